"""`nox -s lock` (scripts/lock.py) moves every pin to the newest version allowed, with the real uv.

A stale lock of a small project is re-locked against a local wheel directory that has a newer
release of each package: uv treats an existing output file as its preferences, so a compile
that is not told to upgrade writes the stale pins again.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.support.installers import uv_binary
from tests.support.wheels import write_wheel

pytestmark = pytest.mark.integration

PYPROJECT = """\
[project]
name = "locked"
version = "0"
requires-python = ">=3.10"
dependencies = ["alpha"]

[dependency-groups]
dev = ["beta"]
"""


def _pins(path: Path) -> dict[str, str]:
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if "==" in line]
    return dict(line.split(" ;")[0].split("==", 1) for line in lines if not line.startswith(" "))


def test_a_stale_lock_moves_to_the_newest_release(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    for name in ("alpha", "beta", "gamma"):
        for version in ("1.0", "1.1"):
            write_wheel(wheels, name=name, version=version, tag="py3-none-any", files={f"{name}.py": b""})
    root = tmp_path / "project"
    (root / "requirements").mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    (root / "requirements" / "nox.in").write_text("gamma\n", encoding="utf-8")
    (root / "requirements" / "nox.txt").write_text("gamma==1.0\n    # via -r requirements/nox.in\n", encoding="utf-8")
    (root / "requirements" / "constraints.txt").write_text(
        "alpha==1.0\n    # via locked (pyproject.toml)\nbeta==1.0\n    # via locked (pyproject.toml:dev)\n",
        encoding="utf-8",
    )
    offline = ["--no-index", "--find-links", str(wheels), "--no-config", "--cache-dir", str(tmp_path / "uv-cache")]
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "lock.py"), "--root", str(root), "--uv", uv_binary(), "--", *offline],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert _pins(root / "requirements" / "nox.txt") == {"gamma": "1.1"}
    assert _pins(root / "requirements" / "constraints.txt") == {"alpha": "1.1", "beta": "1.1"}
