"""``dswheels verify``: prove every wheel works before anyone can install it."""

from __future__ import annotations

import argparse

from dswheels.cli.command import Command
from dswheels.cli.commands import listed_help
from dswheels.cli.flags import Flag, Flags, PathUse, choice, fill
from dswheels.cli.shared import INTERPRETER, MATRIX_FLAG, REPORT, qemu, qemu_settings, torch_index
from dswheels.host.cache import CacheLayout
from dswheels.host.log import get_reporter
from dswheels.kernel.errors import VerifyError
from dswheels.kernel.locations import WHEELHOUSE
from dswheels.kernel.result import Done
from dswheels.kernel.versions import parse_torch_release
from dswheels.verify.static_checks import render_checks_markdown
from dswheels.verify.step import RuntimeAccelerator, VerifyOptions, WheelVerification, verify_wheels

__all__ = ["COMMAND"]

HELP = listed_help("verify")

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
  dswheels verify wheelhouse/cpu/deepspeed-0.19.8+cputorch2.13-cp311-cp311-manylinux_2_35_x86_64.whl
  dswheels verify wheelhouse/ --torch-index pip --report verify.json
  dswheels verify some.whl --static                    # no install
  dswheels verify some.whl --python current            # in this environment (its torch), no venv
  dswheels verify some-manylinux_2_35_aarch64.whl --qemu   # on x86_64 Linux: in an arm64 root under qemu
  dswheels verify some-win_amd64.whl --msvc-root ~/msvc --torch-index pip   # on Linux: under Wine"""


def _torch_release(text: str) -> str:
    try:
        return parse_torch_release(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


FLAGS: Flags = (
    Flag(
        "wheels",
        nargs="*",
        metavar="WHEEL|DIR",
        path=PathUse.READS_WHEELS,
        help=f"wheels, or directories of wheels (default: {WHEELHOUSE}/, what `dswheels build` wrote)",
    ),
    Flag(
        "--manifest",
        to="manifest",
        metavar="FILE",
        path=PathUse.READS,
        help="the build manifest (default: beside the wheel)",
    ),
    MATRIX_FLAG.but(to="matrix", help="plan to compare with when a wheel has no manifest"),
    Flag("--static", to="static_only", action="store_true", help="static checks only (no install)"),
    INTERPRETER.but(
        help="run the run-time part in this interpreter (the wheel must be installed there) instead of a fresh venv"
    ),
    torch_index(what="the fresh venv"),
    choice(
        "--accelerator",
        RuntimeAccelerator,
        to="accelerator",
        help="DS_ACCELERATOR at run time (auto: the wheel's; none: leave it unset)",
    ),
    Flag(
        "--torch-version",
        to="torch_version",
        type=_torch_release,
        metavar="X.Y.Z",
        help="install this exact torch release into the fresh venv instead of the cell's (to see what a user "
        "with another torch gets)",
    ),
    *qemu(what="verify the run-time part of"),
    Flag(
        "--msvc-root",
        to="msvc_root",
        env="DSWHEELS_MSVC_ROOT",
        metavar="DIR",
        path=PathUse.READS,
        help="a win_amd64 wheel on Linux: run the run-time part in a venv of a Windows CPython built (once per "
        "minor, under the cache) from CPython's sources with the MSVC toolset in DIR, under Wine "
        "(docs/build.md#verifying-a-windows-wheel-under-wine); without it that part is not run, and said so",
    ),
    REPORT.but(help="write the results as JSON"),
)


def _options(args: argparse.Namespace) -> VerifyOptions:
    from dswheels.platforms.hosts import HostChoice  # noqa: PLC0415 - keeps --help fast

    return VerifyOptions(**fill(args, FLAGS), hosts=HostChoice(qemu=qemu_settings(args)))


def _run(options: VerifyOptions, args: argparse.Namespace) -> Done:
    results = verify_wheels(args.wheels, options, CacheLayout.here())
    data = {"schema": "dswheels.verify/1", "wheels": [r.as_json() for r in results]}
    markdown = ["### dswheels verify", ""]
    markdown += [render_checks_markdown(f"{r.wheel.name}: {'FAILED' if r.failed else 'ok'}", r.checks) for r in results]
    get_reporter().summary("\n".join(markdown))
    failures = [_failure_line(r) for r in results if r.failed]
    if failures:
        failed = VerifyError(
            f"{len(failures)} of {len(results)} wheel(s) failed verification",
            details="\n".join(failures),
            hint="do not publish these wheels; the checks above say what is wrong",
        )
        return Done(data=data, error=failed)
    get_reporter().emit(f"verified {len(results)} wheel(s)\n")
    return Done(data=data)


def _failure_line(result: WheelVerification) -> str:
    return f"{result.wheel.name}: " + "; ".join(f"{c.name}: {c.detail}" for c in result.failed)


COMMAND = Command("verify", HELP, DESCRIPTION, FLAGS, _options, _run)
