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


def test_inspect_shows_the_provenance_beside_a_wheel(tmp_path: Path) -> None:
    """GitHub's bundle as the workflow leaves it, then the provenance object as the index serves it: verified
    against the tests' own Sigstore root (--trusted-root); against the pinned root it does not verify."""
    import hashlib

    from dswheels.kernel.attestations import provenance_from_bundle
    from tests.support.sigstore_fake import FakeSigstore

    wheel = _windows_wheel(tmp_path)
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    fake = FakeSigstore()
    root = tmp_path / "trusted_root.json"
    root.write_bytes(fake.trusted_root())
    none = dswheels("inspect", str(wheel), timeout=300)
    assert "  provenance       none beside the wheel\n" in none.stdout
    bundle = fake.attest([(wheel.name, sha)])
    (tmp_path / f"{wheel.name}.sigstore.json").write_bytes(bundle)
    shown = dswheels("inspect", str(wheel), "--trusted-root", str(root), timeout=300)
    assert shown.returncode == 0, shown.stderr
    signer = "https://github.com/octo/dswheels/.github/workflows/wheels.yml@refs/tags/v0.19.8 (commit 5f0c6e5b2a4d)"
    assert f"  provenance       verified ({wheel.name}.sigstore.json): signed by {signer}, logged 2026-03-02" in (
        shown.stdout
    )
    (tmp_path / f"{wheel.name}.sigstore.json").unlink()
    (tmp_path / f"{wheel.name}.provenance").write_bytes(provenance_from_bundle(bundle, filename=wheel.name, sha256=sha))
    result = dswheels("inspect", "--format", "json", str(wheel), timeout=300)  # the pinned root: Sigstore's own
    assert result.returncode == 0, result.stderr
    (data,) = json.loads(result.stdout)["wheels"]
    assert data["provenance"]["verified"] is False
    assert "does not verify against the trusted root" in data["provenance"]["problem"]
    assert any("its provenance does not vouch for it" in w for w in data["warnings"])
