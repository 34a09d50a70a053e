"""The workflows' structure: what they read from the plan, what reaches the CLI, who may do what.

The logic lives in dswheels (`dswheels ci plan` decides the run; tests/unit/test_ci.py); what is
left in wheels.yml is wiring, checked here. These read .github/workflows/*.yml as GitHub does
(YAML 1.2 booleans) and evaluate their expressions with tests/gha/expressions.py, so a
condition is tested by what it does, not by how it is spelled; every `dswheels` line is parsed
by dswheels' own parser, and the plan step runs for real (tests/gha/steps.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from dswheels.cli import build_parser, main
from dswheels.cli.ci_plan import OUTPUTS
from dswheels.kernel.compat import load_compat
from dswheels.kernel.model import Platform
from dswheels.kernel.versions import format_version
from tests.conftest import ROOT
from tests.gha.expressions import Status, Value, condition
from tests.gha.invocations import RUNNER_VARIABLES, env_defaults, invocations, scripts
from tests.gha.model import WorkflowError, tag_matches
from tests.gha.steps import Job, StepRun, called_job
from tests.gha.workflow_files import (
    BUILD_CELLS,
    CELL,
    CI,
    JOBS,
    PLAN_MATRIX,
    SMOKE_MATRIX,
    WHEELS,
    as_dict,
    entry,
    entry_keys,
    expressions,
    job_spec,
    job_steps,
)


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def _plan_github(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, Value]]:
    assert main(["plan", *args, "--format", "github"]) == 0
    jobs: list[dict[str, Value]] = json.loads(capsys.readouterr().out)["include"]
    return jobs


# --- the plan contract ---------------------------------------------------------------------------


def test_every_matrix_key_the_workflow_reads_is_one_the_plan_writes(capsys: pytest.CaptureFixture[str]) -> None:
    written: set[str] = set()
    for args in (
        (),
        ("--deepspeed", "0.19.8"),
        ("--deepspeed", "0.19.8", "--torch", "2.13", "--cuda", "cpu", "--python", "3.11", "--platform", "linux_x86_64"),
    ):
        for job in _plan_github(capsys, *args):
            written |= set(job)
            assert all(
                isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v)) for v in job.values()
            ), job
    plan_jobs = [name for name, job in JOBS.items() if as_dict(job.get("strategy")).get("matrix") == PLAN_MATRIX]
    assert plan_jobs == ["build"]
    assert as_dict(JOBS["smoke"]["strategy"])["matrix"] == SMOKE_MATRIX  # the build jobs of GPU platforms
    assert as_dict(JOBS["parts"]["strategy"])["matrix"] == "${{ fromJSON(needs.plan.outputs.parts) }}"
    for job in _plan_github(capsys, "--stage", "part"):  # the shipped matrix needs no part job: none
        written |= set(job)
    read: set[str] = set()
    for name in [*plan_jobs, "smoke", "parts"]:
        for expression in expressions(job_spec(name)):
            read |= entry_keys(expression)
    assert read, "the build jobs read nothing from the plan?"
    assert read <= written, f"read but never written by dswheels plan --format github: {sorted(read - written)}"
    # and the documented contract covers them (docs/plan-json.md, `--format github`)
    doc = (ROOT / "docs" / "plan-json.md").read_text(encoding="utf-8").split("## `--format github`", 1)[1]
    documented = {
        key for row in re.findall(r"^\| (`[^|]+?) \|", doc, flags=re.MULTILINE) for key in re.findall(r"`([^`]+)`", row)
    }
    assert read <= documented


def test_the_plan_output_is_read_only_as_the_matrix_and_its_first_job() -> None:
    uses = [e.strip() for e in expressions(WHEELS) if "needs.plan.outputs.matrix" in e]
    assert set(uses) == {
        "fromJSON(needs.plan.outputs.matrix)",
        "!cancelled() && needs.plan.result == 'success' && fromJSON(needs.plan.outputs.matrix).include[0] != null",
    }
    parts = [e.strip() for e in expressions(WHEELS) if "needs.plan.outputs.parts" in e]
    assert set(parts) == {
        "fromJSON(needs.plan.outputs.parts)",
        "fromJSON(needs.plan.outputs.parts).include[0] != null",
    }
    smoke = [e.strip() for e in expressions(WHEELS) if "needs.plan.outputs.smoke" in e]
    assert set(smoke) == {
        "fromJSON(needs.plan.outputs.smoke)",
        "!cancelled() && needs.build.result == 'success' && fromJSON(needs.plan.outputs.smoke).include[0] != null",
    }


def test_the_plan_jobs_outputs_are_what_dswheels_ci_plan_writes() -> None:
    """Each output of the plan job is its plan step's, and `dswheels ci plan` writes every one of them."""
    outputs = as_dict(JOBS["plan"]["outputs"])
    assert set(outputs) == set(OUTPUTS) - {"plan"}  # the plan file goes as an artifact (below)
    for name, value in outputs.items():
        assert value == f"${{{{ steps.plan.outputs.{name} }}}}", name
    read = {m for e in expressions(WHEELS) for m in re.findall(r"needs\.plan\.outputs\.(\w+)", e)}
    assert read <= set(outputs), f"read but not an output of the plan job: {sorted(read - set(outputs))}"
    plan_step = next(s for s in job_steps("plan") if s.get("id") == "plan")
    assert str(plan_step["run"]).strip() == "dswheels ci plan --out plan"


def test_build_is_skipped_for_an_empty_plan_and_runs_for_a_non_empty_one() -> None:
    check = str(JOBS["build"]["if"])
    for matrix, expected in (('{"include":[]}', False), ('{"include":[{"name":"x"}]}', True)):
        contexts: dict[str, Value] = {"needs": {"plan": {"result": "success", "outputs": {"matrix": matrix}}}}
        assert condition(check, contexts, Status()) is expected
        # after the part jobs, whether there were none (skipped) or one failed: the build compiles the rest
        assert condition(check, contexts, Status(success=False, failure=True)) is expected
        assert not condition(check, contexts, Status(cancelled=True))


def test_every_job_after_the_parts_says_when_it_runs() -> None:
    """The parts job is usually skipped; a job downstream of a skipped job is skipped by the implicit
    success() even when its own needs succeeded (actions/runner#491): every later job checks results."""
    downstream = {"parts"}
    for name, job in JOBS.items():  # the jobs are listed after what they need
        if _needs(name) & downstream:
            downstream.add(name)
            assert "!cancelled()" in str(job.get("if", "")), name
    assert downstream == {"parts", "build", "smoke", "subjects", "attest", "release", "pages", "answer"}


def test_part_jobs_come_first_and_run_the_build_jobs_steps() -> None:
    assert _needs("parts") == {"plan"}
    assert _needs("build") == {"plan", "parts"}
    check = str(JOBS["parts"]["if"])
    for parts, expected in (('{"include":[]}', False), ('{"include":[{"name":"x part 1/2"}]}', True)):
        assert condition(check, {"needs": {"plan": {"outputs": {"parts": parts}}}}, Status()) is expected
    # one definition of how a job compiles: both call build-cells.yml with their matrix entry; parts make no wheel
    assert JOBS["parts"]["uses"] == JOBS["build"]["uses"] == "./.github/workflows/build-cells.yml"
    assert as_dict(JOBS["parts"]["with"]) == {"cell": "${{ toJSON(matrix) }}", "wheels": False}
    assert as_dict(JOBS["build"]["with"]) == {"cell": "${{ toJSON(matrix) }}", "wheels": True}
    steps = job_steps("build")
    # what differs, by the `wheels` input: a part hands its objects on as an artifact, the build job takes
    # them (an entry of the parts matrix has no cache_parts) and makes, verifies and uploads the wheels
    by_name = {str(s.get("name")): s for s in steps}
    assert by_name["Hand the objects to the build job"]["if"] == (
        "always() && !inputs.wheels && env.SAVE_COMPILER_CACHE == 'true' && steps.build.outcome != 'skipped'"
    )
    assert (
        as_dict(by_name["Hand the objects to the build job"]["with"])["name"] == f"sccache-${{{{ {CELL}.cache_job }}}}"
    )
    download = by_name["The part jobs' objects"]
    assert str(download["if"]).startswith(f"{CELL}.cache_parts != ''")
    assert as_dict(download["with"])["pattern"] == f"${{{{ {CELL}.cache_parts }}}}"
    assert as_dict(by_name["Build"]["env"])["OUT"] == "${{ inputs.wheels && 'wheelhouse' || 'parts' }}"
    assert '--out "$OUT"' in str(by_name["Build"]["run"])
    assert by_name["Verify"]["if"] == by_name["The wheels"]["if"] == "inputs.wheels"
    # a called workflow does not see its caller's env: build-cells.yml repeats wheels.yml's
    assert as_dict(BUILD_CELLS["env"]) == as_dict(WHEELS["env"])
    assert BUILD_CELLS["defaults"] == WHEELS["defaults"]


# --- triggers and inputs -------------------------------------------------------------------------


def test_tag_push_and_dispatch_are_the_triggers() -> None:
    on = as_dict(WHEELS["on"])
    assert set(on) == {"push", "workflow_dispatch"}  # nothing an outsider can trigger
    push = as_dict(on["push"])
    assert set(push) == {"tags"}
    tags = [str(t) for t in push["tags"]]  # type: ignore[union-attr]
    for tag in ("v0.19.8", "v0.19.8-2", "v0.14.0"):
        assert tag_matches(tag, tags), tag
    for tag in ("0.19.8", "vnext", "release-1"):
        assert not tag_matches(tag, tags), tag


def _dispatch_inputs() -> dict[str, dict[str, Value]]:
    return as_dict(as_dict(WHEELS["on"])["workflow_dispatch"])["inputs"]  # type: ignore[return-value]


def test_dispatch_choices_are_the_known_sets() -> None:
    compat = load_compat()
    inputs = _dispatch_inputs()
    variants = {v.name for t in compat.torch.values() for os in t.variants for v in t.variants_for(os)}
    pythons = {str(p) for t in compat.torch.values() for ps in t.python.values() for p in ps}
    expected = {
        "torch": [format_version(v) for v in reversed(compat.torch_minors)],
        "cuda": variants,
        "python": pythons,
        "platform": {p.value for p in Platform},
    }
    for name, options in expected.items():
        assert inputs[name]["type"] == "choice", name
        given = [str(o) for o in inputs[name]["options"]]  # type: ignore[union-attr]
        assert given[0] == "matrix", f"{name}: 'matrix' (every value the matrix has) comes first"
        given = given[1:]
        assert len(given) == len(set(given)), name
        if isinstance(options, list):
            assert given == options, f"{name}: options must be compat.yml's, newest first"
        else:
            assert set(given) == options, f"{name}: options differ from compat.yml's"
        assert str(inputs[name]["default"]) in given, name
    # a DeepSpeed released after this workflow was written must be dispatchable (dswheels plan checks it)
    assert inputs["deepspeed"]["type"] == "string"
    assert str(inputs["deepspeed"]["default"]) == format_version(compat.deepspeed_releases[-1])
    for flag in ("publish", "canary"):
        assert inputs[flag] == {"description": inputs[flag]["description"], "type": "boolean", "default": False}


def test_the_default_dispatch_is_a_combination_the_rules_allow(capsys: pytest.CaptureFixture[str]) -> None:
    inputs = _dispatch_inputs()
    args = [f"--{name}={inputs[name]['default']}" for name in ("deepspeed", "torch", "cuda", "python", "platform")]
    assert len(_plan_github(capsys, *args)) == 1


def test_every_dispatch_input_reaches_the_cli_through_env() -> None:
    plan_step = next(s for s in job_steps("plan") if s.get("id") == "plan")
    env = as_dict(plan_step["env"])
    by_input = {}
    for var, value in env.items():
        match = re.fullmatch(r"\$\{\{ inputs\.([a-z_]+) \}\}", str(value))
        if match:
            by_input[match.group(1)] = var
    # every input is handed to the plan step, but `request`: the issue the answer job comments on
    assert set(by_input) == set(_dispatch_inputs()) - {"request"}, "every input must be handed to the plan step"
    answer = next(s for s in job_steps("answer") if s.get("name") == "Answer the request")
    assert as_dict(answer["env"])["REQUEST"] == "${{ inputs.request }}"
    defaults = env_defaults("ci", "plan")
    for name, variable in by_input.items():  # each the default of the ci plan option of its name
        assert variable == f"INPUT_{name.upper()}", name
        assert defaults[name] == variable, name
    # the event and the repository come from the runner's own variables
    assert {defaults["event"], defaults["ref_name"], defaults["repository"]} <= RUNNER_VARIABLES
    assert defaults["gpu_runners"] == "DSWHEELS_GPU_RUNNERS"
    assert env["DSWHEELS_GPU_RUNNERS"] == "${{ vars.DSWHEELS_GPU_RUNNERS }}"


def _plan_job(tmp_path: Path, event: str, ref_name: str, inputs: dict[str, Value], **variables: str) -> Job:
    contexts: dict[str, Value] = {
        "github": {"event_name": event, "ref_name": ref_name, "repository": "octo/dswheels"},
        "inputs": inputs,
        # the workspace is no checkout: the matrix comes through its repository variable
        "vars": {"DSWHEELS_MATRIX": str(ROOT / "matrix" / "matrix.yml"), **variables},
    }
    return Job(workflow=WHEELS, job="plan", workspace=tmp_path / event, contexts=contexts)


def _ran(job: Job) -> tuple[StepRun, dict[str, str], dict[str, Any]]:
    step = job.run("Plan")
    outputs = job.outputs()
    plan = json.loads((job.workspace / step.outputs["plan"]).read_text(encoding="utf-8"))
    return step, outputs, plan


def test_the_plan_step_turns_an_event_into_the_runs_jobs_release_and_plan(tmp_path: Path) -> None:
    """The plan step as written, run for real: dispatch inputs, "matrix" axes, publish, the canary."""
    one: dict[str, Value] = {"deepspeed": "0.19.8", "torch": "2.14", "cuda": "cu130", "python": "3.12"}
    one["platform"] = "win_amd64"
    published = tmp_path / "published"
    job = _plan_job(
        tmp_path / "one",
        "workflow_dispatch",
        "main",
        {**one, "canary": False, "publish": True},
        DSWHEELS_PUBLISH_DIR=str(published),
    )
    step, outputs, plan = _ran(job)
    assert [c["id"] for c in plan["cells"]] == ["ds0.19.8-torch2.14-cu130-cp312-win_amd64"]
    assert outputs["release"] == "v0.19.8"
    assert outputs["publish_dir"] == str(published)
    assert f"0 of 1 planned cells already published at {published}" in step.summary  # skip-published ran
    assert json.loads(outputs["matrix"])["include"][0]["cells"] == "ds0.19.8-torch2.14-cu130-cp312-win_amd64"
    # every axis "matrix": what a tag push of that version plans (the follow workflow dispatches this)
    everything = {**one, "torch": "matrix", "cuda": "matrix", "python": "matrix", "platform": "matrix"}
    _, outputs, plan = _ran(_plan_job(tmp_path / "all", "workflow_dispatch", "main", {**everything, "publish": False}))
    _, tag_outputs, tag_plan = _ran(
        _plan_job(tmp_path / "tag", "push", "v0.19.8-2", {}, DSWHEELS_PUBLISH_DIR=str(tmp_path / "nothing-yet"))
    )
    assert plan["cells"] == tag_plan["cells"]
    assert len(plan["cells"]) > 10
    assert (outputs["release"], tag_outputs["release"]) == ("", "v0.19.8-2")
    assert tag_outputs["index_url"] == "https://octo.github.io/dswheels/"
    # the canary is never published, whatever "publish" says; it is drawn from the version's matrix whatever the
    # other inputs say (the dispatch always sends them: the defaults name a cu130 cell, the canary's CUDA is newer)
    step, outputs, plan = _ran(
        _plan_job(tmp_path / "canary", "workflow_dispatch", "main", {**one, "canary": True, "publish": True})
    )
    assert plan["mode"] == "canary"
    assert outputs["release"] == ""
    assert "published at" not in step.summary
    (cell,) = plan["cells"]
    assert cell["id"] == "ds0.19.8-torch2.15-cu132-cp311-win_amd64"
    assert "-Xcompiler=/Zc:preprocessor" in cell["toolchain"]["nvcc_append_flags"]
    assert sorted(op["name"] for op in cell["ops"]["build"]) == ["cpu_adam", "fused_adam", "random_ltd"]
    assert json.loads(outputs["matrix"])["include"][0]["ops"] == "fused_adam cpu_adam random_ltd"


def test_every_dswheels_command_line_parses_with_dswheels_own_parser() -> None:
    seen = set()
    for invocation in invocations(WHEELS):
        seen.add(" ".join(invocation.argv[:2]) if invocation.argv[0] in ("ci", "cuda") else invocation.argv[0])
        try:
            build_parser().parse_args(list(invocation.argv))
        except SystemExit as exc:  # argparse's way of saying the line is wrong
            pytest.fail(f"{invocation.job} / {invocation.step}: dswheels {' '.join(invocation.argv)}: {exc}")
    assert seen == {"ci plan", "ci measure", "cuda install", "build", "verify", "publish", "index", "smoke", "request"}


@pytest.mark.parametrize("name", ["wheels", "ci"])
def test_every_variable_a_script_reads_is_set(name: str) -> None:
    for script in scripts(WHEELS if name == "wheels" else CI):
        unset = script.reads - script.defined - RUNNER_VARIABLES
        assert not unset, f"{script.job} / {script.step} reads {sorted(unset)}, which nothing sets"


def test_the_plan_file_reaches_every_job_that_builds() -> None:
    upload = next(s for s in job_steps("plan") if "upload-artifact" in str(s.get("uses")))
    assert as_dict(upload["with"]) == {
        "name": "plan",
        "path": "${{ steps.plan.outputs.plan }}",
        "if-no-files-found": "error",
    }
    for job in ("parts", "build"):
        download = next(s for s in job_steps(job) if "download-artifact" in str(s.get("uses")))
        assert as_dict(download["with"]) == {"name": "plan", "path": "plan"}
        build = next(s for s in job_steps(job) if "dswheels build" in str(s.get("run", "")))
        assert "--plan plan/plan.json" in str(build["run"])  # `ci plan --out plan` wrote plan/plan.json
        assert "--matrix" not in str(build["run"])  # nothing is planned again


def test_setup_python_gets_the_jobs_pythons_then_dswheels_own() -> None:
    for job in ("parts", "build", "smoke"):
        setup = next(s for s in job_steps(job) if "setup-python" in str(s.get("uses")))
        lines = str(as_dict(setup["with"])["python-version"]).splitlines()
        pythons = f"${{{{ {entry(job, 'setup_python')} }}}}"
        assert lines == [pythons, "${{ env.HOST_PYTHON }}"], job  # the last is `python`


def test_no_expression_is_expanded_inside_a_script() -> None:
    for workflow in (WHEELS, CI, BUILD_CELLS):
        for job_name, job in as_dict(workflow["jobs"]).items():
            for step in as_dict(job).get("steps") or []:  # type: ignore[union-attr]
                assert "${{" not in str(as_dict(step).get("run", "")), f"{job_name}: pass values through env:"


# --- who runs after whom -------------------------------------------------------------------------


def _needs(job: str) -> set[str]:
    needs = JOBS[job].get("needs") or []
    return {needs} if isinstance(needs, str) else {str(n) for n in needs}  # type: ignore[union-attr]


def _run_release(build: str, smoke: str, release: str = "v0.19.8") -> bool:
    results = {"build": build, "smoke": smoke, "plan": "success"}
    contexts: dict[str, Value] = {
        "needs": {
            "plan": {"result": "success", "outputs": {"release": release, "matrix": "{}", "publish_dir": ""}},
            "build": {"result": build, "outputs": {}},
            "smoke": {"result": smoke, "outputs": {}},
        }
    }
    status = Status(
        success=all(r == "success" for r in results.values()),
        failure="failure" in results.values(),
        cancelled="cancelled" in results.values(),
    )
    # the release's first job lists what the attest jobs sign; the release itself waits for every attestation
    return condition(str(JOBS["subjects"]["if"]), contexts, status)


def test_publish_runs_only_after_builds_and_smoke_passed() -> None:
    assert _needs("smoke") == {"plan", "build"}
    assert _needs("subjects") == {"plan", "build", "smoke"}
    assert _needs("attest") == {"plan", "subjects"}
    assert _needs("release") == {"plan", "build", "smoke", "attest"}
    assert _needs("pages") == {"plan", "release"}
    assert _run_release("success", "success")
    assert _run_release("success", "skipped")  # no GPU runner: smoke is skipped, publish still runs
    assert not _run_release("success", "failure")
    assert not _run_release("success", "cancelled")
    assert not _run_release("failure", "skipped")
    assert not _run_release("skipped", "skipped")  # nothing was built (all published already)
    assert not _run_release("success", "success", release="")  # a dispatch without publish


def test_smoke_runs_the_plans_smoke_jobs_on_their_gpu_runners() -> None:
    gate = str(JOBS["smoke"]["if"])
    none: dict[str, Value] = {
        "needs": {"plan": {"outputs": {"smoke": '{"include":[]}'}}, "build": {"result": "success"}}
    }
    assert not condition(gate, none, Status())  # no GPU runner: skipped (the plan job says so, tests/unit/test_ci.py)
    some: dict[str, Value] = {
        "needs": {"plan": {"outputs": {"smoke": '{"include":[{"name":"x"}]}'}}, "build": {"result": "success"}}
    }
    assert condition(gate, some, Status())
    # after the usually skipped parts job: its own needs decide (actions/runner#491)
    assert condition(gate, some, Status(success=False))
    failed: dict[str, Value] = {
        "needs": {"plan": {"outputs": {"smoke": '{"include":[{"name":"x"}]}'}}, "build": {"result": "failure"}}
    }
    assert not condition(gate, failed, Status(success=False, failure=True))
    assert not condition(gate, some, Status(cancelled=True))
    assert JOBS["smoke"]["runs-on"] == "${{ matrix.smoke_runs_on }}"
    smoke = next(s for s in job_steps("smoke") if "dswheels smoke" in str(s.get("run", "")))
    assert str(smoke["run"]).strip() == "dswheels smoke wheelhouse/*/*.whl --device cuda"  # every wheel, one command
    download = next(s for s in job_steps("smoke") if "download-artifact" in str(s.get("uses")))
    assert as_dict(download["with"]) == {"name": "wheels-${{ matrix.name }}", "path": "wheelhouse"}


def test_publish_and_index_go_where_the_plan_says() -> None:
    """One publish step and one index step run: the GitHub Release, or the publish directory."""
    for job, words in (("release", "dswheels publish"), ("pages", "dswheels index")):
        steps = [s for s in job_steps(job) if words in str(s.get("run", ""))]
        assert len(steps) == 2, job
        for publish_dir, flag in (("", "--github"), ("/srv/wheels", ("--dir", "--from"))):
            contexts: dict[str, Value] = {"needs": {"plan": {"outputs": {"publish_dir": publish_dir}}}}
            ran = [s for s in steps if condition(str(s["if"]), contexts, Status())]
            assert len(ran) == 1, (job, publish_dir)
            script = str(ran[0]["run"])
            assert any(f in script for f in ((flag,) if isinstance(flag, str) else flag)), (job, script)
            if publish_dir:
                assert as_dict(ran[0]["env"])["PUBLISH_DIR"] == "${{ needs.plan.outputs.publish_dir }}"
    index_env = [as_dict(s["env"]) for s in job_steps("pages") if "dswheels index" in str(s.get("run", ""))]
    assert all(env["INDEX_URL"] == "${{ needs.plan.outputs.index_url }}" for env in index_env)


def test_the_build_jobs_call_build_cells_with_their_matrix_entry_as_github_passes_it() -> None:
    """The caller's with: evaluated in its own contexts, typed by the called workflow's declared inputs;
    actionlint (one file at a time here) cannot follow a call, so the harness checks every call it runs."""
    entry: dict[str, Value] = {"name": "n", "cells": "c", "cache_parts": ""}
    for job, wheels in (("parts", False), ("build", True)):
        called = called_job(WHEELS, job, {"matrix": entry, "github": {"ref_name": "v1"}, "needs": {}})
        assert called is not None
        workflow, name, contexts = called
        assert (workflow, name) == (BUILD_CELLS, "cells")
        assert set(contexts) == {"github", "inputs"}  # no matrix, needs or env of the caller
        inputs = as_dict(contexts["inputs"])
        assert inputs["wheels"] is wheels
        assert json.loads(str(inputs["cell"])) == entry
    uses = "./.github/workflows/build-cells.yml"
    unknown: dict[str, Value] = {"jobs": {"x": {"uses": uses, "with": {"cell": "{}", "wheels": True, "nope": "1"}}}}
    with pytest.raises(WorkflowError, match="declares no such input"):
        called_job(unknown, "x", {})
    missing: dict[str, Value] = {"jobs": {"x": {"uses": uses, "with": {"cell": "{}"}}}}
    with pytest.raises(WorkflowError, match="needs the input"):
        called_job(missing, "x", {})


def test_no_job_runs_on_ubuntu_2204_and_linux_cells_build_in_the_container() -> None:
    """ubuntu-22.04 browns out from 2027-03-23 and is gone on 2027-04-17 (actions/runner-images#14254): no workflow
    names it, no shipped Linux cell plans onto it, and the build job runs in the plan's container."""
    for path in sorted((ROOT / ".github" / "workflows").glob("*.yml")):
        assert "ubuntu-22.04" not in path.read_text(encoding="utf-8"), path.name
    assert "ubuntu-22.04" not in (ROOT / "matrix" / "matrix.yml").read_text(encoding="utf-8")
    from dswheels.kernel.model import Platform
    from dswheels.kernel.platform_traits import ALL_TRAITS

    assert ALL_TRAITS[Platform.LINUX_X86_64].runner_image == "manylinux_2_28"
    assert ALL_TRAITS[Platform.LINUX_AARCH64].runner_image == "manylinux_2_28_aarch64"  # on ubuntu-24.04-arm
    cells = (ROOT / ".github" / "workflows" / "build-cells.yml").read_text(encoding="utf-8")
    assert "    container: ${{ fromJSON(inputs.cell).container }}" in cells
