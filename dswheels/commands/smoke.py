"""``dswheels smoke``: train a tiny model with the wheel across ZeRO stages; report loss, speed, memory."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from dswheels import __version__
from dswheels.commands.build import _torch_source
from dswheels.commands.common import Subparsers, add_torch_index_argument, formatter
from dswheels.core.compat import load_compat
from dswheels.core.model import Accelerator
from dswheels.core.naming import cell_id
from dswheels.core.smoke import render_smoke_markdown, runs_for
from dswheels.core.verify import Expected, ExpectedFrom, cell_from_wheel_filename
from dswheels.core.wheelfile import WheelContentError
from dswheels.effects.files import write_text_atomic
from dswheels.effects.gha import write_summary
from dswheels.effects.smoke import SmokeResult, has_gpu, run_adam_check, run_smoke
from dswheels.effects.sources import env_cache_dir
from dswheels.effects.verify import discard_venv, fresh_venv
from dswheels.effects.wheel import read_wheel
from dswheels.errors import ConfigError, EnvironmentMismatchError, SmokeError
from dswheels.log import get_reporter

__all__ = ["register", "run"]

DESCRIPTION = """\
Install the wheel into a fresh venv with its torch and train a tiny model a few steps
through deepspeed.initialize, once per config: ZeRO stage 0-3, micro batch, gradient
accumulation, optimizer offload (DeepSpeedCPUAdam), and on a GPU FusedAdam and bf16. Each
run must lower the loss and JIT-compile nothing; it reports samples/s and peak memory (CPU:
the process's peak RSS; GPU: torch.cuda.max_memory_allocated). DeepSpeedCPUAdam's steps are
compared with torch.optim.AdamW's. Runs that need an op the wheel does not prebuild are
skipped with the reason.

examples:
  dswheels smoke wheelhouse/cpu/deepspeed-0.19.8+cputorch2.13-cp311-cp311-linux_x86_64.whl --torch-index pip
  dswheels smoke wheelhouse/cu130/*.whl --device cuda --report smoke.json     # on the GPU runner"""


def register(sub: Subparsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "smoke",
        help="train a tiny model with the wheel (CPU anywhere, GPU on a GPU runner)",
        description=DESCRIPTION,
        formatter_class=formatter,
    )
    p.add_argument("wheel", type=Path, metavar="WHEEL")
    p.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="auto: cuda when the venv's torch sees a GPU, else cpu",
    )
    p.add_argument("--steps", type=int, default=30, metavar="N", help="optimizer steps per run (default: 30)")
    p.add_argument("--python", metavar="PATH|current", help="use this interpreter (with the wheel installed)")
    add_torch_index_argument(p, what="the fresh venv")
    p.add_argument(
        "--adam-tolerance",
        type=float,
        default=1e-4,
        metavar="X",
        help="max |DeepSpeedCPUAdam - AdamW| over 20 steps of lr 1e-3 (default: 1e-4; measured here: 5e-6)",
    )
    p.add_argument("--report", type=Path, metavar="FILE", help="write the results as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.steps < 3:
        raise ConfigError("--steps must be at least 3 (the first step is warm-up)")
    compat = load_compat()
    wheel: Path = args.wheel
    try:
        cell = cell_from_wheel_filename(wheel.name)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    try:
        ops = read_wheel(wheel, error=SmokeError).installed.built_ops
    except WheelContentError as exc:
        raise SmokeError(f"{wheel.name}: {exc}") from None
    expected = Expected(cell=cell, ops=ops, source=ExpectedFrom.WHEEL)
    reporter = get_reporter()
    cache = env_cache_dir()
    log = cache / "smoke" / f"{wheel.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("", encoding="utf-8")
    created = False
    if args.python:
        python = Path(sys.executable) if args.python == "current" else Path(args.python)
    else:
        python = fresh_venv(
            wheel, expected, compat=compat, torch_source=_torch_source(args.torch_index), root=cache / "smoke", log=log
        )
        created = True
    try:
        device = args.device
        if device == "auto":
            device = "cuda" if has_gpu(python) else "cpu"
        if cell.variant.is_cuda and device == "cpu":
            raise EnvironmentMismatchError(
                f"{wheel.name} is a {cell.variant.name} wheel: its ops are built for the cuda accelerator, so a "
                "CPU-only smoke run would JIT-compile them; no GPU is visible here",
                hint="run smoke on the GPU runner (dswheels verify checks the wheel statically and loads its ops "
                "with DS_ACCELERATOR=cuda without a GPU)",
            )
        accelerator = Accelerator(device)
        runs, skipped = runs_for(device, ops)
        result = SmokeResult()
        with reporter.group(f"{cell_id(cell)}: smoke on {device} ({len(runs)} runs, {args.steps} steps each)"):
            for run_, why in skipped:
                reporter.info(f"  skip    {run_.name}: {why}")
            result.runs = run_smoke(python, runs, device=device, accelerator=accelerator, steps=args.steps, log=log)
            if "cpu_adam" in ops:
                result.adam = run_adam_check(python, accelerator=accelerator, tolerance=args.adam_tolerance, log=log)
                mark = "ok" if result.adam.get("ok") else "FAILED"
                reporter.info(
                    f"  {mark:6}  DeepSpeedCPUAdam vs torch.optim.AdamW: max |diff| "
                    f"{result.adam.get('max_abs_diff', result.adam.get('error'))} (tolerance {args.adam_tolerance})",
                )
    finally:
        if created:
            discard_venv(python)
    skipped_rows = [(r.name, why) for r, why in skipped]
    table = render_smoke_markdown(result.runs, skipped_rows)
    sys.stdout.write(f"\n{cell_id(cell)} on {device}:\n{table}")
    write_summary(f"### dswheels smoke: {wheel.name} on {device}\n\n{table}")
    if args.report:
        write_text_atomic(
            args.report,
            json.dumps(
                {
                    "schema": "dswheels.smoke/1",
                    "dswheels": __version__,
                    "wheel": wheel.name,
                    "cell": cell_id(cell),
                    "device": device,
                    "ok": result.ok,
                    "runs": result.runs,
                    "adam": result.adam,
                    "skipped": [{"name": n, "why": w} for n, w in skipped_rows],
                },
                indent=2,
            )
            + "\n",
        )
    if not result.ok:
        failed = [str(r["name"]) for r in result.runs if not r.get("ok")]
        if result.adam and not result.adam.get("ok"):
            failed.append("DeepSpeedCPUAdam vs AdamW")
        raise SmokeError(
            f"{len(failed)} smoke check(s) failed for {wheel.name}: {', '.join(failed)}",
            details="\n".join(f"{r['name']}: {r.get('why') or r.get('error')}" for r in result.runs if not r.get("ok")),
            hint=f"full log: {log}",
        )
    return 0
