"""The request workflow's steps (.github/workflows/requests.yml, and wheels.yml's ``answer`` job):
answer a wheel-request issue, build what a maintainer's label asks for, and say when it is indexed.

The event payload is read from the file the runner wrote (``$GITHUB_EVENT_PATH``); the issue's body
is parsed by :mod:`dswheels.request.form` and judged by the planner, the published index and the
cost model, exactly as ``dswheels plan --explain``, ``--skip-published`` and ``--costs`` judge a cell.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dswheels.host.files import read_bounded
from dswheels.host.github import GitHub, api_url_from_env, token_from_env
from dswheels.host.github_issues import comment, dispatch, issue_comments, update_comment
from dswheels.host.log import get_reporter
from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.github_api import Comment
from dswheels.kernel.index_links import install_command, published_cell_ids
from dswheels.kernel.model import Cell, DroppedCell, Plan, PlannedCell
from dswheels.kernel.naming import cell_id, partition, wheel_version
from dswheels.kernel.versions import format_version
from dswheels.plan.costs import STATUSES
from dswheels.plan.effects.matrix_file import load_matrix
from dswheels.plan.effects.published import PublishedAt, published_wheels
from dswheels.plan.planner import resolve_cell
from dswheels.plan.step import jobs_of
from dswheels.request.answer import (
    ANSWER_MARKER,
    Buildable,
    Impossible,
    Published,
    Unreadable,
    Verdict,
    render_answer,
    render_build_started,
    render_indexed,
)
from dswheels.request.event import MAX_EVENT_BYTES, IssueEvent, parse_issue_event
from dswheels.request.form import BUILD_LABEL, FORM_LABEL, RequestFormError, parse_form

__all__ = [
    "EventOptions",
    "IndexedOptions",
    "Outcome",
    "answer_indexed",
    "answer_request",
    "build_request",
    "dispatch_inputs",
    "judge_cell",
]

WHEELS_WORKFLOW = "wheels.yml"


@dataclass(frozen=True, kw_only=True, slots=True)
class EventOptions:
    event: Path  # the payload the runner wrote ($GITHUB_EVENT_PATH)
    event_name: str  # $GITHUB_EVENT_NAME
    repo: str  # OWNER/NAME
    matrix: Path  # ops, arch lists and torch index of a cell come from it
    published: PublishedAt = field(default_factory=PublishedAt)
    ref: str = "main"  # the branch a build runs on


@dataclass(frozen=True, kw_only=True, slots=True)
class IndexedOptions:
    issue: int
    repo: str
    cell: Cell
    matrix: Path
    published: PublishedAt
    run_url: str  # the wheels run that built it, for a comment about a build that did not finish


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    did: str  # a sentence for the log: what the step did and why
    verdict: Verdict | None = None
    cell: str = ""


def _github(repo: str) -> GitHub:
    token = token_from_env()
    if not token:
        raise ConfigError("no GitHub token", hint="set GITHUB_TOKEN (the workflow passes its job token)")
    return GitHub(repo, token=token, api_url=api_url_from_env())


def _event(options: EventOptions) -> IssueEvent:
    try:
        data = read_bounded(options.event, limit=MAX_EVENT_BYTES)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the event payload {options.event}: {exc}") from None
    event = parse_issue_event(data, event_name=options.event_name)
    if event.repository != options.repo:
        raise ConfigError(f"the event is from {event.repository[:100]!r}, not {options.repo}")
    return event


def _install(item: PlannedCell, published: PublishedAt) -> Published:
    site = published.site_url()
    if not site:
        raise ConfigError("no index URL to give an install line with", hint="set DSWHEELS_INDEX_URL")
    lines = [
        install_command(
            tool=tool,
            version=wheel_version(item.cell),
            site_url=site,
            part=partition(item.cell),
            torch_index=item.torch_index,
        )
        for tool in ("pip", "uv")
    ]
    return Published(cell_id=cell_id(item.cell), pip=lines[0], uv=lines[1])


def judge_cell(cell: Cell, *, matrix: Path, published: PublishedAt) -> Verdict:
    """Published (with its install line), impossible (the rules' reasons) or buildable (what it costs)."""
    compat = load_compat()
    judged = resolve_cell(cell, compat, load_matrix(matrix, compat), redist_required=True)
    if isinstance(judged, DroppedCell):
        return Impossible(cell_id=cell_id(cell), reasons=judged.reasons)
    # by cell id: a Linux wheel's name carries the floor auditwheel judged (manylinux_2_28_x86_64), not the cell's
    if cell_id(cell) in published_cell_ids(published_wheels(published.source(), missing_dir_ok=True)):
        return _install(judged, published)
    jobs, _per_cell = jobs_of(Plan(planned=(judged,), dropped=(), matrix=str(matrix), mode="combo"))
    longest = max(jobs.jobs, key=lambda j: j.estimate.minutes).estimate
    return Buildable(
        cell_id=cell_id(cell),
        runs_on=" ".join(judged.toolchain.runs_on) or judged.toolchain.runner_image,
        jobs=len(jobs.jobs),
        runner_minutes=jobs.runner_hours * 60,
        setup_minutes=longest.setup_minutes,
        compile_minutes=longest.compile_minutes,
        checks_minutes=longest.checks_minutes,
        to_index_minutes=jobs.path.minutes if jobs.path is not None else longest.minutes,
        figures={s: sum(1 for _, f in jobs.figures if f.status == s) for s in STATUSES},
    )


def _judge_event(event: IssueEvent, options: EventOptions) -> tuple[Verdict, str, str]:
    """The verdict on the issue's request, the request as read, and its cell id ("" when unreadable)."""
    try:
        request = parse_form(event.body)
    except RequestFormError as exc:
        return Unreadable(problems=exc.problems), "", ""
    verdict = judge_cell(request.cell, matrix=options.matrix, published=options.published)
    return verdict, request.describe(), cell_id(request.cell)


def answer_request(options: EventOptions) -> Outcome:
    """Answer the issue the event is about (one comment, edited on later events)."""
    gh = _github(options.repo)  # the token first: a step that cannot answer reads nothing
    event = _event(options)
    if FORM_LABEL not in event.labels or not event.open:
        return Outcome(did=f"issue #{event.number} is not an open wheel request (label {FORM_LABEL}): no answer")
    verdict, asked, cid = _judge_event(event, options)
    upsert_answer(gh, event.number, render_answer(verdict, asked=asked))
    return Outcome(did=f"answered issue #{event.number}: {type(verdict).__name__.lower()}", verdict=verdict, cell=cid)


def dispatch_inputs(cell: Cell, *, issue: int) -> dict[str, str]:
    """wheels.yml's inputs for one published cell, and the issue its ``answer`` job comments on."""
    py = cell.python
    return {
        "deepspeed": format_version(cell.deepspeed),
        "torch": format_version(cell.torch),
        "cuda": cell.variant.name,
        "python": f"{py.version[0]}.{py.version[1]}{'t' if py.free_threaded else ''}",
        "platform": cell.platform.value,
        "canary": "false",
        "publish": "true",
        "request": str(issue),
    }


def build_request(options: EventOptions) -> Outcome:
    """On the maintainer's label: start wheels.yml for the requested cell when it is buildable, else answer why not."""
    gh = _github(options.repo)
    event = _event(options)
    if event.action != "labeled" or event.label != BUILD_LABEL:
        return Outcome(did=f"not the {BUILD_LABEL} label: nothing to build")
    if FORM_LABEL not in event.labels or not event.open:
        return Outcome(did=f"issue #{event.number} is not an open wheel request: nothing to build")
    verdict, asked, cid = _judge_event(event, options)
    if not isinstance(verdict, Buildable):  # published, impossible or unreadable: the answer says so again
        upsert_answer(gh, event.number, render_answer(verdict, asked=asked))
        return Outcome(did=f"issue #{event.number}: {type(verdict).__name__.lower()}, nothing built", verdict=verdict)
    request = parse_form(event.body)
    dispatch(gh, WHEELS_WORKFLOW, ref=options.ref, inputs=dispatch_inputs(request.cell, issue=event.number))
    text = render_build_started(
        cell_id=cid, workflow=WHEELS_WORKFLOW, ref=options.ref, minutes=verdict.to_index_minutes
    )
    comment(gh, event.number, text)
    get_reporter().info(f"started {WHEELS_WORKFLOW} on {options.ref} for {cid} (issue #{event.number})")
    return Outcome(did=f"started the build of {cid}", verdict=verdict, cell=cid)


def answer_indexed(options: IndexedOptions) -> Outcome:
    """After the requested build: the install line when the index lists the wheel, else the run to look at."""
    gh = _github(options.repo)
    verdict = judge_cell(options.cell, matrix=options.matrix, published=options.published)
    published = verdict if isinstance(verdict, Published) else None
    cid = cell_id(options.cell)
    comment(gh, options.issue, render_indexed(cell_id=cid, published=published, run_url=options.run_url))
    did = "indexed" if published is not None else "not indexed"
    return Outcome(did=f"issue #{options.issue}: {cid} {did}", verdict=verdict, cell=cid)


def _ours(item: Comment) -> bool:
    """Whether the comment is a bot's answer comment."""
    return item.by_bot and item.body.startswith(ANSWER_MARKER)


def upsert_answer(gh: GitHub, number: int, body: str) -> None:
    """The one answer comment of a request: made once, then edited, so a request edited ten times still has
    one answer. Only a comment a bot made counts as it: a person cannot plant the marker to have their comment
    overwritten (GitHub sets ``user.type``; a person's account is never "Bot")."""
    for item in issue_comments(gh, number):
        if _ours(item):
            if item.body != body:
                update_comment(gh, item.id, body)
            return
    comment(gh, number, body)
