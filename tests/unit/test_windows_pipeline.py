"""The Windows half of the one build pipeline, as far as it runs without Windows.

The source (PyPI's sdist plus the files win32 needs), the ``link.exe`` that setuptools will
run, the compile parallelism of a hosted runner, and the canary.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dswheels.building.parallelism import GIB, fit_jobs, split_parallelism
from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import EnvironmentMismatchError
from dswheels.kernel.model import PlannedCell, Platform, SourceKind
from dswheels.kernel.naming import cell_id, parse_cell_id
from dswheels.kernel.platform_traits import msvc_bin_dir
from dswheels.plan.canary import CANARY_OPS, PROFILER_API_OPS, pick_canary, restrict_ops
from dswheels.plan.costs import estimate_job, load_costs
from dswheels.plan.matrix.parse import parse_matrix
from dswheels.plan.planner import Combo, plan
from dswheels.platforms.find_tools import MsvcEnv, check_msvc_link
from dswheels.platforms.windows import add_windows_files
from tests.conftest import ROOT

COMPAT = load_compat()
SHIPPED = parse_matrix((ROOT / "matrix" / "matrix.yml").read_text(), "matrix/matrix.yml", COMPAT)


def _planned(cid: str) -> PlannedCell:
    cell = parse_cell_id(cid)
    combo = Combo(
        deepspeed=cell.deepspeed, torch=cell.torch, variant=cell.variant, python=cell.python, platform=cell.platform
    )
    return plan(SHIPPED, COMPAT, combo=combo).planned[0]


# --- the source -----------------------------------------------------------------------------------


def test_every_windows_cell_of_the_shipped_matrix_builds_from_the_pypi_sdist() -> None:
    windows = [p for p in plan(SHIPPED, COMPAT).planned if p.cell.platform is Platform.WIN_AMD64]
    assert windows
    assert {p.source.kind for p in windows} == {SourceKind.SDIST}
    assert {p.source.sha256 for p in windows} == {""}  # nothing pinned by hand: PyPI's JSON API gives it


def test_the_files_win32_needs_are_byte_for_byte_deepspeeds(tmp_path: Path) -> None:
    files = COMPAT.windows_files
    assert set(files) == {"MANIFEST_win.in", "bin/deepspeed.bat", "bin/ds_report.bat"}
    # DeepSpeed's git, v0.14.5..v0.19.5 (74f3dcab6): two lines each, LF line ends, and the template
    assert files["bin/deepspeed.bat"] == '@echo off\npython "%~dp0\\ds" %*\n'
    assert files["bin/ds_report.bat"] == '@echo off\npython "%~dp0\\ds_report" %*\n'
    assert files["MANIFEST_win.in"].splitlines()[-3:] == ["prune csrc", "prune op_builder", "prune accelerator"]
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "ds_report.bat").write_bytes(b"kept\r\n")  # a git archive already has it
    notes = add_windows_files(tmp_path, files)
    assert [n.split(" ", 2)[1] for n in notes] == ["MANIFEST_win.in", "bin/deepspeed.bat"]
    assert (tmp_path / "bin" / "deepspeed.bat").read_bytes() == files["bin/deepspeed.bat"].encode()
    assert (tmp_path / "bin" / "ds_report.bat").read_bytes() == b"kept\r\n"


# --- link.exe -------------------------------------------------------------------------------------


def _msvc(tmp_path: Path) -> MsvcEnv:
    root = tmp_path / "VC" / "Tools" / "MSVC" / "14.44.35207"
    env = {"VCToolsInstallDir": str(root) + "\\", "VSCMD_ARG_HOST_ARCH": "x64", "VSCMD_ARG_TGT_ARCH": "x64"}
    bin_dir = msvc_bin_dir(env)
    assert bin_dir is not None
    bin_dir = bin_dir.replace("\\", "/")  # this machine's separator; the order is what is tested
    Path(bin_dir).mkdir(parents=True)
    (Path(bin_dir) / "link.exe").write_bytes(b"MZ")
    return MsvcEnv(toolset="14.44.35207", bin_dir=bin_dir)


def test_git_bashs_gnu_link_first_on_path_is_refused(tmp_path: Path) -> None:
    msvc = _msvc(tmp_path)
    git_usr_bin = tmp_path / "Git" / "usr" / "bin"
    git_usr_bin.mkdir(parents=True)
    (git_usr_bin / "link.exe").write_bytes(b"MZ")  # GNU coreutils' link, as Git Bash puts it first
    with pytest.raises(EnvironmentMismatchError, match=r"would link with .*Git/usr/bin/link\.exe, not MSVC's") as err:
        check_msvc_link(f"{git_usr_bin};{msvc.bin_dir}", msvc, sep=";")
    assert "pwsh" in (err.value.hint or "")
    # what the build does: MSVC's own directory first, whatever the shell put before it
    check_msvc_link(f"{msvc.bin_dir};{git_usr_bin};{msvc.bin_dir}", msvc, sep=";")


def test_no_link_exe_at_all_is_refused(tmp_path: Path) -> None:
    msvc = _msvc(tmp_path)
    (Path(msvc.bin_dir) / "link.exe").unlink()
    with pytest.raises(EnvironmentMismatchError, match=r"no link\.exe at all"):
        check_msvc_link(msvc.bin_dir, msvc, sep=";")


# --- parallelism ----------------------------------------------------------------------------------


def test_a_hosted_windows_runner_never_runs_more_compiles_than_it_has_cores() -> None:
    # 4 vCPU / 16 GB (about 14 GiB available): DeepSpeed alone would give each nvcc min(cores, 8) threads
    jobs, why = fit_jobs(4, 14 * GIB, cuda=True)
    assert jobs == 4
    assert "4 core(s), 14.0 GiB available" in why
    for ops, archs in [(1, 6), (2, 6), (16, 8), (3, 0)]:
        p = split_parallelism(jobs, ops=ops, archs=archs)
        assert p.at_once * p.ninja_jobs * p.nvcc_threads <= jobs
    assert split_parallelism(jobs, ops=2, archs=6).nvcc_threads == 2  # the canary: the archs in parallel
    # a runner short of memory gets fewer compiles
    assert fit_jobs(4, 6 * GIB, cuda=True)[0] == 2
    assert fit_jobs(4, 6 * GIB, cuda=False)[0] == 4


# --- the canary -----------------------------------------------------------------------------------


def test_the_canary_covers_the_classes_that_break_windows_builds() -> None:
    """Issue 25: the newest CUDA (>= 13.2: CCCL needs /Zc:preprocessor) and an op that includes
    cuda_profiler_api.h (its own installer component: C1083 when it is not installed)."""
    everything = plan(SHIPPED, COMPAT).planned
    canary = pick_canary(everything)
    assert canary is not None
    assert canary.cell.platform is Platform.WIN_AMD64
    assert canary.cell.variant.is_cuda
    assert set(canary.ops.build_names) == set(CANARY_OPS)
    windows_cuda = [p for p in everything if p.cell.platform is Platform.WIN_AMD64 and p.cell.variant.is_cuda]
    tc = canary.toolchain
    assert tc.nvcc == max(p.toolchain.nvcc or () for p in windows_cuda)
    assert tc.nvcc is not None
    assert tc.nvcc >= (13, 2)
    assert "-Xcompiler=/Zc:preprocessor" in tc.nvcc_flags  # the cell runs the workaround of that class
    newest = [p for p in windows_cuda if p.toolchain.nvcc == tc.nvcc]
    assert len(tc.arch_list) == min(len(p.toolchain.arch_list) for p in newest)
    assert "cuda_profiler_api" in tc.cuda_components
    left = dict(canary.ops.left_out)
    assert left["fused_lamb"].startswith("canary:")
    assert not canary.cell.python.free_threaded
    assert pick_canary([p for p in everything if p.cell.platform is Platform.LINUX_X86_64]) is None


def test_the_canary_builds_the_cheapest_op_of_each_class_within_half_an_hour_on_a_runner() -> None:
    canary = pick_canary(plan(SHIPPED, COMPAT).planned)
    assert canary is not None
    costs = load_costs()
    archs = len(canary.toolchain.arch_list)

    def seconds(op: str) -> float:
        host, device = costs.op(op).seconds("windows", costs.runners["windows"])
        return host + device * archs

    (profiler_op,) = set(CANARY_OPS) & set(PROFILER_API_OPS)
    assert profiler_op == min(PROFILER_API_OPS, key=seconds)
    estimate = estimate_job([canary], costs)
    # about half an hour by the model (the CUDA install from the archives: 12 minutes assumed, compile_times.yml)
    assert 15 <= estimate.minutes <= 35, estimate.describe()


def test_restrict_ops_keeps_the_plan_and_names_what_is_not_planned() -> None:
    item = _planned("ds0.19.8-torch2.14-cu130-cp311-win_amd64")
    small = restrict_ops(item, ["fused_adam"], why="testing")
    assert small.ops.build == (("fused_adam", "FUSED_ADAM"),)
    assert small.toolchain == item.toolchain
    assert cell_id(small.cell) == cell_id(item.cell)
    with pytest.raises(ValueError, match=r"not planned for this cell: pin_memory"):
        restrict_ops(item, ["pin_memory"], why="x")  # POSIX only: left out on Windows
