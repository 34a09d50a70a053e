"""verify's fresh venv is the venv a user makes (python -m venv: pip, and setuptools before Python 3.12): torch
2.10 requires setuptools only from 3.12 while its cpp_extension imports it, so in uv's bare venv `ds_report` of a
cp311 torch 2.10 wheel failed where the user's works (seen verifying the aarch64 wheel under qemu)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dswheels.host.venvs import seed_packages
from dswheels.kernel.compat import load_compat
from dswheels.kernel.model import Python
from dswheels.kernel.naming import parse_wheel
from dswheels.kernel.sources import TorchSource, TorchSourceKind
from dswheels.verify.effects import prove
from dswheels.verify.static_checks import Expected, ExpectedFrom

WHEEL = "deepspeed-0.19.8+cputorch2.10-cp311-cp311-linux_x86_64.whl"


def test_verifys_fresh_venv_is_seeded_as_python_m_venv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[dict[str, object]] = []
    monkeypatch.setattr(prove, "find_uv", lambda: "uv")
    monkeypatch.setattr(prove, "uv_venv", lambda *_, **kwargs: made.append(kwargs))
    monkeypatch.setattr(prove, "uv_install", lambda *_, **__: None)
    expected = Expected(cell=parse_wheel(WHEEL).cell, ops=(), source=ExpectedFrom.PLAN)
    prove.fresh_venv(
        tmp_path / WHEEL,
        expected,
        compat=load_compat(),
        torch_source=TorchSource(TorchSourceKind.PIP),
        root=tmp_path / "venvs",
        log=None,
    )
    assert [m.get("seed") for m in made] == [True]
    assert seed_packages(Python((3, 11))) == ("pip", "setuptools")
    assert seed_packages(Python((3, 13))) == ("pip",)
