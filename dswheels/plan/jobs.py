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
from dataclasses import dataclass, replace

from dswheels.kernel.errors import ConfigError
from dswheels.kernel.model import PlannedCell
from dswheels.kernel.versions import format_version
from dswheels.plan.costs import CostModel, Figure, JobEstimate, estimate_job, figures_used

__all__ = ["GITHUB_JOB_LIMIT", "LEVELS", "Job", "JobPlan", "ReleasePath", "job_key", "plan_jobs", "release_path"]

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
    path: ReleasePath | None = None  # the tag's critical path by the model
    figures: tuple[tuple[str, Figure], ...] = ()  # every figure of the model the estimates read

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
    """Jobs for ``planned``: grouped from ``finest`` up as far as ``limit`` needs, split where over budget.

    Each stage's jobs come longest first: GitHub starts a matrix's jobs in its order as runners
    free up, so the longest start first and the release's last job ends soonest.
    """
    for level in LEVELS[LEVELS.index(finest) :]:
        jobs = [job for group in _by(planned, level) for job in _fit(group, model)]
        jobs.sort(key=lambda j: (j.stage != "part", -j.estimate.minutes))
        builds = sum(1 for j in jobs if j.stage == "build")
        if builds <= limit and len(jobs) - builds <= limit:
            done = JobPlan(level=level, jobs=tuple(jobs), budget_minutes=model.budget_minutes)
            ops = {name for item in planned for name in item.ops.build_names}
            figures = figures_used(model, ops, {model.runner_key(item.cell.platform) for item in planned})
            return replace(done, path=release_path(done, model), figures=tuple(figures))
    raise ConfigError(
        f"{len(planned)} cells need more than {limit} jobs even grouped by toolchain "
        "(deepspeed, platform, variant, CUDA toolkit, compiler)",
        hint="GitHub runs at most 256 jobs per matrix: split the selection, e.g. one run per DeepSpeed "
        "version (--deepspeed) or per platform (--platform)",
    )


# --- the release's critical path -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReleasePath:
    """Minutes from a tag push to its last wheel indexed, by the model: wheels.yml's jobs in their order."""

    plan: float
    parts: float  # every part job, on the runners GitHub gives at once (0: none)
    builds: float  # every build job, after the parts, likewise
    release: float
    pages: float
    concurrent: int  # jobs GitHub runs at once
    budget: float  # the tag's budget (minutes)

    @property
    def minutes(self) -> float:
        return self.plan + self.parts + self.builds + self.release + self.pages


def _makespan(minutes: Sequence[float], runners: int) -> float:
    """Jobs started in order, each on the first runner free: when the last one ends.

    >>> _makespan([100, 60, 50, 40], 2)
    140.0
    """
    ends = [0.0] * max(1, runners)
    for job in minutes:
        ends[ends.index(min(ends))] += job
    return max(ends)


def release_path(jobs: JobPlan, model: CostModel) -> ReleasePath:
    """The tag's critical path: plan, then every part job, then every build job (wheels.yml's ``build``
    needs the whole ``parts`` matrix), then release and pages. A smoke job on a self-hosted GPU runner
    is not counted (its runner is the repository's own)."""
    wf = model.workflow
    runners = int(wf.concurrent_jobs.value)
    return ReleasePath(
        plan=wf.plan.value / 60,
        parts=_makespan([j.estimate.minutes for j in jobs.parts], runners),
        builds=_makespan([j.estimate.minutes for j in jobs.builds], runners),
        release=wf.release.value / 60,
        pages=wf.pages.value / 60,
        concurrent=runners,
        budget=wf.tag_budget.value,
    )
