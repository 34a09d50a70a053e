"""The build driver (building/step.py: build_cells) with a stand-in for the per-cell build, a recording
runner in place of the process seam (proc.run) and a set clock: which cells it builds and in what order, with
which options, jobs and cache; --ops; --keep-going; a wheel that fails verification removed; --install. The
real builds are the integration tests."""

from __future__ import annotations

import datetime as dt
import itertools
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from dswheels.building import step as driver
from dswheels.building.effects import cell as cell_module
from dswheels.building.effects.cell import BuildOptions, CellResult, CellStatus, build_cell
from dswheels.building.parallelism import GIB
from dswheels.building.step import BuildRun, build_cells, install_here
from dswheels.host import proc
from dswheels.host.cache import CacheLayout
from dswheels.host.machine import host_os
from dswheels.kernel.compat import Compat, load_compat
from dswheels.kernel.errors import BuildError, ConfigError, DswheelsError, EnvironmentMismatchError, VerifyError
from dswheels.kernel.manifest import manifest_name
from dswheels.kernel.model import PlannedCell
from dswheels.kernel.naming import cell_id, wheel_filename
from dswheels.plan.effects.selection import NamedCells, select_cells
from dswheels.verify.registry import Check
from dswheels.verify.static_checks import Expected, ExpectedFrom
from dswheels.verify.step import VerifyOptions, WheelVerification
from tests.conftest import ROOT

CPU_311 = "ds0.19.8-torch2.13-cpu-cp311-linux_x86_64"
CU130 = "ds0.19.8-torch2.14-cu130-cp311-linux_x86_64"
CPU_312 = "ds0.19.8-torch2.13-cpu-cp312-linux_x86_64"
CELLS = (CPU_311, CU130, CPU_312)


@dataclass
class RecordingRunner:
    """Stands in for proc.run, the process seam: records each command and runs nothing."""

    calls: list[tuple[tuple[str, ...], dict[str, object]]] = field(default_factory=list)

    def __call__(self, argv: Sequence[str | object], /, **kwargs: object) -> proc.RunResult:
        args = tuple(str(a) for a in argv)
        self.calls.append((args, kwargs))
        return proc.RunResult(argv=args, returncode=0, duration=0.0, tail=(), output="", log_path=None)


@dataclass
class FakeBuild:
    """Stands in for build_cell: writes a wheel and its manifest into OUT/<variant>/ unless told to fail."""

    fail: Mapping[str, str] = field(default_factory=dict)  # cell id -> the error's message
    calls: list[tuple[PlannedCell, BuildOptions, CacheLayout, int]] = field(default_factory=list)
    compats: list[Compat] = field(default_factory=list)

    def __call__(
        self,
        planned: PlannedCell,
        options: BuildOptions,
        cache: CacheLayout,
        *,
        compat: Compat,
        jobs: int,
    ) -> CellResult:
        self.calls.append((planned, options, cache, jobs))
        self.compats.append(compat)
        cid = cell_id(planned.cell)
        if cid in self.fail:
            error = BuildError(self.fail[cid])
            return CellResult(cell_id=cid, planned=planned, status=CellStatus.FAILED, duration=1.0, error=error)
        wheel = options.out_dir / planned.cell.variant.name / wheel_filename(planned.cell)
        wheel.parent.mkdir(parents=True, exist_ok=True)
        wheel.write_bytes(b"PK")
        manifest = wheel.with_name(manifest_name(wheel.name))
        manifest.write_text("{}", encoding="utf-8")
        return CellResult(
            cell_id=cid, planned=planned, status=CellStatus.BUILT, duration=2.0, wheel=wheel, manifest=manifest
        )

    @property
    def built(self) -> list[str]:
        return [cell_id(planned.cell) for planned, *_ in self.calls]


def _verifier(failing: set[str], seen: list[tuple[Path, VerifyOptions, CacheLayout]]) -> driver.Verifier:
    def verify(wheel: Path, options: VerifyOptions, cache: CacheLayout) -> WheelVerification:
        seen.append((wheel, options, cache))
        bad = wheel.name in failing
        check = Check(name="ops load", ok=not bad, detail="cpu_adam: undefined symbol" if bad else "")
        expected = Expected(cell=_planned(CPU_311).cell, ops=(), source=ExpectedFrom.PLAN)
        return WheelVerification(wheel=wheel, expected=expected, static=(check,), runtime=None)

    return verify


def _planned(cid: str) -> PlannedCell:
    return select_cells(NamedCells(ids=(cid,), matrix=ROOT / "matrix" / "matrix.yml"), load_compat())[0]


def _options(tmp_path: Path, ids: Sequence[str] = CELLS, **kwargs: object) -> BuildOptions:
    selection = NamedCells(ids=tuple(ids), matrix=ROOT / "matrix" / "matrix.yml")
    return BuildOptions(selection=selection, **{"out_dir": tmp_path / "out", **kwargs})  # type: ignore[arg-type]


def _cache(tmp_path: Path) -> CacheLayout:
    return CacheLayout(tmp_path / "cache")


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> RecordingRunner:
    """In place of the process seam: every process the code under test starts is recorded, none runs."""
    recording = RecordingRunner()
    monkeypatch.setattr(proc, "run", recording)
    return recording


def _not_called(result: CellResult) -> None:
    pytest.fail(f"on_failure heard of {result.cell_id} without --keep-going")


def test_builds_the_selected_cells_in_order_with_one_options_host_and_job_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    build = FakeBuild()
    cache = _cache(tmp_path)
    run = build_cells(_options(tmp_path, jobs=3, out_dir=Path("out")), cache, on_failure=_not_called, build=build)
    assert build.built == list(CELLS)
    assert {id(options) for _, options, _, _ in build.calls} == {id(build.calls[0][1])}  # one options, not copies
    options = build.calls[0][1]
    assert options.out_dir == (tmp_path / "out").resolve()
    assert all(c is cache and jobs == 3 for _, _, c, jobs in build.calls)
    assert len({id(compat) for compat in build.compats}) == 1  # compat.yml read once for the run
    assert [r.status for r in run.results] == [CellStatus.BUILT] * 3
    assert run.failed == ()
    assert run.not_built == ()
    assert run.stopped_by is None
    assert run.out_dir == options.out_dir


def test_ops_restricts_every_cell_and_names_a_cell_that_lacks_one(tmp_path: Path) -> None:
    build = FakeBuild()
    build_cells(
        _options(tmp_path, ops=("cpu_adam", "pin_memory")), _cache(tmp_path), on_failure=_not_called, build=build
    )
    for planned, *_ in build.calls:
        assert planned.ops.build_names == ("cpu_adam", "pin_memory")
        assert ("fused_adam", "not selected (--ops)") in planned.ops.left_out
    with pytest.raises(ConfigError, match=f"--ops deepspeed_shm_comm: {CU130}: not planned for this cell"):
        build_cells(
            _options(tmp_path, ops=("deepspeed_shm_comm",)), _cache(tmp_path), on_failure=_not_called, build=FakeBuild()
        )


def test_without_keep_going_the_first_failure_stops_the_run(tmp_path: Path) -> None:
    build = FakeBuild(fail={CU130: "nvcc failed"})
    run = build_cells(_options(tmp_path), _cache(tmp_path), on_failure=_not_called, build=build)
    assert build.built == [CPU_311, CU130]
    assert isinstance(run.stopped_by, BuildError)
    assert run.stopped_by.message == "nvcc failed"
    assert [r.cell_id for r in run.failed] == [CU130]
    assert run.not_built == (CPU_312,)


def test_keep_going_builds_the_rest_and_reports_each_failure(tmp_path: Path) -> None:
    build = FakeBuild(fail={CPU_311: "cpu_adam failed"})
    heard: list[CellResult] = []
    run = build_cells(_options(tmp_path, keep_going=True), _cache(tmp_path), on_failure=heard.append, build=build)
    assert build.built == list(CELLS)
    assert [r.cell_id for r in heard] == [CPU_311]
    assert [r.cell_id for r in run.failed] == [CPU_311]
    assert run.failed[0].reason == "cpu_adam failed"
    assert run.stopped_by is None
    assert run.not_built == ()


def test_a_wheel_that_fails_verification_is_removed_and_its_cell_failed(tmp_path: Path) -> None:
    bad = wheel_filename(_planned(CU130).cell)
    seen: list[tuple[Path, VerifyOptions, CacheLayout]] = []
    verify_options = VerifyOptions(matrix=ROOT / "matrix" / "matrix.yml")
    options = _options(tmp_path, verify=verify_options, keep_going=True)
    heard: list[CellResult] = []
    cache = _cache(tmp_path)
    run = build_cells(options, cache, on_failure=heard.append, build=FakeBuild(), verify=_verifier({bad}, seen))
    assert [(options, verify_cache) for _, options, verify_cache in seen] == [(verify_options, cache)] * 3
    by_id = {r.cell_id: r for r in run.results}
    failed = by_id[CU130]
    assert failed.status is CellStatus.FAILED
    assert isinstance(failed.error, VerifyError)
    assert "ops load: cpu_adam: undefined symbol" in (failed.error.details or "")
    assert failed.wheel is not None
    assert not failed.wheel.exists()  # removed, with its manifest: it must not be published
    assert failed.manifest is not None
    assert not failed.manifest.exists()
    assert heard == [failed]
    for cid in (CPU_311, CPU_312):
        assert by_id[cid].status is CellStatus.BUILT
        wheel = by_id[cid].wheel
        assert wheel is not None
        assert wheel.is_file()


def test_verification_is_skipped_without_verify_and_for_a_failed_cell(tmp_path: Path) -> None:
    seen: list[tuple[Path, VerifyOptions, CacheLayout]] = []
    verify = _verifier(set(), seen)
    build_cells(_options(tmp_path), _cache(tmp_path), on_failure=_not_called, build=FakeBuild(), verify=verify)
    assert seen == []
    options = _options(tmp_path, verify=VerifyOptions(), keep_going=True)
    build = FakeBuild(fail={CU130: "failed"})
    build_cells(options, _cache(tmp_path), on_failure=lambda _: None, build=build, verify=verify)
    assert [wheel.name for wheel, _, _ in seen] == [wheel_filename(_planned(c).cell) for c in (CPU_311, CPU_312)]


def test_install_builds_exactly_one_cell_and_installs_it_through_the_process_seam(
    tmp_path: Path, runner: RecordingRunner
) -> None:
    build = FakeBuild()
    with pytest.raises(ConfigError, match="--install builds exactly one cell"):
        build_cells(_options(tmp_path, install=True), _cache(tmp_path), on_failure=_not_called, build=build)
    assert build.calls == []  # refused before anything was built
    run = build_cells(
        _options(tmp_path, (CPU_311,), install=True), _cache(tmp_path), on_failure=_not_called, build=build
    )
    wheel = run.results[0].wheel
    assert wheel is not None
    install_here(wheel)
    [(argv, kwargs)] = runner.calls
    assert argv[1:] == ("pip", "install", "--python", sys.executable, "--reinstall-package", "deepspeed", str(wheel))
    assert Path(argv[0]).name.startswith("uv")
    assert kwargs["error"] is EnvironmentMismatchError


@pytest.mark.parametrize(
    ("cells", "memory", "jobs"),
    [
        ((CPU_311,), 64 * GIB, 8),  # the cores
        ((CPU_311,), 5 * GIB, 4),  # ~1 GiB per C++ compile, one left free
        ((CPU_311, CU130), 5 * GIB, 2),  # ~2 GiB per CUDA compile: any CUDA cell decides
        ((CPU_311,), None, 8),  # memory unknown: the cores
    ],
)
def test_the_job_count_fits_the_machine_unless_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cells: tuple[str, ...], memory: int | None, jobs: int
) -> None:
    monkeypatch.setattr(driver, "cpu_count", lambda: 8)
    monkeypatch.setattr(driver, "available_memory", lambda: memory)
    build = FakeBuild()
    build_cells(_options(tmp_path, cells), _cache(tmp_path), on_failure=_not_called, build=build)
    assert {j for *_, j in build.calls} == {jobs}
    build = FakeBuild()
    build_cells(_options(tmp_path, cells, jobs=5), _cache(tmp_path), on_failure=_not_called, build=build)
    assert {j for *_, j in build.calls} == {5}


def test_build_cell_reads_the_environment_and_clock_and_fails_in_its_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runner: RecordingRunner
) -> None:
    """A cell of the other OS, without Wine: the toolchain check refuses it before anything is fetched or run.
    The log is named by the clock, the duration is its monotonic clock's, the stale wheel of the cell is
    removed, and no process is started."""
    other = "ds0.19.8-torch2.13-cpu-cp311-" + ("win_amd64" if host_os() == "linux" else "linux_x86_64")
    planned = _planned(other)
    ticks = itertools.count(100.0, 0.5)
    monkeypatch.setattr(cell_module, "monotonic", lambda: next(ticks))
    monkeypatch.setattr(cell_module, "utc_now", lambda: dt.datetime(2026, 11, 27, 16, 0, tzinfo=dt.timezone.utc))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    options = _options(tmp_path, (other,), out_dir=(tmp_path / "out").resolve())
    stale = options.out_dir / planned.cell.variant.name / wheel_filename(planned.cell)
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"PK")
    result = build_cell(planned, options, _cache(tmp_path), compat=load_compat(), jobs=2)
    assert result.status is CellStatus.FAILED
    assert not result.ok
    assert isinstance(result.error, DswheelsError)
    assert "this machine runs" in result.reason
    assert result.log_path == options.out_dir / "logs" / f"{other}-20261127T160000Z.log"
    assert result.log_path.is_file()
    assert f"full log: {result.log_path}" in (result.error.hint or "")
    assert result.duration > 0
    assert result.duration == pytest.approx(0.5 * round(result.duration / 0.5))  # ticks of the set clock
    assert not stale.exists()
    assert runner.calls == []
    with pytest.raises(AttributeError):
        result.status = CellStatus.BUILT  # type: ignore[misc]  # frozen


def test_the_result_of_a_run_is_what_the_cells_left(tmp_path: Path) -> None:
    """BuildRun: failed and not_built follow the results (the command's exit code and report read them)."""
    planned = tuple(_planned(c) for c in CELLS)
    ok = CellResult(cell_id=CPU_311, planned=planned[0], status=CellStatus.BUILT, duration=1.0)
    bad = CellResult(cell_id=CU130, planned=planned[1], status=CellStatus.FAILED, duration=1.0, error=BuildError("x"))
    run = BuildRun(planned=planned, results=(ok, bad), out_dir=tmp_path, stopped_by=bad.error)
    assert run.failed == (bad,)
    assert run.not_built == (CPU_312,)
    assert ok.ok
    assert ok.reason == ""


def test_the_cache_is_the_flag_s_else_the_environment_s_and_a_token_is_no_reason_to_fail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DSWHEELS_CACHE", str(tmp_path / "env-cache"))
    monkeypatch.setenv("GITHUB_TOKEN", "not a token")  # a space: it cannot go into a header
    monkeypatch.chdir(tmp_path)
    cache = CacheLayout.here()  # a build: no token read, and a bad one is no reason to fail
    assert cache.root == (tmp_path / "env-cache").resolve()
    assert CacheLayout.here(Path("given")).root == (tmp_path / "given").resolve()  # --cache-dir first
    assert CacheLayout.here(Path("~/x")).root == (Path.home() / "x").resolve()
