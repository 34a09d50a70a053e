"""The build jobs' time budget, read from .github/workflows/wheels.yml (issue 25).

GitHub cancels a job at its ``timeout-minutes``, and a cancelled job skips its ``failure()``
steps: the "Re-run to finish" notice (everything compiled is in the compiler cache) did not show
when the CUDA install's two 30-minute tries and the 330-minute build outran the job's 355 minutes.
A step cut off at its own ``timeout-minutes`` fails instead ("The action has timed out":
actions/runner, src/Runner.Worker/StepsRunner.cs), and the steps after it run. So, for every job
that runs ``dswheels build``, on each runner OS and matrix entry the plan writes: the steps that
can run before the build, each at its timeout (every try failing), the build's own limit, the
notice and the post steps fit in the job's minutes. The build's limit is what the job has left
(the ``time_left`` step), run here for real at each point of that worst case.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from dswheels.kernel.compat import load_compat
from dswheels.plan.matrix.parse import parse_matrix
from dswheels.plan.planner import plan
from dswheels.plan.render_plan import render_github
from dswheels.plan.step import jobs_of
from tests.conftest import ROOT
from tests.gha.expressions import Status, Value, condition, interpolate
from tests.gha.steps import Job, StepRun
from tests.gha.workflow_files import JOBS, WHEELS, as_dict, job_spec, job_steps, seen_by_steps

# after the last step: the actions' post steps (sccache's stats, setup-python, checkout) and completing the job
POST_MINUTES = 3
NOTICE = "::notice title=Re-run to finish::"
# the build jobs (the Wine pre-flight builds too, within fixed limits and with no re-run: tests/unit/test_workflows.py)
BUILD_JOBS = [
    name
    for name in JOBS
    if name != "preflight" and any("dswheels build" in str(s.get("run", "")) for s in job_steps(name))
]


def _entries() -> list[dict[str, Value]]:
    """Every build job matrix entry the shipped matrix plans (each platform, CUDA and CPU)."""
    compat = load_compat()
    shipped = parse_matrix((ROOT / "matrix" / "matrix.yml").read_text(encoding="utf-8"), "matrix.yml", compat)
    result = plan(shipped, compat)
    jobs, _ = jobs_of(result)
    entries: list[dict[str, Value]] = json.loads(render_github(result, jobs, stage="build"))["include"]
    kinds = {(e["os"], e["cuda_toolkit"] != ""): e for e in entries}  # one of each: the steps depend on no more
    assert {("windows", True), ("linux", True)} <= set(kinds), sorted(kinds)  # the CUDA install on both
    return list(kinds.values())


ENTRIES = _entries()


def _contexts(job: str, entry: dict[str, Value], steps: list[dict[str, Value]]) -> dict[str, Value]:
    """The worst case: every step that may fail without failing the job (a first try) failed."""
    outcomes: dict[str, Value] = {
        str(s["id"]): {"outcome": "failure" if s.get("continue-on-error") else "success", "outputs": {}}
        for s in steps
        if "id" in s
    }
    runner_os = "Windows" if entry["os"] == "windows" else "Linux"
    job_contexts = seen_by_steps(job, {"matrix": entry, "vars": {}, "github": {}})
    return {**job_contexts, "runner": {"os": runner_os}, "steps": outcomes, "env": {}}


def _timeout(step: dict[str, Value]) -> int | None:
    value = step.get("timeout-minutes")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _name(step: dict[str, Value]) -> str:
    return str(step.get("name") or step.get("uses"))


def _build_index(steps: list[dict[str, Value]]) -> int:
    (index,) = [i for i, s in enumerate(steps) if "dswheels build" in str(s.get("run", ""))]
    return index


def _minutes_left(job: str, entry: dict[str, Value], elapsed: int, tmp_path: Path) -> int:
    """The build step's timeout when the steps before it took ``elapsed`` minutes: a number as written, or
    an expression over what the time-left step (run here for real) computed."""
    build = job_steps(job)[_build_index(job_steps(job))]
    fixed = _timeout(build)
    if fixed is not None:
        return fixed
    contexts: dict[str, Value] = {
        "matrix": entry,
        "vars": {},
        "inputs": {},
        "github": {"ref_name": "v0.19.8", "event_name": "push"},
        "runner": {"os": "Linux"},
    }
    runner = Job(workflow=WHEELS, job=job, workspace=tmp_path / f"{job}-{elapsed}", contexts=contexts)
    started = str(int(time.time()) - elapsed * 60)
    runner.runs["clock"] = StepRun(ran=True, outputs={"started": started}, summary="", stdout="")
    runner.run("time_left")
    value = interpolate(str(build["timeout-minutes"]), runner.step_contexts())
    assert isinstance(value, (int, float)), f"{job}: the build's timeout-minutes is {value!r}, not a number"
    assert value == int(value)
    return int(value)


@pytest.mark.parametrize("job", BUILD_JOBS)
def test_the_build_stops_in_time_for_the_rerun_notice_whatever_the_steps_before_it_take(
    job: str, tmp_path: Path
) -> None:
    steps = job_steps(job)
    limit = job_spec(job)["timeout-minutes"]
    assert isinstance(limit, int)
    assert limit <= 360  # GitHub's cap for a hosted job
    build_at = _build_index(steps)
    assert any(NOTICE in str(s.get("run", "")) for s in steps[build_at + 1 :])
    # every step that runs after a build that failed or ran out of time: the notice, saving the compiler
    # cache, handing the objects on (each with a timeout of its own, or the job's limit is theirs)
    failed: dict[str, Value] = {
        "steps": {str(build["id"]): {"outcome": "failure"} for build in [steps[build_at]]},
        "env": {"SAVE_COMPILER_CACHE": "true"},
        **seen_by_steps(job, {"matrix": ENTRIES[0]}),
    }
    after = [s for s in steps[build_at + 1 :] if condition(s.get("if"), failed, Status(success=False, failure=True))]  # type: ignore[arg-type]
    assert any(NOTICE in str(s.get("run", "")) for s in after)
    untimed_after = [_name(s) for s in after if _timeout(s) is None]
    assert not untimed_after, f"{job}: these steps after the build need a timeout-minutes: {untimed_after}"
    notice_minutes = sum(_timeout(s) or 0 for s in after)
    # the clock starts before anything else, so what it measures covers every step before the build
    assert steps[0].get("id") == "clock"
    for entry in ENTRIES:
        contexts = _contexts(job, entry, steps)
        before = [s for s in steps[:build_at] if condition(s.get("if"), contexts, Status())]  # type: ignore[arg-type]
        timeouts = [_timeout(s) for s in before]
        untimed = [_name(s) for s, t in zip(before, timeouts, strict=True) if t is None]
        assert not untimed, f"{job}: give these steps a timeout-minutes, or a hang eats the build's time: {untimed}"
        worst = sum(t or 0 for t in timeouts)
        for elapsed in sorted({0, worst // 2, worst}):
            build_minutes = _minutes_left(job, entry, elapsed, tmp_path)
            assert build_minutes >= 1  # 0 or less would be no timeout at all (actions/runner)
            end = elapsed + build_minutes + 1  # +1: the time-left step rounds down to a whole minute
            used = end + notice_minutes + POST_MINUTES
            assert used <= limit, (
                f"{job} on {entry['os']} (cuda {entry['cuda_toolkit'] or '-'}): steps before the build took {elapsed} "
                f"min, the build may take {build_minutes}, then the notice and post steps: {used} > {limit} minutes"
            )
        # and the worst case of the steps before it leaves the build some time at all
        assert worst + 1 + notice_minutes + POST_MINUTES <= limit, f"{job}: the steps before the build take {worst}"
    # on an ordinary day (nothing hangs) the build gets nearly all of the job (-1: the time-left step rounds
    # down, and a second passes between the clock this test sets and the step's `date`)
    assert _minutes_left(job, ENTRIES[0], 15, tmp_path) >= limit - 15 - 15 - 1


@pytest.mark.parametrize("job", BUILD_JOBS)
def test_the_rerun_notice_shows_when_the_build_fails_or_runs_out_of_time(job: str) -> None:
    """A step past its timeout-minutes fails (it is not cancelled): its outcome is 'failure'."""
    steps = job_steps(job)
    build = steps[_build_index(steps)]
    notice = next(s for s in steps if NOTICE in str(s.get("run", "")))
    failed: dict[str, Value] = {"steps": {str(build["id"]): {"outcome": "failure"}}}
    passed: dict[str, Value] = {"steps": {str(build["id"]): {"outcome": "success"}}}
    assert condition(notice.get("if"), failed, Status(success=False, failure=True))  # type: ignore[arg-type]
    assert not condition(notice.get("if"), passed, Status())  # type: ignore[arg-type]
    assert "GITHUB_STEP_SUMMARY" in str(notice["run"])  # and in the job's summary
    assert as_dict(notice).get("continue-on-error") is None
