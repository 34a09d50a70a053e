"""The one wheel reader: what it returns, and one wording, in the caller's error type, for what is wrong."""

from __future__ import annotations

import hashlib
import re
import zipfile
from pathlib import Path

import pytest

from dswheels.host.wheel_file import MAX_MEMBERS_READ, MAX_METADATA_BYTES, read_member, read_wheel
from dswheels.kernel.errors import BuildError, ConfigError, PublishError, VerifyError
from dswheels.kernel.wheel_contents import INSTALLED_INFO, WheelContentError
from tests.support.wheels import Bomb, write_zip

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
    with pytest.raises(PublishError, match="more than the 8 MiB dswheels reads"):
        read_wheel(huge, error=PublishError)


def _bombed(tmp_path: Path, **members: bytes | Bomb) -> Path:
    """A DeepSpeed-shaped wheel with members whose zip headers may state any size (tests/support/wheels.write_zip)."""
    files: dict[str, bytes | Bomb] = {f"{DIST}/METADATA": METADATA.encode(), INSTALLED_INFO: INFO.encode()}
    files.update(members)
    return write_zip(tmp_path / "bomb.whl", files)


def test_a_member_that_would_inflate_past_its_bound_is_refused_unread(tmp_path: Path) -> None:
    """A 64 KiB wheel whose build info inflates to 64 MiB (a zip bomb in small): refused on its stated
    size, before a byte is inflated; every reader of the wheel (publish and index too) reads it."""
    wheel = _bombed(tmp_path, **{INSTALLED_INFO: Bomb(64 * 1024**2)})
    assert wheel.stat().st_size < 100_000
    message = f"bomb.whl: its {INSTALLED_INFO} would inflate to 67,108,864 bytes, more than the 1 MiB dswheels reads"
    with pytest.raises(PublishError, match=re.escape(message)):
        read_wheel(wheel, error=PublishError, built_by_deepspeed=False)
    lying = _bombed(tmp_path, **{INSTALLED_INFO: Bomb(64 * 1024**2, stated=100)})
    with pytest.raises(ConfigError, match=f"Bad CRC-32 for file '{re.escape(INSTALLED_INFO)}'"):
        read_wheel(lying, error=ConfigError)  # zipfile inflates no more than the stated size


def test_read_member_holds_the_bytes_inflated_to_the_bound_whatever_the_header_says(tmp_path: Path) -> None:
    wheel = write_zip(tmp_path / "z.zip", {"lie": Bomb(4 * 1024**2, stated=2**31), "ok": b"x" * 100})
    with zipfile.ZipFile(wheel) as archive:
        with pytest.raises(WheelContentError, match="would inflate to 2,147,483,648 bytes, more than the 1 MiB"):
            read_member(archive, "lie", 1024**2)
        assert read_member(archive, "ok", 100) == b"x" * 100
        with pytest.raises(WheelContentError, match="more than the 0 MiB"):
            read_member(archive, "ok", 99)


def test_extensions_are_read_one_at_a_time_each_bounded(tmp_path: Path) -> None:
    """An extension that would inflate past 1 GiB: the wheel opens, and the extension is refused
    when it is read (in the caller's error type); the others are read as they are."""
    members: dict[str, bytes | Bomb] = {SO: Bomb(16 * 1024**2, stated=2 * 1024**3), "deepspeed/x.so": b"\x7fELF"}
    wheel = _bombed(tmp_path, **members)
    contents = read_wheel(wheel, error=VerifyError, extensions=True)
    assert sorted(contents.extensions) == sorted([SO, "deepspeed/x.so"])
    assert contents.extensions["deepspeed/x.so"] == b"\x7fELF"
    with pytest.raises(VerifyError, match=f"bomb.whl: its {re.escape(SO)} would inflate to 2,147,483,648 bytes"):
        _ = contents.extensions[SO]


def test_how_many_members_and_how_many_source_bytes_are_read_is_bounded(tmp_path: Path) -> None:
    many = _bombed(tmp_path, **{f"deepspeed/ops/x{i}.so": b"" for i in range(MAX_MEMBERS_READ + 1)})
    with pytest.raises(ConfigError, match="it has 1001 extension files, more than the 1000 dswheels reads"):
        read_wheel(many, error=ConfigError, extensions=True)
    read_wheel(many, error=ConfigError)  # without extensions nothing of them is read
    sources = {f"deepspeed/ops/op_builder/b{i}.py": Bomb(1024, stated=1024**2) for i in range(65)}
    heavy = _bombed(tmp_path, **sources)
    with pytest.raises(ConfigError, match="op builder sources would inflate to 68,157,440 bytes, more than 64 MiB"):
        read_wheel(heavy, error=ConfigError, builders=True)


def test_a_wheel_replaced_after_it_was_read_is_not_read_from_again(tmp_path: Path) -> None:
    wheel = _deepspeed(tmp_path, **{SO: b"\x7fELF one"})
    contents = read_wheel(wheel, error=VerifyError, extensions=True)
    (tmp_path / "other").mkdir()
    other = _deepspeed(tmp_path / "other", **{SO: b"\x7fELF two, longer"})
    other.replace(wheel)
    with pytest.raises(VerifyError, match=r"w\.whl changed while it was being read"):
        _ = contents.extensions[SO]
