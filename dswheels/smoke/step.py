"""The smoke step (``dswheels smoke``): one wheel in a fresh venv (or a given interpreter), a tiny
model trained through deepspeed.initialize once per config, and DeepSpeedCPUAdam against AdamW
(:mod:`dswheels.smoke.effects.train` runs them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from dswheels.host.cache import CacheLayout
from dswheels.host.log import get_reporter
from dswheels.host.wheel_file import read_wheel
from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import ConfigError, EnvironmentMismatchError, SmokeError
from dswheels.kernel.model import Accelerator, Cell
from dswheels.kernel.naming import cell_id
from dswheels.kernel.sources import TorchSource, TorchSourceKind
from dswheels.kernel.wheel_contents import WheelContentError
from dswheels.smoke.effects.train import SmokeResult, has_gpu, run_adam_check, run_smoke
from dswheels.smoke.runs import SmokeRun, runs_for
from dswheels.verify.effects.prove import discard_venv, fresh_venv
from dswheels.verify.static_checks import Expected, ExpectedFrom, cell_from_wheel_filename

__all__ = ["SmokeDevice", "SmokeOptions", "WheelSmoke", "smoke_wheel"]


class SmokeDevice(str, Enum):
    AUTO = "auto"  # cuda when the venv's torch sees a GPU, else cpu
    CPU = "cpu"
    CUDA = "cuda"


@dataclass(frozen=True, kw_only=True, slots=True)
class SmokeOptions:
    device: SmokeDevice = SmokeDevice.AUTO
    steps: int = 30  # optimizer steps per run
    python: Path | None = None  # this interpreter (with the wheel installed), not a fresh venv
    torch_source: TorchSource = field(
        default_factory=lambda: TorchSource(TorchSourceKind.PLAN)
    )  # where the fresh venv gets torch
    adam_tolerance: float = 1e-4  # max |DeepSpeedCPUAdam - AdamW|


@dataclass(frozen=True, kw_only=True, slots=True)
class WheelSmoke:
    wheel: Path
    cell: Cell
    device: str  # cpu | cuda
    result: SmokeResult
    skipped: tuple[tuple[str, str], ...]  # (run, why) for the runs the wheel's ops do not allow
    log: Path

    @property
    def ok(self) -> bool:
        return self.result.ok

    def failure(self) -> SmokeError:
        """What failed, as the error a failing wheel exits with."""
        runs = self.result.runs
        failed = [str(r["name"]) for r in runs if not r.get("ok")]
        if self.result.adam and not self.result.adam.get("ok"):
            failed.append("DeepSpeedCPUAdam vs AdamW")
        return SmokeError(
            f"{len(failed)} smoke check(s) failed for {self.wheel.name}: {', '.join(failed)}",
            details="\n".join(f"{r['name']}: {r.get('why') or r.get('error')}" for r in runs if not r.get("ok")),
            hint=f"full log: {self.log}",
        )

    def as_json(self) -> dict[str, object]:
        return {
            "wheel": self.wheel.name,
            "cell": cell_id(self.cell),
            "device": self.device,
            "ok": self.ok,
            "runs": self.result.runs,
            "adam": self.result.adam,
            "skipped": [{"name": n, "why": w} for n, w in self.skipped],
            "log": str(self.log),
        }


def _wheel(wheel: Path) -> tuple[Cell, tuple[str, ...]]:
    """The wheel's cell and the ops it prebuilds."""
    try:
        cell = cell_from_wheel_filename(wheel.name)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    try:
        ops = read_wheel(wheel, error=SmokeError).installed.built_ops
    except WheelContentError as exc:
        raise SmokeError(f"{wheel.name}: {exc}") from None
    return cell, tuple(ops)


def _device(options: SmokeOptions, python: Path, cell: Cell, wheel: Path) -> str:
    device = options.device.value
    if options.device is SmokeDevice.AUTO:
        device = "cuda" if has_gpu(python) else "cpu"
    if cell.variant.is_cuda and device == "cpu":
        raise EnvironmentMismatchError(
            f"{wheel.name} is a {cell.variant.name} wheel: its ops are built for the cuda accelerator, so a "
            "CPU-only smoke run would JIT-compile them; no GPU is visible here",
            hint="run smoke on the GPU runner (dswheels verify checks the wheel statically and loads its ops "
            "with DS_ACCELERATOR=cuda without a GPU)",
        )
    return device


def _train(
    python: Path, options: SmokeOptions, *, wheel: Path, cell: Cell, ops: tuple[str, ...], log: Path
) -> tuple[str, SmokeResult, list[tuple[SmokeRun, str]]]:
    """The runs the wheel's ops allow on the device, and the Adam check when it has cpu_adam."""
    reporter = get_reporter()
    device = _device(options, python, cell, wheel)
    accelerator = Accelerator(device)
    runs, skipped = runs_for(device, ops)
    result = SmokeResult()
    with reporter.group(f"{cell_id(cell)}: smoke on {device} ({len(runs)} runs, {options.steps} steps each)"):
        for run_, why in skipped:
            reporter.info(f"  skip    {run_.name}: {why}")
        result.runs = run_smoke(python, runs, device=device, accelerator=accelerator, steps=options.steps, log=log)
        if "cpu_adam" in ops:
            result.adam = run_adam_check(python, accelerator=accelerator, tolerance=options.adam_tolerance, log=log)
            mark = "ok" if result.adam.get("ok") else "FAILED"
            reporter.info(
                f"  {mark:6}  DeepSpeedCPUAdam vs torch.optim.AdamW: max |diff| "
                f"{result.adam.get('max_abs_diff', result.adam.get('error'))} (tolerance {options.adam_tolerance})",
            )
    return device, result, skipped


def smoke_wheel(wheel: Path, options: SmokeOptions, cache: CacheLayout) -> WheelSmoke:
    """Smoke-test one wheel (``ok`` false when a run failed; an error when it could not run); its venv and
    log are in the cache's smoke area."""
    cell, ops = _wheel(wheel)
    root = cache.smoke
    log = root / f"{wheel.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("", encoding="utf-8")
    python = options.python
    if python is None:
        expected = Expected(cell=cell, ops=ops, source=ExpectedFrom.WHEEL)
        python = fresh_venv(
            wheel, expected, compat=load_compat(), torch_source=options.torch_source, root=root, log=log
        )
    try:
        device, result, skipped = _train(python, options, wheel=wheel, cell=cell, ops=ops, log=log)
    finally:
        if options.python is None:
            discard_venv(python)
    return WheelSmoke(
        wheel=wheel,
        cell=cell,
        device=device,
        result=result,
        skipped=tuple((r.name, why) for r, why in skipped),
        log=log,
    )
