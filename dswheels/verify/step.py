"""The verify step (``dswheels verify``): each wheel's static checks against its build manifest (or
the plan), then its run-time part (:mod:`dswheels.verify.effects.prove` holds the checks themselves)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from dswheels.host.cache import CacheLayout
from dswheels.host.log import get_reporter
from dswheels.host.machine import host_machine, host_os
from dswheels.host.wheel_file import WheelContents
from dswheels.host.wheelhouse import find_wheels
from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import ConfigError, VerifyError
from dswheels.kernel.locations import MATRIX, WHEELHOUSE
from dswheels.kernel.model import Accelerator, Cell
from dswheels.kernel.naming import cell_id
from dswheels.kernel.sources import TorchSource, TorchSourceKind
from dswheels.kernel.wheel_contents import WheelContentError
from dswheels.plan.effects.selection import NamedCells, plan_cell_ids
from dswheels.platforms import platform_module
from dswheels.platforms.hosts import EmulatedMachine, HostChoice
from dswheels.verify.effects.prove import (
    RuntimeResult,
    emulated_runtime_checks,
    load_expected,
    read_verified_wheel,
    runtime_checks,
    static_part,
)
from dswheels.verify.registry import Check
from dswheels.verify.static_checks import Expected, ExpectedFrom, cell_from_wheel_filename

__all__ = ["RuntimeAccelerator", "VerifyOptions", "WheelVerification", "verify_wheel", "verify_wheels", "wheel_cell"]


class RuntimeAccelerator(str, Enum):
    """DS_ACCELERATOR for the run-time part: the wheel's own (auto), one named, or unset (none)."""

    AUTO = "auto"
    CUDA = "cuda"
    CPU = "cpu"
    NONE = "none"

    def for_wheel(self, expected: Expected) -> Accelerator | None:
        if self is RuntimeAccelerator.AUTO:
            return expected.accelerator
        return None if self is RuntimeAccelerator.NONE else Accelerator(self.value)


@dataclass(frozen=True, kw_only=True, slots=True)
class VerifyOptions:
    matrix: Path = MATRIX  # the plan to compare with when a wheel has no manifest
    manifest: Path | None = None  # the build manifest (default: beside the wheel)
    static_only: bool = False
    python: Path | None = None  # the run-time part in this interpreter (it has the wheel), not a fresh venv
    torch_source: TorchSource = field(
        default_factory=lambda: TorchSource(TorchSourceKind.PLAN)
    )  # where the fresh venv gets torch
    accelerator: RuntimeAccelerator = RuntimeAccelerator.AUTO
    torch_version: str | None = None  # this exact torch release in the fresh venv instead of the cell's
    hosts: HostChoice = field(default_factory=HostChoice)  # a wheel of another CPU: its emulated machine (--qemu)


@dataclass(frozen=True, kw_only=True, slots=True)
class WheelVerification:
    wheel: Path
    expected: Expected
    static: tuple[Check, ...]
    runtime: RuntimeResult | None  # None: static checks only

    @property
    def checks(self) -> tuple[Check, ...]:
        return self.static + (tuple(self.runtime.checks) if self.runtime else ())

    @property
    def failed(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if not c.ok)

    def as_json(self) -> dict[str, object]:
        runtime = self.runtime
        return {
            "wheel": self.wheel.name,
            "cell": cell_id(self.expected.cell),
            "expected_from": self.expected.source,
            "ok": not self.failed,
            "static": [c.as_json() for c in self.static],
            "runtime": None
            if runtime is None
            else {
                "python": runtime.python,
                "torch": runtime.torch,
                "checks": [c.as_json() for c in runtime.checks],
                "ds_report": runtime.ds_report.as_json() if runtime.ds_report else None,
                "loads": runtime.loads,
            },
        }


def wheel_cell(wheel: Path, data: WheelContents) -> Cell:
    """The cell the wheel's label names; for DeepSpeed's own wheels (no label), the one its torch_info names."""
    try:
        return cell_from_wheel_filename(wheel.name)
    except ValueError as exc:
        problem = str(exc)
    try:
        cell = cell_from_wheel_filename(wheel.name, data.installed)
    except (ValueError, WheelContentError):
        raise VerifyError(problem, hint="dswheels verifies the wheels dswheels build names") from None
    get_reporter().info(
        f"{wheel.name} has no dswheels label: checked as {cell_id(cell)}, the build its torch_info names",
    )
    return cell


def _plan_expectation(cell: Cell, matrix: Path) -> Expected | None:
    if not matrix.exists():
        return None
    planned = plan_cell_ids(NamedCells(ids=(cell_id(cell),), matrix=matrix), load_compat())[0]
    return Expected(
        cell=cell,
        ops=planned.ops.build_names,
        cpu_baseline=planned.toolchain.cpu_baseline,
        arch_list=planned.toolchain.arch_list,
        source=ExpectedFrom.PLAN,
        linux_runtime=planned.toolchain.linux_runtime,
        linux_runtime_from=f"the plan of {matrix}",
    )


def _show(title: str, checks: Sequence[Check]) -> None:
    reporter = get_reporter()
    reporter.info(title)
    for c in checks:
        reporter.info(f"  {'ok    ' if c.ok else 'FAILED'}  {c.name}: {c.detail}")


def _emulated(expected: Expected, options: VerifyOptions, cache: CacheLayout, log: Path) -> EmulatedMachine | None:
    """The emulated machine a wheel of another CPU runs in here (qemu, with --qemu); None: run it here."""
    host = platform_module(expected.cell.platform).host(options.hosts, here=host_os(), machine=host_machine())
    return host.machine(cache=cache, log=log)


def _run_time(wheel: Path, expected: Expected, options: VerifyOptions, cache: CacheLayout) -> RuntimeResult:
    accelerator = options.accelerator.for_wheel(expected)
    work_root = cache.verify
    log = work_root / f"{wheel.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("", encoding="utf-8")
    with get_reporter().group(f"{cell_id(expected.cell)}: run time"):
        machine = None if options.python is not None else _emulated(expected, options, cache, log)
        if machine is not None:
            runtime = emulated_runtime_checks(
                wheel,
                expected,
                machine,
                compat=load_compat(),
                torch_source=options.torch_source,
                work_root=work_root,
                accelerator=accelerator,
                log=log,
                torch_version=options.torch_version,
            )
        else:
            runtime = runtime_checks(
                wheel,
                expected,
                compat=load_compat(),
                python=options.python,
                torch_source=options.torch_source,
                work_root=work_root,
                accelerator=accelerator,
                log=log,
                torch_version=options.torch_version,
            )
    _show(
        f"run time (Python {runtime.python}, torch {runtime.torch}, DS_ACCELERATOR={accelerator or 'unset'}):",
        runtime.checks,
    )
    return runtime


def verify_wheel(wheel: Path, options: VerifyOptions, cache: CacheLayout) -> WheelVerification:
    """One wheel's checks; the reporter shows each part as it is done. The run-time part works and logs
    in the cache's verify area."""
    compat = load_compat()
    data = read_verified_wheel(wheel)
    cell = wheel_cell(wheel, data)
    expected = load_expected(
        wheel, cell, lambda c: _plan_expectation(c, options.matrix), options.manifest, compat=compat
    )
    static = tuple(static_part(data, expected, compat))
    _show(f"static checks (against the {expected.source}):", static)
    runtime = None if options.static_only else _run_time(wheel, expected, options, cache)
    return WheelVerification(wheel=wheel, expected=expected, static=static, runtime=runtime)


def verify_wheels(paths: Sequence[Path], options: VerifyOptions, cache: CacheLayout) -> tuple[WheelVerification, ...]:
    """The wheels ``paths`` name (a directory: the wheels in it and one level down; none: what
    ``dswheels build`` wrote), each verified."""
    wheels = find_wheels(paths)
    if options.manifest is not None and len(wheels) != 1:
        raise ConfigError("--manifest goes with exactly one wheel")
    if not paths:
        get_reporter().info(f"{len(wheels)} wheel(s) in {WHEELHOUSE}/, what `dswheels build` wrote")
    return tuple(verify_wheel(wheel, options, cache) for wheel in wheels)
