"""The build step (``dswheels build``): plan the selected cells, build (or only prepare) each with
:func:`dswheels.effects.build.build_cell`, verify each wheel when asked, and say how every cell went."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dswheels.core.building.compiler_cache import SccacheSettings
from dswheels.core.building.parallelism import fit_jobs
from dswheels.core.building.report import CellOutcome
from dswheels.core.compat import load_compat
from dswheels.core.cuda_redist import REDIST_URL
from dswheels.core.locations import WHEELHOUSE
from dswheels.core.model import PlannedCell
from dswheels.core.naming import cell_id
from dswheels.core.sources import TorchSource, TorchSourceKind
from dswheels.core.workflow.canary import restrict_ops
from dswheels.effects import proc
from dswheels.effects.build import BuildOptions, CellResult, build_cell, discard_wheel
from dswheels.effects.interpreter import find_uv
from dswheels.effects.machine import available_memory, cpu_count
from dswheels.effects.sources import env_cache_dir
from dswheels.effects.steps.selection import CellSelection, select_cells
from dswheels.effects.steps.verify import VerifyOptions, verify_wheel
from dswheels.errors import ConfigError, DswheelsError, EnvironmentMismatchError, VerifyError
from dswheels.log import get_reporter

__all__ = ["BuildCellsOptions", "BuildRun", "build_cells", "install_here", "outcome_of"]


@dataclass(frozen=True, kw_only=True, slots=True)
class BuildCellsOptions:
    selection: CellSelection
    ops: tuple[str, ...] = ()  # build only these of the planned ops; (): every planned op
    out_dir: Path = WHEELHOUSE  # wheels go to OUT/<variant>/
    cache_dir: Path | None = None  # downloads and venvs (None: DSWHEELS_CACHE or the user cache dir)
    work_dir: Path | None = None  # sources unpacked and built (None: CACHE/w)
    jobs: int | None = None  # concurrent compiles in all (None: what this machine holds)
    parallel_ops: int = 0  # extensions built at once (0: as many as jobs)
    interpreter: str = "auto"  # auto | current | venv
    torch_source: TorchSource = field(default_factory=lambda: TorchSource(TorchSourceKind.PLAN))
    compiler_cache: str = "auto"  # auto | ccache | sccache | none
    sccache: SccacheSettings = field(default_factory=SccacheSettings)
    debug_symbols: bool = False
    keep_work: bool = False
    prepare_only: bool = False  # stop before the compile (any OS)
    pypi: str | None = None  # PyPI JSON API for DeepSpeed (None: compat.yml's)
    verbose: bool = False
    keep_going: bool = False  # build the other cells after a failure
    verify: VerifyOptions | None = None  # verify every built wheel (a failing one is removed)
    install: bool = False  # the one cell will be installed here (install_here)
    msvc_root: Path | None = None  # Windows cells on Linux: built under Wine with this MSVC root
    wine_cuda: tuple[str, str] = ("auto", REDIST_URL)  # under Wine: CUDA from auto|pypi|nvidia; NVIDIA's redist URL


@dataclass(frozen=True, kw_only=True, slots=True)
class BuildRun:
    planned: tuple[PlannedCell, ...]
    results: tuple[CellResult, ...]  # in the planned order, up to where a failure stopped the run
    out_dir: Path
    stopped_by: DswheelsError | None  # the failure that stopped the run (no keep_going)

    @property
    def failed(self) -> tuple[CellResult, ...]:
        return tuple(r for r in self.results if r.error is not None)

    @property
    def not_built(self) -> tuple[str, ...]:
        """The planned cells a failure kept from being built."""
        return tuple(cell_id(p.cell) for p in self.planned[len(self.results) :])


def _restrict(planned: Sequence[PlannedCell], ops: Sequence[str]) -> tuple[PlannedCell, ...]:
    if not ops:
        return tuple(planned)
    restricted = []
    for item in planned:
        try:
            restricted.append(restrict_ops(item, ops, why="not selected (--ops)"))
        except ValueError as exc:  # noqa: PERF203 - the first cell that lacks one is the error
            raise ConfigError(f"--ops {','.join(ops)}: {cell_id(item.cell)}: {exc}") from None
    return tuple(restricted)


def _jobs(options: BuildCellsOptions, planned: Sequence[PlannedCell]) -> int:
    if options.jobs is not None:
        return options.jobs
    jobs, why = fit_jobs(cpu_count(), available_memory(), cuda=any(p.cell.variant.is_cuda for p in planned))
    get_reporter().info(f"{jobs} concurrent compile(s): {why} (--jobs to change)")
    return jobs


def _cell_options(options: BuildCellsOptions, planned: Sequence[PlannedCell]) -> BuildOptions:
    compat = load_compat()
    cache_dir = (options.cache_dir or env_cache_dir()).expanduser().resolve()
    return BuildOptions(
        out_dir=options.out_dir.resolve(),
        cache_dir=cache_dir,
        work_root=(options.work_dir or cache_dir / "w").expanduser().resolve(),
        compat=compat,
        jobs=_jobs(options, planned),
        interpreter=options.interpreter,
        torch_source=options.torch_source,
        compiler_cache=options.compiler_cache,
        sccache=options.sccache,
        debug_symbols=options.debug_symbols,
        keep_work=options.keep_work,
        pypi_json=options.pypi or compat.sdist_json,
        verbose=options.verbose,
        parallel_ops=options.parallel_ops,
        prepare_only=options.prepare_only,
        msvc_root=options.msvc_root,
        wine_cuda=options.wine_cuda,
    )


def _verify_built(wheel: Path, options: VerifyOptions) -> VerifyError | None:
    """Verify a fresh wheel; a wheel that fails is removed (it must not be published)."""
    failed = verify_wheel(wheel, options).failed
    if not failed:
        return None
    discard_wheel(wheel)
    return VerifyError(
        f"{wheel.name} failed verification (removed from the output)",
        details="\n".join(f"{c.name}: {c.detail}" for c in failed),
        hint="the wheel builds but does not work as built; see the checks above",
    )


def build_cells(options: BuildCellsOptions, *, on_failure: Callable[[CellResult], None]) -> BuildRun:
    """Build every selected cell; ``on_failure`` hears of each failed cell the run goes on after."""
    planned = _restrict(select_cells(options.selection, load_compat()), options.ops)
    cell_options = _cell_options(options, planned)
    if options.install and len(planned) != 1:
        raise ConfigError("--install builds exactly one cell (this environment's)")
    get_reporter().info(f"{len(planned)} cell(s) to build into {cell_options.out_dir}")
    results: list[CellResult] = []
    for item in planned:
        result = build_cell(item, cell_options)
        results.append(result)
        if result.error is None and options.verify is not None and result.wheel is not None:
            result.error = _verify_built(result.wheel, options.verify)
        if result.error is not None:
            if not options.keep_going:
                return BuildRun(
                    planned=planned, results=tuple(results), out_dir=cell_options.out_dir, stopped_by=result.error
                )
            on_failure(result)
    return BuildRun(planned=planned, results=tuple(results), out_dir=cell_options.out_dir, stopped_by=None)


def install_here(wheel: Path) -> None:
    """Install a built wheel into the interpreter running dswheels."""
    uv = find_uv()
    proc.run(
        [uv, "pip", "install", "--python", sys.executable, "--reinstall-package", "deepspeed", str(wheel)],
        error=EnvironmentMismatchError,
        what="installing the wheel",
    )


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def outcome_of(result: CellResult) -> CellOutcome:
    """A cell's row of the build report."""
    manifest = result.manifest_data
    return CellOutcome(
        cell_id=result.cell_id,
        ok=result.error is None,
        wheel=manifest.wheel.filename if manifest else "",
        size=manifest.wheel.size if manifest else 0,
        sha256=manifest.wheel.sha256 if manifest else "",
        seconds=result.seconds,
        ops=tuple((op.name, op.seconds) for op in manifest.ops_built) if manifest else (),
        cache=str(manifest.compiler_cache.get("tool", "")) if manifest and manifest.compiler_cache else "",
        cache_hits=_int(manifest.compiler_cache.get("hits")) if manifest else None,
        cache_misses=_int(manifest.compiler_cache.get("misses")) if manifest else None,
        error=result.error.message if result.error else "",
        log=str(result.log_path or ""),
        op_outcomes=result.op_outcomes if result.error else (),
        error_lines=tuple((result.error.details or "").splitlines()[:20]) if result.error else (),
    )
