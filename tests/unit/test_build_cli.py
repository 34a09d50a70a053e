"""The build/verify/smoke/cibw command lines: selection, bad input, the generated Windows job (no builds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dswheels.cli import main
from dswheels.commands.build import _split_cells, _torch_source, plan_cell_ids
from dswheels.core.compat import load_compat
from dswheels.core.naming import cell_id

DATA = Path(__file__).parent.parent / "data"
CPU = "ds0.19.8-torch2.13-cpu-cp311-linux_x86_64"
CUDA = "ds0.19.8-torch2.14-cu130-cp311-linux_x86_64"


def test_cell_values_may_hold_several_ids() -> None:
    assert _split_cells([f"{CPU} {CUDA}", f"\n{CPU}\t"]) == [CPU, CUDA, CPU]


def test_cells_are_planned_from_the_rules_alone() -> None:
    # the CUDA cell is not in matrix-cpu.yml's torch axis, and is planned anyway
    planned = plan_cell_ids([CPU, CUDA], matrix=DATA / "matrix-cpu.yml", nvcc=None, compat=load_compat())
    assert [cell_id(p.cell) for p in planned] == [CPU, CUDA]
    assert planned[0].ops.build_names == ("cpu_adam", "deepspeed_shm_comm")
    assert planned[1].torch_index == "https://download.pytorch.org/whl/cu130"
    skip = plan_cell_ids([CUDA], matrix=DATA / "matrix-cuda.yml", nvcc="13.2", compat=load_compat())[0]
    assert skip.toolchain.nvcc == (13, 2)
    assert skip.toolchain.skip_cuda_check


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["build", "--cell", CPU, "--only", "*"], "--cell names complete cells"),
        (["build", "--cell", "ds0.19.8-torch2.13-cpu-cp311"], "not a cell id"),
        (["build", "--cell", CPU, "--nvcc", "thirteen"], "--nvcc"),
        (["build", "--jobs", "0", "--cell", CPU], "--jobs must be at least 1"),
        (["build", "--cell", CPU, "--torch-index", "/no/such/dir"], "no such directory"),
        (["verify", "a.whl", "b.whl", "--manifest", "m.json"], "--manifest goes with exactly one wheel"),
    ],
)
def test_bad_input_exits_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = [*argv, "--matrix", str(DATA / "matrix-cpu.yml")] if argv[0] == "build" else argv
    assert main(args) == 2
    assert message in capsys.readouterr().err


def test_torch_sources(tmp_path: Path) -> None:
    assert _torch_source(None).kind == "plan"
    assert _torch_source("pip").kind == "pip"
    assert _torch_source("https://mirror.example/whl/cu130").location == "https://mirror.example/whl/cu130"
    links = _torch_source(str(tmp_path))
    assert (links.kind, links.location) == ("links", str(tmp_path.resolve()))
    (tmp_path / "torch").mkdir()
    index = _torch_source(str(tmp_path))
    assert (index.kind, index.location) == ("index", tmp_path.resolve().as_uri())


def test_cibw_writes_a_windows_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    matrix = tmp_path / "matrix.yml"
    matrix.write_text(
        (DATA / "matrix-cuda.yml")
        .read_text()
        .replace("[linux_x86_64]", "[win_amd64]")
        .replace("linux_x86_64:", "win_amd64:")
        .replace("ubuntu-22.04", "windows-2022"),
    )
    cells = "ds0.19.8-torch2.14-cu130-cp311-win_amd64 ds0.19.8-torch2.14-cu130-cp312-win_amd64"
    code = main(["cibw", "--matrix", str(matrix), "--cell", cells, "--out", str(tmp_path / "o"), "--no-source"])
    assert code == 0
    config = (tmp_path / "o" / "cibuildwheel.toml").read_text()
    assert 'build = "cp311-win_amd64 cp312-win_amd64"' in config
    assert 'DS_BUILD_FUSED_ADAM = "1"' in config
    assert 'CUDA_HOME = "$CUDA_PATH"' in config
    assert "cibuildwheel " in capsys.readouterr().out
