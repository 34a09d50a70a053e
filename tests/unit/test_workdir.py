"""The paths a compile sees are the same for every Python of a group (dswheels/effects/workdir.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from dswheels.core.naming import parse_cell_id
from dswheels.effects.workdir import (
    HEADER_TIME,
    group_id,
    link_site,
    set_aside,
    settle_header_times,
    wipe,
    work_dir_for,
)


def _group_dir(cell: str, root: Path) -> Path:
    return work_dir_for(root, group_id(SimpleNamespace(cell=parse_cell_id(cell))))  # type: ignore[arg-type]


def test_the_pythons_of_a_group_build_in_one_directory(tmp_path: Path) -> None:
    ids = [f"ds0.19.8-torch2.14-cu130-cp3{m}-linux_x86_64" for m in (10, 11, 12, 13)]
    assert len({_group_dir(cid, tmp_path) for cid in ids}) == 1
    assert _group_dir("ds0.19.8-torch2.15-cu130-cp311-linux_x86_64", tmp_path) != _group_dir(ids[0], tmp_path)
    assert _group_dir("ds0.19.8-torch2.14-cu126-cp311-linux_x86_64", tmp_path) != _group_dir(ids[0], tmp_path)
    assert len(_group_dir(ids[0], tmp_path).name) == 10  # short for Windows' MAX_PATH


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
