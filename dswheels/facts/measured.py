"""After a release (follow.yml): which wheels run to refit the cost model from, and the pull request that
proposes the refit figures. Pure decisions over what GitHub lists; :mod:`dswheels.facts.refit_step` does the I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from dswheels.kernel.github_api import WorkflowRun
from dswheels.plan.refit import Change

__all__ = [
    "MEASUREMENTS_PREFIX",
    "branch_for",
    "measured_runs",
    "pull_body",
    "pull_title",
    "refit_before",
]

MEASUREMENTS_PREFIX = "measurements-"  # wheels.yml's build jobs' artifacts (`dswheels ci measure`)
_RUNS_NAMED = re.compile(r"\(run ([0-9]{1,20})\)", re.ASCII)


def branch_for(run: int) -> str:
    return f"dswheels/measured-{run}"


def pull_title(run: int) -> str:
    return f"compile_times.yml: the figures release run {run} measured"


def refit_before(compile_times: str) -> frozenset[int]:
    """The runs compile_times.yml's figures already name (``... (run 4242)``): refit and merged."""
    return frozenset(int(found) for found in _RUNS_NAMED.findall(compile_times))


def measured_runs(runs: Iterable[WorkflowRun]) -> list[int]:
    """The wheels runs worth refitting from, newest first: finished with success, no canary (its three ops
    are not a release's)."""
    picked = [(run.created, run.id) for run in runs if run.conclusion == "success" and "(canary)" not in run.title]
    return [run_id for _, run_id in sorted(picked, reverse=True)]


def _figure(value: float, status: str, source: str) -> str:
    return f"{value:g} ({status}: {source})"


def pull_body(*, run: int, run_url: str, changes: Sequence[Change], jobs: int, notes: Sequence[str]) -> str:
    """The pull request's description: every figure the refit changed, before and after."""
    lines = [
        (
            f"The wheels run {run} ({run_url}) recorded what its {jobs} build job(s) measured (`dswheels ci measure`: "
            "setup, CUDA install, each op's compile, checks, compiler cache hits). `dswheels facts refit` refit the "
            "cost model from those records, as `nox -s costs` does from manifests; each figure below now says "
            "where it was measured, and `dswheels plan --costs` lists them as measured."
        ),
        "",
        "| figure | before | after |",
        "|---|---|---|",
    ]
    for change in changes:
        before = (
            "-" if change.before is None else _figure(change.before.value, change.before.status, change.before.source)
        )
        after = _figure(change.after.value, change.after.status, change.after.source)
        lines.append(f"| `{change.name}` | {before.replace('|', '/')} | {after.replace('|', '/')} |")
    lines += [
        "",
        "<details><summary>what the refit read and left out</summary>",
        "",
        "```",
        *notes,
        "```",
        "</details>",
    ]
    return "\n".join(lines) + "\n"
