"""The workflows' hardening: least permissions, timeouts, pinned actions, the cache policy, and
the Windows build steps (long paths, MSVC, no GNU link.exe), read from .github/workflows/*.yml."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from dswheels.plan.compiler_cache_keys import SccacheBackend, SccacheSettings, sccache_backend
from tests.conftest import ROOT
from tests.gha.expressions import Status, Value, condition
from tests.gha.invocations import env_defaults
from tests.gha.workflow_files import (
    BUILD_CELLS,
    CI,
    JOBS,
    WHEELS,
    WORKFLOWS,
    as_dict,
    entry,
    job_spec,
    job_steps,
    seen_by_steps,
)

# wheels.yml and the reusable workflow its build jobs call (.github/workflows/build-cells.yml)
WHEELS_TEXT = "\n".join((WORKFLOWS / name).read_text(encoding="utf-8") for name in ("wheels.yml", "build-cells.yml"))


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


# --- hardening -----------------------------------------------------------------------------------

MINIMAL = {
    "wheels": {
        "plan": {"contents": "read"},
        "parts": {"contents": "read"},
        "build": {"contents": "read"},
        "smoke": {"contents": "read"},
        "subjects": {"contents": "read"},
        "attest": {"id-token": "write", "attestations": "write"},
        "release": {"contents": "write"},
        "pages": {"contents": "read", "pages": "write", "id-token": "write"},
        "answer": {"issues": "write"},
    },
    "ci": {"lint": {"contents": "read"}, "unit": {"contents": "read"}, "integration": {"contents": "read"}},
}


@pytest.mark.parametrize("name", ["wheels", "ci"])
def test_permissions_are_the_minimum(name: str) -> None:
    workflow = WHEELS if name == "wheels" else CI
    assert workflow["permissions"] == {}
    jobs = as_dict(workflow["jobs"])
    assert {job: as_dict(jobs[job]).get("permissions") for job in jobs} == MINIMAL[name]
    if name == "wheels":  # what the build jobs call asks for no more than they may have
        assert BUILD_CELLS["permissions"] == {}
        assert {job: as_dict(spec).get("permissions") for job, spec in as_dict(BUILD_CELLS["jobs"]).items()} == {
            "cells": {"contents": "read"}
        }


@pytest.mark.parametrize("name", ["wheels", "ci"])
def test_every_job_has_a_timeout_and_the_runs_have_a_concurrency_group(name: str) -> None:
    workflow = WHEELS if name == "wheels" else CI
    assert "github.ref" in str(as_dict(workflow["concurrency"])["group"])
    for job_name, job in as_dict(workflow["jobs"]).items():
        spec = job_spec(job_name) if workflow is WHEELS else as_dict(job)  # a called workflow's job has the limit
        assert isinstance(spec.get("timeout-minutes"), int), job_name


def test_every_action_is_pinned_by_sha_with_its_version() -> None:
    pins: dict[str, str] = {}
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if "uses:" not in line or "uses: ./.github/workflows/" in line:  # this repository's own: no pin
                continue
            match = re.search(r"uses: ([\w.-]+/[\w./-]+)@([0-9a-f]{40}) # (v\d+\.\d+\.\d+)$", line)
            assert match, f"{path.name}: not pinned to a commit with its tag: {line.strip()}"
            action, pin = match.group(1), f"{match.group(2)} {match.group(3)}"
            assert pins.setdefault(action, pin) == pin, f"{action} is pinned to two versions"


def _uses(step: Value) -> str:
    return str(as_dict(step).get("uses", "")).split("@")[0].lower()


# each use saves one Actions cache entry (actions/cache saves in its post step)
SAVES_AN_ENTRY = ("actions/cache", "actions/cache/save")
# actions that hand the Actions cache's token to every later process of the job: with it sccache (and
# dswheels before issue 23) writes GitHub's cache itself, one entry per object
EXPOSES_THE_CACHE = ("mozilla-actions/sccache-action", "crazy-max/ghaction-github-runtime")
TOKEN = {"ACTIONS_RESULTS_URL": "https://results-receiver.actions.githubusercontent.com/", "ACTIONS_RUNTIME_TOKEN": "t"}


@pytest.mark.parametrize("job", list(JOBS))
def test_a_job_creates_at_most_one_cache_entry_never_one_per_object(job: str) -> None:
    """GitHub allows a repository 200 new cache entries a minute (changelog 2026-01-16, mozilla/sccache#2730)
    and sccache's Actions cache backend drops the writes it is refused (#2821): nineteen jobs writing one
    entry per object lose most of them. A job saves at most one entry, and the sccache its build starts
    never writes the Actions cache itself, whatever the job exposes to it."""
    steps = job_steps(job)
    saves = [_uses(s) for s in steps if _uses(s) in SAVES_AN_ENTRY]
    assert len(saves) <= 1, f"{job} saves {len(saves)} cache entries"
    exposing = [_uses(s) for s in steps if _uses(s) in EXPOSES_THE_CACHE]
    assert not exposing, f"{job}: {exposing} give every later process the cache's token (one entry per object)"
    if not any("dswheels build" in str(s.get("run", "")) for s in steps):
        return
    # the build's sccache, started by dswheels with the job's settings in a runner that exposes the token
    env = {str(k): str(v) for k, v in as_dict(job_spec(job).get("env")).items()}
    settings = SccacheSettings(backend=SccacheBackend.AUTO, bucket="", namespace=env["DSWHEELS_SCCACHE_NAMESPACE"])
    variables, where = sccache_backend(settings, {**TOKEN, "SCCACHE_DIR": "/runner/temp/sccache"}, base_dir="/w")
    assert not [k for k in variables if k.startswith("SCCACHE_GHA")], f"{job}: sccache would write one entry per object"
    assert where == "local disk (/runner/temp/sccache)"


def test_the_cache_policy_compiler_cache_in_build_jobs_only_one_entry_per_job() -> None:
    """The deliberate cache policy (docs/costs.md; .github/zizmor.yml records the review).

    Only the jobs that compile (parts, build) use a cache: sccache on the runner's disk, restored from
    and saved to ONE Actions cache entry per job (keys from the plan: its family of toolkit, arch list,
    compiler and runner image, then the job), whatever the build's outcome, unless a bucket holds the
    objects or the repository asks for none. plan, smoke (the self-hosted GPU runner), release and pages
    (the jobs with write tokens) never restore anything. No secret reaches a job.
    """
    assert "secrets." not in WHEELS_TEXT  # the only credential is the job token, given where it is needed
    build_defaults = env_defaults("build")
    for name in JOBS:
        steps = job_steps(name)
        cache_steps = {_uses(s): as_dict(s) for s in steps if _uses(s).startswith("actions/cache")}
        if name not in ("parts", "build"):
            assert not cache_steps, name
            continue
        assert set(cache_steps) == {"actions/cache/restore", "actions/cache/save"}, name
        restore, save = cache_steps["actions/cache/restore"], cache_steps["actions/cache/save"]
        family, job_key = f"${{{{ {entry(name, 'cache_key')} }}}}", f"${{{{ {entry(name, 'cache_job')} }}}}"
        key = f"{family}-{job_key}-${{{{ github.run_id }}}}-${{{{ github.run_attempt }}}}"
        assert as_dict(restore["with"])["key"] == as_dict(save["with"])["key"] == key
        assert str(as_dict(restore["with"])["restore-keys"]).splitlines() == [f"{family}-{job_key}-", f"{family}-"]
        assert as_dict(restore["with"])["path"] == as_dict(save["with"])["path"] == "${{ runner.temp }}/sccache"
        assert str(save["if"]).startswith("always()")  # a failed or cut-off build keeps what it compiled
        order = [_uses(s) or str(s.get("name")) for s in steps]
        assert order.index("actions/cache/restore") < order.index("Build") < order.index("actions/cache/save")
        for step in steps:  # no other action of a building job keeps a cache of its own (CUDA: a run step)
            if not _uses(step).startswith("actions/cache"):
                assert "cache" not in as_dict(step.get("with")), step
        env = as_dict(job_spec(name)["env"])
        sccache = {variable for variable in env if variable.startswith("DSWHEELS_SCCACHE_")}
        assert sccache == {
            build_defaults[f"sccache_{key}"] for key in ("backend", "bucket", "endpoint", "region", "namespace")
        }
        assert env["DSWHEELS_SCCACHE_NAMESPACE"] == "wheels-${{ github.ref_name }}"
        assert env["DSWHEELS_SCCACHE_BUCKET"] == "${{ vars.DSWHEELS_SCCACHE_BUCKET }}"
        build = next(s for s in steps if "dswheels build" in str(s.get("run", "")))
        assert "--compiler-cache sccache" in str(build["run"])  # its time limit: tests/unit/test_workflows_budget.py
        assert as_dict(build["env"])["SCCACHE_DIR"] == "${{ runner.temp }}/sccache"
    ci = (WORKFLOWS / "ci.yml").read_text(encoding="utf-8")
    assert "sccache" not in ci  # ci.yml's ccache directory has keys of its own (ccache-<os>-...)
    assert "key: ccache-${{ runner.os }}-" in ci
    zizmor = yaml.safe_load((WORKFLOWS.parent / "zizmor.yml").read_text(encoding="utf-8"))
    assert zizmor == {"rules": {"cache-poisoning": {"ignore": ["wheels.yml"]}}}
    smoke = json.dumps(JOBS["smoke"])
    assert "github.token" not in smoke
    for checkout in (s for job in JOBS for s in job_steps(job)):
        if "actions/checkout" in str(as_dict(checkout).get("uses")):
            assert as_dict(as_dict(checkout)["with"])["persist-credentials"] is False


@pytest.mark.parametrize("state", ["default", "bucket", "local"])
def test_the_actions_cache_is_used_unless_a_bucket_holds_the_objects_or_none_is_wanted(state: str) -> None:
    variables = {
        "default": {},
        "bucket": {"DSWHEELS_SCCACHE_BUCKET": "b"},
        "local": {"DSWHEELS_SCCACHE_BACKEND": "local"},
    }
    expression = str(as_dict(job_spec("build")["env"])["SAVE_COMPILER_CACHE"]).removeprefix("${{").removesuffix("}}")
    contexts: dict[str, Value] = {
        "vars": {"DSWHEELS_SCCACHE_BUCKET": "", "DSWHEELS_SCCACHE_BACKEND": "", **variables[state]}
    }
    assert condition(expression.strip(), contexts, Status()) is (state == "default")


def test_windows_build_steps_enable_long_paths_and_msvc_from_the_plan() -> None:
    steps = job_steps("build")
    long_paths = next(s for s in steps if "LongPathsEnabled" in str(s.get("run", "")))
    assert "core.longpaths true" in str(long_paths["run"])
    assert long_paths["if"] == "runner.os == 'Windows'"
    msvc = next(s for s in steps if "setup-msvc-dev" in str(s.get("uses")))
    assert as_dict(msvc["with"]) == {"arch": "x64", "toolset": f"${{{{ {entry('build', 'msvc_toolset')} }}}}"}


def _runs_on(step: dict[str, Value], os_name: str, job: str = "build") -> bool:
    """Whether ``step`` of ``job`` runs on ``os_name`` (an entry that names nothing, a build job's inputs)."""
    contexts: dict[str, Value] = {
        **seen_by_steps(job, {"matrix": {}}),
        "runner": {"os": os_name},
        "steps": {},
        "env": {},
    }
    return "if" not in step or condition(str(step["if"]), contexts, Status())


def test_one_build_step_for_both_platforms() -> None:
    steps = job_steps("build")
    builds = [s for s in steps if "dswheels build" in str(s.get("run", ""))]
    assert len(builds) == 1, "one pipeline: the same `dswheels build` on Windows and Linux"
    build = builds[0]
    assert _runs_on(build, "Windows")
    assert _runs_on(build, "Linux")
    script = str(build["run"]).replace("\\\n", " ")
    for flag in (
        "--plan plan/plan.json",
        '--cell "$CELLS"',
        '--ops "$OPS"',
        "--keep-going",
        '--work-dir "$RUNNER_TEMP/w"',
    ):
        assert flag in script
    assert "cibuildwheel" not in WHEELS_TEXT


def test_no_windows_build_step_can_reach_gnu_link() -> None:
    """Git Bash puts coreutils' link.exe first on PATH; setuptools would link every extension with it."""
    steps = job_steps("build")
    default_shell = str(as_dict(as_dict(WHEELS.get("defaults")).get("run")).get("shell", "bash"))
    removed = False
    for step in steps:
        if not _runs_on(step, "Windows"):
            continue
        script = str(step.get("run", ""))
        shell = str(step.get("shell", default_shell))
        if shell == "bash" and re.search(r"\brm -f [^\n]*/usr/bin/link\.exe", script):
            removed = True
        compiles = any(word in script for word in ("dswheels build", "setup.py", "python -m build", "cibuildwheel"))
        if compiles and shell not in ("pwsh", "powershell", "cmd"):
            assert removed, f"{step.get('name')}: runs under {shell} with GNU link.exe still on PATH"


def test_cuda_comes_from_nvidias_archives_through_dswheels_on_both_oses_within_a_step_timeout() -> None:
    """No third-party action and no installer: `dswheels cuda install` (sha256-checked archives) before the build."""
    assert "cuda-toolkit@" not in WHEELS_TEXT  # the action with the pin problem is gone
    for name in ("parts", "build"):
        steps = job_steps(name)
        (install,) = [s for s in steps if "dswheels cuda install" in str(s.get("run", ""))]
        assert " ".join(str(install["run"]).replace("\\\n", " ").split()) == (
            'dswheels cuda install --toolkit "$CUDA_TOOLKIT" --platform "$CUDA_PLATFORM" --dest "$RUNNER_TEMP/cuda" '
            "--github-env --report measure/cuda.json"  # its seconds, for the job's record (`dswheels ci measure`)
        )
        toolkit = f"${{{{ {entry(name, 'cuda_toolkit')} }}}}"
        platform = f"${{{{ {entry(name, 'platform')} }}}}"  # the plan's: linux-sbsa archives for linux_aarch64
        assert as_dict(install["env"]) == {"CUDA_TOOLKIT": toolkit, "CUDA_PLATFORM": platform}  # no ${{ }} in run:
        timeout = install.get("timeout-minutes")
        assert isinstance(timeout, int)
        assert timeout <= 45
        for os_name in ("Windows", "Linux"):
            on_os: dict[str, Value] = {"runner": {"os": os_name}, "steps": {}}
            cuda: dict[str, Value] = {**seen_by_steps(name, {"matrix": {"cuda_toolkit": "13.0.3"}}), **on_os}
            cpu: dict[str, Value] = {**seen_by_steps(name, {"matrix": {"cuda_toolkit": ""}}), **on_os}
            assert condition(str(install["if"]), cuda, Status())
            assert not condition(str(install["if"]), cpu, Status())
        order = [str(s.get("name", s.get("uses", ""))) for s in steps]
        build = next(i for i, s in enumerate(steps) if "dswheels build" in str(s.get("run", "")))
        assert order.index("Install dswheels") < steps.index(install) < build
    assert as_dict(WHEELS["env"])["DSWHEELS_CUDA_REDIST_URL"] == "${{ vars.DSWHEELS_CUDA_REDIST_URL }}"


def test_dswheels_comes_from_the_checkout_only() -> None:
    """A job never installs a dswheels release (0.1.0 is on no index): every install is the checkout's."""
    assert "dswheels==" not in WHEELS_TEXT
    assert "test-requires" not in WHEELS_TEXT
    for job in JOBS:
        for step in job_steps(job):
            script = str(as_dict(step).get("run", ""))
            for line in script.splitlines():
                if "pip install" in line and "dswheels" not in line:
                    assert line.strip().endswith((" .", ' ".[provenance]"')), line


def test_every_build_uploads_wheels_and_runs_verify() -> None:
    steps = job_steps("build")
    verify = next(s for s in steps if "dswheels verify" in str(s.get("run", "")))
    assert _runs_on(verify, "Windows")
    assert _runs_on(verify, "Linux")
    uploads = [s for s in steps if "upload-artifact" in str(s.get("uses")) and _runs_on(s, "Linux")]
    (upload,) = [s for s in uploads if str(as_dict(s["with"])["name"]).startswith("wheels-")]
    assert as_dict(upload["with"])["name"] == f"wheels-${{{{ {entry('build', 'name')} }}}}"
    assert as_dict(upload["with"])["if-no-files-found"] == "error"
    release = job_steps("release")
    downloads = [as_dict(s["with"]) for s in release if "download-artifact" in str(s.get("uses"))]
    wanted = [("wheels-*", "wheelhouse"), ("provenance-*", "wheelhouse")]  # each bundle lands beside its wheel
    assert [(d["pattern"], d["path"]) for d in downloads] == wanted
    # one attestation per wheel (PEP 740: one subject), by its name and digest: never a glob of files
    (attest,) = [s for s in job_steps("attest") if "actions/attest" in str(s.get("uses"))]
    assert as_dict(attest["with"]) == {
        "subject-name": "${{ matrix.name }}",
        "subject-digest": "sha256:${{ matrix.sha256 }}",
    }
    assert "actions/attest" not in str(release)
