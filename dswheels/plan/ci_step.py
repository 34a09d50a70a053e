"""The ``dswheels ci plan`` step: what a run of the wheels workflow builds and publishes, planned once.

Plans the run's selection (the canary alone when asked), leaves out what is published already
when the run publishes, writes the plan file the build jobs read, and returns the step outputs.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from dswheels import __version__
from dswheels.host.files import write_text_atomic
from dswheels.host.log import get_reporter
from dswheels.kernel.compat import load_compat
from dswheels.kernel.model import Plan, Platform
from dswheels.kernel.plan_json import render_json
from dswheels.plan.effects.published import PublishedAt, Skipped, skip_published
from dswheels.plan.effects.selection import MatrixCells, plan_matrix
from dswheels.plan.event import RunIntent, platforms_text
from dswheels.plan.jobs import JobPlan
from dswheels.plan.planner import combo_from_values
from dswheels.plan.render_plan import render_github
from dswheels.plan.step import canary_plan, image_warnings, jobs_of

__all__ = ["OUTPUTS", "CiPlanOptions", "CiRun", "plan_ci_run"]

# the step outputs, in the order the workflow reads them (docs: `dswheels ci plan --help`)
OUTPUTS = ("matrix", "parts", "smoke", "release", "plan", "publish_dir", "index_url")


@dataclass(frozen=True, kw_only=True, slots=True)
class CiPlanOptions:
    intent: RunIntent  # what the event asks for
    gpu: frozenset[Platform]  # the platforms with a GPU runner for the smoke jobs
    matrix: Path
    published: PublishedAt
    out: Path  # where plan.json goes
    today: dt.date | None = None  # the day the planned images' ends are judged against


@dataclass(frozen=True, kw_only=True, slots=True)
class CiRun:
    plan: Plan
    skipped: Skipped | None  # what a publishing run left out
    jobs: JobPlan
    per_cell: JobPlan | None
    notes: tuple[str, ...]  # for the log and the step summary
    outputs: Mapping[str, str]  # OUTPUTS, for $GITHUB_OUTPUT


def _describe(intent: RunIntent) -> str:
    axes = " ".join(f"{axis}={value or 'matrix'}" for axis, value in intent.selection.items())
    what = f"{axes}{' (canary)' if intent.canary else ''}"
    return f"{what}; {'publishes to the release ' + intent.release if intent.publishes else 'publishes nothing'}"


def _smoke_jobs(jobs: JobPlan, gpu: frozenset[Platform]) -> JobPlan:
    return replace(jobs, jobs=tuple(j for j in jobs.builds if j.cells[0].cell.platform in gpu))


def _smoke_notes(result: Plan, gpu: frozenset[Platform]) -> list[str]:
    reporter = get_reporter()
    title = "GPU smoke test skipped"
    if not gpu:
        text = (
            "no GPU smoke test: set the repository variable DSWHEELS_GPU_RUNNERS to the platforms that have a "
            "self-hosted GPU runner (README: Set up a self-hosted GPU runner)"
        )
        reporter.notice(title, text)
        return [text]
    lacking = {item.cell.platform for item in result.planned} - gpu
    if not lacking:
        return [f"GPU smoke test on {platforms_text(gpu)}"]
    text = f"no GPU runner for {platforms_text(lacking)} in DSWHEELS_GPU_RUNNERS: those wheels are not smoke-tested"
    reporter.notice(title, text)
    return [text]


def plan_ci_run(options: CiPlanOptions) -> CiRun:
    intent = options.intent
    # the build jobs install CUDA from NVIDIA's archives: a toolkit without a pinned redistrib JSON drops its cells
    selection = MatrixCells(matrix=options.matrix, combo=combo_from_values(intent.selection), redist_required=True)
    result = plan_matrix(selection, load_compat())
    if intent.canary:
        result = canary_plan(result)
    notes = [_describe(intent)]
    skipped = None
    if intent.publishes:
        skipped = skip_published(result, options.published.source(), missing_dir_ok=True)
        result = skipped.plan
        notes.append(f"{skipped.skipped} of {skipped.total} planned cells already published at {skipped.location}")
    jobs, per_cell = jobs_of(result)
    plan_file = options.out / "plan.json"
    write_text_atomic(plan_file, render_json(result, version=__version__))
    notes += _smoke_notes(result, options.gpu)
    for warning in image_warnings(result, options.today):  # a ::warning:: annotation, and in the summary
        get_reporter().warning(warning)
        notes.append(f"warning: {warning}")
    outputs = {
        "matrix": render_github(result, jobs, stage="build"),
        "parts": render_github(result, jobs, stage="part"),
        "smoke": render_github(result, _smoke_jobs(jobs, options.gpu), stage="build"),
        "release": intent.release,
        "plan": plan_file.as_posix(),
        "publish_dir": options.published.publish_dir,
        "index_url": options.published.site_url(),
    }
    return CiRun(plan=result, skipped=skipped, jobs=jobs, per_cell=per_cell, notes=tuple(notes), outputs=outputs)
