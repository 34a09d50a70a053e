"""The paths a compile sees are the same for every cell of a compile family (dswheels/building/effects/workdir.py)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from dswheels.building.effects.cell import cell_work_dir
from dswheels.building.effects.workdir import HEADER_TIME, link_site, set_aside, settle_header_times, wipe
from dswheels.kernel.compat import load_compat
from dswheels.kernel.model import PlannedCell
from dswheels.kernel.naming import cell_id
from dswheels.plan.compiler_cache_keys import cache_keys
from dswheels.plan.effects.matrix_file import load_matrix
from dswheels.plan.planner import plan
from tests.conftest import ROOT


def _dir(planned: PlannedCell, root: Path, *, prepare_only: bool = False) -> Path:
    return cell_work_dir(planned, root, prepare_only=prepare_only)


def test_every_cell_of_a_cache_family_builds_in_one_directory(tmp_path: Path) -> None:
    """The cells whose objects the workflow's cache shares (one family: runner image, toolkit, compiler, arch
    list) compile at the same paths, whatever their DeepSpeed, torch or Python: nvcc's preprocessed device
    code carries absolute paths, so a unit that reaches no torch header is one cache entry only then (a
    directory per DeepSpeed and torch took just ptxas' results from the cache for torch 2.14 after 2.13)."""
    compat = load_compat()
    planned = plan(load_matrix(ROOT / "matrix" / "matrix.yml", compat), compat).planned
    by_family: dict[str, set[Path]] = defaultdict(set)
    for item in planned:
        by_family[cache_keys([item]).family].add(_dir(item, tmp_path))
    assert all(len(dirs) == 1 for dirs in by_family.values()), by_family
    assert len({d for dirs in by_family.values() for d in dirs}) == len(by_family)  # one family, one directory
    linux_cu130 = {
        (str(i.cell.deepspeed), str(i.cell.torch), i.cell.python.tag)
        for i in planned
        if i.cell.variant.name == "cu130" and i.cell.platform.os == "linux"
    }
    assert len({d for d, _, _ in linux_cu130}) >= 2  # both DeepSpeed versions,
    assert len({t for _, t, _ in linux_cu130}) >= 2  # several torch minors and
    assert len({p for _, _, p in linux_cu130}) >= 2  # Pythons share the cu130 family's directory
    assert all(len(d.name) == 10 for dirs in by_family.values() for d in dirs)  # short for Windows' MAX_PATH
    # --prepare-only compiles nothing and keeps each cell's tree
    assert len({_dir(i, tmp_path, prepare_only=True) for i in planned}) == len({cell_id(i.cell) for i in planned})


def test_torch_is_reached_through_the_work_dir_and_the_venv_survives_a_wipe(tmp_path: Path) -> None:
    venvs = [tmp_path / f"venvs/cp3{m}/lib/python3.{m}/site-packages" for m in (11, 12)]
    work = tmp_path / "w" / "abc"
    for venv in venvs:
        (venv / "torch" / "include").mkdir(parents=True)
        (venv / "torch" / "include" / "a.h").write_text("#pragma once\n")
        wipe(work)
        work.mkdir(parents=True)
        site = link_site(work, venv)
        assert site == work / "site"  # the same path whichever venv it points to
        assert (site / "torch" / "include" / "a.h").read_text() == "#pragma once\n"
    wipe(work)
    assert not work.exists()
    assert all((venv / "torch" / "include" / "a.h").exists() for venv in venvs)


def test_headers_get_one_time_so_pragma_once_decides_the_same_everywhere(tmp_path: Path) -> None:
    for rel in ("torch/include/ATen/ops/x_native.h", "nvidia/cu13/include/cublas_v2.h", "torch/lib/libc10.so"):
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(rel)
    assert settle_header_times(tmp_path) == 2
    assert int((tmp_path / "torch/include/ATen/ops/x_native.h").stat().st_mtime) == HEADER_TIME
    assert int((tmp_path / "nvidia/cu13/include/cublas_v2.h").stat().st_mtime) == HEADER_TIME
    assert int((tmp_path / "torch/lib/libc10.so").stat().st_mtime) != HEADER_TIME  # only headers
    assert settle_header_times(tmp_path) == 0  # already settled: nothing touched again


def test_a_failed_tree_is_kept_aside_for_the_next_python(tmp_path: Path) -> None:
    work = tmp_path / "abc"
    (work / "src").mkdir(parents=True)
    (work / "src" / "setup.py").write_text("x")
    venv = tmp_path / "venv"
    venv.mkdir()
    link_site(work, venv)
    kept = set_aside(work, "cp311")
    assert kept == tmp_path / "abc-cp311-failed"
    assert (kept / "src" / "setup.py").read_text() == "x"
    assert not work.exists()
    assert venv.is_dir()
    assert (kept / "site").is_symlink()
    assert set_aside(work, "cp312") is None
