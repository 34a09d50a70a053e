"""``dswheels facts builds|dispatch|issue``: the steps of .github/workflows/follow.yml.

- ``builds``: the DeepSpeed versions whose wheels should be built now: new releases the facts
  check placed, and every version the matrix plans cells for that are not published yet;
- ``dispatch``: start the wheels workflow for each (skipping one already queued or running);
- ``issue``: keep ONE issue with the facts check's findings and proposed diff up to date,
  and close it when the facts agree with their sources again.
"""

from __future__ import annotations

import argparse
import json
import re

from dswheels.cli.command import Command
from dswheels.cli.flags import Flag, Flags, PathUse, fill
from dswheels.cli.shared import MATRIX_FLAG, PUBLISHED_AT, REPORT, published_at
from dswheels.facts.follow import ISSUE_TITLE
from dswheels.facts.follow_step import (
    BuildsOptions,
    DispatchOptions,
    IssueOptions,
    builds_now,
    dispatch_builds,
    keep_drift_issue,
)
from dswheels.host.gha import write_output
from dswheels.host.log import get_reporter
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.jsondoc import parse_json
from dswheels.kernel.locations import MATRIX
from dswheels.kernel.result import Done

__all__ = ["COMMANDS"]

BUILDS_DESCRIPTION = __doc__ or ""  # what the module says, `facts builds --help` says

DISPATCH = """\
Start the wheels workflow (a workflow_dispatch on --ref) once for each DeepSpeed version
given, with every axis set to `matrix` and publish on: every cell the matrix plans for that
version is built and published. A version whose run is already queued or running is left
alone, and said so. follow.yml's step after `facts builds`, whose output is --versions-json.
Needs GITHUB_TOKEN (or GH_TOKEN) with actions: write on --repo; GITHUB_API_URL names another
API (default https://api.github.com).
"""

ISSUE = f"""\
Keep one issue titled "{ISSUE_TITLE}" on --repo in step with the facts
check: open it when the report finds drift and none is open, update its body (the --markdown
report, with the proposed compat.yml edit) when it says something new, close it with a comment
when the report finds no drift. follow.yml's step after `facts check`. Needs GITHUB_TOKEN (or
GH_TOKEN) with issues: write; GITHUB_API_URL names another API (default
https://api.github.com).
"""


def _versions(text: str) -> tuple[str, ...]:
    try:
        versions = parse_json(text, what="--versions-json")
    except ValueError:
        versions = None
    if not isinstance(versions, list) or not all(isinstance(v, str) for v in versions):
        raise ConfigError(f"--versions-json: expected a JSON list of versions, got {text[:80]!r}")
    bad = [v for v in versions if not re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", v)]
    if bad:
        raise ConfigError(f"--versions-json: not DeepSpeed versions (X.Y.Z): {', '.join(bad)}")
    return tuple(versions)


# the facts report the follow steps read (their result is written with --report, like every stage's)
FACTS = Flag(
    "--facts",
    dest="facts_json",
    to="report",
    required=True,
    metavar="PATH",
    path=PathUse.READS,
    help="`dswheels facts check --json` output",
)
REPO = Flag("--repo", to="repo", required=True, metavar="OWNER/NAME")

BUILDS: Flags = (
    FACTS,
    MATRIX_FLAG.but(
        to="matrix",
        default=None,
        help=f"matrix file (else {MATRIX} of the repository: the installed dswheels' clone, else the working "
        "directory's, looked up upward)",
    ),
    Flag(
        "--published",
        to="published",
        metavar="INDEX_URL|DIR",
        path=PathUse.READS_PUBLISHED,
        help="the index the wheels are published to (default: --publish-dir when set, else --index-url)",
    ),
    *PUBLISHED_AT,
    REPORT,
)

DISPATCH_FLAGS: Flags = (
    Flag(
        "--versions-json",
        to="versions",
        parse=_versions,
        required=True,
        metavar="JSON",
        help='DeepSpeed versions, e.g. ["0.19.9"] (`facts builds` prints it)',
    ),
    REPO,
    Flag(
        "--workflow", to="workflow", default="wheels.yml", help="the workflow file to dispatch (default: %(default)s)"
    ),
    Flag("--ref", to="ref", default="main", help="the branch it runs on (default: %(default)s)"),
    REPORT,
)

ISSUE_FLAGS: Flags = (
    FACTS,
    Flag(
        "--markdown",
        to="markdown",
        required=True,
        metavar="PATH",
        path=PathUse.READS,
        help="`dswheels facts check --markdown`",
    ),
    REPO,
    REPORT,
)


def _builds(args: argparse.Namespace) -> BuildsOptions:
    return BuildsOptions(**fill(args, BUILDS), published_at=published_at(args))


def _run_builds(options: BuildsOptions, _args: argparse.Namespace) -> Done:
    found = builds_now(options)
    for version in found.start:
        why = (
            "a new release the facts place"
            if version in found.placeable
            else f"{found.unpublished[version]} cells not published"
        )
        get_reporter().aside(f"build DeepSpeed {version}: {why}")
    if not found.start:
        get_reporter().aside("nothing to build: every planned cell is published and no new release was placed")
    text = json.dumps(list(found.start))
    write_output("versions", text)
    get_reporter().emit(text + "\n")
    return Done(data={"start": list(found.start)})


def _run_dispatch(options: DispatchOptions, _args: argparse.Namespace) -> Done:
    started = dispatch_builds(options)
    return Done(data={"versions": list(options.versions), "started": list(started)})


def _run_issue(options: IssueOptions, _args: argparse.Namespace) -> Done:
    outcome = keep_drift_issue(options)
    if outcome.opened is not None:
        get_reporter().emit(f"opened issue #{outcome.opened}: {outcome.action.why}\n")
    else:
        get_reporter().emit(f"{outcome.action.why}\n")
    return Done(data={"opened": outcome.opened, "why": outcome.action.why})


def _dispatch(args: argparse.Namespace) -> DispatchOptions:
    return DispatchOptions(**fill(args, DISPATCH_FLAGS))


def _issue(args: argparse.Namespace) -> IssueOptions:
    return IssueOptions(**fill(args, ISSUE_FLAGS))


BUILDS_HELP = "the DeepSpeed versions whose wheels should be built now"
DISPATCH_HELP = "start the wheels workflow for DeepSpeed versions"
ISSUE_HELP = "open, update or close the one facts-drift issue"

COMMANDS = (
    Command("builds", BUILDS_HELP, BUILDS_DESCRIPTION, BUILDS, _builds, _run_builds),
    Command("dispatch", DISPATCH_HELP, DISPATCH, DISPATCH_FLAGS, _dispatch, _run_dispatch),
    Command("issue", ISSUE_HELP, ISSUE, ISSUE_FLAGS, _issue, _run_issue),
)
