"""Grouping cells into GitHub jobs: one compile per toolchain, never more than 256, split past the budget."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.model import PlannedCell
from dswheels.kernel.naming import cell_id
from dswheels.plan.costs import STATUSES, CostModel, Figure, OpCost, Seconds, Units, estimate_job, load_costs
from dswheels.plan.jobs import JobPlan, plan_jobs
from dswheels.plan.matrix.parse import parse_matrix
from dswheels.plan.planner import plan
from dswheels.plan.render_costs import render_job_summary
from dswheels.plan.scopes import Scope

COMPAT = load_compat()
COSTS = load_costs()


def with_budget(minutes: float) -> CostModel:
    return dataclasses.replace(
        COSTS, workflow=dataclasses.replace(COSTS.workflow, job_budget=Figure(minutes, "chosen", "a test's"))
    )


def group_jobs(
    planned: list[PlannedCell], *, limit: int = 256, finest: str = "python", model: CostModel = COSTS
) -> tuple[str, list[list[PlannedCell]]]:
    jobs: JobPlan = plan_jobs(planned, model, limit=limit, finest=finest)
    return jobs.level, [list(job.cells) for job in jobs.jobs]


RUNNERS = """
runners:
  win_amd64: {build: [windows-2022], smoke: [gpu]}
  linux_x86_64: {build: [ubuntu-24.04, ubuntu-22.04], smoke: [gpu]}
"""


def _plan(deepspeed: str, torch: str, python: str) -> list[PlannedCell]:
    text = (
        f"""schema: 1
deepspeed: [{deepspeed}]
torch: [{torch}]
python: [{python}]
platforms: [win_amd64, linux_x86_64]
"""
        + RUNNERS
    )
    return list(plan(parse_matrix(text, "m.yml", COMPAT), COMPAT).planned)


def test_the_pythons_of_a_toolchain_share_a_job_by_default() -> None:
    planned = _plan('"0.19.8"', '{version: "2.14", variants: [cu126, cu130]}', '"3.11", "3.12"')
    level, groups = group_jobs(planned)
    assert level == "python"
    assert len(groups) == 4
    assert len(planned) == 8
    for group in groups:  # the two Pythons of one (deepspeed, torch, variant, platform)
        assert sorted(str(i.cell.python) for i in group) == ["3.11", "3.12"]
        assert len({(i.cell.torch, i.cell.variant, i.cell.platform) for i in group}) == 1


def test_one_job_per_cell_on_request() -> None:
    planned = _plan('"0.19.8"', '{version: "2.14", variants: [cu126, cu130]}', '"3.11", "3.12"')
    level, groups = group_jobs(planned, finest="cell")
    assert level == "cell"
    assert len(groups) == len(planned) == 8


def test_large_plans_are_grouped_under_the_limit_and_keep_every_cell() -> None:
    ds = ", ".join(f'"0.19.{i}"' for i in range(5, 9))
    torch = ", ".join(f'{{version: "{t}", variants: [cu126, cu130, cpu]}}' for t in ("2.12", "2.13", "2.14"))
    planned = _plan(ds, torch, '"3.10", "3.11", "3.12", "3.13", "3.14"')
    assert len(planned) > 256
    level, groups = group_jobs(planned)
    assert level == "python"
    assert len(groups) <= 256
    ids = [cell_id(item.cell) for group in groups for item in group]
    assert sorted(ids) == sorted(cell_id(item.cell) for item in planned)
    for group in groups:  # one job = one toolchain
        assert len({(i.cell.variant, i.cell.platform, i.toolchain.cuda_toolkit) for i in group}) == 1


def test_the_coarsest_grouping_still_keeps_one_toolchain_per_job() -> None:
    ds = ", ".join(f'"0.19.{i}"' for i in range(5, 9))
    torch = ", ".join(f'{{version: "{t}", variants: [cu126, cu130, cpu]}}' for t in ("2.12", "2.13", "2.14"))
    planned = _plan(ds, torch, '"3.10", "3.11", "3.12", "3.13", "3.14"')
    level, groups = group_jobs(planned, limit=40, model=with_budget(600))  # the grouping, not the budget
    assert level == "toolchain"
    assert len(groups) <= 40
    for group in groups:
        toolchains = {
            (i.cell.variant, i.cell.platform, i.toolchain.cuda_toolkit, i.toolchain.host_compiler) for i in group
        }
        assert len(toolchains) == 1
    assert sum(len(g) for g in groups) == len(planned)


def test_too_many_even_grouped_is_an_error_with_a_way_out() -> None:
    planned = _plan('"0.19.8"', '{version: "2.14", variants: [cu126]}', '"3.11"')
    with pytest.raises(ConfigError, match="more than 1 jobs") as info:
        group_jobs(planned * 2, limit=1, finest="cell")
    assert "split the selection" in (info.value.hint or "")


# --- the cost model and the split ------------------------------------------------------------------


def test_a_later_python_compiles_only_its_cpp_units() -> None:
    planned = _plan('"0.19.8"', '{version: "2.14", variants: [cu130]}', '"3.11", "3.12"')
    linux = [p for p in planned if p.cell.platform.os == "linux"]
    both = estimate_job(linux, COSTS)
    one = estimate_job(linux[:1], COSTS)
    assert both.later_compile_minutes < 0.3 * both.first_compile_minutes  # the .cu units are not compiled again
    assert both.compile_minutes < 2 * one.compile_minutes
    separate = sum(estimate_job([p], COSTS).minutes for p in linux)
    assert both.minutes < separate  # one toolkit install, one compile of the .cu units


def test_a_group_over_the_budget_is_split_by_op_and_finished_from_the_cache() -> None:
    planned = _plan('"0.19.8"', '{version: "2.14", variants: [cu130]}', '"3.11", "3.12", "3.13"')
    windows = [p for p in planned if p.cell.platform.os == "windows"]
    whole = estimate_job(windows, COSTS)
    model = with_budget(whole.minutes * 0.6)
    jobs = plan_jobs(windows, model)
    parts, builds = jobs.parts, jobs.builds
    assert len(builds) == 1
    assert len(parts) >= 2
    finish = builds[0]
    assert finish.ops == ()
    assert len(finish.cells) == 3
    assert finish.part == f"{len(parts)} parts"
    ops = [name for part in parts for name in part.ops]
    assert sorted(ops) == sorted(windows[0].ops.build_names)  # each op in exactly one part
    for part in parts:
        assert len(part.cells) == 3  # a part compiles its ops for every Python: the cache holds them all
        assert part.estimate.minutes <= model.budget_minutes
    assert finish.estimate.compile_minutes < 0.3 * whole.compile_minutes  # everything from the cache: lookups only
    assert not jobs.over_budget


def test_an_op_too_big_for_any_job_is_flagged() -> None:
    planned = _plan('"0.19.8"', '{version: "2.14", variants: [cu130]}', '"3.11"')
    windows = [p for p in planned if p.cell.platform.os == "windows"]
    huge = OpCost(
        linux=Seconds(host=10, device=100_000, status="assumed", source="a test's"),
        units=Units({Scope.CELL: 1}, {Scope.TORCH: 1}),
    )
    model = dataclasses.replace(COSTS, ops={**COSTS.ops, "fused_adam": huge})
    jobs = plan_jobs(windows, model)
    assert [job.ops for job in jobs.over_budget] == [("fused_adam",)]  # alone in its part, still too big
    summary = "\n".join(render_job_summary(jobs))
    assert "OVER THE BUDGET" in summary
    assert "fused_adam alone" in summary


def test_the_shipped_matrix_fits_by_the_model() -> None:
    """Issue 23: no job over 150 minutes, a tag's last wheel indexed within three hours, a job's compile
    within 5% of its work over its slots (where the tail matters: jobs compiling 20 minutes or more), and
    every figure the estimate reads says where it comes from."""
    from dswheels.plan.effects.matrix_file import load_matrix
    from tests.conftest import ROOT

    planned = plan(load_matrix(ROOT / "matrix" / "matrix.yml", COMPAT), COMPAT).planned
    jobs = plan_jobs(planned, COSTS)
    assert jobs.budget_minutes == 150
    assert not jobs.over_budget
    assert max(job.estimate.minutes for job in jobs.jobs) < 150
    assert len(jobs.builds) <= 256
    assert len(jobs.parts) <= 256
    per_cell = plan_jobs(planned, COSTS, finest="cell", limit=10**6)  # one job per cell: over 256 jobs, had it to be
    assert jobs.runner_hours < 0.5 * per_cell.runner_hours
    newest = [p for p in planned if p.cell.deepspeed == COMPAT.deepspeed_releases[-1]]
    tag = plan_jobs(newest, COSTS)
    assert tag.path is not None
    assert tag.path.minutes < 180
    for job in jobs.jobs:
        estimate = job.estimate
        if estimate.compile_minutes >= 20:
            assert estimate.compile_minutes <= 1.05 * estimate.work_minutes, (job.cells[0].cell, estimate)
    statuses = {figure.status for _, figure in jobs.figures}
    assert statuses <= set(STATUSES)
    assert {"measured", "probed", "assumed"} <= statuses
    assert all(figure.source for _, figure in jobs.figures)


def test_the_tag_waits_for_runners_when_it_has_more_jobs_than_github_runs_at_once() -> None:
    planned = _plan('"0.19.8"', '{version: "2.14", variants: [cu126, cu130]}', '"3.11", "3.12"')
    jobs = plan_jobs(planned, COSTS)
    one = dataclasses.replace(
        COSTS, workflow=dataclasses.replace(COSTS.workflow, concurrent_jobs=Figure(1, "documented", "t"))
    )
    serial = plan_jobs(planned, one)
    assert jobs.path is not None
    assert serial.path is not None
    longest = max(j.estimate.minutes for j in jobs.builds)
    assert jobs.path.builds == pytest.approx(longest)  # all at once: the longest job
    assert serial.path.builds == pytest.approx(sum(j.estimate.minutes for j in jobs.builds))  # one after another
    assert [j.estimate.minutes for j in jobs.builds] == sorted((j.estimate.minutes for j in jobs.builds), reverse=True)


def test_aarch64_jobs_take_the_arm64_runners_figures_and_linux_jobs_their_containers() -> None:
    """linux_aarch64's jobs run on GitHub's arm64 runners (compile_times.yml runners.linux_aarch64), the other Linux
    jobs on the x86_64 ones; a job in its floor's manylinux container counts the container's setup."""
    shipped = plan(parse_matrix(Path("matrix/matrix.yml").read_text(encoding="utf-8"), "matrix.yml", COMPAT), COMPAT)
    cpu = {p.cell.platform.value: p for p in shipped.planned if p.cell.variant.name == "cpu"}
    arm, x86 = cpu["linux_aarch64"], cpu["linux_x86_64"]
    win = next(p for p in shipped.planned if p.cell.platform.value == "win_amd64")  # CUDA only: its toolkit too
    assert (COSTS.runner_key(arm.cell.platform), COSTS.runner_key(x86.cell.platform)) == ("linux_aarch64", "linux")
    assert COSTS.runner_key(win.cell.platform) == "windows"
    assert arm.toolchain.container
    assert x86.toolchain.container
    assert not win.toolchain.container
    runner = COSTS.runners["linux_aarch64"]
    assert runner.container_setup.value > 0
    assert estimate_job([arm], COSTS).setup_minutes == pytest.approx(
        (runner.setup.value + runner.container_setup.value) / 60
    )
    windows = COSTS.runners["windows"]
    assert estimate_job([win], COSTS).setup_minutes == pytest.approx(
        (windows.setup.value + windows.cuda_setup.value) / 60
    )
    # the arm64 runner's own figures move its jobs and no other
    slower = dataclasses.replace(runner, speed=Figure(2.0, "assumed", "a test's"))
    model = dataclasses.replace(COSTS, runners={**COSTS.runners, "linux_aarch64": slower})
    assert estimate_job([arm], model).compile_minutes == pytest.approx(2 * estimate_job([arm], COSTS).compile_minutes)
    assert estimate_job([x86], model) == estimate_job([x86], COSTS)
    # without a container (a Linux job on the runner itself) there is nothing to pull
    bare = dataclasses.replace(arm, toolchain=dataclasses.replace(arm.toolchain, container=""))
    assert estimate_job([bare], COSTS).setup_minutes == pytest.approx(runner.setup.value / 60)
    # a model without the platform's own entry takes its OS's
    linux_only = dataclasses.replace(COSTS, runners={k: v for k, v in COSTS.runners.items() if k != "linux_aarch64"})
    assert linux_only.runner_key(arm.cell.platform) == "linux"
