"""The Windows build, as far as it runs without Windows, exactly as a Windows build job starts it.

wheels.yml installs dswheels non-editable (`pip install .`) and runs `dswheels build` under
`CI=true`. Here the same install runs the same command for Windows cells of the shipped
matrix with `--prepare-only`: the PyPI sdist fetched and checked against PyPI's digest (no
hand-made pin), unpacked, the files win32 needs added, the op builders patched for MSVC, the
build interpreter made. What stops it is only what needs Windows: MSVC and the compile.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dswheels.kernel.compat import load_compat
from tests.conftest import ROOT
from tests.integration.conftest import build_env, require_compilers

SHIPPED = ROOT / "matrix" / "matrix.yml"


@pytest.fixture(scope="module")
def installed_dswheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with dswheels installed from this checkout as wheels.yml does it: not editable."""
    venv = tmp_path_factory.mktemp("dswheels-installed") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--constraint",
            str(ROOT / "requirements" / "constraints.txt"),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    listed = subprocess.run(
        [str(python), "-m", "pip", "show", "-f", "dswheels"], check=True, capture_output=True, text=True
    )
    assert "Editable project location" not in listed.stdout  # the real thing: files copied into site-packages
    return python.parent / ("dswheels.exe" if os.name == "nt" else "dswheels")


def _prepare(exe: Path, cell: str, cache: Path, out: Path) -> subprocess.CompletedProcess[str]:
    env = build_env(cache, CI="true")
    return subprocess.run(
        [
            str(exe),
            "build",
            "--matrix",
            str(SHIPPED),
            "--cell",
            cell,
            "--prepare-only",
            "--torch-index",
            "pip",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=out.parent,  # not the checkout: nothing may depend on running from it
        timeout=3600,
        check=False,
    )


@pytest.mark.integration
def test_a_windows_cell_of_the_shipped_matrix_prepares_in_ci_from_a_non_editable_install(
    installed_dswheels: Path, dswheels_cache: Path, tmp_path: Path
) -> None:
    require_compilers()
    cell = "ds0.19.8-torch2.14-cu130-cp311-win_amd64"
    result = _prepare(installed_dswheels, cell, dswheels_cache, tmp_path / "wheelhouse")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    # the source: PyPI's sdist, checked against PyPI's digest; no pin was needed, none was recorded
    assert "source: deepspeed-0.19.8.tar.gz (sha256 9e491abd0827... from PyPI's JSON API)" in result.stdout
    assert "no sha256 pinned" not in result.stderr
    prepared = re.search(rf"^prepared {re.escape(cell)}: (.+)$", result.stdout, re.MULTILINE)
    assert prepared is not None, result.stdout
    src = Path(prepared.group(1))
    # what setup.py needs on win32 and the sdist leaves out, byte for byte as in DeepSpeed's git
    for rel, text in load_compat().windows_files.items():
        assert (src / rel).read_bytes() == text.encode(), rel
    # the op builders give MSVC the plan's portable baseline (x86-64-v2: no /arch flag), not the host's CPU
    baseline = load_compat().cpu_baselines["x86-64-v2"]
    builder = (src / "op_builder" / "builder.py").read_text()
    # (or the level of an ISA variant the build asks for: dswheels.probes.isa_variants)
    assert f"return getattr(self, 'dswheels_cpu_arch', {baseline.msvc!r})  # dswheels: portable CPU baseline" in builder
    assert (
        f"return getattr(self, 'dswheels_simd_width', {baseline.simd!r})  # dswheels: portable CPU baseline" in builder
    )
    # the log records every change, and nothing was compiled
    log = next((tmp_path / "wheelhouse" / "logs").glob(f"{cell}-*.log")).read_text()
    assert "added MANIFEST_win.in" in log
    assert "added bin/deepspeed.bat" in log
    assert "stopped before the compile (--prepare-only)" in log
    # the op builders' flags were evaluated for win32 and judged for cl/link/nvcc (op_flags.json shipped)
    assert "op_flags.py" in log
    assert "flags: link ignores -lcurand (LNK4044)" in result.stdout
    assert not list((tmp_path / "wheelhouse").rglob("*.whl"))
    assert not (src / "build").exists()
