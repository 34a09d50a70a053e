"""No package of dswheels is named as the tools name build output: pytest's ``norecursedirs`` (its default
skips every ``build`` and ``dist``) and ruff's ``extend-exclude`` would silently leave it untested and
unlinted, which is what happened when the build stage was first moved to ``dswheels/build/``."""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _packages() -> list[Path]:
    return sorted(p.parent for p in (ROOT / "dswheels").rglob("__init__.py") if "__pycache__" not in p.parts)


def test_no_package_is_skipped_by_pytest(request: pytest.FixtureRequest) -> None:
    patterns = [str(p) for p in request.config.getini("norecursedirs")]
    assert "build" in patterns  # pytest's default, which this project keeps: the check below is not vacuous
    skipped = [p.relative_to(ROOT) for p in _packages() if any(fnmatch.fnmatch(p.name, pat) for pat in patterns)]
    assert skipped == []


def test_no_package_is_excluded_from_ruff() -> None:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.fail("ruff is not installed (the lint dependency group has it)")
    listed = subprocess.run(
        [ruff, "check", "--show-files", "dswheels"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=120
    ).stdout
    linted = {Path(line.strip()).resolve().parent for line in listed.splitlines() if line.strip().endswith(".py")}
    assert [p.relative_to(ROOT) for p in _packages() if p.resolve() not in linted] == []


def test_every_module_ruff_bans_exists() -> None:
    """A ban on a module that no longer exists guards nothing (``dswheels.ci`` stayed banned after its move)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")  # tomllib is 3.11's; the tests run on 3.10 too
    banned = re.findall(r'^"(dswheels\.[\w.]+)"\.msg = ', text, flags=re.MULTILINE)
    ours = [ROOT / Path(*name.split(".")) for name in banned]
    assert ours, "the bans of pure modules on the effects are the point of this test"
    assert [p for p in ours if not p.is_dir() and not p.with_suffix(".py").is_file()] == []
