"""The follow workflow's structure and the decisions its steps make (tests/integration/test_follow_chain.py
runs its steps)."""

from __future__ import annotations

import re
from collections.abc import Mapping

import pytest

from dswheels.cli import build_parser
from dswheels.facts.follow import (
    ISSUE_MARKER,
    ActiveRuns,
    active_versions,
    builds_to_start,
    dispatch_inputs,
    issue_action,
    issue_body,
)
from dswheels.kernel.github_api import Issue, WorkflowRun, read_issue, read_runs
from dswheels.kernel.remote_json import RemoteJson
from tests.conftest import ROOT
from tests.gha.expressions import Status, condition
from tests.gha.invocations import RUNNER_VARIABLES, env_defaults, invocations, scripts
from tests.gha.model import as_map, as_str_map, load_workflow

WORKFLOWS = ROOT / ".github" / "workflows"
FOLLOW = load_workflow(WORKFLOWS / "follow.yml")
WHEELS = load_workflow(WORKFLOWS / "wheels.yml")
JOBS = as_map(FOLLOW["jobs"], "jobs")


def test_it_runs_daily_and_on_demand_and_never_twice_at_once() -> None:
    on = as_map(FOLLOW["on"], "on")
    assert set(on) == {"schedule", "workflow_dispatch"}
    schedule = on["schedule"]
    assert isinstance(schedule, list)
    assert len(schedule) == 1
    assert re.fullmatch(r"\d+ \d+ \* \* \*", str(as_map(schedule[0], "cron")["cron"]))
    assert as_map(FOLLOW["concurrency"], "c") == {"group": "follow", "cancel-in-progress": False}


def test_each_job_holds_only_the_permission_it_uses() -> None:
    assert FOLLOW["permissions"] == {}
    assert {job: as_map(spec, job).get("permissions") for job, spec in JOBS.items()} == {
        "check": {"contents": "read"},
        "issue": {"issues": "write"},
        "build": {"actions": "write"},
        "measured": {"actions": "read", "pull-requests": "read"},
        "refit": {"contents": "write", "pull-requests": "write"},
    }
    for job, spec in JOBS.items():
        assert isinstance(as_map(spec, job).get("timeout-minutes"), int), job


@pytest.mark.parametrize(("value", "runs"), [("", True), ("on", True), ("off", False)])
def test_the_repository_variable_turns_it_off(value: str, runs: bool) -> None:
    contexts = {"vars": {"DSWHEELS_FOLLOW": value} if value else {}}
    assert condition(as_map(JOBS["check"], "check")["if"], contexts, Status()) is runs  # type: ignore[arg-type]
    # the other jobs need `check`: skipped with it


def test_builds_start_only_when_there_is_something_to_build() -> None:
    gate = str(as_map(JOBS["build"], "build")["if"])
    for builds, runs in (("[]", False), ("", False), ('["0.19.9"]', True)):
        contexts = {"needs": {"check": {"result": "success", "outputs": {"builds": builds}}}}
        assert condition(gate, contexts, Status()) is runs, builds  # type: ignore[arg-type]


def test_no_expression_is_expanded_inside_a_script_and_tokens_go_through_env() -> None:
    for job, spec in JOBS.items():
        for step in as_map(spec, job).get("steps") or []:  # type: ignore[union-attr]
            step_map = as_map(step, job)
            assert "${{" not in str(step_map.get("run", "")), f"{job}: pass values through env:"
            env = as_str_map(step_map.get("env"), "env")
            if "GITHUB_TOKEN" in env:
                assert job in ("issue", "build", "measured", "refit"), f"{job} has no business with the token"


def test_every_dswheels_command_line_parses_with_dswheels_own_parser() -> None:
    used = set()
    for invocation in invocations(FOLLOW):
        used.add(" ".join(invocation.argv[:2]))
        try:
            build_parser().parse_args(list(invocation.argv))
        except SystemExit as exc:
            pytest.fail(f"{invocation.job} / {invocation.step}: dswheels {' '.join(invocation.argv)}: {exc}")
    assert used == {
        "facts check",
        "facts builds",
        "facts issue",
        "facts dispatch",
        "facts measured",
        "facts refit",
        "facts refit-pr",
    }


def test_every_variable_a_script_reads_is_set() -> None:
    for script in scripts(FOLLOW):
        unset = script.reads - script.defined - RUNNER_VARIABLES
        assert not unset, f"{script.job} / {script.step} reads {sorted(unset)}, which nothing sets"


def test_the_repository_variables_reach_the_commands_as_their_defaults() -> None:
    steps = {str(as_map(s, "s").get("name")): as_map(s, "s") for s in as_map(JOBS["check"], "c")["steps"]}  # type: ignore[union-attr]
    check_env = as_str_map(steps["Check compat.yml against its sources"].get("env"), "env")
    defaults = env_defaults("facts", "check")
    for option in ("pypi", "torch_index", "action_links"):  # each source's location, one variable each
        variable = defaults[option]
        assert check_env[variable] == f"${{{{ vars.{variable} }}}}", option
    # where the wheels are published: the workflow's env, the defaults of `facts builds`
    builds = env_defaults("facts", "builds")
    workflow_env = as_str_map(FOLLOW["env"], "env")
    for option in ("matrix", "publish_dir", "index_url"):
        assert workflow_env[builds[option]] == f"${{{{ vars.{builds[option]} }}}}", option
    assert builds["repository"] in RUNNER_VARIABLES  # the default index: https://OWNER.github.io/NAME/


def test_the_dispatch_names_only_inputs_the_wheels_workflow_declares() -> None:
    declared = as_map(as_map(as_map(WHEELS["on"], "on")["workflow_dispatch"], "wd")["inputs"], "inputs")
    # all of them but `request` (a wheel-request issue's number: requests.yml's dispatch sets it), whose default is none
    assert set(dispatch_inputs("0.19.9")) == set(declared) - {"request"}
    assert as_map(declared["request"], "request")["default"] == ""
    assert dispatch_inputs("0.19.9")["deepspeed"] == "0.19.9"


# --- the decisions ---------------------------------------------------------------------------------


def test_builds_are_new_placed_releases_and_versions_with_unpublished_cells() -> None:
    idle = ActiveRuns(frozenset(), 0)
    start, later = builds_to_start(placeable=["0.19.9"], unpublished={"0.19.8": 3, "0.19.7": 0}, active=idle)
    assert (start, later) == (["0.19.9", "0.19.8"], [])


def _runs(*items: Mapping[str, object]) -> tuple[WorkflowRun, ...]:
    shape = {"created_at": "2026-11-24T04:23:00Z"}  # what GitHub's runs carry besides (docs' example)
    runs = [{"id": n, **shape, **item} for n, item in enumerate(items, start=1)]
    return read_runs(RemoteJson({"total_count": len(items), "workflow_runs": runs}))


def _issues(*items: Mapping[str, object]) -> list[Issue]:
    return [read_issue(RemoteJson(dict(item))) for item in items]


def test_a_version_already_building_waits_and_unnamed_runs_hold_everything() -> None:
    runs = _runs(
        {"status": "in_progress", "display_title": "wheels 0.19.8 (matrix)"},
        {"status": "completed", "display_title": "wheels 0.19.7"},
    )
    active = active_versions(runs)
    assert active == ActiveRuns(frozenset({"0.19.8"}), 0)
    start, later = builds_to_start(placeable=[], unpublished={"0.19.8": 1, "0.19.7": 2}, active=active)
    assert start == ["0.19.7"]
    assert later == ["0.19.8: a wheels run for it is queued or running"]
    held = active_versions(_runs({"status": "queued", "display_title": "wheels"}))
    assert builds_to_start(placeable=["0.19.9"], unpublished={}, active=held)[0] == []


def test_a_run_title_with_digits_of_another_script_names_no_version() -> None:
    """``\\d`` matches Arabic-Indic digits: such a title would have held back a build of 0.١٩.8 (issue 30)."""
    active = active_versions(_runs({"status": "queued", "display_title": "wheels 0.١٩.8"}))
    assert active == ActiveRuns(frozenset(), 1)


def test_one_issue_is_opened_updated_and_closed() -> None:
    body = issue_body("findings")
    assert body.startswith(ISSUE_MARKER)
    assert issue_action([], drift=True, body=body).kind == "create"
    ours = {"number": 7, "body": issue_body("older findings")}
    other = {"number": 3, "body": None}
    pull = {"number": 9, "body": body, "pull_request": {"url": "x"}}
    assert issue_action(_issues(other, ours, pull), drift=True, body=body).kind == "update"
    assert issue_action(_issues({**ours, "body": body}), drift=True, body=body).kind == "none"
    closing = issue_action(_issues(ours), drift=False, body=body)
    assert (closing.kind, closing.number) == ("close", 7)
    assert issue_action(_issues(other), drift=False, body=body).kind == "none"
