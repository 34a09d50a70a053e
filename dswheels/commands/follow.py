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
import sys
from pathlib import Path

from dswheels.commands.common import Subparsers, add_matrix_argument, formatter, load_matrix
from dswheels.commands.selection import add_published_arguments, published_source, published_wheels
from dswheels.core.compat import load_compat
from dswheels.core.index.site import published_canonical_names
from dswheels.core.naming import wheel_filename
from dswheels.core.plan.planner import plan
from dswheels.core.untyped import Untyped
from dswheels.core.versions import format_version
from dswheels.core.workflow.follow import (
    ISSUE_TITLE,
    active_versions,
    builds_to_start,
    dispatch_inputs,
    issue_action,
    issue_body,
)
from dswheels.effects.gha import write_output
from dswheels.effects.github import GitHub, api_url_from_env, token_from_env
from dswheels.effects.github_follow import close_issue, comment, create_issue, dispatch, open_issues, runs, update_issue
from dswheels.errors import ConfigError, PublishError

__all__ = ["register"]


def _report(path: Path) -> Untyped:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"cannot read the facts report {path}: {exc}", hint="write it with `dswheels facts check --json`"
        ) from None
    report = Untyped(data)
    if report.at("schema").data != "dswheels.facts-report/1":
        raise ConfigError(f"{path} is not a dswheels facts report (schema dswheels.facts-report/1)")
    return report


def _github(repo: str) -> GitHub:
    token = token_from_env()
    if not token:
        raise PublishError("no GitHub token", hint="set GITHUB_TOKEN (the workflow passes its job token)")
    return GitHub(repo, token=token, api_url=api_url_from_env())


def register(sub: Subparsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "builds",
        help="the DeepSpeed versions whose wheels should be built now",
        description=__doc__,
        formatter_class=formatter,
    )
    p.add_argument("--report", type=Path, required=True, metavar="PATH", help="`dswheels facts check --json` output")
    add_matrix_argument(p)
    p.add_argument(
        "--published",
        metavar="INDEX_URL|DIR",
        help="the index the wheels are published to (default: --publish-dir when set, else --index-url)",
    )
    add_published_arguments(p)
    p.set_defaults(func=run_builds)
    p = sub.add_parser("dispatch", help="start the wheels workflow for DeepSpeed versions", formatter_class=formatter)
    p.add_argument(
        "--versions-json",
        required=True,
        metavar="JSON",
        help='DeepSpeed versions, e.g. ["0.19.9"] (`facts builds` prints it)',
    )
    p.add_argument("--repo", required=True, metavar="OWNER/NAME")
    p.add_argument("--workflow", default="wheels.yml", help="the workflow file to dispatch (default: %(default)s)")
    p.add_argument("--ref", default="main", help="the branch it runs on (default: %(default)s)")
    p.set_defaults(func=run_dispatch)
    p = sub.add_parser("issue", help="open, update or close the one facts-drift issue", formatter_class=formatter)
    p.add_argument("--report", type=Path, required=True, metavar="PATH", help="`dswheels facts check --json` output")
    p.add_argument("--markdown", type=Path, required=True, metavar="PATH", help="`dswheels facts check --markdown`")
    p.add_argument("--repo", required=True, metavar="OWNER/NAME")
    p.set_defaults(func=run_issue)


def run_builds(args: argparse.Namespace) -> int:
    report = _report(args.report)
    placeable = list(report.at("placeable_deepspeed").strs())
    compat = load_compat()
    result = plan(load_matrix(args.matrix, compat), compat)
    location = args.published or published_source(args)
    published = published_canonical_names(published_wheels(location, missing_dir_ok=not args.published))
    unpublished: dict[str, int] = {}
    for item in result.planned:
        version = format_version(item.cell.deepspeed)
        unpublished[version] = unpublished.get(version, 0) + (wheel_filename(item.cell) not in published)
    start, _later = builds_to_start(placeable=placeable, unpublished=unpublished, active=active_versions([]))
    for version in start:
        why = "a new release the facts place" if version in placeable else f"{unpublished[version]} cells not published"
        sys.stderr.write(f"build DeepSpeed {version}: {why}\n")
    if not start:
        sys.stderr.write("nothing to build: every planned cell is published and no new release was placed\n")
    text = json.dumps(start)
    write_output("versions", text)
    sys.stdout.write(text + "\n")
    return 0


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


def run_dispatch(args: argparse.Namespace) -> int:
    versions = _versions(args.versions_json)
    gh = _github(args.repo)
    active = active_versions(runs(gh, args.workflow))
    start, later = builds_to_start(placeable=versions, unpublished={}, active=active)
    for note in later:
        sys.stdout.write(f"not now: {note}\n")
    for version in start:
        dispatch(gh, args.workflow, ref=args.ref, inputs=dispatch_inputs(version))
        sys.stdout.write(f"started {args.workflow} for DeepSpeed {version} on {args.ref}\n")
    return 0


def run_issue(args: argparse.Namespace) -> int:
    report = _report(args.report)
    try:
        markdown = args.markdown.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {args.markdown}: {exc.strerror}") from None
    gh = _github(args.repo)
    body = issue_body(markdown)
    action = issue_action(open_issues(gh), drift=report.at("drift").data is True, body=body)
    if action.kind == "create":
        created = create_issue(gh, title=ISSUE_TITLE, body=body)
        sys.stdout.write(f"opened issue #{created.get('number')}: {action.why}\n")
    elif action.kind == "update" and action.number is not None:
        update_issue(gh, action.number, title=ISSUE_TITLE, body=body)
        sys.stdout.write(f"{action.why}\n")
    elif action.kind == "close" and action.number is not None:
        comment(gh, action.number, f"`dswheels facts check` on {report.at('checked').data} found no drift: closing.")
        close_issue(gh, action.number)
        sys.stdout.write(f"{action.why}\n")
    else:
        sys.stdout.write(f"{action.why}\n")
    return 0
