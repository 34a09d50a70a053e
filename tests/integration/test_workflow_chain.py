"""The wheels workflow's own steps, run here in job order for one Linux cell (`nox -s dryrun`).

What the unit tests cannot prove: that the lines wheels.yml runs, as written, chain into wheels a
user installs. The plan job's `dswheels ci plan` (a dispatch of one Linux CPU cell, publish
ticked) writes the plan; the plan file travels as the artifact it is; the build job builds its
cells of that plan (a real DeepSpeed compile of one op) and verifies them; the wheels travel
to the release job, which publishes them to the directory the repository variable names; the
pages job indexes it; pip installs from the site. Then a tag push of that version plans
nothing (its wheel is published) and every job after the plan is skipped.

GitHub's runner is not emulated (tests/gha/steps.py): each job's `run:` steps run here with
bash, their env: resolved from the contexts a runner would give; artifacts move by
upload/download-artifact's path rules; the other actions (checkout, setup-python, MSVC's
environment, sccache-action, attestation, Pages) are not run: tests/unit/test_workflows.py
checks how they are called. Jobs for Windows or a GPU runner are not run here.

The Linux build job runs in pypa's manylinux_2_28 container on a runner; here this machine stands in
for the container (no registry is reachable from it): the job's `container:` is checked to be the
plan's pinned image, its Container Pythons and GCC toolset steps run as written (with a stand-in
`dnf` that records what it was asked to install: the image's gcc-toolset is not here), and the
wheel gets the tag auditwheel gives a build on this machine. What only a runner proves: that the
image starts, that AlmaLinux 8's AppStream serves the toolset, and that a build there is
manylinux_2_28 (docs/build.md#what-only-a-runner-proves).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dswheels.host.auditwheel import judge_floor
from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import VerifyError
from tests.conftest import DATA, ROOT, require
from tests.gha.expressions import Status, Value, condition
from tests.gha.model import as_map, load_workflow, validate_inputs
from tests.gha.steps import Artifacts, Caches, Job, run_job
from tests.integration.conftest import require_compilers
from tests.support.processes import stop_sccache
from tests.support.servers import StaticServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

WHEELS = load_workflow(ROOT / ".github" / "workflows" / "wheels.yml")
JOBS = as_map(WHEELS["jobs"], "jobs")
CELL = "ds0.19.8-torch2.13-cpu-cp311-linux_x86_64"
VERSION = "0.19.8+cputorch2.13"
# the wheel's platform tag is its floor, auditwheel's verdict on a build here (manylinux_2_35 on Debian 12)
WHEEL_RE = re.compile(rf"deepspeed-{re.escape(VERSION)}-cp311-cp311-(manylinux_2_\d+_x86_64)\.whl")
PARTITION = "cpu-torch2.13"
COMPAT = load_compat()
DNF = """#!/bin/sh
# stands in for the manylinux image's dnf: records what the GCC toolset step asks it to install
echo "$@" >> "$DNF_LOG"
"""
INPUTS = {
    "deepspeed": "0.19.8",
    "torch": "2.13",
    "cuda": "cpu",
    "python": "3.11",
    "platform": "linux_x86_64",
    "canary": "false",
    "publish": "true",
}


def _if(job: str) -> str:
    return str(as_map(JOBS[job], job)["if"])


def _dispatched(tmp_path: Path, cache: Path) -> tuple[dict[str, Value], dict[str, str]]:
    declared = as_map(as_map(as_map(WHEELS["on"], "on")["workflow_dispatch"], "wd")["inputs"], "inputs")
    site = tmp_path / "pages" / "site"
    variables = {
        "DSWHEELS_MATRIX": str(DATA / "dryrun-matrix.yml"),  # one Linux CPU cell, one op: a cheap real build
        "DSWHEELS_TORCH_INDEX": "pip",  # pip's own configuration: this machine's wheels or PyPI
        "DSWHEELS_PUBLISH_DIR": str(tmp_path / "published"),
        "DSWHEELS_INDEX_URL": site.as_uri() + "/",
    }
    contexts: dict[str, Value] = {
        "github": {
            "event_name": "workflow_dispatch",
            "ref_name": "main",
            "repository": "dswheels/dswheels",
            "sha": "0" * 40,
            "token": "",
            "run_id": "4242",
            "run_attempt": "1",
        },
        "inputs": validate_inputs(declared, INPUTS),  # as the dispatch form hands them over
        "vars": dict(variables),
        "runner": {"os": "Linux"},
    }
    machine = {
        "DSWHEELS_CACHE": str(cache),
        "SCCACHE_DIR": str(tmp_path / "sccache"),
        "DNF_LOG": str(tmp_path / "dnf.log"),
        # what pypa's image sets (its Dockerfile's ENV): the build keeps the plan's promise in the container
        "AUDITWHEEL_PLAT": "manylinux_2_28_x86_64",
    }
    return contexts, machine


def _stand_ins(tmp_path: Path) -> Path:
    """What the manylinux image has and this machine lacks: dnf (recording what it is asked to install)."""
    stand_ins = tmp_path / "stand-ins"
    stand_ins.mkdir(exist_ok=True)
    (stand_ins / "dnf").write_text(DNF, encoding="utf-8")
    (stand_ins / "dnf").chmod(0o755)
    return stand_ins


def test_the_wheels_workflow_chain_runs_here_for_one_linux_cell(tmp_path: Path, dswheels_cache: Path) -> None:
    require(sys.platform == "linux", "the chain stands in for the workflow's ubuntu runners")
    require_compilers()
    base, machine = _dispatched(tmp_path, dswheels_cache)
    store = Artifacts(tmp_path / "artifacts")
    caches = Caches(tmp_path / "actions-cache")

    plan = run_job(
        Job(workflow=WHEELS, job="plan", workspace=tmp_path / "plan", contexts=base, extra_env=machine), store
    )
    assert plan.ran == ["Plan", "actions/upload-artifact"]
    outputs = plan.outputs
    assert "no GPU smoke test" in plan.steps["plan"].summary  # the smoke job is skipped visibly, not pretended
    assert outputs["release"] == "v0.19.8"
    needs: dict[str, Value] = {"plan": {"result": "success", "outputs": dict(outputs)}}

    parts_ctx: dict[str, Value] = {**base, "needs": needs}
    assert not condition(_if("parts"), parts_ctx, Status())  # nothing to split
    needs["parts"] = {"result": "skipped", "outputs": {}}
    after_parts = Status(success=False)  # a job after a skipped one: success() is false (actions/runner#491)
    assert condition(_if("build"), {**base, "needs": needs}, after_parts)
    (entry,) = json.loads(outputs["matrix"])["include"]
    assert entry["cells"] == CELL
    build = Job(
        workflow=WHEELS,
        job="build",
        workspace=tmp_path / "build",
        contexts={**base, "needs": needs, "matrix": entry},
        extra_env=machine,
        stand_ins=_stand_ins(tmp_path),
    )
    try:
        built = run_job(build, store, caches=caches)
    finally:
        stop_sccache({**os.environ, **machine})  # `dswheels build --compiler-cache sccache` started it on this port
    assert built.ran == [
        "Start the clock",
        "actions/download-artifact",
        "Container Pythons",
        "GCC toolset",
        "Restore the compiler cache",
        "Time left for the build",
        "Build",
        "Save the compiler cache",
        "Verify",
        "The wheels",
        "Record what the job measured",
        "The measurements",
    ]
    assert build.runs["Restore the compiler cache"].outputs == {"cache-hit": "false"}  # nothing saved before
    # the job's whole compiler cache as ONE entry: its family, the job, the run and attempt
    key = f"{entry['cache_key']}-{entry['cache_job']}-4242-1"
    assert [(e.job, e.key) for e in caches.entries] == [("build", key)]
    assert 300 <= int(built.steps["time_left"].outputs["minutes"]) <= 345  # the build's deadline: the job's, less
    # the Windows-only steps and the CUDA install were evaluated and skipped on this Linux leg; in the container
    # setup-python is skipped for the image's own Pythons
    assert {"Enable long paths", "No GNU link.exe", "Re-run to finish", "CUDA toolkit"} <= set(built.skipped)
    assert "actions/setup-python" in built.skipped
    _check_container(build, entry, tmp_path)
    assert f"| `{CELL}` | ok |" in built.steps["build"].summary  # the job summary: the cell built
    _check_measured(store.root / f"measurements-{entry['name']}")

    _check_rerun_restores(tmp_path, base=base, needs=needs, entry=entry, machine=machine, store=store, caches=caches)

    needs["build"] = {"result": "success", "outputs": {}}
    assert not condition(_if("smoke"), {**base, "needs": needs}, after_parts)  # no GPU runner
    needs["smoke"] = {"result": "skipped", "outputs": {}}
    _release(tmp_path, base, needs, store)
    needs["release"] = {"result": "success", "outputs": {}}
    assert condition(_if("pages"), {**base, "needs": needs}, Status())
    pages = Job(workflow=WHEELS, job="pages", workspace=tmp_path / "pages", contexts={**base, "needs": needs})
    assert run_job(pages, store).ran == ["Index the directory"]

    published = tmp_path / "published"
    _check_published(published, pages.workspace / pages.with_("actions/upload-pages-artifact")["path"], tmp_path)
    _check_tag_push(tmp_path, base, machine, published)


def _check_measured(artifact: Path) -> None:
    """The job's record (`dswheels ci measure`): its build and verify from their reports, the cell's compile
    from its manifest (copied beside it), the runner and run from the runner's variables."""
    record = json.loads((artifact / "job.json").read_text(encoding="utf-8"))
    (cell,) = record["cells"]
    assert cell["cell_id"] == CELL
    manifest = json.loads((artifact / cell["manifest"]).read_text(encoding="utf-8"))
    assert cell["compile"] == manifest["durations"]["compile"] > 0
    assert manifest["runner"]["run_id"] == record["runner"]["run_id"] == "4242"
    seconds = record["seconds"]
    assert seconds["cuda_install"] is None  # a CPU job installs no toolkit
    assert seconds["build"] > 0
    assert seconds["verify"] > 0
    assert seconds["job"] >= seconds["build"] + seconds["verify"]


def _release(tmp_path: Path, base: dict[str, Value], needs: dict[str, Value], store: Artifacts) -> None:
    """The subjects job lists the wheel, the release job publishes it to the directory."""
    after_parts = Status(success=False)  # a job after a skipped one: success() is false (actions/runner#491)
    assert condition(_if("subjects"), {**base, "needs": needs}, after_parts)
    subjects = Job(workflow=WHEELS, job="subjects", workspace=tmp_path / "subjects", contexts={**base, "needs": needs})
    (subjects.workspace / "scripts").mkdir(parents=True)  # what actions/checkout puts there
    shutil.copy2(ROOT / "scripts" / "attest_subjects.py", subjects.workspace / "scripts")
    listed = run_job(subjects, store)
    (subject,) = json.loads(listed.outputs["subjects"])["include"]
    assert WHEEL_RE.fullmatch(subject["name"]), subject["name"]
    assert subject["folder"] == "cpu"
    needs["subjects"] = {"result": "success", "outputs": dict(listed.outputs)}
    # attest: GitHub's Sigstore signs (actions/attest does not run here: tests/integration/test_release_provenance.py
    # runs these jobs with a Sigstore instance of its own); without its artifact the release publishes no provenance
    needs["attest"] = {"result": "success", "outputs": {}}
    assert condition(_if("release"), {**base, "needs": needs}, Status())
    release = Job(workflow=WHEELS, job="release", workspace=tmp_path / "release", contexts={**base, "needs": needs})
    released = run_job(release, store)
    assert released.skipped == ["Publish to the release"]  # DSWHEELS_PUBLISH_DIR: the directory instead
    assert released.ran == [
        "actions/download-artifact",
        "The attestations, beside their wheels",
        "Publish to the directory",
    ]


def _check_container(build: Job, entry: dict[str, Value], tmp_path: Path) -> None:
    """The job ran in the plan's pinned manylinux image, with the image's Pythons and the plan's gcc-toolset first
    on PATH; the manifest records the toolset the plan chose and the compiler that ran."""
    image = COMPAT.runner_images["manylinux_2_28"]
    assert build.container == image.container == entry["container"]
    assert "@sha256:" in build.container
    assert entry["runs_on"] == ["ubuntu-24.04"]
    toolset = entry["gcc_toolset"]
    assert toolset == image.gcc[0]  # a CPU cell: the image's default toolset
    assert (tmp_path / "dnf.log").read_text(encoding="utf-8").split() == [
        "install",
        "-y",
        "-q",
        f"gcc-toolset-{toolset}-gcc-c++",
        f"gcc-toolset-{toolset}-binutils",
    ]
    # the last line a step adds to GITHUB_PATH comes first: the toolset, then dswheels' Python, then the cell's
    assert build.paths == [
        f"/opt/rh/gcc-toolset-{toolset}/root/usr/bin",
        "/opt/python/cp312-cp312/bin",
        "/opt/python/cp311-cp311/bin",
    ]
    (manifest,) = (build.workspace / "wheelhouse").rglob("*.manifest.json")
    recorded = json.loads(manifest.read_text())
    planned = recorded["plan"]["toolchain"]
    assert (planned["host_compiler"]["version"], planned["gcc_toolset"], planned["container"]) == (
        toolset,
        True,
        image.container,
    )
    assert recorded["toolchain"]["cxx"].startswith("c++ (")  # the compiler that ran (this machine's, standing in)
    assert WHEEL_RE.fullmatch(recorded["wheel"]["filename"]), recorded["wheel"]["filename"]


def _check_rerun_restores(
    tmp_path: Path,
    *,
    base: dict[str, Value],
    needs: dict[str, Value],
    entry: dict[str, Value],
    machine: dict[str, str],
    store: Artifacts,
    caches: Caches,
) -> None:
    """ "Re-run failed jobs" on a fresh runner (attempt 2): the job restores the entry the first attempt saved,
    newest first by its restore keys, and its build takes every unit from it; it saves one entry more."""
    rerun_store = Artifacts(tmp_path / "rerun-artifacts")
    shutil.copytree(store.root / "plan", rerun_store.root / "plan")
    github = {**as_map(base["github"], "github"), "run_attempt": "2"}
    rerun = Job(
        workflow=WHEELS,
        job="build",
        workspace=tmp_path / "build-rerun",
        contexts={**base, "github": github, "needs": needs, "matrix": entry},
        extra_env=machine,
        stand_ins=_stand_ins(tmp_path),
    )
    try:
        again = run_job(rerun, rerun_store, caches=caches)
    finally:
        stop_sccache({**os.environ, **machine})  # the re-run's build started its own server on this port
    assert "Build" in again.ran
    restored = rerun.runs["Restore the compiler cache"].outputs
    assert restored["cache-hit"] == "false"  # another attempt, another key: restored through its restore keys
    assert restored["cache-matched-key"] == caches.entries[0].key
    (manifest,) = (rerun.workspace / "wheelhouse").rglob("*.manifest.json")
    cache = json.loads(manifest.read_text())["compiler_cache"]
    assert cache["tool"] == "sccache"
    assert cache["hits"] >= 2, cache  # cpu_adam's two units, compiled by the first attempt
    assert cache["misses"] == 0, cache
    assert [e.job for e in caches.entries] == ["build", "build"]  # one entry per job, never one per object
    assert caches.entries[1].key.endswith("-4242-2")


def _check_published(published: Path, site: Path, tmp_path: Path) -> None:
    """The release job published the one wheel with its manifest, tagged with the floor auditwheel gives it; the
    site links it and pip finds it for that platform."""
    (wheel,) = (p.name for p in published.rglob("*.whl"))
    tag = WHEEL_RE.fullmatch(wheel)
    assert tag is not None, wheel
    verdict = judge_floor(next(published.rglob(wheel)), COMPAT.torch_provided_libraries, error=VerifyError)
    assert verdict.tag == tag[1]
    assert sorted(p.name for p in published.rglob("*.manifest.json")) == [wheel.removesuffix(".whl") + ".manifest.json"]
    digest = hashlib.sha256(next(published.rglob(wheel)).read_bytes()).hexdigest()
    text = "\n".join(p.read_text(encoding="utf-8") for p in site.rglob("index.html"))
    assert re.search(rf"{re.escape(wheel.replace('+', '%2B'))}#sha256={digest}", text)
    _pip_resolves(site / "whl" / PARTITION / "simple", tmp_path / "pip-download", wheel, tag[1])


def _check_tag_push(tmp_path: Path, base: dict[str, Value], machine: dict[str, str], published: Path) -> None:
    """A tag push of that version: the wheel is published, nothing is planned, nothing after the plan runs."""
    after_parts = Status(success=False)  # a job after a skipped one: success() is false (actions/runner#491)
    tag_ctx: dict[str, Value] = {
        **base,
        "github": {**as_map(base["github"], "github"), "event_name": "push", "ref_name": "v0.19.8"},
        "inputs": {},
    }
    tag = run_job(
        Job(workflow=WHEELS, job="plan", workspace=tmp_path / "tag-plan", contexts=tag_ctx, extra_env=machine),
        Artifacts(tmp_path / "tag-artifacts"),
    )
    tag_outputs = tag.outputs
    assert json.loads(tag_outputs["matrix"]) == {"include": []}
    assert f"1 of 1 planned cells already published at {published}" in tag.steps["plan"].summary
    tag_needs: dict[str, Value] = {
        "plan": {"result": "success", "outputs": dict(tag_outputs)},
        "parts": {"result": "skipped", "outputs": {}},
    }
    assert not condition(_if("build"), {**tag_ctx, "needs": tag_needs}, after_parts)
    tag_needs |= {"build": {"result": "skipped", "outputs": {}}, "smoke": {"result": "skipped", "outputs": {}}}
    assert not condition(_if("subjects"), {**tag_ctx, "needs": tag_needs}, after_parts)
    tag_needs |= {"subjects": {"result": "skipped", "outputs": {}}, "attest": {"result": "skipped", "outputs": {}}}
    assert not condition(_if("attest"), {**tag_ctx, "needs": tag_needs}, after_parts)
    assert not condition(_if("release"), {**tag_ctx, "needs": tag_needs}, after_parts)


def _pip_resolves(index: Path, dest: Path, wheel: str, platform: str) -> None:
    """pip, told only about the deployed partition, finds and downloads exactly the wheel."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--isolated",
            "--no-deps",
            "--only-binary",
            ":all:",
            "--index-url",
            index.as_uri() + "/",
            "--dest",
            str(dest),
            "--python-version",
            "3.11",
            "--platform",
            platform,
            f"deepspeed=={VERSION}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert sorted(p.name for p in dest.glob("*.whl")) == [wheel]


def _cuda_step(
    tmp_path: Path, dswheels_cache: Path, *, matrix: str, platform: str
) -> tuple[dict[str, Value], Job, list[str]]:
    """A dispatch of one torch 2.14 cu130 cell of ``matrix`` on ``platform``: its plan job's entry, and its build
    job after the CUDA step ran against tests/data/cuda-redist on loopback (the paths fetched)."""
    base, machine = _dispatched(tmp_path, dswheels_cache)
    inputs = {**INPUTS, "torch": "2.14", "cuda": "cu130", "platform": platform, "publish": "false"}
    declared = as_map(as_map(as_map(WHEELS["on"], "on")["workflow_dispatch"], "wd")["inputs"], "inputs")
    base["inputs"] = validate_inputs(declared, inputs)
    redist = DATA / "cuda-redist"
    with StaticServer(redist) as server:
        base["vars"] = {
            **as_map(base["vars"], "vars"),
            "DSWHEELS_MATRIX": str(DATA / matrix),
            "DSWHEELS_CUDA_REDIST_URL": server.url,  # the repository variable: a mirror of NVIDIA's folder
        }
        plan = run_job(
            Job(workflow=WHEELS, job="plan", workspace=tmp_path / "plan", contexts=base, extra_env=machine),
            Artifacts(tmp_path / "artifacts"),
        )
        (entry,) = json.loads(plan.outputs["matrix"])["include"]
        # the test JSON is not NVIDIA's (its archives are rebuilt): the runner is told its digest
        pin = hashlib.sha256((redist / "redistrib_13.0.3.json").read_bytes()).hexdigest()
        build = Job(
            workflow=WHEELS,
            job="build",
            workspace=tmp_path / "build",
            contexts={**base, "matrix": entry},
            extra_env={**machine, "DSWHEELS_CUDA_REDIST_SHA256": pin},
        )
        step = build.run("CUDA toolkit")
        assert step.ran
        fetched = sorted(r.path for r in server.log if r.status == 200)
    return entry, build, fetched


def test_an_aarch64_cells_job_runs_on_the_arm64_runner_with_nvidias_sbsa_archives(tmp_path: Path) -> None:
    """A linux_aarch64 CUDA cell: the plan job puts its build job in pypa's manylinux_2_28_aarch64 container (pinned
    by digest) on GitHub's arm64 runner, and that job's CUDA step, as written, installs NVIDIA's linux-sbsa archives
    (the arm64 server toolkit), whatever the machine running the step is: the plan's platform names them."""
    # a cache of its own: the shared one would hand it the JSON the other CUDA test fetched (by its digest)
    cache = tmp_path / "cache"
    entry, build, fetched = _cuda_step(tmp_path, cache, matrix="matrix-aarch64.yml", platform="linux_aarch64")
    assert entry["platform"] == "linux_aarch64"
    assert entry["runs_on"] == ["ubuntu-24.04-arm"]
    image = COMPAT.runner_images["manylinux_2_28_aarch64"]
    assert build.container == image.container == entry["container"]
    assert image.container.startswith("quay.io/pypa/manylinux_2_28_aarch64@sha256:")
    assert entry["cells"] == "ds0.19.8-torch2.14-cu130-cp311-linux_aarch64"
    assert entry["cuda_toolkit"] == "13.0.3"
    archives = [p for p in fetched if p.endswith((".tar.xz", ".zip"))]
    assert archives
    assert all("/linux-sbsa/" in p for p in archives), archives
    assert len(archives) == len(str(entry["cuda_components"]).split())
    root = Path(build.exported["CUDA_HOME"])
    marker = json.loads((root / ".dswheels-cuda.json").read_text(encoding="utf-8"))
    assert marker["platform"] == "linux-sbsa"
    # nvcc.profile's target folder on an arm64 server, and DeepSpeed's lib64
    assert (root / "targets" / "sbsa-linux" / "include" / "cuda_runtime.h").is_file()
    assert (root / "lib64").is_symlink()


def test_the_build_jobs_cuda_step_installs_the_planned_toolkit_from_nvidias_archives(tmp_path: Path) -> None:
    """The plan job plans a CUDA cell; its build job's CUDA step, as written, installs what the plan
    names from the redist folder (tests/data/cuda-redist on loopback, a mirror for the runner) and
    the steps after it see CUDA_HOME and nvcc on PATH. The compile itself is the CPU chain's above."""
    # a cache of its own: a kept one (DSWHEELS_TEST_CACHE), or the aarch64 test's, holds the JSON by its digest
    # from an earlier run, and the step would not fetch it
    base, machine = _dispatched(tmp_path, tmp_path / "cache")
    inputs = {**INPUTS, "torch": "2.14", "cuda": "cu130", "publish": "false"}
    declared = as_map(as_map(as_map(WHEELS["on"], "on")["workflow_dispatch"], "wd")["inputs"], "inputs")
    base["inputs"] = validate_inputs(declared, inputs)
    redist = DATA / "cuda-redist"
    with StaticServer(redist) as server:
        base["vars"] = {
            **as_map(base["vars"], "vars"),
            "DSWHEELS_MATRIX": str(DATA / "matrix-cuda.yml"),
            "DSWHEELS_CUDA_REDIST_URL": server.url,  # the repository variable: a mirror of NVIDIA's folder
        }
        plan = run_job(
            Job(workflow=WHEELS, job="plan", workspace=tmp_path / "plan", contexts=base, extra_env=machine),
            Artifacts(tmp_path / "artifacts"),
        )
        (entry,) = json.loads(plan.outputs["matrix"])["include"]
        assert entry["cuda_toolkit"] == "13.0.3"
        assert entry["cuda_components"].split()[:2] == ["cuda_nvcc", "cuda_cudart"]
        # the test JSON is not NVIDIA's (its archives are rebuilt): the runner is told its digest
        pin = hashlib.sha256((redist / "redistrib_13.0.3.json").read_bytes()).hexdigest()
        build = Job(
            workflow=WHEELS,
            job="build",
            workspace=tmp_path / "build",
            contexts={**base, "matrix": entry},
            extra_env={**machine, "DSWHEELS_CUDA_REDIST_SHA256": pin},
        )
        step = build.run("CUDA toolkit")
        assert step.ran
        fetched = sorted(r.path for r in server.log if r.status == 200)
    root = Path(build.exported["CUDA_HOME"])
    assert build.exported["CUDA_PATH"] == str(root)
    assert build.paths == [str(root / "bin")]
    assert root == build.temp / "cuda"  # $RUNNER_TEMP/cuda: a short root (Windows' cl and nvcc)
    for name in ("bin/nvcc", "include/cuda_runtime.h", "include/cccl/cub/cub.cuh", "include/cuda_profiler_api.h"):
        assert (root / name).is_file(), name
    assert "/redistrib_13.0.3.json" in fetched
    assert len([p for p in fetched if p.endswith(".tar.xz")]) == len(entry["cuda_components"].split())
    assert not [p for p in fetched if p.endswith(".zip")]  # the Linux leg takes the Linux archives only
    # a later step of the job finds the toolkit as `dswheels build` does: CUDA_HOME, and nvcc on PATH
    seen = subprocess.run(
        ["bash", "-c", "command -v nvcc && nvcc --version"],
        env=build._process_env({}, {k: tmp_path / k for k in ("output", "summary", "env", "path")}),
        capture_output=True,
        text=True,
        check=True,
    )
    assert seen.stdout.splitlines()[0] == str(root / "bin" / "nvcc")
    assert "release 13.0, V13.0.88" in seen.stdout
