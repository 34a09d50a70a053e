"""``dswheels verify`` and ``dswheels smoke`` on the wheels the build module made, and on tampered copies."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from dswheels.kernel.manifest import parse_manifest, render_manifest
from dswheels.kernel.naming import parse_cell_id
from dswheels.kernel.wheel_contents import dist_info_dir, render_record
from tests.integration.conftest import Built, build_env, dswheels, record_time
from tests.support.readme import README_CACHE, README_CWD, check_example

pytestmark = pytest.mark.integration


def _verify(cache: Path, *args: str) -> tuple[int, str, str, float]:
    start = time.monotonic()
    result = dswheels("verify", *args, "--torch-index", "pip", env=build_env(cache))
    return result.returncode, result.stdout, result.stderr, time.monotonic() - start


def test_verify_cpu_wheel(cpu_build: Built, dswheels_cache: Path, tmp_path: Path) -> None:
    """The README's example: no wheel named, so the one build wrote (wheelhouse/) is verified."""
    report = tmp_path / "verify.json"
    argv = ("verify", "--torch-index", "pip", "--report", str(report))
    start = time.monotonic()
    result = dswheels(*argv, env=build_env(dswheels_cache), cwd=cpu_build.cwd)
    code, out, err = result.returncode, result.stdout, result.stderr
    record_time("verify cpu wheel (static + fresh venv)", time.monotonic() - start)
    assert code == 0, out + err
    places = {str(cpu_build.cwd): README_CWD, str(tmp_path): README_CWD, str(dswheels_cache): README_CACHE}
    check_example("verify", argv=argv, output=out + err, places=places)
    data = json.loads(report.read_text())["wheels"][0]
    assert data["ok"] is True
    assert data["expected_from"] == "manifest"
    static = {c["name"]: c for c in data["static"]}
    for name in (
        "filename",
        "version label",
        "torch pin",
        "accelerator",
        "torch_info",
        "installed ops",
        "extensions",
        "manifest sha256",
        "portable op_builder",
        "no -march=native",
    ):
        assert static[name]["ok"], static[name]
    assert any(n.startswith("cpu baseline ") for n in static)
    runtime = data["runtime"]
    assert runtime["torch"].startswith("2.13.")
    built = sorted(op["name"] for op in json.loads(cpu_build.manifest.read_text())["ops"]["built"])
    assert sorted(runtime["ds_report"]["installed"]) == built
    checks = {c["name"]: c for c in runtime["checks"]}
    assert checks["no JIT"]["ok"]
    assert all(checks[f"load {op}"]["ok"] for op in built)
    assert "from the wheel" in checks["load cpu_adam"]["detail"]
    assert runtime["loads"]["ops"]["cpu_adam"]["loaded"] == "deepspeed.ops.adam.cpu_adam_op"
    assert "compiled w. 'torch 2.13'" in checks["ds_report"]["detail"]
    assert "verified 1 wheel(s)" in out


def test_verify_cuda_wheel_without_gpu(cuda_build: Built, dswheels_cache: Path) -> None:
    code, out, err, seconds = _verify(dswheels_cache, str(cuda_build.wheel))
    record_time("verify cuda wheel (static + fresh venv, DS_ACCELERATOR=cuda)", seconds)
    assert code == 0, out + err
    assert "DS_ACCELERATOR=cuda" in out
    assert re.search(r"ok\s+load fused_adam: deepspeed.ops.adam.fused_adam_op from the wheel", out)
    assert re.search(r"ok\s+gpu code fused_adam_op", out)
    assert "compiled w. 'torch 2.14, cuda 13.0'" in out


def test_smoke_cpu_wheel(cpu_build: Built, dswheels_cache: Path, tmp_path: Path) -> None:
    report = tmp_path / "smoke.json"
    start = time.monotonic()
    argv = ("smoke", str(cpu_build.wheel), "--torch-index", "pip", "--steps", "12", "--report", str(report))
    result = dswheels(*argv, env=build_env(dswheels_cache), cwd=cpu_build.cwd)
    record_time("smoke cpu wheel (4 runs + Adam check)", time.monotonic() - start)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-3000:]
    places = {str(cpu_build.cwd): README_CWD, str(tmp_path): README_CWD, str(dswheels_cache): README_CACHE}
    check_example("smoke-cpu", argv=argv, output=result.stdout + result.stderr, places=places)
    report_data = json.loads(report.read_text())
    assert (report_data["schema"], report_data["ok"]) == ("dswheels.smoke/2", True)
    (data,) = report_data["wheels"]
    assert data["device"] == "cpu"
    runs = {r["name"]: r for r in data["runs"]}
    assert {r["stage"] for r in runs.values()} == {0, 1, 2, 3}
    for run in runs.values():
        assert run["ok"], run
        assert run["loss_last"] < run["loss_first"]
        assert run["samples_per_s"] > 0
        assert run["peak_memory_mb"] > 0
        assert run["jit"] == []
    assert runs["zero1-offload-cpuadam"]["optimizer"] == "DeepSpeedCPUAdam"
    assert runs["zero0-torch-adamw"]["optimizer"] == "AdamW"
    assert data["adam"]["ok"]
    assert data["adam"]["max_abs_diff"] <= 1e-4
    assert "| zero3-offload-cpuadam | 3 | ok |" in result.stdout


def test_smoke_refuses_a_cuda_wheel_without_gpu(cuda_build: Built, dswheels_cache: Path) -> None:
    result = dswheels(
        "smoke", str(cuda_build.wheel), "--torch-index", "pip", "--device", "cpu", env=build_env(dswheels_cache)
    )
    assert result.returncode == 9, result.stderr
    assert "run smoke on the GPU runner" in result.stderr


# --- negative cases: real wheels, tampered -------------------------------------------------------


def _rewrite(src: Path, dest: Path, edit: Callable[[str, bytes], tuple[str, bytes]]) -> Path:
    """Copy a wheel with every member passed through ``edit`` (name, data) and a correct RECORD."""
    with zipfile.ZipFile(src) as zf:
        members = [edit(info.filename, zf.read(info)) for info in zf.infolist()]
    names = [n for n, _ in members]
    dist_info = dist_info_dir(names)
    record_path = f"{dist_info}/RECORD"
    members = [(n, d) for n, d in members if n != record_path]
    members.append((record_path, render_record(members, record_path=record_path).encode()))
    dest.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            zf.writestr(name, data)
    return dest


def _manifest_for(built: Built, wheel: Path, *, cell_id: str | None = None, **changes: object) -> None:
    """The built wheel's manifest for ``wheel``; ``cell_id``: claiming another cell (its plan's cell too)."""
    import hashlib

    manifest = parse_manifest(built.manifest.read_text())
    if cell_id is not None:
        plan = dataclasses.replace(manifest.plan, cell=parse_cell_id(cell_id))
        manifest = dataclasses.replace(manifest, cell_id=cell_id, plan=plan)
    data = json.loads(render_manifest(manifest))
    data["wheel"] = {
        "filename": wheel.name,
        "size": wheel.stat().st_size,
        "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
    }
    data.update(changes)
    (wheel.parent / (wheel.name.removesuffix(".whl") + ".manifest.json")).write_text(json.dumps(data))


def test_op_list_short_of_the_manifest_fails(cpu_build: Built, dswheels_cache: Path, tmp_path: Path) -> None:
    wheel = tmp_path / cpu_build.wheel.name
    shutil.copyfile(cpu_build.wheel, wheel)
    data = json.loads(cpu_build.manifest.read_text())
    data["ops"]["built"].append(
        {
            "name": "cpu_lion",
            "env": "DS_BUILD_CPU_LION",
            "extension": "deepspeed/ops/lion/cpu_lion_op.so",
            "module": "deepspeed.ops.lion.cpu_lion_op",
            "size": 1,
            "seconds": 1.0,
        },
    )
    _manifest_for(cpu_build, wheel, ops=data["ops"])
    code, _out, err, _s = _verify(dswheels_cache, str(wheel), "--static")
    assert code == 6
    assert "installed ops: installed_ops:" in err
    assert "short of the manifest's list by cpu_lion" in err


def test_cpu_accelerator_labelled_cuda_fails(cpu_build: Built, dswheels_cache: Path, tmp_path: Path) -> None:
    old, new = "0.19.8+cputorch2.13", "0.19.8+cu130torch2.13"

    def relabel(name: str, data: bytes) -> tuple[str, bytes]:
        name = name.replace(f"deepspeed-{old}.dist-info", f"deepspeed-{new}.dist-info")
        if name.endswith(("METADATA", "git_version_info_installed.py")):
            data = data.replace(old.encode(), new.encode())
        return name, data

    wheel = _rewrite(cpu_build.wheel, tmp_path / cpu_build.wheel.name.replace(old, new), relabel)
    _manifest_for(cpu_build, wheel, cell_id="ds0.19.8-torch2.13-cu130-cp311-linux_x86_64")
    code, _out, err, _s = _verify(dswheels_cache, str(wheel), "--static")
    assert code == 6
    assert "accelerator: accelerator_name 'cpu', but the wheel is labelled cu130torch2.13" in err
    assert "JIT-compiled" in err
    assert "torch_info: built with torch 2.13, CUDA 0.0; the label says torch 2.13, CUDA 13.0" in err


def test_wheel_for_another_torch_minor_fails(cpu_build: Built, dswheels_cache: Path) -> None:
    """The CPU wheel (torch 2.13) in an environment with torch 2.14: DeepSpeed refuses its ops."""
    code, out, err, seconds = _verify(dswheels_cache, str(cpu_build.wheel), "--torch-version", "2.14.1")
    record_time("verify with another torch minor", seconds)
    assert code == 6, out + err
    assert "runtime torch: the environment has torch 2.14.1" in err
    assert "the wheel is built for torch 2.13" in err
    assert "PyTorch version mismatch" in err


def test_loading_that_falls_back_to_jit_fails(cuda_build: Built, dswheels_cache: Path) -> None:
    """A CUDA wheel on a GPU-less host without DS_ACCELERATOR=cuda: DeepSpeed would JIT-compile every op."""
    code, out, err, seconds = _verify(dswheels_cache, str(cuda_build.wheel), "--accelerator", "none")
    record_time("verify cuda wheel without DS_ACCELERATOR", seconds)
    assert code == 6, out + err
    assert "load fused_adam: " in err
    assert "would be JIT-compiled" in err
    assert "run-time accelerator cpu, the wheel's cuda" in err
