"""open_wheel: one wording, the caller's error type, for what can be wrong with a wheel."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from dswheels.effects.wheelzip import open_wheel
from dswheels.errors import BuildError, VerifyError


def test_a_missing_member_names_itself(tmp_path: Path) -> None:
    wheel = tmp_path / "deepspeed-0.19.8-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("deepspeed/__init__.py", "")
    missing = r"lacks .*git_version_info_installed\.py.*: not a DeepSpeed wheel"
    with pytest.raises(VerifyError, match=missing), open_wheel(wheel, VerifyError) as zf:
        zf.read("deepspeed/git_version_info_installed.py")
    with open_wheel(wheel, VerifyError) as zf:  # a good read goes through untouched
        assert zf.namelist() == ["deepspeed/__init__.py"]


def test_a_damaged_or_absent_wheel(tmp_path: Path) -> None:
    broken = tmp_path / "broken.whl"
    broken.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(BuildError, match=r"^broken\.whl: "), open_wheel(broken, BuildError):
        pass
    with pytest.raises(VerifyError, match="no such wheel"), open_wheel(tmp_path / "absent.whl", VerifyError):
        pass
