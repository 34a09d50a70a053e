"""``dswheels smoke``: train a tiny model with the wheel across ZeRO stages; report loss, speed, memory."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from dswheels.cli.command import Command
from dswheels.cli.commands import listed_help
from dswheels.cli.flags import Flag, Flags, PathUse, choice, fill, parse_count, parse_decimal
from dswheels.cli.shared import INTERPRETER, REPORT, torch_index
from dswheels.host.cache import CacheLayout
from dswheels.host.log import get_reporter
from dswheels.kernel.errors import ConfigError, DswheelsError
from dswheels.kernel.naming import cell_id
from dswheels.kernel.result import Done
from dswheels.smoke.runs import render_smoke_markdown
from dswheels.smoke.step import SmokeDevice, SmokeOptions, WheelSmoke, smoke_wheel

__all__ = ["COMMAND", "SMOKE_SCHEMA"]

SMOKE_SCHEMA = "dswheels.smoke/2"  # /1 was one wheel's object; /2 lists one per wheel under "wheels"

HELP = listed_help("smoke")

DESCRIPTION = """\
Install the wheel into a fresh venv with its torch and train a tiny model a few steps
through deepspeed.initialize, once per config: ZeRO stage 0-3, micro batch, gradient
accumulation, optimizer offload (DeepSpeedCPUAdam), and on a GPU FusedAdam and bf16. Each
run must lower the loss and JIT-compile nothing; it reports samples/s and peak memory (CPU:
the process's peak RSS; GPU: torch.cuda.max_memory_allocated). DeepSpeedCPUAdam's steps are
compared with torch.optim.AdamW's. Runs that need an op the wheel does not prebuild are
skipped with the reason.

examples:
  dswheels smoke wheelhouse/cpu/deepspeed-0.19.8+cputorch2.13-cp311-cp311-manylinux_2_35_x86_64.whl --torch-index pip
  dswheels smoke wheelhouse/*/*.whl --device cuda --report smoke.json     # on the GPU runner: every wheel

With several wheels, each is smoke-tested and reported; a failing one does not stop the others,
and the exit code is the first failure's."""


def _steps(steps: int) -> int:
    if steps < 3:
        raise ConfigError("--steps must be at least 3 (the first step is warm-up)")
    return steps


FLAGS: Flags = (
    Flag(
        "wheels",
        nargs="+",
        metavar="WHEEL",
        path=PathUse.READS_WHEELS,
        help="the wheels to smoke-test, one after another",
    ),
    choice(
        "--device",
        SmokeDevice,
        to="device",
        help="auto: cuda when the venv's torch sees a GPU, else cpu",
    ),
    Flag(
        "--steps",
        to="steps",
        parse=_steps,
        type=parse_count,
        default=30,
        metavar="N",
        help="optimizer steps per run (default: 30)",
    ),
    INTERPRETER.but(help="use this interpreter (with the wheel installed)"),
    torch_index(what="the fresh venv"),
    Flag(
        "--adam-tolerance",
        to="adam_tolerance",
        type=parse_decimal,
        default=1e-4,
        metavar="X",
        help="max |DeepSpeedCPUAdam - AdamW| over 20 steps of lr 1e-3 (default: 1e-4; measured here: 5e-6)",
    ),
    REPORT.but(help=f"write the results of every wheel as JSON ({SMOKE_SCHEMA})"),
)


def _options(args: argparse.Namespace) -> SmokeOptions:
    return SmokeOptions(**fill(args, FLAGS))


def _show(smoked: WheelSmoke) -> None:
    table = render_smoke_markdown(smoked.result.runs, smoked.skipped)
    get_reporter().emit(f"\n{cell_id(smoked.cell)} on {smoked.device}:\n{table}")
    get_reporter().summary(f"### dswheels smoke: {smoked.wheel.name} on {smoked.device}\n\n{table}")


def _smoke_each(
    wheels: Sequence[Path], options: SmokeOptions, cache: CacheLayout
) -> tuple[list[dict[str, object]], list[DswheelsError]]:
    """Every wheel's report entry, and the errors of those that failed; one wheel alone raises its own."""
    entries: list[dict[str, object]] = []
    errors: list[DswheelsError] = []
    for wheel in wheels:
        try:
            smoked = smoke_wheel(wheel, options, cache)
        except DswheelsError as exc:
            if len(wheels) == 1:
                raise
            entries.append({"wheel": wheel.name, "ok": False, "error": exc.message})
            errors.append(exc)
            get_reporter().error(f"{wheel.name}: {exc.message}")
            get_reporter().aside(exc.render())
            continue
        _show(smoked)
        entries.append(smoked.as_json())
        if not smoked.ok:
            errors.append(smoked.failure())
    return entries, errors


def _run(options: SmokeOptions, args: argparse.Namespace) -> Done:
    wheels: list[Path] = args.wheels
    entries, errors = _smoke_each(wheels, options, CacheLayout.here())
    data = {"schema": SMOKE_SCHEMA, "ok": not errors, "wheels": entries}
    if len(wheels) > 1:
        verdicts = "".join(f"  {'ok' if e['ok'] else 'FAILED':6}  {e['wheel']}\n" for e in entries)
        get_reporter().emit(f"\nsmoke: {len(wheels) - len(errors)} of {len(wheels)} wheel(s) passed\n{verdicts}")
    if len(errors) == 1 and len(wheels) == 1:
        return Done(data=data, error=errors[0])
    if errors:
        why = f"{len(errors)} of {len(wheels)} wheel(s) failed the smoke test"
        get_reporter().aside(why)
        return Done(data=data, exit_code=errors[0].exit_code, reason=why)
    return Done(data=data)


COMMAND = Command("smoke", HELP, DESCRIPTION, FLAGS, _options, _run)
