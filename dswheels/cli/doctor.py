"""``dswheels doctor``: check this machine for DeepSpeed, and say what to fix."""

from __future__ import annotations

import argparse

from dswheels import __version__
from dswheels.cli.command import Command
from dswheels.cli.commands import listed_help
from dswheels.cli.flags import Flag, Flags, PathUse, fill
from dswheels.cli.shared import REPORT, TARGET
from dswheels.doctor import Status
from dswheels.doctor.render_report import render_json, render_text, report_to_data
from dswheels.doctor.step import DoctorOptions, examine
from dswheels.host.log import TerminalReporter, get_reporter, reset_reporter, set_reporter
from dswheels.kernel.result import Done

__all__ = ["COMMAND"]

HELP = listed_help("doctor")

DESCRIPTION = """\
Inspect the environment that will use DeepSpeed and report each check as OK, WARN or FAIL,
with a concrete fix: OS and architecture; Python; torch, its CUDA, the GPUs and their compute
capability; the CUDA toolkits (CUDA_HOME, CUDA_PATH and CUDA_PATH_V*, nvcc on PATH, the
standard install locations) with each nvcc's version and the cuBLAS/cuSPARSE/cuSOLVER/cuRAND
dev files; on Windows, Visual Studio / Build Tools and their MSVC toolsets (vswhere) and
whether long paths are enabled; ninja; DeepSpeed and which of its ops are prebuilt; on Linux,
the glibc and the libstdc++ the environment loads against what the published wheels need
(compat.yml linux_runtime_floor, or with --index the picked wheel's build manifest).

Then the verdict: the cell this environment is (e.g. ds0.19.8-torch2.9-cu128-cp312-win_amd64),
whether --index publishes its wheel (and the nearest cells if not), and whether a local build
would work -- decided by the same rules as `dswheels plan` -- with what blocks it or what to
set. Ends with where to set CUDA_HOME for this kind of environment (system, venv or conda).

The environment is the Python that will use DeepSpeed: this interpreter, or --python.
Exit code 0 when nothing FAILs, 9 otherwise (the report is printed either way).

examples:
  dswheels doctor
  dswheels doctor --python .venv/bin/python --index https://example.org/dswheels
  dswheels doctor --json > doctor.json          # attach this to a bug report
  dswheels doctor --facts doctor.json           # judge someone else's machine again"""


FLAGS: Flags = (
    *TARGET,
    Flag("--json", action="store_true", help="print the report and the collected facts as JSON"),
    Flag(
        "--facts",
        to="facts_file",
        metavar="FILE",
        path=PathUse.READS,
        help="judge facts saved by `dswheels doctor --json` instead of probing this machine",
    ),
    REPORT,
)


def _options(args: argparse.Namespace) -> DoctorOptions:
    return DoctorOptions(**fill(args, FLAGS))


def _run(options: DoctorOptions, args: argparse.Namespace) -> Done:
    shown = get_reporter()
    if args.json:
        # progress would break the JSON on stdout: send it to stderr
        token = set_reporter(TerminalReporter.on_stderr())
        try:
            found = examine(options)
        finally:
            reset_reporter(token)
        shown.emit(render_json(found.report, found.facts, version=__version__))
    else:
        found = examine(options)
        shown.emit(render_text(found.report))
    failed = found.report.worst is Status.FAIL
    return Done(
        data={"doctor": report_to_data(found.report)},
        exit_code=9 if failed else 0,
        reason="a check failed" if failed else "",
    )


COMMAND = Command("doctor", HELP, DESCRIPTION, FLAGS, _options, _run)
