"""The request workflow's structure: its trigger, least permissions, and no value of the event in a script or
in any expression but the two GitHub or a maintainer sets (tests/integration/test_request_chain.py runs it)."""

from __future__ import annotations

import re

import pytest

from dswheels.cli import build_parser
from dswheels.request.form import BUILD_LABEL
from tests.conftest import ROOT
from tests.gha.expressions import Status, condition
from tests.gha.invocations import RUNNER_VARIABLES, invocations, scripts
from tests.gha.model import as_map, as_str_map, load_workflow

WORKFLOWS = ROOT / ".github" / "workflows"
REQUESTS = load_workflow(WORKFLOWS / "requests.yml")
JOBS = as_map(REQUESTS["jobs"], "jobs")
TEXT = (WORKFLOWS / "requests.yml").read_text(encoding="utf-8")


def test_it_runs_on_issue_events_one_at_a_time_per_issue() -> None:
    assert as_map(REQUESTS["on"], "on") == {"issues": {"types": ["opened", "edited", "reopened", "labeled"]}}
    assert as_map(REQUESTS["concurrency"], "c") == {
        "group": "requests-${{ github.event.issue.number }}",
        "cancel-in-progress": False,
    }


def test_each_job_holds_only_the_permission_it_uses() -> None:
    assert REQUESTS["permissions"] == {}
    assert {job: as_map(spec, job).get("permissions") for job, spec in JOBS.items()} == {
        "answer": {"issues": "write"},
        "build": {"actions": "write", "issues": "write"},
    }
    for job, spec in JOBS.items():
        assert isinstance(as_map(spec, job).get("timeout-minutes"), int), job


def test_the_only_event_values_in_expressions_are_githubs_or_a_maintainers() -> None:
    # the issue's number (GitHub's), the action (GitHub's), the label's name (a maintainer's: only triage access
    # adds labels) and the default branch (the repository's): never the title, body, or anything an author writes
    allowed = {
        "github.event.issue.number",
        "github.event.action",
        "github.event.label.name",
        "github.event.repository.default_branch",
    }
    code = "\n".join(line.split(" #", 1)[0] for line in TEXT.splitlines() if not line.lstrip().startswith("#"))
    used = {found.rstrip(".") for found in re.findall(r"github\.event\.[a-z_.]+", code)}
    assert used == allowed
    assert "github.event.issue.body" not in code
    assert "github.event.issue.title" not in code


def test_no_expression_is_expanded_inside_a_script_and_the_event_goes_as_its_file() -> None:
    for job, spec in JOBS.items():
        for step in as_map(spec, job).get("steps") or []:  # type: ignore[union-attr]
            step_map = as_map(step, job)
            assert "${{" not in str(step_map.get("run", "")), f"{job}: pass values through env:"
            if "dswheels request" in str(step_map.get("run", "")):
                assert '--event "$GITHUB_EVENT_PATH"' in str(step_map["run"])
                assert as_str_map(step_map.get("env"), "env")["GITHUB_TOKEN"] == "${{ github.token }}"  # noqa: S105


@pytest.mark.parametrize(
    ("action", "label", "jobs"),
    [
        ("opened", None, {"answer"}),
        ("edited", None, {"answer"}),
        ("reopened", None, {"answer"}),
        ("labeled", "wheel-request", set()),  # the form's own label, added when the issue is opened
        ("labeled", BUILD_LABEL, {"build"}),
    ],
)
def test_which_job_an_event_starts(action: str, label: str | None, jobs: set[str]) -> None:
    event: dict[str, object] = {"action": action, **({"label": {"name": label}} if label else {})}
    contexts = {"github": {"event": event}}
    started = {name for name, spec in JOBS.items() if condition(as_map(spec, name).get("if"), contexts, Status())}  # type: ignore[arg-type]
    assert started == jobs


def test_every_dswheels_command_line_parses_and_every_variable_is_set() -> None:
    used = set()
    for invocation in invocations(REQUESTS):
        used.add(" ".join(invocation.argv[:2]))
        try:
            build_parser().parse_args(list(invocation.argv))
        except SystemExit as exc:
            pytest.fail(f"{invocation.job} / {invocation.step}: dswheels {' '.join(invocation.argv)}: {exc}")
    assert used == {"request answer", "request build"}
    for script in scripts(REQUESTS):
        unset = script.reads - script.defined - RUNNER_VARIABLES
        assert not unset, f"{script.job} / {script.step} reads {sorted(unset)}, which nothing sets"
