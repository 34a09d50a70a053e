"""``dswheels verify``: prove every wheel works before anyone can install it."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from dswheels import __version__
from dswheels.commands.build import plan_cell_ids
from dswheels.commands.common import Subparsers, add_torch_index_argument, formatter
from dswheels.core.compat import load_compat
from dswheels.core.locations import MATRIX, WHEELHOUSE
from dswheels.core.model import Accelerator, Cell
from dswheels.core.naming import cell_id
from dswheels.core.sources import TorchSource
from dswheels.core.versions import parse_torch_release
from dswheels.core.wheel.contents import WheelContentError
from dswheels.core.wheel.verify import Check, Expected, ExpectedFrom, cell_from_wheel_filename, render_checks_markdown
from dswheels.effects.files import write_text_atomic
from dswheels.effects.gha import write_summary
from dswheels.effects.sources import env_cache_dir
from dswheels.effects.verify import RuntimeResult, load_expected, read_verified_wheel, runtime_checks, static_part
from dswheels.effects.wheel import WheelContents
from dswheels.effects.wheelhouse import find_wheels
from dswheels.errors import ConfigError, VerifyError
from dswheels.log import get_reporter

__all__ = ["register", "run"]

DESCRIPTION = f"""\
Check a DeepSpeed wheel against its build manifest (beside it) or, without one, the plan
(--matrix). Static checks need only the wheel: its name and local label, the torch pin in
METADATA, the accelerator, torch and CUDA DeepSpeed stamped into it, installed_ops equal to
the manifest's ops, one extension per op, no instruction above the CPU baseline, GPU code
only for the planned archs, and on Linux the glibc/libstdc++ floor: the highest GLIBC_x.y,
GLIBCXX_3.4.n and CXXABI_1.3.n the extensions ask for, which must not exceed the promised
maximum (the plan's linux_runtime: compat.yml's linux_runtime_floor unless the matrix sets
linux_runtime); on Windows every DLL a .pyd imports must come from Windows, the Visual C++
runtime, the wheel's Python or its torch wheel (docs/inspect.md). A DeepSpeed wheel without a
dswheels label (DeepSpeed's own) is checked as the cell its torch_info names.
The run-time part installs the wheel into a fresh venv with
the cell's torch, parses ds_report, and loads every op with an empty TORCH_EXTENSIONS_DIR
while JIT compilation is made to fail: each op must come from the wheel.

A CUDA wheel is checked with DS_ACCELERATOR=cuda (a GPU-less host would otherwise pick the
cpu accelerator and JIT-compile every op); --accelerator none shows what a user without the
variable gets.

With no WHEEL|DIR: the wheels `dswheels build` wrote ({WHEELHOUSE}/<variant>/*.whl); a
directory stands for the wheels in it and one level down.

examples:
  dswheels verify                                      # what dswheels build wrote
  dswheels verify wheelhouse/cpu/deepspeed-0.19.8+cputorch2.13-cp311-cp311-linux_x86_64.whl
  dswheels verify wheelhouse/ --torch-index pip --report verify.json
  dswheels verify some.whl --static                    # no install
  dswheels verify some.whl --python current            # in this environment (its torch), no venv"""


def register(sub: Subparsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "verify",
        help="prove wheels are what they claim and load without JIT",
        description=DESCRIPTION,
        formatter_class=formatter,
    )
    p.add_argument(
        "wheels",
        nargs="*",
        type=Path,
        metavar="WHEEL|DIR",
        help=f"wheels, or directories of wheels (default: {WHEELHOUSE}/, what `dswheels build` wrote)",
    )
    p.add_argument("--manifest", type=Path, metavar="FILE", help="the build manifest (default: beside the wheel)")
    p.add_argument(
        "--matrix",
        type=Path,
        default=MATRIX,
        metavar="PATH",
        help="plan to compare with when a wheel has no manifest (default: %(default)s)",
    )
    p.add_argument("--static", action="store_true", help="static checks only (no install)")
    p.add_argument(
        "--python",
        metavar="PATH|current",
        help="run the run-time part in this interpreter (the wheel must be installed there) instead of a fresh venv",
    )
    add_torch_index_argument(p, what="the fresh venv")
    p.add_argument(
        "--accelerator",
        choices=("auto", "cuda", "cpu", "none"),
        default="auto",
        help="DS_ACCELERATOR at run time (auto: the wheel's; none: leave it unset)",
    )
    p.add_argument(
        "--torch-version",
        type=_torch_release,
        metavar="X.Y.Z",
        help="install this exact torch release into the fresh venv instead of the cell's (to see what a user "
        "with another torch gets)",
    )
    p.add_argument("--report", type=Path, metavar="FILE", help="write the results as JSON")
    p.set_defaults(func=run)


def _torch_release(text: str) -> str:
    try:
        return parse_torch_release(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _torch_source(text: str | None) -> TorchSource:
    from dswheels.commands.build import _torch_source as parse  # noqa: PLC0415 - one parser for both commands

    return parse(text)


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
    planned = plan_cell_ids([cell_id(cell)], matrix=matrix, nvcc=None, compat=load_compat())[0]
    return Expected(
        cell=cell,
        ops=planned.ops.build_names,
        cpu_baseline=planned.toolchain.cpu_baseline,
        arch_list=planned.toolchain.arch_list,
        source=ExpectedFrom.PLAN,
        linux_runtime=planned.toolchain.linux_runtime,
        linux_runtime_from=f"the plan of {matrix}",
    )


def _accelerator(choice: str, expected: Expected) -> Accelerator | None:
    """``--accelerator``: auto is the wheel's; none leaves DS_ACCELERATOR unset."""
    if choice == "auto":
        return expected.accelerator
    return None if choice == "none" else Accelerator(choice)


def _print(title: str, checks: list[Check]) -> None:
    reporter = get_reporter()
    reporter.info(title)
    for c in checks:
        reporter.info(f"  {'ok    ' if c.ok else 'FAILED'}  {c.name}: {c.detail}")


def verify_one(wheel: Path, args: argparse.Namespace) -> tuple[list[Check], RuntimeResult | None, Expected]:
    compat = load_compat()
    data = read_verified_wheel(wheel)
    cell = wheel_cell(wheel, data)
    expected = load_expected(wheel, cell, _plan_expectation(cell, args.matrix), args.manifest, compat=compat)
    checks = static_part(data, expected, compat)
    _print(f"static checks (against the {expected.source}):", checks)
    runtime: RuntimeResult | None = None
    if not args.static:
        accelerator = _accelerator(args.accelerator, expected)
        python = None
        if args.python:
            python = Path(sys.executable) if args.python == "current" else Path(args.python)
        log = env_cache_dir() / "verify" / f"{wheel.name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("", encoding="utf-8")
        with get_reporter().group(f"{cell_id(expected.cell)}: run time"):
            runtime = runtime_checks(
                wheel,
                expected,
                compat=compat,
                python=python,
                torch_source=_torch_source(args.torch_index),
                work_root=env_cache_dir() / "verify",
                accelerator=accelerator,
                log=log,
                torch_version=args.torch_version,
            )
        _print(
            f"run time (Python {runtime.python}, torch {runtime.torch}, DS_ACCELERATOR={accelerator or 'unset'}):",
            runtime.checks,
        )
    return checks, runtime, expected


def run(args: argparse.Namespace) -> int:
    wheels = find_wheels(args.wheels)
    if args.manifest is not None and len(wheels) != 1:
        raise ConfigError("--manifest goes with exactly one wheel")
    if not args.wheels:
        get_reporter().info(f"{len(wheels)} wheel(s) in {WHEELHOUSE}/, what `dswheels build` wrote")
    reports = []
    failures: list[str] = []
    markdown = ["### dswheels verify", ""]
    for wheel in wheels:
        static, runtime, expected = verify_one(wheel, args)
        all_checks = static + (runtime.checks if runtime else [])
        failed = [c for c in all_checks if not c.ok]
        reports.append(
            {
                "wheel": wheel.name,
                "cell": cell_id(expected.cell),
                "expected_from": expected.source,
                "ok": not failed,
                "static": [c.as_json() for c in static],
                "runtime": None
                if runtime is None
                else {
                    "python": runtime.python,
                    "torch": runtime.torch,
                    "checks": [c.as_json() for c in runtime.checks],
                    "ds_report": runtime.ds_report.as_json() if runtime.ds_report else None,
                    "loads": runtime.loads,
                },
            },
        )
        markdown.append(render_checks_markdown(f"{wheel.name}: {'ok' if not failed else 'FAILED'}", all_checks))
        if failed:
            failures.append(f"{wheel.name}: " + "; ".join(f"{c.name}: {c.detail}" for c in failed))
    if args.report:
        write_text_atomic(
            args.report,
            json.dumps({"schema": "dswheels.verify/1", "dswheels": __version__, "wheels": reports}, indent=2) + "\n",
        )
    write_summary("\n".join(markdown))
    if failures:
        raise VerifyError(
            f"{len(failures)} of {len(wheels)} wheel(s) failed verification",
            details="\n".join(failures),
            hint="do not publish these wheels; the checks above say what is wrong",
        )
    sys.stdout.write(f"verified {len(wheels)} wheel(s)\n")
    return 0
