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
from pathlib import Path

from dswheels.cli.parsing import Subparsers, add_command
from dswheels.cli.shared import add_matrix_argument, add_published_arguments, add_report_argument, published_at
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
from dswheels.kernel.locations import MATRIX
from dswheels.kernel.result import Done

__all__ = ["register"]

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


FACTS_HELP = "`dswheels facts check --json` output"


def _add_facts_input(p: argparse.ArgumentParser) -> None:
    """The facts report the follow steps read (their result is written with --report, like every stage's)."""
    p.add_argument(
        "--facts",
        dest="facts_json",
        type=Path,
        required=True,
        metavar="PATH",
        help="`dswheels facts check --json` output",
    )


def register(sub: Subparsers[argparse.ArgumentParser]) -> None:
    p = add_command(sub, "builds", help="the DeepSpeed versions whose wheels should be built now", description=__doc__)
    _add_facts_input(p)
    add_matrix_argument(
        p,
        help=f"matrix file (else {MATRIX} of the repository: the installed dswheels' clone, else the working "
        "directory's, looked up upward)",
        default=None,
    )
    p.add_argument(
        "--published",
        metavar="INDEX_URL|DIR",
        help="the index the wheels are published to (default: --publish-dir when set, else --index-url)",
    )
    add_published_arguments(p)
    add_report_argument(p)
    p.set_defaults(func=run_builds)
    p = add_command(sub, "dispatch", help="start the wheels workflow for DeepSpeed versions", description=DISPATCH)
    p.add_argument(
        "--versions-json",
        required=True,
        metavar="JSON",
        help='DeepSpeed versions, e.g. ["0.19.9"] (`facts builds` prints it)',
    )
    p.add_argument("--repo", required=True, metavar="OWNER/NAME")
    p.add_argument("--workflow", default="wheels.yml", help="the workflow file to dispatch (default: %(default)s)")
    p.add_argument("--ref", default="main", help="the branch it runs on (default: %(default)s)")
    add_report_argument(p)
    p.set_defaults(func=run_dispatch)
    p = add_command(sub, "issue", help="open, update or close the one facts-drift issue", description=ISSUE)
    _add_facts_input(p)
    p.add_argument("--markdown", type=Path, required=True, metavar="PATH", help="`dswheels facts check --markdown`")
    p.add_argument("--repo", required=True, metavar="OWNER/NAME")
    add_report_argument(p)
    p.set_defaults(func=run_issue)


def run_builds(args: argparse.Namespace) -> Done:
    options = BuildsOptions(
        report=args.facts_json, matrix=args.matrix, published=args.published, published_at=published_at(args)
    )
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


def _versions(text: str) -> list[str]:
    try:
        versions = json.loads(text)
    except ValueError:
        versions = None
    if not isinstance(versions, list) or not all(isinstance(v, str) for v in versions):
        raise ConfigError(f"--versions-json: expected a JSON list of versions, got {text!r}")
    bad = [v for v in versions if not re.fullmatch(r"\d+\.\d+\.\d+", v)]
    if bad:
        raise ConfigError(f"--versions-json: not DeepSpeed versions (X.Y.Z): {', '.join(bad)}")
    return versions


def run_dispatch(args: argparse.Namespace) -> Done:
    options = DispatchOptions(
        versions=tuple(_versions(args.versions_json)), repo=args.repo, workflow=args.workflow, ref=args.ref
    )
    started = dispatch_builds(options)
    return Done(data={"versions": list(options.versions), "started": list(started)})


def run_issue(args: argparse.Namespace) -> Done:
    options = IssueOptions(report=args.facts_json, markdown=args.markdown, repo=args.repo)
    outcome = keep_drift_issue(options)
    if outcome.opened is not None:
        get_reporter().emit(f"opened issue #{outcome.opened}: {outcome.action.why}\n")
    else:
        get_reporter().emit(f"{outcome.action.why}\n")
    return Done(data={"opened": outcome.opened, "why": outcome.action.why})
