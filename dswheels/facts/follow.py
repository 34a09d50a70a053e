"""Following upstream (.github/workflows/follow.yml): which builds to start, and the one drift issue.

Pure decisions over what the facts check reported, what the matrix plans, what is published
and which wheel builds are already running. :mod:`dswheels.cli.facts_follow` does the I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from dswheels.kernel.github_api import Issue, WorkflowRun

__all__ = [
    "ISSUE_MARKER",
    "ISSUE_TITLE",
    "ActiveRuns",
    "IssueAction",
    "active_versions",
    "builds_to_start",
    "dispatch_inputs",
    "issue_action",
    "issue_body",
]

ISSUE_MARKER = "<!-- dswheels: facts drift (one issue, kept up to date by .github/workflows/follow.yml) -->"
ISSUE_TITLE = "compat.yml drifted from its sources"
_ACTIVE = frozenset({"queued", "in_progress", "waiting", "requested", "pending"})
_VERSION_RE = re.compile(r"(?<![0-9.])([0-9]+\.[0-9]+\.[0-9]+)(?![0-9.])")


@dataclass(frozen=True, slots=True)
class ActiveRuns:
    """Wheel builds queued or running: the DeepSpeed versions their titles name, and how many name none."""

    versions: frozenset[str]
    unnamed: int


def active_versions(runs: Iterable[WorkflowRun]) -> ActiveRuns:
    """From ``GET .../actions/workflows/<wheels>/runs`` items: what is still building."""
    versions: set[str] = set()
    unnamed = 0
    for run in runs:
        if run.status not in _ACTIVE:
            continue
        found = _VERSION_RE.findall(run.title)
        versions.update(found)
        unnamed += not found
    return ActiveRuns(frozenset(versions), unnamed)


def builds_to_start(
    *,
    placeable: Sequence[str],
    unpublished: Mapping[str, int],
    active: ActiveRuns,
) -> tuple[list[str], list[str]]:
    """The DeepSpeed versions to build, and a sentence for each version left for later.

    ``placeable``: new releases the facts check read and found the facts place as they are;
    ``unpublished``: DeepSpeed version -> cells the matrix plans whose wheel is not published.
    A version with a build queued or running is left for the next run; so is everything when a
    running build does not say its version (the wheels workflow's run-name would).
    """
    wanted = list(dict.fromkeys([*placeable, *(v for v, n in unpublished.items() if n)]))
    later: list[str] = []
    start: list[str] = []
    for version in wanted:
        if version in active.versions:
            later.append(f"{version}: a wheels run for it is queued or running")
        elif active.unnamed:
            later.append(f"{version}: {active.unnamed} wheels run(s) are running and their titles name no version")
        else:
            start.append(version)
    return start, later


def dispatch_inputs(version: str) -> dict[str, str]:
    """The wheels workflow's inputs for "every cell the matrix plans for this DeepSpeed, published"."""
    return {
        "deepspeed": version,
        "torch": "matrix",
        "cuda": "matrix",
        "python": "matrix",
        "platform": "matrix",
        "canary": "false",
        "publish": "true",
    }


def issue_body(markdown: str) -> str:
    return f"{ISSUE_MARKER}\n\n{markdown.rstrip()}\n"


@dataclass(frozen=True, slots=True)
class IssueAction:
    kind: str  # "create" | "update" | "close" | "none"
    number: int | None
    why: str


def _ours(issue: Issue) -> bool:
    return ISSUE_MARKER in issue.body and not issue.is_pull_request


def issue_action(issues: Iterable[Issue], *, drift: bool, body: str) -> IssueAction:
    """What to do with the one drift issue, given the repository's open issues."""
    ours = sorted((i for i in issues if _ours(i)), key=lambda i: i.number)
    existing = ours[0] if ours else None
    if drift:
        if existing is None:
            return IssueAction("create", None, "the facts drifted and no drift issue is open")
        number = existing.number
        if existing.body == body:
            return IssueAction("none", number, f"issue #{number} already says this")
        return IssueAction("update", number, f"issue #{number} is updated with today's findings")
    if existing is None:
        return IssueAction("none", None, "no drift, and no drift issue is open")
    number = existing.number
    return IssueAction("close", number, f"no drift any more: issue #{number} is closed")
