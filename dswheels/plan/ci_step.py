"""The ``dswheels ci plan`` step: what a run of the wheels workflow builds and publishes, planned once.

Plans the run's selection (the canary alone when asked), leaves out what is published already
when the run publishes, writes the plan file the build jobs read, and returns the step outputs.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from dswheels import __version__
from dswheels.host.files import write_text_atomic
from dswheels.host.log import get_reporter
from dswheels.kernel.compat import Compat, load_compat
from dswheels.kernel.model import Plan, Platform
from dswheels.kernel.naming import cell_id
from dswheels.kernel.plan_json import render_json
from dswheels.plan.canary import pick_canary, windows_cuda
from dswheels.plan.effects.published import PublishedAt, Skipped, skip_published
from dswheels.plan.effects.selection import MatrixCells, plan_matrix
from dswheels.plan.event import RunIntent, platforms_text
from dswheels.plan.jobs import JobPlan
from dswheels.plan.planner import combo_from_values
from dswheels.plan.render_plan import render_github
from dswheels.plan.step import canary_plan, image_warnings, jobs_of

__all__ = ["OUTPUTS", "CiPlanOptions", "CiRun", "plan_ci_run"]

# the step outputs, in the order the workflow reads them (docs: `dswheels ci plan --help`)
OUTPUTS = ("matrix", "parts", "smoke", "preflight", "release", "plan", "publish_dir", "index_url")


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


def _preflight(result: Plan, compat: Compat) -> tuple[str, list[str]]:
    """The Wine pre-flight jobs and their notes: for each CUDA major of the Windows cells this run builds, the
    canary of those whose Python dswheels can build under Wine (compat.yml ``cpython_sources``; not free-threaded):
    its cell and the canary's ops, ``dswheels build --cell --ops`` of the same plan file. None when the run builds
    no such cell. Under Wine CUDA 13 comes from NVIDIA's PyPI wheels, CUDA 12 from NVIDIA's archives."""
    windows = [item for item in result.planned if windows_cuda(item) and item.toolchain.nvcc]
    majors = sorted({(item.toolchain.nvcc or ())[:1] for item in windows}, reverse=True)
    entries: list[object] = []
    notes: list[str] = []
    for major in majors:
        cells = [item for item in windows if (item.toolchain.nvcc or ())[:1] == major]
        runnable = [
            item
            for item in cells
            if not item.cell.python.free_threaded and item.cell.python.version[:2] in compat.cpython_sources
        ]
        canary = pick_canary(runnable)
        if canary is None:
            pythons = ", ".join(sorted({str(item.cell.python) for item in cells}))
            notes.append(
                f"no Wine pre-flight for the Windows CUDA {major[0]} cells: none builds every canary op with a Python "
                f"compat.yml pins sources of for the Wine host (they have {pythons})"
            )
            continue
        alone = replace(result, planned=(canary,), mode="canary")
        jobs, _per_cell = jobs_of(alone)
        entries += json.loads(render_github(alone, jobs, stage="build"))["include"]
        notes.append(f"Wine pre-flight before the Windows build jobs: {cell_id(canary.cell)}")
    return json.dumps({"include": entries}, separators=(",", ":")), notes


def plan_ci_run(options: CiPlanOptions) -> CiRun:
    intent = options.intent
    # the build jobs install CUDA from NVIDIA's archives: a toolkit without a pinned redistrib JSON drops its cells
    selection = MatrixCells(matrix=options.matrix, combo=combo_from_values(intent.selection), redist_required=True)
    compat = load_compat()
    result = plan_matrix(selection, compat)
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
    preflight, preflight_notes = _preflight(result, compat)
    notes += preflight_notes
    outputs = {
        "matrix": render_github(result, jobs, stage="build"),
        "parts": render_github(result, jobs, stage="part"),
        "smoke": render_github(result, _smoke_jobs(jobs, options.gpu), stage="build"),
        "preflight": preflight,
        "release": intent.release,
        "plan": plan_file.as_posix(),
        "publish_dir": options.published.publish_dir,
        "index_url": options.published.site_url(),
    }
    return CiRun(plan=result, skipped=skipped, jobs=jobs, per_cell=per_cell, notes=tuple(notes), outputs=outputs)
