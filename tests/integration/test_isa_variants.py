"""The CPU ops built once per ISA level, for real: the CPU reference wheel's cpu_adam, loaded here, forced to each
level, under qemu-x86_64 with CPU models that lack AVX (Nehalem) and AVX-512 (Haswell), and a variant with an
instruction above its level planted, which ``verify`` must fail.

Under qemu-user torch's CPU capability is the emulated model's (its cpuinfo reads CPUID, which qemu answers
for the model: DEFAULT for Nehalem, AVX2 for Haswell), while ``/proc/cpuinfo`` is still the host's. numpy's
OpenBLAS picks its kernels from the host's (OPENBLAS_VERBOSE=2 says "Core: Haswell" under -cpu Nehalem here)
and dies with SIGILL in numpy's import-time self-test, so the runs pin it to the model's
(``OPENBLAS_CORETYPE``): that is OpenBLAS under emulation, not our wheel. A whole Python with torch and
DeepSpeed is slow under TCG (a minute or more): one small step check per model.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from dswheels.kernel.binaries.isa import scan_disassembly
from dswheels.kernel.compat import load_compat
from dswheels.kernel.isa_variants import DISPATCH_MODULE, parse_variant_table
from dswheels.kernel.manifest import parse_manifest
from tests.conftest import require
from tests.integration.conftest import Built, build_env, dswheels, record_time
from tests.integration.test_verify import _manifest_for, _rewrite

pytestmark = pytest.mark.integration

QEMU = shutil.which("qemu-x86_64")
LEVELS = ("default", "avx2", "avx512")
ADAM = "deepspeed.ops.adam.cpu_adam_op"
# DeepSpeedCPUAdam against torch.optim.AdamW as DeepSpeed's own test compares them (tests/unit/ops/adam/
# test_cpu_adam.py, _compare_optimizers: 10 steps, the norms within 1% of the reference's), plus which variant
# was loaded and torch's answer; JIT compilation is forbidden (dswheels.probes.no_jit)
STEP_CHECK = """
import importlib.util, json, sys, torch
spec = importlib.util.spec_from_file_location("no_jit", sys.argv[1])
no_jit = importlib.util.module_from_spec(spec); spec.loader.exec_module(no_jit); no_jit.forbid_jit()
from deepspeed.ops.adam import DeepSpeedCPUAdam
from deepspeed.ops.op_builder import CPUAdamBuilder
torch.manual_seed(0)
size = 1024
ours = torch.nn.Parameter(torch.randn(size)); ref = torch.nn.Parameter(ours.detach().clone())
a, b = DeepSpeedCPUAdam([ours]), torch.optim.AdamW([ref])
for _ in range(10):
    ours.grad = torch.randn(size); ref.grad = ours.grad.clone()
    a.step(); b.step()
op = CPUAdamBuilder().load()
print("RESULT " + json.dumps({"capability": torch.backends.cpu.get_cpu_capability(), "module": op.__name__,
    "variant": op.__dswheels_variant__, "norm": float(ours.detach().norm()), "ref_norm": float(ref.detach().norm()),
    "max_abs_diff": float((ours.detach() - ref.detach()).abs().max())}))
"""


def _members(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def _variant_files(files: dict[str, bytes]) -> dict[str, str]:
    """level suffix -> cpu_adam's extension file of that variant."""
    return {
        s: next(n for n in files if n.startswith(f"deepspeed/ops/adam/cpu_adam_op_{s}.") and n.endswith(".so"))
        for s in LEVELS
    }


def test_cpu_adam_is_built_per_level_and_shm_once(cpu_build: Built, tmp_path: Path) -> None:
    files = _members(cpu_build.wheel)
    table = parse_variant_table(files[DISPATCH_MODULE].decode())
    assert table.levels == (("default", "x86-64-v2"), ("avx2", "x86-64-v3"), ("avx512", "x86-64-v4"))
    assert table.ops == {"cpu_adam": ADAM}  # shm_comm's builder asks no cpu_arch(): it picks its kernels itself
    assert "load_into(globals())" in files["deepspeed/ops/adam/cpu_adam_op.py"].decode()
    assert not [n for n in files if n.startswith("deepspeed/ops/adam/cpu_adam_op.") and n.endswith(".so")]
    assert [n for n in files if n.startswith("deepspeed/ops/comm/deepspeed_shm_comm_op.")]
    variants = _variant_files(files)
    manifest = parse_manifest(cpu_build.manifest.read_text())
    adam = next(op for op in manifest.ops_built if op.name == "cpu_adam")
    assert adam.module == ADAM
    assert [(v.suffix, v.level, v.extension) for v in adam.variants] == [(s, lv, variants[s]) for s, lv in table.levels]
    assert adam.size == sum(v.size for v in adam.variants) == sum(len(files[variants[s]]) for s in LEVELS)
    # each variant against its own level, disassembled here, independently of the build's own check
    forbidden = {name: b.forbidden_registers for name, b in load_compat().cpu_baselines.items()}
    zmm = {}
    for suffix, level in table.levels:
        so = tmp_path / f"{suffix}.so"
        so.write_bytes(files[variants[suffix]])
        dis = subprocess.run(["objdump", "-d", str(so)], capture_output=True, text=True, check=True).stdout
        assert "cpuid" not in dis.split()  # no run-time detection of its own: its level is all that guards it
        report = scan_disassembly(dis, forbidden[level])
        assert report.violations == 0, (suffix, report.examples)
        zmm[suffix] = dis.count("%zmm")
        if suffix == "default":  # the baseline scan of each higher level must find what makes it higher
            assert scan_disassembly(dis, forbidden["x86-64-v2"]).ok
        else:
            assert not scan_disassembly(dis, forbidden["x86-64-v2"]).ok
    assert zmm["default"] == zmm["avx2"] == 0
    assert zmm["avx512"] > 100  # the AVX-512 paths of simd.h, not a scalar build under another name


def _venv(root: Path, wheel: Path) -> Path:
    uv = shutil.which("uv")
    require(uv is not None, "uv on PATH (the test group installs it)")
    assert uv is not None
    python = root / "bin" / "python"
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(root)], check=True)
    links = ["--find-links", "/opt/wheels"] if Path("/opt/wheels").is_dir() else []
    done = subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(python), *links, "torch==2.13.0", str(wheel)], check=False
    )
    require(done.returncode == 0, "torch==2.13.0 installable (network or /opt/wheels)")
    return python


@pytest.fixture(scope="module")
def wheel_python(cpu_build: Built, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with torch 2.13 and the CPU reference wheel."""
    return _venv(tmp_path_factory.mktemp("isa-venv") / "v", cpu_build.wheel)


def _step_check(python: Path, tmp: Path, *, prefix: tuple[str, ...] = (), **env: str) -> dict[str, object]:
    """Run :data:`STEP_CHECK` (under ``prefix``: qemu) with JIT forbidden and an empty TORCH_EXTENSIONS_DIR."""
    from dswheels.probes import no_jit

    ext = tmp / "ext"
    ext.mkdir(exist_ok=True)
    script = tmp / "step_check.py"
    script.write_text(STEP_CHECK)
    base = {k: v for k, v in os.environ.items() if k not in {"ATEN_CPU_CAPABILITY", "TORCH_EXTENSIONS_DIR"}}
    done = subprocess.run(
        [*prefix, str(python), str(script), no_jit.__file__],
        capture_output=True,
        text=True,
        env={**base, "DS_ACCELERATOR": "cpu", "TORCH_EXTENSIONS_DIR": str(ext), **env},
        cwd=tmp,
        timeout=1800,
        check=False,
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert not list(ext.iterdir()), "something was JIT-compiled"
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("RESULT "))
    result: dict[str, object] = json.loads(line.removeprefix("RESULT "))
    norm, ref = float(result["norm"]), float(result["ref_norm"])  # type: ignore[arg-type]
    assert abs(norm - ref) <= ref * 1e-2, result  # DeepSpeed's own tolerance (_compare_optimizers)
    assert float(result["max_abs_diff"]) < 1e-3, result  # type: ignore[arg-type]  # and element by element
    assert result["module"] == ADAM
    return result


def _expected_here() -> str:
    flags = set(Path("/proc/cpuinfo").read_text().split("flags", 1)[1].split("\n", 1)[0].split())
    if {"avx512vl", "avx512bw", "avx512dq", "fma"} <= flags:
        return "avx512"
    return "avx2" if {"avx2", "fma"} <= flags else "default"


def test_each_level_loads_as_torch_says_and_steps_like_adamw(wheel_python: Path, tmp_path: Path) -> None:
    here = _step_check(wheel_python, tmp_path)
    assert here["variant"] == _expected_here(), here
    assert here["capability"] == str(here["variant"]).upper()
    for forced in ("default", "avx2"):  # torch's own override: never a variant above what it says
        result = _step_check(wheel_python, tmp_path, ATEN_CPU_CAPABILITY=forced)
        assert (result["capability"], result["variant"]) == (forced.upper(), forced), result


def test_ds_report_says_which_variant_loads(wheel_python: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    done = subprocess.run(
        [str(wheel_python), "-m", "deepspeed.env_report"],
        capture_output=True,
        text=True,
        env={**env, "ATEN_CPU_CAPABILITY": "default", "DS_ACCELERATOR": "cpu"},
        cwd=tmp_path,
        check=True,
        timeout=600,
    )
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("cpu op isa variants"))
    assert "default (x86-64-v2) of default, avx2, avx512; torch CPU capability DEFAULT; ops: cpu_adam" in line


@pytest.mark.parametrize(("model", "want"), [("Nehalem", "default"), ("Haswell", "avx2")])
def test_under_qemu_the_model_picks_the_variant(wheel_python: Path, tmp_path: Path, model: str, want: str) -> None:
    """No AVX (Nehalem, x86-64-v2): the baseline loads and steps with no SIGILL; AVX2 (Haswell): the AVX2 variant."""
    require(QEMU is not None, "qemu-x86_64 (Debian: apt install qemu-user)")
    assert QEMU is not None
    import time

    start = time.monotonic()
    result = _step_check(wheel_python, tmp_path, prefix=(QEMU, "-cpu", model), OPENBLAS_CORETYPE=model)
    record_time(f"cpu_adam step check under qemu-x86_64 -cpu {model}", time.monotonic() - start)
    assert (result["capability"], result["variant"]) == (want.upper(), want), result


def _plant(cpu_build: Built, tmp_path: Path, swap: tuple[str, str]) -> Path:
    """A copy of the wheel whose ``swap[0]`` variant of cpu_adam holds the ``swap[1]`` variant's code, with a
    manifest that describes it."""
    files = _members(cpu_build.wheel)
    variants = _variant_files(files)
    target, source = variants[swap[0]], variants[swap[1]]
    dest = tmp_path / "planted" / cpu_build.wheel.name
    wheel = _rewrite(cpu_build.wheel, dest, lambda n, d: (n, files[source] if n == target else d))
    _manifest_for(cpu_build, wheel)
    return wheel


def test_a_variant_above_its_level_fails_verify(cpu_build: Built, dswheels_cache: Path, tmp_path: Path) -> None:
    wheel = _plant(cpu_build, tmp_path, ("avx2", "avx512"))
    done = dswheels("verify", "--static", str(wheel), env=build_env(dswheels_cache))
    assert done.returncode == 6, done.stdout + done.stderr
    assert "FAILED  cpu level cpu_adam_op_avx2: " in done.stdout
    assert "above x86-64-v3 (AVX-512 instructions" in done.stdout
    # the original passes the same check
    done = dswheels("verify", "--static", str(cpu_build.wheel), env=build_env(dswheels_cache))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok      cpu level cpu_adam_op_avx2: " in done.stdout


def test_a_missing_dispatch_or_variant_fails_verify(cpu_build: Built, dswheels_cache: Path, tmp_path: Path) -> None:
    files = _members(cpu_build.wheel)
    gone = _variant_files(files)["avx2"]
    wheel = _rewrite(cpu_build.wheel, tmp_path / "a" / cpu_build.wheel.name, lambda n, d: (n, d))
    with zipfile.ZipFile(wheel) as zf:
        kept = {n: zf.read(n) for n in zf.namelist() if n not in {gone, "deepspeed/ops/adam/cpu_adam_op.py"}}
    shutil.rmtree(wheel.parent)
    wheel = _rewrite_members(kept, tmp_path / "b" / cpu_build.wheel.name)
    _manifest_for(cpu_build, wheel)
    done = dswheels("verify", "--static", str(wheel), env=build_env(dswheels_cache))
    assert done.returncode == 6, done.stdout + done.stderr
    assert "FAILED  isa variants: cpu_adam: no deepspeed/ops/adam/cpu_adam_op.py" in done.stdout
    assert "no extension for deepspeed.ops.adam.cpu_adam_op_avx2" in done.stdout


def _rewrite_members(members: dict[str, bytes], dest: Path) -> Path:
    from dswheels.kernel.wheel_contents import dist_info_dir, render_record

    record = f"{dist_info_dir(list(members))}/RECORD"
    rows = [(n, d) for n, d in members.items() if n != record]
    dest.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in [*rows, (record, render_record(rows, record_path=record).encode())]:
            zf.writestr(name, data)
    return dest


def test_inspect_shows_the_variants_and_which_loads_here(cpu_build: Built, dswheels_cache: Path) -> None:
    env = {**build_env(dswheels_cache)}
    env.pop("ATEN_CPU_CAPABILITY", None)
    done = dswheels("inspect", str(cpu_build.wheel), "--format", "json", env=env)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)["wheels"][0]
    variants = data["isa_variants"]
    assert variants["ops"] == {"cpu_adam": ADAM}
    assert variants["loads_here"] == _expected_here()
    levels = {e["isa_variant"]["variant"]: e["cpu"]["level"] for e in data["extensions"] if e["isa_variant"]}
    assert levels == {"default": "x86-64-v2", "avx2": "x86-64-v3", "avx512": "x86-64-v4"}
    assert not [w for w in data["warnings"] if "variant" in w]
    done = dswheels("inspect", str(cpu_build.wheel), env={**env, "ATEN_CPU_CAPABILITY": "default"})
    assert "  loads here       default (torch's CPU capability here: DEFAULT)" in done.stdout
