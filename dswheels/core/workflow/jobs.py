"""Cells into GitHub jobs: one compile per toolchain, under 256 jobs, under the 6-hour cap.

By default one job builds every Python of a (DeepSpeed, torch, variant, platform): one CUDA
install, one compiler cache, and the later Pythons reuse the first one's ``.cu`` objects
(docs/costs.md). Past 256 such jobs, one job per toolchain (every torch too). A job the cost
model puts over the budget is split:

* a job of several groups (toolchain level) into jobs of fewer groups;
* a job of one group **by op**: *part* jobs each compile some of its ops for all its Pythons into
  the shared compiler cache (wheels.yml's ``parts`` job; no wheel leaves them), then the group's
  own build job, which runs after every part, compiles the whole cells from that cache and makes
  the wheels. A wheel must hold all its ops, so nothing is merged: the last job finishes from
  the cache. An op that alone needs more than the budget cannot be split further (an arch split
  would change every nvcc command line, and with it every cache key): the plan says so.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from dswheels.core.model import PlannedCell
from dswheels.core.versions import format_version
from dswheels.core.workflow.costs import CostModel, JobEstimate, estimate_job
from dswheels.errors import ConfigError

__all__ = ["GITHUB_JOB_LIMIT", "LEVELS", "Job", "JobPlan", "job_key", "plan_jobs"]

GITHUB_JOB_LIMIT = 256
LEVELS = ("cell", "python", "toolchain")


@dataclass(frozen=True, slots=True)
class Job:
    cells: tuple[PlannedCell, ...]
    estimate: JobEstimate
    stage: str = "build"  # "build": makes wheels; "part": compiles ops into the shared cache only
    ops: tuple[str, ...] = ()  # a part's ops; () = every planned op
    part: str = ""  # "2/3" for a part; "3 parts" for the build job that finishes after them


@dataclass(frozen=True, slots=True)
class JobPlan:
    level: str
    jobs: tuple[Job, ...]
    budget_minutes: float

    @property
    def builds(self) -> tuple[Job, ...]:
        return tuple(j for j in self.jobs if j.stage == "build")

    @property
    def parts(self) -> tuple[Job, ...]:
        return tuple(j for j in self.jobs if j.stage == "part")

    @property
    def runner_hours(self) -> float:
        return sum(j.estimate.minutes for j in self.jobs) / 60

    @property
    def over_budget(self) -> tuple[Job, ...]:
        return tuple(j for j in self.jobs if j.estimate.minutes > self.budget_minutes)


def job_key(item: PlannedCell, level: str) -> tuple[str, ...]:
    """Cells of one job always share a runner and a toolchain: one CUDA install, one compiler."""
    cell, tc = item.cell, item.toolchain
    shared = (
        format_version(cell.deepspeed),
        cell.platform.value,
        tc.runner_image,
        cell.variant.name,
        tc.cuda_toolkit,
        tc.host_compiler.version,
    )
    if level == "cell":
        return (*shared, format_version(cell.torch), cell.python.tag)
    if level == "python":  # every Python of a (deepspeed, torch, variant, platform)
        return (*shared, format_version(cell.torch))
    return shared  # every torch and Python of a toolchain


def _by(items: Sequence[PlannedCell], level: str) -> list[list[PlannedCell]]:
    groups: dict[tuple[str, ...], list[PlannedCell]] = defaultdict(list)
    for item in items:
        groups[job_key(item, level)].append(item)
    return list(groups.values())


def _split_ops(cells: list[PlannedCell], model: CostModel) -> list[Job]:
    """One group over the budget: part jobs by op (largest first into the emptiest part), then its build."""
    ops = list(cells[0].ops.build_names)
    weight = {name: estimate_job(cells, model, ops=[name]).compile_minutes for name in ops}
    ops.sort(key=lambda name: -weight[name])
    bins: list[list[str]] = [ops]
    estimates = [estimate_job(cells, model)]
    count = 1
    for count in range(2, len(ops) + 1):
        bins = [[] for _ in range(count)]
        for name in ops:
            min(bins, key=lambda b: sum(weight[n] for n in b)).append(name)
        estimates = [estimate_job(cells, model, ops=b) for b in bins]
        if all(e.minutes <= model.budget_minutes for e in estimates) or count == len(ops):
            break
    parts = [
        Job(cells=tuple(cells), estimate=e, stage="part", ops=tuple(b), part=f"{i}/{count}")
        for i, (b, e) in enumerate(zip(bins, estimates, strict=True), start=1)
    ]
    finish = Job(cells=tuple(cells), estimate=estimate_job(cells, model, cached=True), part=f"{count} parts")
    return [*parts, finish]


def _fit(cells: list[PlannedCell], model: CostModel) -> list[Job]:
    estimate = estimate_job(cells, model)
    if estimate.minutes <= model.budget_minutes:
        return [Job(cells=tuple(cells), estimate=estimate)]
    groups = _by(cells, "python")
    if len(groups) > 1:  # several torches in one job: fewer per job (first fit, largest first)
        groups.sort(key=lambda g: -estimate_job(g, model).minutes)
        packed: list[list[PlannedCell]] = []
        for group in groups:
            home = next(
                (b for b in packed if estimate_job(b + group, model).minutes <= model.budget_minutes),
                None,
            )
            if home is None:
                packed.append(list(group))
            else:
                home.extend(group)
        return [job for b in packed for job in _fit(b, model)]
    if len(cells[0].ops.build) < 2:
        return [Job(cells=tuple(cells), estimate=estimate)]  # nothing to split: the plan flags it
    return _split_ops(cells, model)


def plan_jobs(
    planned: Sequence[PlannedCell],
    model: CostModel,
    *,
    limit: int = GITHUB_JOB_LIMIT,
    finest: str = "python",
) -> JobPlan:
    """Jobs for ``planned``: grouped from ``finest`` up as far as ``limit`` needs, split where over budget."""
    for level in LEVELS[LEVELS.index(finest) :]:
        jobs = [job for group in _by(planned, level) for job in _fit(group, model)]
        builds = sum(1 for j in jobs if j.stage == "build")
        if builds <= limit and len(jobs) - builds <= limit:
            return JobPlan(level=level, jobs=tuple(jobs), budget_minutes=model.budget_minutes)
    raise ConfigError(
        f"{len(planned)} cells need more than {limit} jobs even grouped by toolchain "
        "(deepspeed, platform, variant, CUDA toolkit, compiler)",
        hint="GitHub runs at most 256 jobs per matrix: split the selection, e.g. one run per DeepSpeed "
        "version (--deepspeed) or per platform (--platform)",
    )
