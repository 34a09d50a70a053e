"""What a plan costs in runner time, for people: the jobs, their estimates, the splits, the total,
the tag's critical path and where every figure comes from."""

from __future__ import annotations

from dswheels.kernel.naming import cell_id
from dswheels.plan.costs import CAP_MINUTES, STATUSES
from dswheels.plan.jobs import GITHUB_JOB_LIMIT, Job, JobPlan

__all__ = ["render_cost_table", "render_figures", "render_job_summary"]

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


def _critical_path(jobs: JobPlan, longest: Job) -> list[str]:
    path = jobs.path
    if path is None:
        return []
    est = longest.estimate
    parts = f" -> {len(jobs.parts)} part job(s) {path.parts:.0f}" if jobs.parts else ""
    total = path.minutes
    lines = [
        f"critical path: the longest job {est.minutes:.0f} min = setup {est.setup_minutes:.0f} + compile "
        f"{est.compile_minutes:.0f} + checks {est.checks_minutes:.0f} (its cells' venvs, post-processing, verify); "
        f"its compile is {est.compile_minutes / est.work_minutes:.2f}x its work over the runner's slots"
        if est.work_minutes
        else f"critical path: the longest job {est.minutes:.0f} min",
        (
            f"tag to the last wheel indexed: ~{total:.0f} min (plan {path.plan:.0f}{parts} -> {len(jobs.builds)} "
            f"build job(s) {path.builds:.0f}, {path.concurrent} at a time -> release {path.release:.0f} -> pages "
            f"{path.pages:.0f}; a smoke job on a GPU runner not counted); budget {path.budget:.0f} min"
        ),
    ]
    if total > path.budget:
        lines.append(
            f"OVER THE TAG BUDGET: ~{total:.0f} of {path.budget:.0f} minutes: fewer jobs at once than the plan needs "
            "(a paid plan runs more), or a smaller matrix per tag"
        )
    return lines


def render_job_summary(jobs: JobPlan, *, per_cell: JobPlan | None = None) -> list[str]:
    """The lines under ``dswheels plan``'s table: jobs, runner-hours, the longest job, the critical path,
    splits, overruns."""
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
    lines.extend(_critical_path(jobs, longest))
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


def render_figures(jobs: JobPlan) -> list[str]:
    """Every figure the estimates read, with whether it was measured, probed, documented, chosen or assumed."""
    if not jobs.figures:
        return []
    counts = {status: sum(1 for _, f in jobs.figures if f.status == status) for status in STATUSES}
    lines = ["figures (dswheels/compile_times.yml): " + ", ".join(f"{n} {status}" for status, n in counts.items() if n)]
    width = max(len(name) for name, _ in jobs.figures)
    lines.extend(
        f"  {figure.status:<10} {name:<{width}} {figure.value:g}  {figure.source}" for name, figure in jobs.figures
    )
    return lines


def render_cost_table(jobs: JobPlan, *, per_cell: JobPlan | None = None) -> str:
    """``dswheels plan --costs``: every job with its estimate, then the summary and the figures."""
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
    summary = render_job_summary(jobs, per_cell=per_cell)
    return "\n".join([*lines, "", *summary, "", *render_figures(jobs)]) + "\n"
