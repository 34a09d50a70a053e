"""The run-time part of a win_amd64 wheel verified on Linux (dswheels/verify/effects/foreign_runtime.py).

Where it goes: under Wine with an MSVC root, else not run and said so (the static checks stay as they
are). What a failed op load means where torch is PyPI's CPU build: a CUDA op whose .pyd imports only
what torch's CUDA wheel adds is judged statically, named; a .pyd importing anything nothing provides,
a CPU op, or a .pyd DeepSpeed does not import from stays a failure.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import pytest

from dswheels.host import proc
from dswheels.host.cache import CacheLayout
from dswheels.host.wheel_file import read_wheel
from dswheels.kernel.errors import VerifyError
from dswheels.kernel.naming import parse_cell_id
from dswheels.platforms.wine import windows_venv
from dswheels.verify import step as verify_step
from dswheels.verify.effects import foreign_runtime
from dswheels.verify.effects.prove import RuntimeResult
from dswheels.verify.registry import Check
from dswheels.verify.static_checks import Expected
from tests.conftest import ROOT
from tests.support.binaries import pe
from tests.support.wheels import write_wheel

CELL = "ds0.19.8-torch2.14-cu130-cp311-win_amd64"
CPU_PYD = "deepspeed/ops/adam/cpu_adam_op.cp311-win_amd64.pyd"
CUDA_PYD = "deepspeed/ops/random_ltd_op.cp311-win_amd64.pyd"
_DESCRIPTOR = struct.Struct("<IIIII")


def pyd(*dlls: str) -> bytes:
    """A PE DLL whose import directory names ``dlls``."""
    table = 0x1000
    names = table + (len(dlls) + 1) * _DESCRIPTOR.size
    rvas = [names + sum(len(d) + 1 for d in dlls[:i]) for i in range(len(dlls))]
    data = b"".join(_DESCRIPTOR.pack(0, 0, 0, rva, 0) for rva in rvas) + bytes(_DESCRIPTOR.size)
    data += b"".join(d.encode() + b"\0" for d in dlls)
    return pe(sections=[(table, len(data), data)], import_rva=table)


CPU_IMPORTS = ("KERNEL32.dll", "python311.dll", "c10.dll", "torch_cpu.dll", "VCRUNTIME140.dll")
CUDA_IMPORTS = (*CPU_IMPORTS, "c10_cuda.dll", "torch_cuda.dll", "cudart64_13.dll")


def windows_wheel(directory: Path, members: dict[str, bytes]) -> Path:
    installed = "version='0.19.8+cu130torch2.14'\ninstalled_ops={'cpu_adam': True, 'random_ltd': True}\n"
    installed += "accelerator_name='cuda'\ntorch_info={'version': '2.14', 'cuda_version': '13.0'}\n"
    return write_wheel(
        directory,
        name="deepspeed",
        version="0.19.8+cu130torch2.14",
        tag="cp311-cp311-win_amd64",
        files={"deepspeed/git_version_info_installed.py": installed.encode(), **members},
        requires_dist=["torch==2.14.*"],
    )


def expected() -> Expected:
    return Expected(cell=parse_cell_id(CELL), ops=("cpu_adam", "random_ltd"))


def loads(torch_cuda: str | None = None, **errors: str) -> RuntimeResult:
    modules = {"cpu_adam": "deepspeed.ops.adam.cpu_adam_op", "random_ltd": "deepspeed.ops.random_ltd_op"}
    ops = {name: {"module": modules[name], "error": error} for name, error in errors.items()}
    checks = [Check(f"load {name}", ok=False, detail=str(e["error"])) for name, e in ops.items()]
    return RuntimeResult(
        checks=[Check("ds_report", ok=True, detail="x"), *checks], loads={"ops": ops, "torch_cuda": torch_cuda}
    )


DLL_FAILED = "load() raised ImportError: DLL load failed while importing random_ltd_op: Module not found."


def judged(tmp_path: Path, result: RuntimeResult, members: dict[str, bytes]) -> dict[str, Check]:
    data = read_wheel(windows_wheel(tmp_path, members), error=VerifyError, extensions=True)
    return {c.name: c for c in foreign_runtime._judge_cuda_loads(result, data, expected())}


def test_a_cuda_op_that_needs_only_what_torchs_cuda_wheel_adds_is_judged_statically(tmp_path: Path) -> None:
    checks = judged(tmp_path, loads(random_ltd=DLL_FAILED), {CUDA_PYD: pyd(*CUDA_IMPORTS)})
    check = checks["load random_ltd"]
    assert check.ok
    assert check.detail.startswith("judged statically, not loaded: its .pyd imports")
    assert "c10_cuda.dll, cudart64_13.dll, torch_cuda.dll" in check.detail
    assert checks["ds_report"].ok


def test_a_dll_nothing_provides_is_a_failure_even_beside_torch_cuda(tmp_path: Path) -> None:
    checks = judged(tmp_path, loads(random_ltd=DLL_FAILED), {CUDA_PYD: pyd(*CUDA_IMPORTS, "c1x.dll")})
    assert not checks["load random_ltd"].ok
    assert "DLL load failed" in checks["load random_ltd"].detail


def test_a_cpu_op_that_fails_to_load_is_a_failure(tmp_path: Path) -> None:
    checks = judged(
        tmp_path, loads(cpu_adam=DLL_FAILED.replace("random_ltd", "cpu_adam")), {CPU_PYD: pyd(*CPU_IMPORTS)}
    )
    assert not checks["load cpu_adam"].ok


def test_a_pyd_deepspeed_does_not_import_from_is_not_excused(tmp_path: Path) -> None:
    misplaced = {"deepspeed/ops/elsewhere/random_ltd_op.cp311-win_amd64.pyd": pyd(*CUDA_IMPORTS)}
    checks = judged(tmp_path, loads(random_ltd=DLL_FAILED), misplaced)
    assert not checks["load random_ltd"].ok


def test_with_torchs_cuda_wheel_a_failed_load_is_a_failure(tmp_path: Path) -> None:
    checks = judged(tmp_path, loads(torch_cuda="13.0", random_ltd=DLL_FAILED), {CUDA_PYD: pyd(*CUDA_IMPORTS)})
    assert not checks["load random_ltd"].ok


def test_a_would_jit_failure_is_never_judged_statically(tmp_path: Path) -> None:
    would_jit = "load() raised WouldJitError: random_ltd would be JIT-compiled"
    checks = judged(tmp_path, loads(random_ltd=would_jit), {CUDA_PYD: pyd(*CUDA_IMPORTS)})
    assert not checks["load random_ltd"].ok


# --- where verify sends a Windows wheel on Linux ---------------------------------------------------------
class StopError(Exception):
    pass


@dataclass
class Seen:
    kwargs: dict[str, object] = field(default_factory=dict)


def test_verify_runs_a_windows_wheel_under_wine_with_the_msvc_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the seam: the Windows platform's Wine host gives the venv (its maker recorded here)."""
    seen = Seen()

    def recorder(*args: object, **kwargs: object) -> NoReturn:
        seen.kwargs = {"args": args, **kwargs}
        raise StopError

    monkeypatch.setattr(windows_venv, "fresh_wheel_venv", recorder)
    monkeypatch.setattr(proc, "find_tool", lambda name, _env=None: f"/usr/bin/{name}")
    cache = CacheLayout(tmp_path / "cache")
    options = verify_step.VerifyOptions(matrix=ROOT / "matrix" / "matrix.yml", msvc_root=tmp_path / "msvc")
    wheel = windows_wheel(tmp_path / "w", {CPU_PYD: pyd(*CPU_IMPORTS), CUDA_PYD: pyd(*CUDA_IMPORTS)})
    with pytest.raises(StopError):
        verify_step.verify_wheel(wheel, options, cache)
    assert seen.kwargs["args"] == (tmp_path / "msvc", wheel, ["torch==2.14.1", "torch==2.14.*"])
    assert seen.kwargs["cache"] == cache
    assert seen.kwargs["python"] == (3, 11)
    assert seen.kwargs["wheel_deps"] is True


@pytest.mark.parametrize(
    ("msvc", "wine", "why"),
    [(False, True, "no MSVC root to build a Windows Python with"), (True, False, "Wine is not installed")],
)
def test_without_wine_or_msvc_verify_keeps_the_static_judgement_and_says_what_it_did_not_prove(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, msvc: bool, wine: bool, why: str
) -> None:
    monkeypatch.setattr(proc, "find_tool", lambda name, _env=None: f"/usr/bin/{name}" if wine else None)
    cache = CacheLayout(tmp_path / "cache")
    options = verify_step.VerifyOptions(
        matrix=ROOT / "matrix" / "matrix.yml", msvc_root=tmp_path / "msvc" if msvc else None
    )
    wheel = windows_wheel(tmp_path / "w", {CPU_PYD: pyd(*CPU_IMPORTS), CUDA_PYD: pyd(*CUDA_IMPORTS)})
    result = verify_step.verify_wheel(wheel, options, cache)
    assert result.static
    assert result.runtime is not None
    (check,) = result.runtime.checks
    assert check.name == "run time"
    assert check.ok
    assert check.detail.startswith(f"not run ({why}")
    assert "not proven here" in check.detail
