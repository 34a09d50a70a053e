"""The workflows' structure: what they read from the plan, what reaches the CLI, who may do what.

These read .github/workflows/*.yml as GitHub does (YAML 1.2 booleans) and evaluate their
expressions with the dry run's evaluator (tests/gha/expressions.py), so a condition is
tested by what it does, not by how it is spelled.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from dswheels.cli import main
from dswheels.core.compat import load_compat
from dswheels.core.versions import format_version
from tests.conftest import ROOT
from tests.gha.expressions import Status, Value, condition
from tests.gha.model import load_workflow, tag_matches

WORKFLOWS = ROOT / ".github" / "workflows"
WHEELS = load_workflow(WORKFLOWS / "wheels.yml")
CI = load_workflow(WORKFLOWS / "ci.yml")
JOBS: dict[str, dict[str, Value]] = WHEELS["jobs"]  # type: ignore[assignment]
PLAN_MATRIX = "${{ fromJSON(needs.plan.outputs.matrix) }}"
EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def _strings(node: Value) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)


def _expressions(node: Value) -> Iterator[str]:
    """Every expression: ``${{ }}`` templates, and ``if:`` values (bare expressions)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "if" and isinstance(value, str) and "${{" not in value:
                yield value
            else:
                yield from _expressions(value)
    elif isinstance(node, list):
        for value in node:
            yield from _expressions(value)
    elif isinstance(node, str):
        yield from (m.group(1) for m in EXPRESSION.finditer(node))


def _steps(job: str) -> list[dict[str, Value]]:
    return JOBS[job]["steps"]  # type: ignore[return-value]


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
    assert plan_jobs == ["build", "smoke"]
    read: set[str] = set()
    for name in plan_jobs:
        for expression in _expressions(JOBS[name]):
            read |= set(re.findall(r"\bmatrix\.([A-Za-z_][\w-]*)", expression))
    assert read, "the build jobs read nothing from the plan?"
    assert read <= written, f"read but never written by dswheels plan --format github: {sorted(read - written)}"
    # and the documented contract covers them (docs/plan-json.md, `--format github`)
    doc = (ROOT / "docs" / "plan-json.md").read_text(encoding="utf-8").split("## `--format github`", 1)[1]
    documented = {
        key for row in re.findall(r"^\| (`[^|]+?) \|", doc, flags=re.MULTILINE) for key in re.findall(r"`([^`]+)`", row)
    }
    assert read <= documented


def test_the_plan_output_is_read_only_as_the_matrix_and_its_first_job() -> None:
    uses = [e.strip() for e in _expressions(WHEELS) if "needs.plan.outputs.matrix" in e]
    assert set(uses) == {
        "fromJSON(needs.plan.outputs.matrix)",
        "fromJSON(needs.plan.outputs.matrix).include[0] != null",
    }
    outputs = as_dict(JOBS["plan"]["outputs"])
    assert set(outputs) == {"matrix", "release"}


def as_dict(value: Value) -> dict[str, Value]:
    return value if isinstance(value, dict) else {}


def test_build_is_skipped_for_an_empty_plan_and_runs_for_a_non_empty_one() -> None:
    check = str(JOBS["build"]["if"])
    for matrix, expected in (('{"include":[]}', False), ('{"include":[{"name":"x"}]}', True)):
        contexts: dict[str, Value] = {"needs": {"plan": {"result": "success", "outputs": {"matrix": matrix}}}}
        assert condition(check, contexts, Status()) is expected


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
        "deepspeed": [format_version(v) for v in reversed(compat.deepspeed_releases)],
        "torch": [format_version(v) for v in reversed(compat.torch_minors)],
        "cuda": variants,
        "python": pythons,
        "platform": {"win_amd64", "linux_x86_64"},
    }
    for name, options in expected.items():
        assert inputs[name]["type"] == "choice", name
        given = [str(o) for o in inputs[name]["options"]]  # type: ignore[union-attr]
        assert len(given) == len(set(given)), name
        if isinstance(options, list):
            assert given == options, f"{name}: options must be compat.yml's, newest first"
        else:
            assert set(given) == options, f"{name}: options differ from compat.yml's"
        assert str(inputs[name]["default"]) in given, name
    assert inputs["publish"] == {"description": inputs["publish"]["description"], "type": "boolean", "default": False}


def test_the_default_dispatch_is_a_combination_the_rules_allow(capsys: pytest.CaptureFixture[str]) -> None:
    inputs = _dispatch_inputs()
    args = [f"--{name}={inputs[name]['default']}" for name in ("deepspeed", "torch", "cuda", "python", "platform")]
    assert len(_plan_github(capsys, *args)) == 1


def test_every_dispatch_input_reaches_the_cli_through_env() -> None:
    plan_step = next(s for s in _steps("plan") if s.get("id") == "plan")
    env = as_dict(plan_step["env"])
    by_input = {}
    for var, value in env.items():
        match = re.fullmatch(r"\$\{\{ inputs\.([a-z_]+) \}\}", str(value))
        if match:
            by_input[match.group(1)] = var
    assert set(by_input) == set(_dispatch_inputs()), "every input must be handed to the plan step"
    script = str(plan_step["run"])
    for name in ("deepspeed", "torch", "cuda", "python", "platform"):
        assert f'--{name} "${by_input[name]}"' in script, name
    assert f'"${by_input["publish"]}" = true' in script


_FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z-]*)")


def _invocations() -> Iterator[tuple[str, str, set[str]]]:
    """(job, subcommand, --flags) of every ``dswheels`` command line in wheels.yml's scripts."""
    for job_name, job in JOBS.items():
        for step in job.get("steps") or []:  # type: ignore[union-attr]
            script = str(as_dict(step).get("run", "")).replace("\\\n", " ")
            arrays: dict[str, set[str]] = {}  # bash arrays of flags: skip=(--skip-published "$X")
            for name, body in re.findall(r"\b([a-z_]+)\+?=\(([^)]*)\)", script):
                arrays.setdefault(name, set()).update(_FLAG.findall(body))
            for match in re.finditer(r"\bdswheels ([a-z][a-z-]*)([^\n|;>]*)", script):
                flags = set(_FLAG.findall(match.group(2)))
                for name in re.findall(r"\$\{([a-z_]+)\[@\]\}", match.group(2)):
                    flags |= arrays.get(name, set())
                yield job_name, match.group(1), flags


def test_every_dswheels_command_and_flag_the_workflow_uses_exists(capsys: pytest.CaptureFixture[str]) -> None:
    seen = set()
    problems = []
    for job, command, flags in _invocations():
        seen.add(command)
        with pytest.raises(SystemExit) as info:
            main([command, "--help"])
        text = capsys.readouterr().out
        if info.value.code != 0:
            problems.append(f"{job}: dswheels has no command {command!r}")
            continue
        problems += [f"{job}: dswheels {command} has no {flag}" for flag in sorted(flags) if flag not in text]
    assert {"plan", "build", "verify", "publish", "index", "smoke"} <= seen
    assert not problems, "\n".join(problems)


def test_no_expression_is_expanded_inside_a_script() -> None:
    for workflow in (WHEELS, CI):
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
            "plan": {"result": "success", "outputs": {"release": release, "matrix": "{}"}},
            "build": {"result": build, "outputs": {}},
            "smoke": {"result": smoke, "outputs": {}},
        }
    }
    status = Status(
        success=all(r == "success" for r in results.values()),
        failure="failure" in results.values(),
        cancelled="cancelled" in results.values(),
    )
    return condition(str(JOBS["release"]["if"]), contexts, status)


def test_publish_runs_only_after_builds_and_smoke_passed() -> None:
    assert _needs("smoke") == {"plan", "build"}
    assert _needs("release") == {"plan", "build", "smoke"}
    assert _needs("pages") == {"release"}
    assert _run_release("success", "success")
    assert _run_release("success", "skipped")  # no GPU runner: smoke is skipped, publish still runs
    assert not _run_release("success", "failure")
    assert not _run_release("success", "cancelled")
    assert not _run_release("failure", "skipped")
    assert not _run_release("skipped", "skipped")  # nothing was built (all published already)
    assert not _run_release("success", "success", release="")  # a dispatch without publish


def test_smoke_is_gated_by_the_gpu_runner_variable_with_a_visible_notice() -> None:
    gate = str(JOBS["smoke"]["if"])
    contexts: dict[str, Value] = {"vars": {}, "needs": {}}
    assert not condition(gate, contexts, Status())
    assert condition(gate, {**contexts, "vars": {"DSWHEELS_GPU_RUNNERS": "linux_x86_64"}}, Status())
    notice = next(s for s in _steps("plan") if "::notice" in str(s.get("run", "")))
    assert not condition(str(notice["if"]), {"vars": {"DSWHEELS_GPU_RUNNERS": "win_amd64"}}, Status())
    assert condition(str(notice["if"]), {"vars": {}}, Status())
    labels = "${{ contains(vars.DSWHEELS_GPU_RUNNERS, matrix.platform) && matrix.smoke_runs_on || 'ubuntu-24.04' }}"
    assert JOBS["smoke"]["runs-on"] == labels


# --- hardening -----------------------------------------------------------------------------------

MINIMAL = {
    "wheels": {
        "plan": {"contents": "read"},
        "build": {"contents": "read"},
        "smoke": {"contents": "read"},
        "release": {"contents": "write", "id-token": "write", "attestations": "write"},
        "pages": {"contents": "read", "pages": "write", "id-token": "write"},
    },
    "ci": {"lint": {"contents": "read"}, "unit": {"contents": "read"}, "integration": {"contents": "read"}},
}


@pytest.mark.parametrize("name", ["wheels", "ci"])
def test_permissions_are_the_minimum(name: str) -> None:
    workflow = WHEELS if name == "wheels" else CI
    assert workflow["permissions"] == {}
    jobs = as_dict(workflow["jobs"])
    assert {job: as_dict(jobs[job]).get("permissions") for job in jobs} == MINIMAL[name]


@pytest.mark.parametrize("name", ["wheels", "ci"])
def test_every_job_has_a_timeout_and_the_runs_have_a_concurrency_group(name: str) -> None:
    workflow = WHEELS if name == "wheels" else CI
    assert "github.ref" in str(as_dict(workflow["concurrency"])["group"])
    for job_name, job in as_dict(workflow["jobs"]).items():
        assert isinstance(as_dict(job).get("timeout-minutes"), int), job_name


def test_every_action_is_pinned_by_sha_with_its_version() -> None:
    pins: dict[str, str] = {}
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if "uses:" not in line:
                continue
            match = re.search(r"uses: ([\w.-]+/[\w./-]+)@([0-9a-f]{40}) # (v\d+\.\d+\.\d+)$", line)
            assert match, f"{path.name}: not pinned to a commit with its tag: {line.strip()}"
            action, pin = match.group(1), f"{match.group(2)} {match.group(3)}"
            assert pins.setdefault(action, pin) == pin, f"{action} is pinned to two versions"


def test_release_workflow_uses_no_cache_and_no_secrets_on_self_hosted_runners() -> None:
    text = (WORKFLOWS / "wheels.yml").read_text(encoding="utf-8")
    assert "actions/cache" not in text
    assert "sccache" not in text
    for job in JOBS.values():
        for step in job.get("steps") or []:  # type: ignore[union-attr]
            with_ = as_dict(as_dict(step).get("with"))
            assert "cache" not in with_
            if "cuda-toolkit" in str(as_dict(step).get("uses")):
                assert with_["use-github-cache"] is False
                assert with_["use-local-cache"] is False
    smoke = json.dumps(JOBS["smoke"])
    assert "secrets." not in smoke
    assert "github.token" not in smoke
    assert "secrets." not in text  # the only credential is the job token, given where it is needed
    for step in (s for job in JOBS.values() for s in job.get("steps") or []):  # type: ignore[union-attr]
        if "actions/checkout" in str(as_dict(step).get("uses")):
            assert as_dict(as_dict(step)["with"])["persist-credentials"] is False


def test_windows_build_steps_enable_long_paths_and_msvc_from_the_plan() -> None:
    steps = _steps("build")
    long_paths = next(s for s in steps if "LongPathsEnabled" in str(s.get("run", "")))
    assert "core.longpaths true" in str(long_paths["run"])
    assert long_paths["if"] == "runner.os == 'Windows'"
    msvc = next(s for s in steps if "setup-msvc-dev" in str(s.get("uses")))
    assert as_dict(msvc["with"]) == {"arch": "x64", "toolset": "${{ matrix.msvc_toolset }}"}
    cuda = next(s for s in steps if "cuda-toolkit" in str(s.get("uses")))
    assert as_dict(cuda["with"])["cuda"] == "${{ matrix.cuda_toolkit }}"
    assert "matrix.cuda_subpackages" in str(as_dict(cuda["with"])["sub-packages"])
    build = next(s for s in steps if s.get("name") == "Build")
    assert as_dict(build["env"]) == {"CC": "gcc-${{ matrix.gcc }}", "CXX": "g++-${{ matrix.gcc }}"}


def test_every_build_uploads_wheels_and_runs_verify() -> None:
    steps = _steps("build")
    runs = " ".join(str(s.get("run", "")) for s in steps)
    assert "dswheels verify" in runs
    upload = next(s for s in steps if "upload-artifact" in str(s.get("uses")))
    assert as_dict(upload["with"])["name"] == "wheels-${{ matrix.name }}"
    assert as_dict(upload["with"])["if-no-files-found"] == "error"
    release = _steps("release")
    download = next(s for s in release if "download-artifact" in str(s.get("uses")))
    assert as_dict(download["with"])["pattern"] == "wheels-*"
    attest = next(s for s in release if "actions/attest" in str(s.get("uses")))
    assert str(as_dict(attest["with"])["subject-path"]).endswith("*.whl")


def test_cibuildwheel_wheels_get_manifests_before_they_are_uploaded() -> None:
    steps = _steps("build")
    names = [str(s.get("name", s.get("uses", ""))) for s in steps]
    build = next(i for i, s in enumerate(steps) if "python -m cibuildwheel" in str(s.get("run", "")))
    finish = next(i for i, s in enumerate(steps) if "--finish" in str(s.get("run", "")))
    upload = next(i for i, s in enumerate(steps) if "upload-artifact" in str(s.get("uses")))
    assert build < finish < upload, names
    on_windows = {"runner": {"os": "Windows"}}
    on_linux = {"runner": {"os": "Linux"}}
    for index in (build, finish):
        assert condition(steps[index].get("if"), on_windows, Status())  # type: ignore[arg-type]
        assert not condition(steps[index].get("if"), on_linux, Status())  # type: ignore[arg-type]
    configure = str(steps[build]["run"]).replace("\\\n", " ")
    script = str(steps[finish]["run"]).replace("\\\n", " ")
    finish_line = next(ln for ln in script.splitlines() if "--finish" in ln)
    configure_line = next(ln for ln in configure.splitlines() if ln.strip().startswith("dswheels cibw"))
    # the same job: the same matrix, cells and --out as the configuring run, and cibuildwheel's --output-dir
    for flag in ('--matrix "$DSWHEELS_MATRIX"', '--cell "$CELLS"', '--out "$RUNNER_TEMP/cibw"'):
        assert flag in configure_line
        assert flag in finish_line
    output_dir = re.search(r'--output-dir "([^"]+)"', configure)
    assert output_dir is not None
    assert f'--finish "{output_dir.group(1)}"' in finish_line
    assert as_dict(steps[finish]["env"]) == as_dict(steps[build]["env"]) == {"VARIANT": "${{ matrix.variant }}"}
    # each wheel is then checked against its new manifest
    verify = script[script.index(finish_line) + len(finish_line) :]
    assert 'dswheels verify "wheelhouse/$VARIANT"/*.whl --static' in verify
