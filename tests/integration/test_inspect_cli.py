"""``dswheels inspect`` through the real command line: a small wheel made here, and every bad input (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import DATA
from tests.integration.conftest import dswheels
from tests.support.wheels import write_wheel

pytestmark = pytest.mark.integration

BUILDER = (
    "class FusedAdamBuilder(CUDAOpBuilder):\n    NAME = 'fused_adam'\n"
    "    def absolute_name(self):\n        return f'deepspeed.ops.adam.{self.NAME}_op'\n"
)
INSTALLED = (
    "version='0.19.8+cu130torch2.14'\ninstalled_ops={'fused_adam': 1}\naccelerator_name='cuda'\n"
    "torch_info={'version': '2.14', 'cuda_version': '13.0'}\n"
)


def _windows_wheel(directory: Path) -> Path:
    """A dswheels-named Windows wheel whose one extension is the PE fixture (tests/data/pe)."""
    return write_wheel(
        directory,
        name="deepspeed",
        version="0.19.8+cu130torch2.14",
        tag="cp312-cp312-win_amd64",
        files={
            "deepspeed/git_version_info_installed.py": INSTALLED.encode(),
            "deepspeed/ops/op_builder/fused_adam.py": BUILDER.encode(),
            "deepspeed/ops/adam/fused_adam_op.cp312-win_amd64.pyd": (DATA / "pe" / "fixture.pyd").read_bytes(),
        },
        requires_dist=["torch==2.14.*"],
    )


def test_inspect_a_small_windows_wheel(tmp_path: Path) -> None:
    wheel = _windows_wheel(tmp_path)
    text = dswheels("inspect", str(wheel), timeout=300)
    assert text.returncode == 0, text.stderr
    assert "  version          0.19.8+cu130torch2.14\n" in text.stdout
    assert "  torch pin        torch==2.14.*\n" in text.stdout
    assert "UNEXPECTED mystery.dll" in text.stdout
    assert "- fused_adam imports mystery.dll: not part of Windows" in text.stdout
    result = dswheels("inspect", "--format", "json", str(wheel), timeout=300)
    assert result.returncode == 0, result.stderr
    (data,) = json.loads(result.stdout)["wheels"]
    assert data["local_label"] == "cu130torch2.14"
    assert data["dlls_judged_for"] == "torch 2.14 (CUDA 13)"
    (ext,) = data["extensions"]
    assert ext["gpu"] == {"sass": ["sm_75", "sm_80"], "ptx": ["compute_80"]}
    assert ext["cpu"]["instructions"] > 0  # objdump read the PE's code
    assert [d["name"] for d in ext["dll_imports"] if not d["ok"]] == ["mystery.dll"]


def _bad(path: Path, words: str) -> None:
    result = dswheels("inspect", str(path), timeout=120)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert words in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_inputs_exit_2(tmp_path: Path) -> None:
    _bad(tmp_path / "nothing.whl", "no such file")
    _bad(tmp_path, "is not a wheel (a .whl file)")
    text = tmp_path / "notes.txt"
    text.write_text("hello", encoding="utf-8")
    _bad(text, "is not a wheel (a .whl file)")
    odd = tmp_path / "not-a-wheel-name.whl"
    odd.write_bytes(b"x")
    _bad(odd, "not-a-wheel-name.whl: not a wheel filename")
    corrupt = tmp_path / "deepspeed-0.16.5-cp311-cp311-win_amd64.whl"
    corrupt.write_bytes(b"PK\x03\x04 this is no zip archive")
    _bad(corrupt, "deepspeed-0.16.5-cp311-cp311-win_amd64.whl: File is not a zip file")
    torch = write_wheel(tmp_path / "t", name="torch", version="2.6.0", tag="cp311-cp311-win_amd64", files={})
    _bad(torch, "is a wheel of torch, not of deepspeed")
    bare = write_wheel(tmp_path / "d", name="deepspeed", version="0.16.5", tag="py3-none-any", files={})
    _bad(bare, "has no deepspeed/git_version_info_installed.py")


def test_truncated_wheel_exits_2(tmp_path: Path) -> None:
    wheel = _windows_wheel(tmp_path)
    data = wheel.read_bytes()
    wheel.write_bytes(data[: len(data) // 2])
    _bad(wheel, "File is not a zip file")


def test_damaged_member_exits_2(tmp_path: Path) -> None:
    """A byte flipped inside the compressed .pyd: the zip's directory is intact, the member is not."""
    wheel = _windows_wheel(tmp_path)
    data = bytearray(wheel.read_bytes())
    start = data.find(b"deepspeed/ops/adam/fused_adam_op.cp312-win_amd64.pyd") + 200
    for offset in range(start, start + 64, 8):
        data[offset] ^= 0xFF
    wheel.write_bytes(bytes(data))
    result = dswheels("inspect", str(wheel), timeout=120)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "deepspeed-0.19.8+cu130torch2.14-cp312-cp312-win_amd64.whl" in result.stderr
    assert "Traceback" not in result.stderr
