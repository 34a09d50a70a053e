"""Wheels that lie, through the real command line under a memory limit: zip bombs, crafted extensions.

A 3 MB wheel whose ``git_version_info_installed.py`` or an op's extension inflates to 3 GiB, and
one whose extension's version records overlap (the quadratic walk of issue 20): every command
that reads them (``inspect``, ``verify --static``, ``publish``, ``index``) ends in its documented
exit code with one paragraph, under a 2.5 GiB address-space limit, within a minute, leaving
nothing in its temporary folder.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.support.binaries import quadratic_verneed
from tests.support.limits import Limited, run_limited
from tests.support.wheels import Bomb, write_manifest, write_zip

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(sys.platform == "win32", reason="the memory limit is set with POSIX setrlimit"),
]

NAME = "deepspeed-0.19.8+cu128torch2.9-cp311-cp311-linux_x86_64.whl"
DIST = "deepspeed-0.19.8+cu128torch2.9.dist-info"
INSTALLED_INFO = "deepspeed/git_version_info_installed.py"
SO = "deepspeed/ops/adam/fused_adam_op.cpython-311-x86_64-linux-gnu.so"
METADATA = b"Metadata-Version: 2.1\nName: deepspeed\nVersion: 0.19.8+cu128torch2.9\nRequires-Dist: torch==2.9.*\n"
WHEEL = b"Wheel-Version: 1.0\nGenerator: bdist_wheel\nRoot-Is-Purelib: false\nTag: cp311-cp311-linux_x86_64\n"
INFO = (
    b"version='0.19.8+cu128torch2.9'\ninstalled_ops={'fused_adam': 1}\naccelerator_name='cuda'\n"
    b"torch_info={'version': '2.9', 'cuda_version': '12.8'}\n"
)


def _wheel(folder: Path, **members: bytes | Bomb) -> Path:
    """A DeepSpeed-shaped wheel with its manifest beside it (so ``verify --static`` needs no plan)."""
    files: dict[str, bytes | Bomb] = {f"{DIST}/METADATA": METADATA, INSTALLED_INFO: INFO, f"{DIST}/WHEEL": WHEEL}
    files.update(members)
    wheel = write_zip(folder / NAME, files)
    write_manifest(wheel)
    return wheel


def _ran(result: Limited, code: int, words: str = "") -> None:
    assert result.returncode == code, (result.returncode, result.stdout[-2000:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    assert words in result.stderr
    assert result.seconds < 60
    assert result.left_in_tmp == ()


BOMB = 3 * 1024**3


def test_build_info_that_inflates_to_3_gib_is_refused_by_every_reader(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "w", **{INSTALLED_INFO: Bomb(BOMB)})
    assert wheel.stat().st_size < 4 * 1024**2
    words = f"its {INSTALLED_INFO} would inflate to 3,221,225,472 bytes, more than the 1 MiB"
    tmp = tmp_path / "tmp"
    _ran(run_limited(["inspect", str(wheel)], tmp=tmp), 2, words)
    _ran(run_limited(["verify", "--static", str(wheel)], tmp=tmp), 6, words)
    _ran(run_limited(["publish", "--dir", str(tmp_path / "pub"), str(wheel)], tmp=tmp), 7, words)
    by_hand = tmp_path / "by-hand"  # copied into a published directory by hand: index reads it too
    by_hand.mkdir()
    shutil.copy(wheel, by_hand)
    _ran(run_limited(["index", "--from", str(by_hand), "--out", str(tmp_path / "site")], tmp=tmp), 7, words)


def test_an_extension_that_inflates_to_3_gib_is_refused_where_extensions_are_read(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "w", **{SO: Bomb(BOMB)})
    words = f"its {SO} would inflate to 3,221,225,472 bytes, more than the 1 GiB"
    tmp = tmp_path / "tmp"
    _ran(run_limited(["inspect", str(wheel)], tmp=tmp), 2, words)
    _ran(run_limited(["verify", "--static", str(wheel)], tmp=tmp), 6, words)
    # publish and index read the METADATA and the build info, not the extensions
    _ran(run_limited(["publish", "--dir", str(tmp_path / "pub"), str(wheel)], tmp=tmp), 0)
    _ran(run_limited(["index", "--from", str(tmp_path / "pub"), "--out", str(tmp_path / "site")], tmp=tmp), 0)


def test_an_extension_whose_version_records_overlap_is_malformed_not_a_memory_error(tmp_path: Path) -> None:
    """The issue's 1 MiB extension: ~n^2/2 version records made inspect and verify --static die with
    MemoryError at 3 GB after 21 s, leaving /tmp/dsw-bin-* behind."""
    wheel = _wheel(tmp_path / "w", **{SO: quadratic_verneed(1024**2)})
    words = f"cannot read the extension {SO}: .gnu.version_r is malformed"
    tmp = tmp_path / "tmp"
    _ran(run_limited(["inspect", str(wheel)], tmp=tmp), 2, words)
    _ran(run_limited(["verify", "--static", str(wheel)], tmp=tmp), 6, words)
