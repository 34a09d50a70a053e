"""The build/verify/smoke command lines: selection, bad input, cells of another OS, --ops (no builds)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from dswheels.cli import build_parser, main
from dswheels.cli.build import FLAGS, _hosts, _split_cells
from dswheels.cli.flags import settle
from dswheels.cli.shared import parse_nvcc_option, parse_torch_source
from dswheels.cuda.redist import REDIST_URL
from dswheels.kernel.compat import load_compat
from dswheels.kernel.naming import cell_id
from dswheels.kernel.platform_traits import WineCudaSource
from dswheels.kernel.sources import TorchSourceKind
from dswheels.plan.effects.selection import NamedCells, PlanFileCells, plan_cell_ids, read_plan_cells
from dswheels.platforms.hosts import HostChoice, WineSettings

DATA = Path(__file__).parent.parent / "data"
CPU = "ds0.19.8-torch2.13-cpu-cp311-linux_x86_64"
CUDA = "ds0.19.8-torch2.14-cu130-cp311-linux_x86_64"


def test_cell_values_may_hold_several_ids() -> None:
    assert _split_cells([f"{CPU} {CUDA}", f"\n{CPU}\t"]) == [CPU, CUDA, CPU]


def test_cells_are_planned_from_the_rules_alone() -> None:
    # the CUDA cell is not in matrix-cpu.yml's torch axis, and is planned anyway
    planned = plan_cell_ids(NamedCells(ids=(CPU, CUDA), matrix=DATA / "matrix-cpu.yml"), load_compat())
    assert [cell_id(p.cell) for p in planned] == [CPU, CUDA]
    assert planned[0].ops.build_names == ("cpu_adam", "deepspeed_shm_comm")
    assert planned[1].torch_index == "https://download.pytorch.org/whl/cu130"
    cuda = NamedCells(ids=(CUDA,), matrix=DATA / "matrix-cuda.yml", nvcc=parse_nvcc_option("13.2"))
    skip = plan_cell_ids(cuda, load_compat())[0]
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
    assert parse_torch_source(None).kind is TorchSourceKind.PLAN
    assert parse_torch_source("pip").kind is TorchSourceKind.PIP
    assert parse_torch_source("https://mirror.example/whl/cu130").location == "https://mirror.example/whl/cu130"
    links = parse_torch_source(str(tmp_path))
    assert (links.kind, links.location) == ("links", str(tmp_path.resolve()))
    (tmp_path / "torch").mkdir()
    index = parse_torch_source(str(tmp_path))
    assert (index.kind, index.location) == ("index", tmp_path.resolve().as_uri())


def _windows_matrix(tmp_path: Path) -> Path:
    matrix = tmp_path / "matrix.yml"
    matrix.write_text(
        (DATA / "matrix-cuda.yml")
        .read_text()
        .replace("[linux_x86_64]", "[win_amd64]")
        .replace("linux_x86_64:", "win_amd64:")
        .replace("manylinux_2_28", "windows-2022"),
    )
    return matrix


@pytest.mark.skipif(sys.platform == "win32", reason="the foreign platform here is Windows")
def test_a_windows_cell_is_refused_here_before_anything_is_fetched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cell = "ds0.19.8-torch2.14-cu130-cp311-win_amd64"
    code = main(["build", "--matrix", str(_windows_matrix(tmp_path)), "--cell", cell, "--out", str(tmp_path / "o")])
    assert code == 9
    err = capsys.readouterr().err
    assert f"{cell} is built on Windows, and this machine runs Linux" in err
    assert "--prepare-only" in err
    assert not (tmp_path / "o" / "cu130").exists()


@pytest.mark.skipif(sys.platform == "win32", reason="Wine is Linux's host of Windows cells")
def test_an_msvc_root_builds_a_windows_cell_under_wine_and_is_checked_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cell = "ds0.19.8-torch2.14-cu130-cp311-win_amd64"
    root = tmp_path / "no-msvc"
    matrix = str(_windows_matrix(tmp_path))
    code = main(["build", "--matrix", matrix, "--cell", cell, "--out", str(tmp_path / "o"), "--msvc-root", str(root)])
    assert code == 9
    err = capsys.readouterr().err
    assert f"{root} is not an MSVC root" in err  # the Wine host's check, before anything is fetched
    assert not (tmp_path / "o" / "cu130").exists()


def test_the_wine_flags_are_the_windows_platforms_host_choice(tmp_path: Path) -> None:
    def hosts(*argv: str, env: dict[str, str] | None = None) -> HostChoice:
        args = build_parser().parse_args(["build", *argv])
        settle(args, FLAGS, env or {})
        return _hosts(args)

    assert hosts() == HostChoice()
    assert hosts("--wine-cuda", "nvidia") == HostChoice()  # nothing under Wine without an MSVC root
    assert hosts("--msvc-root", str(tmp_path)) == HostChoice(wine=WineSettings(msvc_root=tmp_path))
    assert hosts("--msvc-root", str(tmp_path), "--wine-cuda", "nvidia", "--cuda-redist-url", "http://m/") == HostChoice(
        wine=WineSettings(msvc_root=tmp_path, cuda_source=WineCudaSource.NVIDIA, cuda_redist_url="http://m/")
    )
    assert WineSettings(msvc_root=tmp_path).cuda_redist_url == REDIST_URL
    from_env = {"DSWHEELS_MSVC_ROOT": str(tmp_path), "DSWHEELS_CUDA_REDIST_URL": "http://m/"}
    assert hosts(env=from_env) == HostChoice(wine=WineSettings(msvc_root=tmp_path, cuda_redist_url="http://m/"))


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        ("cpu_adam,no_such_op", "not planned for this cell: no_such_op (it builds cpu_adam, deepspeed_shm_comm)"),
        ("async_io", "not planned for this cell: async_io"),
    ],
)
def test_ops_must_be_planned_for_every_cell(ops: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["build", "--matrix", str(DATA / "matrix-cpu.yml"), "--cell", CPU, "--ops", ops, "--prepare-only"])
    assert code == 2
    assert message in capsys.readouterr().err


def test_prepare_only_compiles_nothing_so_it_neither_verifies_nor_installs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["build", "--matrix", str(DATA / "matrix-cpu.yml"), "--cell", CPU, "--prepare-only", "--verify"]) == 2
    assert "--prepare-only compiles nothing" in capsys.readouterr().err


# --- --plan: the cells of a plan, as planned ---------------------------------------------------------


def _plan_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    assert main(["plan", "--format", "json", "--matrix", str(DATA / "matrix-golden.yml")]) == 0
    path = tmp_path / "plan.json"
    path.write_text(capsys.readouterr().out, encoding="utf-8")
    return path


def test_a_plans_cells_are_built_as_planned(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _plan_file(tmp_path, capsys)
    everything = read_plan_cells(PlanFileCells(path=path))
    data = json.loads(path.read_text(encoding="utf-8"))
    assert [cell_id(p.cell) for p in everything] == [c["id"] for c in data["cells"]]
    # exactly the plan's resolution, not a new one: an edit to the file is what gets built
    data["cells"][1]["toolchain"]["notes"] = ["edited in the plan file"]
    path.write_text(json.dumps(data), encoding="utf-8")
    wanted = data["cells"][1]["id"]
    (picked,) = read_plan_cells(PlanFileCells(path=path, ids=(wanted, wanted)))
    assert (cell_id(picked.cell), picked.toolchain.notes) == (wanted, ("edited in the plan file",))
    globbed = read_plan_cells(PlanFileCells(path=path, only=("ds0.15.1-*",)))
    assert [cell_id(p.cell) for p in globbed] == [c["id"] for c in data["cells"] if c["id"].startswith("ds0.15.1-")]


@pytest.mark.parametrize(
    ("extra", "edit", "message"),
    [
        (["--deepspeed", "0.19.8"], None, "--plan builds cells as the plan resolved them"),
        (["--nvcc", "13.0"], None, "--plan builds cells as the plan resolved them"),
        (["--cell", CPU], None, f"not in the plan {{path}} (14 cells): {CPU}"),
        (["--only", "ds9.*"], None, "matches no cell of the plan"),
        (["--cell", "ds0.15.1-torch2.1-cu121-cp311-win_amd64", "--only", "*"], None, "give one"),
        ([], '{"schema": "dswheels.manifest/3"}', "is not a plan: schema is 'dswheels.manifest/3'"),
        ([], "{not json", "cannot be read: "),
        ([], "", "no plan file at"),
    ],
)
def test_bad_plan_input_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], edit: str | None, message: str
) -> None:
    path = _plan_file(tmp_path, capsys)
    if edit == "":
        path.unlink()
    elif edit is not None:
        path.write_text(edit, encoding="utf-8")
    assert main(["build", "--plan", str(path), *extra]) == 2
    assert message.format(path=path) in capsys.readouterr().err


def test_smoke_takes_many_wheels_and_reports_each(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every wheel is tried and reported; a failing one stops none of the others (no venv is made for
    these: their names already say they are no dswheels wheels)."""
    wheels = [tmp_path / "a-1.0-py3-none-any.whl", tmp_path / "deepspeed-0.19.8-py3-none-any.whl"]
    report = tmp_path / "smoke.json"
    assert main(["smoke", *map(str, wheels), "--report", str(report)]) == 2
    captured = capsys.readouterr()
    assert "a-1.0-py3-none-any.whl is a wheel of a, not of deepspeed" in captured.err
    assert "deepspeed-0.19.8-py3-none-any.whl has no dswheels label" in captured.err
    assert "2 of 2 wheel(s) failed the smoke test" in captured.err
    assert "smoke: 0 of 2 wheel(s) passed" in captured.out
    data = json.loads(report.read_text(encoding="utf-8"))
    assert (data["schema"], data["ok"]) == ("dswheels.smoke/2", False)
    assert [(w["wheel"], w["ok"]) for w in data["wheels"]] == [(w.name, False) for w in wheels]
    # one wheel: its own error, as before
    assert main(["smoke", str(wheels[0])]) == 2
    assert "is a wheel of a, not of deepspeed" in capsys.readouterr().err
