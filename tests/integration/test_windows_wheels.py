"""``dswheels inspect`` and ``verify --static`` on DeepSpeed's own Windows wheels from PyPI.

DeepSpeed published win_amd64 wheels (MSVC + nvcc builds, 14 prebuilt ops each) for 0.14.5,
0.15.0 and 0.16.3-0.16.5. The tests download them once into the shared test cache and compare
what dswheels reports with an independent reading: binutils' ``objcopy`` cuts the ``.nv_fatb``
section out of each ``.pyd`` and NVIDIA's ``cuobjdump`` (the nvidia-cuda-cuobjdump wheel, a test
dependency) lists the fatbin's cubins and PTX; ``objdump -p`` and pefile list the DLL imports.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path
from typing import Any

import pefile
import pytest

from tests.conftest import require
from tests.integration.conftest import build_env, dswheels

pytestmark = pytest.mark.integration

VERSIONS = ("0.14.5", "0.15.0", "0.16.3", "0.16.4", "0.16.5")
# what the reference recorded (shared/reference/updates-2026-11-24.md); the tests check it too
SASS = {
    "0.14.5": ["sm_60", "sm_61", "sm_70", "sm_80", "sm_86"],
    "0.16.5": ["sm_60", "sm_61", "sm_70", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"],
}
CUDA_OPS = {
    "fused_adam", "fused_lamb", "fused_lion", "quantizer", "random_ltd", "transformer", "stochastic_transformer",
    "spatial_inference", "transformer_inference", "inference_core_ops", "ragged_ops",
}  # fmt: skip
CPU_OPS = {"cpu_adam", "cpu_adagrad", "cpu_lion"}


def _wheel(cache: Path, version: str) -> Path:
    """DeepSpeed's cp311 win_amd64 wheel of ``version``, fetched from PyPI once per cache."""
    folder = cache / "pypi-deepspeed-windows"
    name = f"deepspeed-{version}-cp311-cp311-win_amd64.whl"
    if not (folder / name).is_file():
        result = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--platform", "win_amd64",
             "--python-version", "3.11", f"deepspeed=={version}", "-d", str(folder)],
            capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        require(result.returncode == 0, f"pip download deepspeed=={version} from PyPI: {result.stderr[-500:]}")
    return folder / name


def _cuobjdump() -> Path:
    tool = Path(sysconfig.get_paths()["purelib"]) / "nvidia" / "cu13" / "bin" / "cuobjdump"
    require(tool.is_file(), f"NVIDIA's cuobjdump (the nvidia-cuda-cuobjdump wheel) at {tool}")
    return tool


def _fatbin_listing(pyd: Path, tmp: Path) -> tuple[list[str], list[str]]:
    """(SASS, PTX) archs of a .pyd as objcopy + cuobjdump see them; ([], []) without device code."""
    require(shutil.which("objcopy") is not None, "binutils' objcopy")
    fatbin = tmp / (pyd.name + ".fatbin")
    subprocess.run(["objcopy", "-O", "binary", "--only-section=.nv_fatb", pyd, fatbin], check=True)
    if fatbin.stat().st_size == 0:
        return [], []
    tool = _cuobjdump()
    elf = subprocess.run([tool, "--list-elf", fatbin], capture_output=True, text=True, check=False)
    ptx = subprocess.run([tool, "--list-ptx", fatbin], capture_output=True, text=True, check=False)
    sass = sorted(set(re.findall(r"\.(sm_\d+)[a-z]?\.cubin", elf.stdout)), key=lambda a: int(a[3:]))
    ptxs = sorted(set(re.findall(r"\.(sm_\d+)[a-z]?\.ptx", ptx.stdout)), key=lambda a: int(a[3:]))
    assert sass or ptxs, (elf.stdout, elf.stderr, ptx.stdout, ptx.stderr)
    return sass, [a.replace("sm_", "compute_") for a in ptxs]


@pytest.fixture(scope="module")
def inspected(dswheels_cache: Path) -> dict[str, Any]:
    """``dswheels inspect --format json`` of all five wheels, in one run of the real command."""
    wheels = [_wheel(dswheels_cache, v) for v in VERSIONS]
    result = dswheels("inspect", "--format", "json", *map(str, wheels), env=build_env(dswheels_cache), timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    data = json.loads(result.stdout)
    assert data["schema"] == "dswheels.inspect/1"
    return {w["version"]: w for w in data["wheels"]}


@pytest.mark.parametrize("version", VERSIONS)
def test_inspect_reports_what_the_fatbins_really_hold(
    version: str, inspected: dict[str, Any], dswheels_cache: Path, tmp_path: Path
) -> None:
    report = inspected[version]
    assert report["platform"] == "win_amd64"
    assert report["accelerator"] == "cuda"
    assert set(report["installed_ops"]) == CUDA_OPS | CPU_OPS
    extensions = report["extensions"]
    assert {e["op"] for e in extensions} == CUDA_OPS | CPU_OPS  # every op's builder finds its .pyd
    with zipfile.ZipFile(_wheel(dswheels_cache, version)) as zf:
        zf.extractall(tmp_path, [str(e["file"]) for e in extensions])
    seen: set[tuple[str, ...]] = set()
    for ext in extensions:
        pyd = tmp_path / str(ext["file"])
        sass, ptx = _fatbin_listing(pyd, tmp_path)
        gpu = ext["gpu"]
        if ext["op"] in CPU_OPS:
            assert gpu is None
            assert (sass, ptx) == ([], [])
        else:
            assert gpu == {"sass": sass, "ptx": ptx}, ext["file"]
            seen.add(tuple(sass))
        reference = pefile.PE(str(pyd), fast_load=True)
        reference.parse_data_directories(directories=[pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_IMPORT"]])
        imports = [entry.dll.decode() for entry in reference.DIRECTORY_ENTRY_IMPORT]
        assert [d["name"] for d in ext["dll_imports"]] == imports
        objdump = subprocess.run(["objdump", "-p", pyd], capture_output=True, text=True, check=True).stdout
        assert imports == re.findall(r"DLL Name: (\S+)", objdump)
        assert all(d["ok"] for d in ext["dll_imports"]), ext["dll_imports"]
        assert ext["cpu"]["runtime_dispatch"] or ext["cpu"]["above_x86_64_v2"] == 0
    assert len(seen) == 1  # one arch list for the whole wheel
    if version in SASS:
        assert seen == {tuple(SASS[version])}
    warnings = "\n".join(report["warnings"])
    assert f"no PTX in any CUDA extension: GPUs newer than {seen.pop()[-1]} cannot run these ops" in warnings
    assert "torch is not pinned" in warnings


def test_imports_are_the_reference_ones(inspected: dict[str, Any]) -> None:
    names = {d["name"] for e in inspected["0.16.5"]["extensions"] for d in e["dll_imports"]}
    assert {"c10.dll", "c10_cuda.dll", "torch_cpu.dll", "torch_python.dll", "python311.dll", "cudart64_12.dll"} <= names
    assert {"cublas64_12.dll", "curand64_10.dll", "MSVCP140.dll", "VCRUNTIME140.dll", "VCRUNTIME140_1.dll"} <= names
    assert "KERNEL32.dll" in names
    assert any(n.startswith("api-ms-win-crt-") for n in names)


def test_sm_100_and_120_outrun_the_recorded_cuda(inspected: dict[str, Any]) -> None:
    warnings = "\n".join(inspected["0.16.5"]["warnings"])
    assert "SASS sm_100, sm_120 but torch_info says CUDA 12.4" in warnings
    assert inspected["0.16.5"]["torch_info"]["cuda_version"] == "12.4"


def test_text_output_is_aligned(dswheels_cache: Path) -> None:
    result = dswheels("inspect", str(_wheel(dswheels_cache, "0.14.5")), env=build_env(dswheels_cache), timeout=600)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "  torch_info       torch 2.3, CUDA 12.1\n" in out
    assert re.search(r"^  fused_adam +deepspeed/ops/adam/fused_adam_op\.cp311-win_amd64\.pyd \(pe, ", out, re.MULTILINE)
    assert re.search(r"^ +gpu +SASS sm_60, sm_61, sm_70, sm_80, sm_86; PTX none$", out, re.MULTILINE)
    assert re.search(r"^ +dlls +torch: c10\.dll, torch_cpu\.dll, torch_python\.dll, c10_cuda\.dll$", out, re.MULTILINE)


@pytest.mark.parametrize("version", ["0.14.5", "0.16.5"])
def test_verify_static_judges_deepspeeds_own_wheel(version: str, dswheels_cache: Path, tmp_path: Path) -> None:
    """The wheel is checked as the cell its torch_info names, against the shipped matrix's plan for it."""
    wheel = _wheel(dswheels_cache, version)
    report = tmp_path / "verify.json"
    result = dswheels("verify", "--static", str(wheel), "--report", str(report), env=build_env(dswheels_cache))
    assert result.returncode == 6, result.stdout[-3000:] + result.stderr[-3000:]  # not a dswheels wheel: name, pin
    data = json.loads(report.read_text())["wheels"][0]
    cell = {"0.14.5": "ds0.14.5-torch2.3-cu121-cp311-win_amd64", "0.16.5": "ds0.16.5-torch2.6-cu124-cp311-win_amd64"}
    assert data["cell"] == cell[version]
    assert "has no dswheels label: checked as" in result.stdout
    checks = {c["name"]: c for c in data["static"]}
    assert checks["installed ops"]["ok"], checks["installed ops"]  # the plan's 14 ops are exactly these
    assert not checks["filename"]["ok"]
    assert not checks["torch pin"]["ok"]
    dll = [c for name, c in checks.items() if name.startswith("dll imports ")]
    assert len(dll) == 14
    assert all(c["ok"] for c in dll), [c["detail"] for c in dll if not c["ok"]]
    gpu = [c for name, c in checks.items() if name.startswith("gpu code ")]
    assert len(gpu) == 11
    sass = ", ".join(SASS[version])
    assert all(f"SASS {sass}; PTX none" in c["detail"] for c in gpu)
    # the plan for CUDA 12.1/12.4 builds 5.0-9.0: 0.16.5's sm_100/sm_120 are more than it planned
    assert all(c["ok"] is (version == "0.14.5") for c in gpu), [c["detail"] for c in gpu]
    cpu = [c for name, c in checks.items() if name.startswith("cpu baseline ")]
    assert len(cpu) == 14
    assert all(c["ok"] for c in cpu)


def test_every_extension_sits_where_its_op_is_imported_from(inspected: dict[str, Any], dswheels_cache: Path) -> None:
    """DeepSpeed loads a prebuilt op with import_module(builder.absolute_name()). In 0.16.5 InferenceCoreBuilder's
    absolute_name() is deepspeed.inference.v2.kernelsinference_core_ops (a dot missing upstream) and the .pyd is
    named to match, exporting PyInit_kernelsinference_core_ops: InferenceCoreBuilder().load(), which is how every
    caller in the wheel gets the op, imports it. Not misplaced, and inspect says where each op is loaded from."""
    for version in VERSIONS:
        for ext in inspected[version]["extensions"]:
            assert ext["misplaced"] is None, ext["misplaced"]
            assert str(ext["file"]).startswith(str(ext["module"]).replace(".", "/") + "."), ext
    core = next(e for e in inspected["0.16.5"]["extensions"] if e["op"] == "inference_core_ops")
    assert core["module"] == "deepspeed.inference.v2.kernelsinference_core_ops"
    wheel = _wheel(dswheels_cache, "0.16.5")
    with zipfile.ZipFile(wheel) as zf:
        builder = zf.read("deepspeed/ops/op_builder/inference_core_ops.py").decode()
        pyd = zf.read(str(core["file"]))
    assert "return f'deepspeed.inference.v2.kernels{self.NAME}'" in builder
    image = pefile.PE(data=pyd, fast_load=True)
    image.parse_data_directories(directories=[pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_EXPORT"]])
    assert b"PyInit_kernelsinference_core_ops" in {s.name for s in image.DIRECTORY_ENTRY_EXPORT.symbols}
    text = dswheels("inspect", str(wheel), env=build_env(dswheels_cache), timeout=600).stdout
    assert (
        "module   deepspeed.inference.v2.kernelsinference_core_ops: inference_core_ops's builder imports it from here"
        in text
    )


def _with_member(wheel: Path, out: Path, member: str, text: str) -> Path:
    """A copy of ``wheel`` with ``member`` replaced by ``text``."""
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info, text.encode() if info.filename == member else src.read(info))
    return out


def test_an_extension_outside_its_ops_import_path_is_flagged(dswheels_cache: Path, tmp_path: Path) -> None:
    """DeepSpeed's real 0.16.5 Windows wheel with InferenceCoreBuilder naming the module its path suggests
    (deepspeed.inference.v2.kernels.inference_core_ops, as a builder with the dot has it): the unchanged
    kernelsinference_core_ops.pyd is then where no builder looks, a lost separator, and inspect and verify say so."""
    wheel = _wheel(dswheels_cache, "0.16.5")
    builder = "deepspeed/ops/op_builder/inference_core_ops.py"
    with zipfile.ZipFile(wheel) as zf:
        source = zf.read(builder).decode()
    dotted = source.replace(
        "f'deepspeed.inference.v2.kernels{self.NAME}'", "f'deepspeed.inference.v2.kernels.{self.NAME}'"
    )
    assert dotted != source
    broken = _with_member(wheel, tmp_path / wheel.name, builder, dotted)
    env = build_env(dswheels_cache)
    result = dswheels("inspect", "--format", "json", str(broken), env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    (report,) = json.loads(result.stdout)["wheels"]
    pyd = "deepspeed/inference/v2/kernelsinference_core_ops.cp311-win_amd64.pyd"
    (core,) = [e for e in report["extensions"] if e["file"] == pyd]
    assert core["op"] == "inference_core_ops"
    expected = (
        f"{pyd} imports as deepspeed.inference.v2.kernelsinference_core_ops, but inference_core_ops's builder loads "
        "deepspeed.inference.v2.kernels.inference_core_ops (its absolute_name()): a folder separator is lost or added "
        "in the path: loading inference_core_ops raises ModuleNotFoundError wherever DeepSpeed calls its builder's "
        "load()"
    )
    assert core["misplaced"] == expected
    assert expected in report["warnings"]
    assert [e["file"] for e in report["extensions"] if e["misplaced"]] == [pyd]  # the other 13 are where they belong
    text = dswheels("inspect", str(broken), env=env, timeout=600).stdout
    assert "module   deepspeed.inference.v2.kernelsinference_core_ops: NOT where its op is imported from" in text
    report_file = tmp_path / "verify.json"
    verify = dswheels("verify", "--static", str(broken), "--report", str(report_file), env=env)
    assert verify.returncode == 6
    checks = {c["name"]: c for c in json.loads(report_file.read_text())["wheels"][0]["static"]}
    assert not checks["extensions"]["ok"]
    assert expected in checks["extensions"]["detail"]
