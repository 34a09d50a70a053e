"""The one wheel reader: what it returns, and one wording, in the caller's error type, for what is wrong."""

from __future__ import annotations

import hashlib
import re
import zipfile
from pathlib import Path

import pytest

from dswheels.core.wheel.contents import INSTALLED_INFO, WheelContentError
from dswheels.effects.wheel import MAX_METADATA_BYTES, read_wheel
from dswheels.errors import BuildError, ConfigError, PublishError, VerifyError

DIST = "deepspeed-0.19.8+cputorch2.13.dist-info"
SO = "deepspeed/ops/adam/cpu_adam_op.cpython-311-x86_64-linux-gnu.so"
METADATA = "Metadata-Version: 2.1\nName: deepspeed\nVersion: 0.19.8+cputorch2.13\nRequires-Dist: torch==2.13.*\n"
INFO = "version='0.19.8+cputorch2.13'\ninstalled_ops={'cpu_adam': 1}\naccelerator_name='cpu'\n"


def _wheel(tmp_path: Path, members: dict[str, str | bytes], name: str = "w.whl") -> Path:
    path = tmp_path / name
    with zipfile.ZipFile(path, "w") as zf:
        for member, data in members.items():
            zf.writestr(member, data)
    return path


def _deepspeed(tmp_path: Path, **extra: str | bytes) -> Path:
    members: dict[str, str | bytes] = {f"{DIST}/METADATA": METADATA, INSTALLED_INFO: INFO}
    members.update(extra)
    return _wheel(tmp_path, members)


def test_what_it_reads(tmp_path: Path) -> None:
    builder = "deepspeed/ops/op_builder/builder.py"
    members: dict[str, str | bytes] = {SO: b"\x7fELF", builder: "class OpBuilder: ...\n"}
    wheel = _deepspeed(tmp_path, **members)
    plain = read_wheel(wheel, error=VerifyError)
    assert plain.metadata.version == "0.19.8+cputorch2.13"
    assert plain.metadata_bytes == METADATA.encode()
    assert plain.installed.built_ops == ("cpu_adam",)
    assert plain.sha256 == hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert plain.size == wheel.stat().st_size
    assert (dict(plain.builder_sources), dict(plain.extensions)) == ({}, {})  # only when asked
    full = read_wheel(wheel, error=VerifyError, builders=True, extensions=True)
    assert dict(full.builder_sources) == {builder: "class OpBuilder: ...\n"}
    assert dict(full.extensions) == {SO: b"\x7fELF"}


def test_without_deepspeeds_build_info(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, {f"{DIST}/METADATA": METADATA})
    with pytest.raises(VerifyError, match=r"has no deepspeed/git_version_info_installed\.py: not a wheel built by"):
        read_wheel(wheel, error=VerifyError)
    listed = read_wheel(wheel, error=PublishError, built_by_deepspeed=False)  # the index lists it all the same
    assert listed.installed_text is None
    with pytest.raises(WheelContentError, match=r"not a wheel built by DeepSpeed's setup\.py"):
        _ = listed.installed


def test_a_missing_member_names_itself(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, {"deepspeed/__init__.py": ""})
    with pytest.raises(BuildError, match=r"w\.whl: expected one \.dist-info directory, found none"):
        read_wheel(wheel, error=BuildError)
    only_dir = _wheel(tmp_path, {f"{DIST}/RECORD": ""}, name="x.whl")
    with pytest.raises(ConfigError, match=re.escape(f"x.whl lacks {DIST}/METADATA: not a DeepSpeed wheel")):
        read_wheel(only_dir, error=ConfigError)


def test_a_damaged_or_absent_wheel(tmp_path: Path) -> None:
    broken = tmp_path / "broken.whl"
    broken.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(BuildError, match=r"^broken\.whl: File is not a zip file"):
        read_wheel(broken, error=BuildError)
    with pytest.raises(VerifyError, match="no such wheel"):
        read_wheel(tmp_path / "absent.whl", error=VerifyError)


def test_metadata_that_is_not_metadata(tmp_path: Path) -> None:
    nameless = _deepspeed(tmp_path, **{f"{DIST}/METADATA": "Metadata-Version: 2.1\n"})
    with pytest.raises(PublishError, match="METADATA has no Name or no Version"):
        read_wheel(nameless, error=PublishError)
    huge = _deepspeed(tmp_path, **{f"{DIST}/METADATA": METADATA + "X" * MAX_METADATA_BYTES})
    with pytest.raises(PublishError, match="larger than 8 MiB"):
        read_wheel(huge, error=PublishError)
