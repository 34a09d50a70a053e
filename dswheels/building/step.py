"""The build step (``dswheels build``): plan the selected cells, build (or only prepare) each with
:func:`dswheels.building.effects.cell.build_cell`, verify each wheel when asked, and say how every cell went."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from dswheels.building.effects.cell import BuildOptions, CellResult, CellStatus, build_cell, discard_wheel
from dswheels.building.parallelism import fit_jobs
from dswheels.building.summary import CellOutcome
from dswheels.host import proc
from dswheels.host.cache import CacheLayout
from dswheels.host.log import get_reporter
from dswheels.host.machine import available_memory, cpu_count
from dswheels.host.venvs import find_uv
from dswheels.kernel.compat import Compat, load_compat
from dswheels.kernel.errors import ConfigError, DswheelsError, EnvironmentMismatchError, VerifyError
from dswheels.kernel.model import PlannedCell
from dswheels.kernel.naming import cell_id
from dswheels.plan.canary import restrict_ops
from dswheels.plan.effects.selection import select_cells
from dswheels.verify.step import VerifyOptions, WheelVerification, verify_wheel

__all__ = ["BuildOptions", "BuildRun", "CellBuilder", "Verifier", "build_cells", "install_here", "outcome_of"]


class CellBuilder(Protocol):
    """What builds one cell (:func:`dswheels.building.effects.cell.build_cell`; a test's stand-in)."""

    def __call__(
        self, planned: PlannedCell, options: BuildOptions, cache: CacheLayout, *, compat: Compat, jobs: int
    ) -> CellResult: ...


Verifier = Callable[[Path, VerifyOptions, CacheLayout], WheelVerification]  # verify_wheel, or a test's stand-in


@dataclass(frozen=True, kw_only=True, slots=True)
class BuildRun:
    planned: tuple[PlannedCell, ...]
    results: tuple[CellResult, ...]  # in the planned order, up to where a failure stopped the run
    out_dir: Path
    stopped_by: DswheelsError | None  # the failure that stopped the run (no keep_going)

    @property
    def failed(self) -> tuple[CellResult, ...]:
        return tuple(r for r in self.results if r.status is CellStatus.FAILED)

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


def _jobs(options: BuildOptions, planned: Sequence[PlannedCell]) -> int:
    if options.jobs is not None:
        return options.jobs
    jobs, why = fit_jobs(cpu_count(), available_memory(), cuda=any(p.cell.variant.is_cuda for p in planned))
    get_reporter().info(f"{jobs} concurrent compile(s): {why} (--jobs to change)")
    return jobs


def _verify_built(result: CellResult, options: VerifyOptions, cache: CacheLayout, verify: Verifier) -> CellResult:
    """A fresh wheel verified; one that fails is removed (it must not be published) and its cell failed."""
    assert result.wheel is not None  # noqa: S101 - a built cell has its wheel
    failed = verify(result.wheel, options, cache).failed
    if not failed:
        return result
    discard_wheel(result.wheel)
    error = VerifyError(
        f"{result.wheel.name} failed verification (removed from the output)",
        details="\n".join(f"{c.name}: {c.detail}" for c in failed),
        hint="the wheel builds but does not work as built; see the checks above",
    )
    return replace(result, status=CellStatus.FAILED, error=error)


def build_cells(
    options: BuildOptions,
    cache: CacheLayout,
    *,
    on_failure: Callable[[CellResult], None],
    build: CellBuilder = build_cell,
    verify: Verifier = verify_wheel,
) -> BuildRun:
    """Build every selected cell with ``build``; ``on_failure`` hears of each failed cell the run goes on after."""
    compat = load_compat()
    planned = _restrict(select_cells(options.selection, compat), options.ops)
    options = replace(options, out_dir=options.out_dir.resolve())
    if options.install and len(planned) != 1:
        raise ConfigError("--install builds exactly one cell (this environment's)")
    jobs = _jobs(options, planned)
    get_reporter().info(f"{len(planned)} cell(s) to build into {options.out_dir}")
    results: list[CellResult] = []
    for item in planned:
        result = build(item, options, cache, compat=compat, jobs=jobs)
        if result.status is CellStatus.BUILT and options.verify is not None:
            result = _verify_built(result, options.verify, cache, verify)
        results.append(result)
        if result.error is not None:
            if not options.keep_going:
                return BuildRun(
                    planned=planned, results=tuple(results), out_dir=options.out_dir, stopped_by=result.error
                )
            on_failure(result)
    return BuildRun(planned=planned, results=tuple(results), out_dir=options.out_dir, stopped_by=None)


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
        ok=result.ok,
        wheel=manifest.wheel.filename if manifest else "",
        size=manifest.wheel.size if manifest else 0,
        sha256=manifest.wheel.sha256 if manifest else "",
        seconds=result.duration,
        ops=tuple((op.name, op.seconds) for op in manifest.ops_built) if manifest else (),
        cache=str(manifest.compiler_cache.get("tool", "")) if manifest and manifest.compiler_cache else "",
        cache_hits=_int(manifest.compiler_cache.get("hits")) if manifest else None,
        cache_misses=_int(manifest.compiler_cache.get("misses")) if manifest else None,
        error=result.error.message if result.error else "",
        log=str(result.log_path or ""),
        op_outcomes=result.op_outcomes if result.error else (),
        error_lines=tuple((result.error.details or "").splitlines()[:20]) if result.error else (),
    )
