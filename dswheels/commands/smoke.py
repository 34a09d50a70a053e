"""``dswheels smoke``: train a tiny model with the wheel across ZeRO stages; report loss, speed, memory."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from dswheels import __version__
from dswheels.commands.build import _torch_source
from dswheels.commands.common import Subparsers, add_torch_index_argument, formatter
from dswheels.core.compat import Compat, load_compat
from dswheels.core.model import Accelerator
from dswheels.core.naming import cell_id
from dswheels.core.wheel.contents import WheelContentError
from dswheels.core.wheel.smoke import render_smoke_markdown, runs_for
from dswheels.core.wheel.verify import Expected, ExpectedFrom, cell_from_wheel_filename
from dswheels.effects.files import write_text_atomic
from dswheels.effects.gha import write_summary
from dswheels.effects.smoke import SmokeResult, has_gpu, run_adam_check, run_smoke
from dswheels.effects.sources import env_cache_dir
from dswheels.effects.verify import discard_venv, fresh_venv
from dswheels.effects.wheel import read_wheel
from dswheels.errors import ConfigError, DswheelsError, EnvironmentMismatchError, SmokeError
from dswheels.log import get_reporter

__all__ = ["SMOKE_SCHEMA", "register", "run"]

SMOKE_SCHEMA = "dswheels.smoke/2"  # /1 was one wheel's object; /2 lists one per wheel under "wheels"

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
  dswheels smoke wheelhouse/*/*.whl --device cuda --report smoke.json     # on the GPU runner: every wheel

With several wheels, each is smoke-tested and reported; a failing one does not stop the others,
and the exit code is the first failure's."""


def register(sub: Subparsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "smoke",
        help="train a tiny model with the wheel (CPU anywhere, GPU on a GPU runner)",
        description=DESCRIPTION,
        formatter_class=formatter,
    )
    p.add_argument("wheels", nargs="+", type=Path, metavar="WHEEL", help="the wheels to smoke-test, one after another")
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
    p.add_argument(
        "--report", type=Path, metavar="FILE", help=f"write the results of every wheel as JSON ({SMOKE_SCHEMA})"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.steps < 3:
        raise ConfigError("--steps must be at least 3 (the first step is warm-up)")
    compat = load_compat()
    wheels: list[Path] = args.wheels
    entries: list[dict[str, object]] = []
    errors: list[DswheelsError] = []
    for wheel in wheels:
        try:
            entry = _smoke_one(wheel, args, compat)
        except DswheelsError as exc:
            if len(wheels) == 1:
                raise
            entries.append({"wheel": wheel.name, "ok": False, "error": exc.message})
            errors.append(exc)
            get_reporter().error(f"{wheel.name}: {exc.message}")
            sys.stderr.write(exc.render() + "\n")
            continue
        entries.append(entry)
        if not entry["ok"]:
            errors.append(_failure(wheel, entry))
    if args.report:
        report = {"schema": SMOKE_SCHEMA, "dswheels": __version__, "ok": not errors, "wheels": entries}
        write_text_atomic(args.report, json.dumps(report, indent=2) + "\n")
    if len(wheels) > 1:
        verdicts = "".join(f"  {'ok' if e['ok'] else 'FAILED':6}  {e['wheel']}\n" for e in entries)
        sys.stdout.write(f"\nsmoke: {len(wheels) - len(errors)} of {len(wheels)} wheel(s) passed\n{verdicts}")
    if len(errors) == 1 and len(wheels) == 1:
        raise errors[0]
    if errors:
        sys.stderr.write(f"{len(errors)} of {len(wheels)} wheel(s) failed the smoke test\n")
        return errors[0].exit_code
    return 0


def _failure(wheel: Path, entry: dict[str, object]) -> SmokeError:
    runs = [r for r in entry["runs"] if isinstance(r, dict)] if isinstance(entry["runs"], list) else []
    failed = [str(r["name"]) for r in runs if not r.get("ok")]
    adam = entry["adam"]
    if isinstance(adam, dict) and adam and not adam.get("ok"):
        failed.append("DeepSpeedCPUAdam vs AdamW")
    return SmokeError(
        f"{len(failed)} smoke check(s) failed for {wheel.name}: {', '.join(failed)}",
        details="\n".join(f"{r['name']}: {r.get('why') or r.get('error')}" for r in runs if not r.get("ok")),
        hint=f"full log: {entry['log']}",
    )


def _smoke_one(wheel: Path, args: argparse.Namespace, compat: Compat) -> dict[str, object]:
    """Smoke-test one wheel; its report entry (``ok`` false when a run failed)."""
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
    return {
        "wheel": wheel.name,
        "cell": cell_id(cell),
        "device": device,
        "ok": result.ok,
        "runs": result.runs,
        "adam": result.adam,
        "skipped": [{"name": n, "why": w} for n, w in skipped_rows],
        "log": str(log),
    }
