"""What a plan costs in runner time, for people: the jobs, their estimates, the splits and the total."""

from __future__ import annotations

from dswheels.core.naming import cell_id
from dswheels.core.workflow.costs import CAP_MINUTES
from dswheels.core.workflow.jobs import GITHUB_JOB_LIMIT, Job, JobPlan

__all__ = ["render_cost_table", "render_job_summary"]

_LEVELS = {
    "cell": "one per cell",
    "python": "one per (DeepSpeed, torch, variant, platform), building all its Pythons: one CUDA install, "
    "one compiler cache, the .cu objects compiled once",
    "toolchain": "one per toolchain (DeepSpeed, platform, variant, CUDA toolkit, compiler), building all its "
    f"torch versions and Pythons, because finer groups would pass GitHub's {GITHUB_JOB_LIMIT}-job limit",
}


def _name(job: Job) -> str:
    first = cell_id(job.cells[0].cell)
    more = f" +{len(job.cells) - 1} Python(s)" if len(job.cells) > 1 else ""
    return f"{first}{more}" + (f" part {job.part}" if job.stage == "part" else "")


def render_job_summary(jobs: JobPlan, *, per_cell: JobPlan | None = None) -> list[str]:
    """The lines under ``dswheels plan``'s table: jobs, runner-hours, the longest job, splits, overruns."""
    if not jobs.jobs:
        return ["no jobs"]
    builds, parts = jobs.builds, jobs.parts
    lines = [
        f"{len(builds)} build job(s), {_LEVELS[jobs.level]}"
        + (f"; {len(parts)} part job(s) before them" if parts else "")
        + f" (GitHub runs at most {GITHUB_JOB_LIMIT} per matrix)",
    ]
    longest = max(jobs.jobs, key=lambda j: j.estimate.minutes)
    cost = f"estimated {jobs.runner_hours:.1f} runner-hours"
    if per_cell is not None and per_cell.level == "cell":
        cost += f" (one job per cell: {len(per_cell.jobs)} jobs, {per_cell.runner_hours:.1f} runner-hours)"
    lines.append(
        f"{cost}; the longest job {longest.estimate.describe()}: {_name(longest)}; "
        f"budget {jobs.budget_minutes:.0f} of GitHub's {CAP_MINUTES} minutes per job (docs/costs.md)",
    )
    lines.extend(
        f"split by op: {_name(job)}: {job.part} compile its ops into the shared compiler cache first, "
        "then its build job makes the wheels from that cache"
        for job in builds
        if job.part
    )
    lines.extend(
        f"OVER THE BUDGET: {_name(job)} {job.estimate.describe()}: "
        + (
            f"its op(s) {', '.join(job.ops)} alone need that; "
            if job.ops and len(job.ops) == 1
            else "one cell with a single op cannot be split; "
        )
        + "build it on a larger runner (the matrix's runners) or with fewer archs (arch_lists)"
        for job in jobs.over_budget
    )
    return lines


def render_cost_table(jobs: JobPlan, *, per_cell: JobPlan | None = None) -> str:
    """``dswheels plan --costs``: every job with its estimate, then the summary."""
    rows = [("JOB", "STAGE", "CELLS", "MINUTES", "COMPILE", "1ST PY", "LATER PY")]
    rows.extend(
        (
            _name(job),
            job.stage + (f" {job.part}" if job.part else ""),
            str(len(job.cells)),
            f"{job.estimate.minutes:.0f}",
            f"{job.estimate.compile_minutes:.0f}",
            f"{job.estimate.first_compile_minutes:.0f}",
            f"{job.estimate.later_compile_minutes:.0f}" if len(job.cells) > 1 else "-",
        )
        for job in jobs.jobs
    )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join([*lines, "", *render_job_summary(jobs, per_cell=per_cell)]) + "\n"
