"""The follow workflow's steps (``dswheels facts builds|dispatch|issue``, .github/workflows/follow.yml):
which DeepSpeed versions to build now, starting those builds, and the one facts-drift issue."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from dswheels.facts.effects.github_follow import (
    close_issue,
    comment,
    create_issue,
    dispatch,
    open_issues,
    runs,
    update_issue,
)
from dswheels.facts.follow import (
    ISSUE_TITLE,
    IssueAction,
    active_versions,
    builds_to_start,
    dispatch_inputs,
    issue_action,
    issue_body,
)
from dswheels.host.files import read_bounded
from dswheels.host.github import GitHub, api_url_from_env, token_from_env
from dswheels.host.log import get_reporter
from dswheels.host.repository import repository_file
from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.index_links import published_cell_ids
from dswheels.kernel.jsondoc import parse_json
from dswheels.kernel.locations import MATRIX
from dswheels.kernel.naming import cell_id
from dswheels.kernel.untyped import Untyped
from dswheels.kernel.versions import format_version
from dswheels.plan.effects.matrix_file import load_matrix
from dswheels.plan.effects.published import PublishedAt, published_wheels
from dswheels.plan.planner import plan

__all__ = [
    "BuildsNow",
    "BuildsOptions",
    "DispatchOptions",
    "IssueOptions",
    "IssueOutcome",
    "builds_now",
    "dispatch_builds",
    "keep_drift_issue",
]


def _report(path: Path) -> Untyped:
    try:
        data = parse_json(read_bounded(path), what=str(path))
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"cannot read the facts report {path}: {exc}", hint="write it with `dswheels facts check --json`"
        ) from None
    report = Untyped(data)
    if report.at("schema").data != "dswheels.facts-report/1":
        raise ConfigError(f"{path} is not a dswheels facts report (schema dswheels.facts-report/1)")
    return report


def _github(repo: str) -> GitHub:
    """The repository's API with ``GITHUB_TOKEN`` (or ``GH_TOKEN``) and ``GITHUB_API_URL``, read where the
    client is made, as the stores' is: a command that talks to GitHub is the only one a bad token stops."""
    token = token_from_env()
    if not token:
        raise ConfigError("no GitHub token", hint="set GITHUB_TOKEN (the workflow passes its job token)")
    return GitHub(repo, token=token, api_url=api_url_from_env())


def _package_dir() -> Path:
    """Where the installed dswheels is: a clone's own ``dswheels/`` for an editable install."""
    return Path(str(resources.files("dswheels")))


# --- builds ----------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class BuildsOptions:
    report: Path  # `dswheels facts check --json` output
    matrix: Path | None = None  # None: the repository's matrix/matrix.yml (see builds_now)
    published: str | None = None  # the index (or directory) the wheels are published to
    published_at: PublishedAt = field(default_factory=PublishedAt)  # where they are when ``published`` is not given


@dataclass(frozen=True, kw_only=True, slots=True)
class BuildsNow:
    start: tuple[str, ...]  # the DeepSpeed versions to build now
    placeable: tuple[str, ...]  # new releases the facts check placed
    unpublished: Mapping[str, int]  # version -> planned cells not published


def builds_now(options: BuildsOptions) -> BuildsNow:
    """New releases the facts check placed, and every version the matrix plans unpublished cells for.

    Without a matrix it is the repository's ``matrix/matrix.yml``: that of the clone the facts come from
    (an editable install), else the working directory's, each looked up upward (from any subdirectory)."""
    placeable = tuple(_report(options.report).at("placeable_deepspeed").strs())
    compat = load_compat()
    matrix = options.matrix or repository_file(MATRIX, near=(_package_dir(), Path.cwd())) or MATRIX
    result = plan(load_matrix(matrix, compat), compat)
    location = options.published or options.published_at.source()
    published = published_cell_ids(published_wheels(location, missing_dir_ok=not options.published))
    unpublished: dict[str, int] = {}
    for item in result.planned:
        version = format_version(item.cell.deepspeed)
        unpublished[version] = unpublished.get(version, 0) + (cell_id(item.cell) not in published)
    start, _later = builds_to_start(placeable=placeable, unpublished=unpublished, active=active_versions([]))
    return BuildsNow(start=tuple(start), placeable=placeable, unpublished=unpublished)


# --- dispatch --------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class DispatchOptions:
    versions: tuple[str, ...]  # DeepSpeed versions (X.Y.Z)
    repo: str  # OWNER/NAME
    workflow: str = "wheels.yml"
    ref: str = "main"


def dispatch_builds(options: DispatchOptions) -> tuple[str, ...]:
    """Start the workflow for each version not already queued or running; the versions started (the
    reporter says each, and why any is left for later)."""
    gh = _github(options.repo)
    active = active_versions(runs(gh, options.workflow))
    start, later = builds_to_start(placeable=options.versions, unpublished={}, active=active)
    reporter = get_reporter()
    for note in later:
        reporter.info(f"not now: {note}")
    for version in start:
        dispatch(gh, options.workflow, ref=options.ref, inputs=dispatch_inputs(version))
        reporter.info(f"started {options.workflow} for DeepSpeed {version} on {options.ref}")
    return tuple(start)


# --- the drift issue -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class IssueOptions:
    report: Path  # `dswheels facts check --json` output
    markdown: Path  # `dswheels facts check --markdown` output
    repo: str  # OWNER/NAME


@dataclass(frozen=True, kw_only=True, slots=True)
class IssueOutcome:
    action: IssueAction
    opened: str | None = None  # the number of the issue opened (as GitHub gave it)


def keep_drift_issue(options: IssueOptions) -> IssueOutcome:
    """Open, update or close the one drift issue, as the facts report says."""
    gh = _github(options.repo)  # the token first: a command that cannot talk to GitHub reads nothing
    report = _report(options.report)
    try:
        markdown = read_bounded(options.markdown).decode("utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {options.markdown}: {exc.strerror}") from None
    except ValueError as exc:  # not UTF-8, too large, or not a regular file (a FIFO, a device)
        raise ConfigError(f"cannot read {options.markdown}: {exc}") from None
    body = issue_body(markdown)
    action = issue_action(open_issues(gh), drift=report.at("drift").data is True, body=body)
    if action.kind == "create":
        created = create_issue(gh, title=ISSUE_TITLE, body=body)
        return IssueOutcome(action=action, opened=str(created.number))
    if action.kind == "update" and action.number is not None:
        update_issue(gh, action.number, title=ISSUE_TITLE, body=body)
    elif action.kind == "close" and action.number is not None:
        comment(gh, action.number, f"`dswheels facts check` on {report.at('checked').data} found no drift: closing.")
        close_issue(gh, action.number)
    return IssueOutcome(action=action)
