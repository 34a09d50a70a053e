"""What the request workflow says in a wheel-request issue: one verdict per request, rendered as markdown.

Every word of an answer comes from dswheels (the parsed, canonical values of the request, the rules'
reasons with their sources, the cost model's figures), never from the issue's text, so nothing an
author writes is echoed into a comment (no mention, link or markup of theirs reaches it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dswheels.kernel.model import Reason
from dswheels.request.form import BUILD_LABEL, FORM_LABEL

__all__ = [
    "ANSWER_MARKER",
    "Buildable",
    "Impossible",
    "Published",
    "Unreadable",
    "Verdict",
    "render_answer",
    "render_build_started",
    "render_indexed",
]

# the one answer per issue carries it; a later event edits that comment instead of adding another
ANSWER_MARKER = "<!-- dswheels: wheel request answer (.github/workflows/requests.yml) -->"


@dataclass(frozen=True, kw_only=True, slots=True)
class Published:
    cell_id: str
    pip: str  # the install lines (dswheels.kernel.index_links.install_command)
    uv: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Impossible:
    cell_id: str
    reasons: tuple[Reason, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class Buildable:
    cell_id: str
    runs_on: str  # the runner image its job runs on
    jobs: int  # build jobs (more than one when the cell is split by op)
    runner_minutes: float  # every job's minutes
    setup_minutes: float  # the longest job's parts
    compile_minutes: float
    checks_minutes: float
    to_index_minutes: float  # dispatch to the wheel indexed: the plan job, the builds, release and pages
    figures: Mapping[str, int]  # how many figures the estimate read, by status (measured, assumed, ...)


@dataclass(frozen=True, kw_only=True, slots=True)
class Unreadable:
    problems: tuple[str, ...]


Verdict = Published | Impossible | Buildable | Unreadable


def _install(pip: str, uv: str) -> list[str]:
    return ["```sh", pip, "```", "", "or with uv:", "", "```sh", uv, "```"]


def _answer_lines(verdict: Verdict, *, asked: str) -> list[str]:
    if isinstance(verdict, Unreadable):
        return [
            "This issue does not read as a wheel request:",
            "",
            *(f"- {problem}" for problem in verdict.problems),
            "",
            "Edit the issue (keep the form's headings) and it is read again.",
        ]
    head = f"**{asked}** is the cell `{verdict.cell_id}`."
    if isinstance(verdict, Published):
        return [f"{head} Its wheel is published: install it with", "", *_install(verdict.pip, verdict.uv)]
    if isinstance(verdict, Impossible):
        lines = [f"{head} It cannot be built:", ""]
        for reason in verdict.reasons:
            lines.append(
                f"- {reason.message} (rule `{reason.rule}`" + (f"; source: {reason.source})" if reason.source else ")")
            )
            if reason.fix:
                lines.append(f"  - what would work: {reason.fix}")
        return lines
    figures = ", ".join(f"{n} {status}" for status, n in verdict.figures.items() if n)
    jobs = "one job" if verdict.jobs == 1 else f"{verdict.jobs} jobs"
    return [
        f"{head} It is not published yet, and the rules allow it: it can be built.",
        "",
        (
            f"- cost: {jobs} on `{verdict.runs_on}`, about {verdict.runner_minutes:.0f} runner minutes "
            f"(setup {verdict.setup_minutes:.0f}, compile {verdict.compile_minutes:.0f}, "
            f"venv, post-processing and verify {verdict.checks_minutes:.0f})"
        ),
        f"- from the start of the build to the wheel in the index: about {verdict.to_index_minutes:.0f} minutes",
        (
            f"- the estimate reads the cost model's figures (dswheels/compile_times.yml): {figures}; "
            "`dswheels plan --costs` lists each with where it comes from"
        ),
        "",
        (
            f"A maintainer starts the build by adding the label `{BUILD_LABEL}`; this issue then gets the install line "
            "once the wheel is indexed."
        ),
    ]


def render_answer(verdict: Verdict, *, asked: str) -> str:
    """The answer comment; ``asked``: the request as dswheels read it (:meth:`WheelRequest.describe`)."""
    footer = f"<sub>dswheels answers issues opened with the `{FORM_LABEL}` form, and again when one is edited.</sub>"
    return "\n".join([ANSWER_MARKER, "", *_answer_lines(verdict, asked=asked), "", footer]) + "\n"


def render_build_started(*, cell_id: str, workflow: str, ref: str, minutes: float) -> str:
    return (
        f"The build of `{cell_id}` was started: {workflow} on `{ref}`, about {minutes:.0f} minutes to the index "
        "by the cost model. This issue gets the install line when the wheel is indexed.\n"
    )


def render_indexed(*, cell_id: str, published: Published | None, run_url: str) -> str:
    """The comment after the requested build: the install line, or why there is none yet."""
    if published is not None:
        return (
            "\n".join(
                [f"`{cell_id}` is built and indexed: install it with", "", *_install(published.pip, published.uv)]
            )
            + "\n"
        )
    return (
        f"The build of `{cell_id}` did not put its wheel into the index: see the run, {run_url}. "
        f"A maintainer can start it again by removing and adding the label `{BUILD_LABEL}`.\n"
    )
