"""The plan step (``dswheels plan``): the selected cells planned, optionally only the canary or only
what is not published yet, and the jobs that build them."""

from __future__ import annotations

import datetime as dt
import sys
from dataclasses import dataclass, replace
from enum import Enum

from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.model import Plan
from dswheels.plan.canary import CANARY_OPS, pick_canary
from dswheels.plan.costs import load_costs
from dswheels.plan.effects.published import Skipped, skip_published
from dswheels.plan.effects.selection import MatrixCells, plan_matrix
from dswheels.plan.image_ends import image_end_warnings, planned_images
from dswheels.plan.jobs import JobPlan, plan_jobs

__all__ = ["JobGrouping", "PlanOptions", "PlanRun", "canary_plan", "image_warnings", "jobs_of", "run_plan"]


class JobGrouping(str, Enum):
    """The finest grouping of cells into build jobs (``plan --group``): coarser still past the job limit."""

    PYTHON = "python"  # one job builds every Python of a (deepspeed, torch, variant, platform)
    CELL = "cell"  # one job per cell


@dataclass(frozen=True, kw_only=True, slots=True)
class PlanOptions:
    selection: MatrixCells
    canary: bool = False  # only the canary of the selected cells
    skip_published: str | None = None  # leave out the cells whose wheels this index or directory lists
    group: JobGrouping | None = JobGrouping.PYTHON  # the jobs' finest grouping; None: no jobs
    today: dt.date | None = None  # the day the planned images' ends are judged against (None: not judged)


@dataclass(frozen=True, kw_only=True, slots=True)
class PlanRun:
    plan: Plan
    skipped: Skipped | None  # what --skip-published left out
    jobs: JobPlan | None  # None when not asked for
    per_cell: JobPlan | None  # one job per cell, for the runner-hours comparison
    warnings: tuple[str, ...] = ()  # planned runner images GitHub is retiring (dswheels.plan.image_ends)


def canary_plan(result: Plan) -> Plan:
    """The plan of the canary alone (:mod:`dswheels.plan.canary`)."""
    picked = pick_canary(result.planned)
    if picked is None:
        raise ConfigError(
            f"no canary: the selection plans no Windows CUDA cell that builds {', '.join(CANARY_OPS)}",
            hint="select Windows CUDA cells (e.g. --deepspeed alone, on the shipped matrix)",
        )
    return replace(result, planned=(picked,), mode="canary")


def jobs_of(result: Plan, *, group: JobGrouping = JobGrouping.PYTHON) -> tuple[JobPlan, JobPlan | None]:
    """The plan's jobs (grouped by ``group``, under the cost model's budget) and, for the runner-hours
    comparison, one job per cell (None for an empty plan)."""
    model = load_costs()
    jobs = plan_jobs(result.planned, model, finest=group.value)
    per_cell = (
        plan_jobs(result.planned, model, finest=JobGrouping.CELL.value, limit=sys.maxsize) if result.planned else None
    )
    return jobs, per_cell


def image_warnings(result: Plan, today: dt.date | None) -> tuple[str, ...]:
    """What the plan's runner images' retirements warn of on ``today`` (nothing without a day)."""
    if today is None:
        return ()
    return image_end_warnings(planned_images(result.planned, load_compat().runner_images), today)


def run_plan(options: PlanOptions) -> PlanRun:
    result = plan_matrix(options.selection, load_compat())
    if options.canary:
        result = canary_plan(result)
    skipped = None
    if options.skip_published:
        skipped = skip_published(result, options.skip_published)
        result = skipped.plan
    jobs, per_cell = jobs_of(result, group=options.group) if options.group else (None, None)
    warnings = image_warnings(result, options.today)
    return PlanRun(plan=result, skipped=skipped, jobs=jobs, per_cell=per_cell, warnings=warnings)
