"""The ``dswheels`` command line: parse arguments, run one command, map errors to exit codes.

Exit codes: 0 ok, 1 internal error, 2 bad input, 3 nothing to do, 4 source, 5 build,
6 verify, 7 publish, 8 smoke, 9 environment (no wheel fits), 10 GitHub (outside publishing), 130 interrupted,
143 terminated (SIGTERM).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import signal
import sys
import threading
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from dswheels import __version__
from dswheels.cli.commands import LISTED, named_command
from dswheels.cli.flags import env_sources_named
from dswheels.cli.parser import COMMAND_DEST, REPORT_DEST, STAGE_DEST, formatter
from dswheels.host.clock import monotonic
from dswheels.host.environ import check_environment
from dswheels.host.gha import in_github_actions
from dswheels.host.log import (
    TEXT_ERRORS,
    GitHubReporter,
    Reporter,
    TerminalReporter,
    get_reporter,
    reset_reporter,
    set_reporter,
)
from dswheels.host.stage_report import write_report
from dswheels.kernel.errors import DswheelsError
from dswheels.kernel.result import Done, StageResult, failed_result
from dswheels.kernel.urls import redact_text

if TYPE_CHECKING:  # a command's module is loaded only when its command runs
    from dswheels.cli.command import Command

__all__ = ["build_parser", "main"]

EPILOG = """\
exit codes: 0 ok, 1 internal error, 2 bad input, 3 nothing to do, 4 source failed,
            5 build failed, 6 verify failed, 7 publish failed, 8 smoke failed,
            9 environment problem, 10 GitHub failed, 11 provenance refused (missing, or
            its signature does not verify), 12 the wheel is not the attested bytes,
            13 the attestation is for another file, 14 signed by another identity,
            130 interrupted, 143 terminated

Run `dswheels COMMAND --help` for each command. Docs: README.md and docs/."""


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of the command line ``argv``: it loads the module of the command ``argv`` names and no
    other (``dswheels --help`` loads none). Without ``argv``, every command's (the tests, the docs)."""
    parser = argparse.ArgumentParser(
        prog="dswheels",
        description="Build, verify and publish DeepSpeed wheels with every C++/CUDA op precompiled.",
        epilog=EPILOG,
        formatter_class=formatter,
    )
    parser.add_argument("--version", action="version", version=f"dswheels {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors (or DSWHEELS_DEBUG=1)")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    named = None if argv is None else named_command(argv)
    for listed in LISTED:
        listed.register(sub, load=argv is None or listed.name == named)
    return parser


def _default_reporter() -> Reporter:
    if in_github_actions():
        return GitHubReporter()
    no_color = bool(os.environ.get("NO_COLOR"))  # no-color.org: set and not empty
    color = sys.stdout.isatty() and not no_color
    if os.environ.get("FORCE_COLOR") and not no_color:
        color = True
    return TerminalReporter(color=color)


class Terminated(KeyboardInterrupt):
    """SIGTERM (a cancelled CI job, ``kill``): unwound like Ctrl-C, so temporary files are removed
    and child processes stopped on the way out, instead of Python's default of dying on the spot."""


def _on_sigterm(_signum: int, _frame: object) -> None:
    raise Terminated


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class _Redacted:
    """A text stream that masks the userinfo of every URL written to it (``alice:****@``): what
    dswheels prints (progress, errors, JSON, a subprocess's output) never shows a password or token."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact_text(text))
        return len(text)

    def writelines(self, lines: Iterator[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


@contextlib.contextmanager
def _redacted_output() -> Iterator[None]:
    """Everything written to stdout and stderr while the command runs goes through :class:`_Redacted`."""
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Redacted(stdout), _Redacted(stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = stdout, stderr


def main(argv: Sequence[str] | None = None) -> int:
    # keep subprocess output and our own prints in order; and a character the console's code page lacks
    # (piped stdout on Windows is cp1252) is printed as its escape instead of ending the command
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(line_buffering=True, errors=TEXT_ERRORS)
    with _sigterm_unwinds(), _redacted_output():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    debug: bool = args.debug
    token = set_reporter(_default_reporter())
    try:
        debug = check_environment() or debug  # DSWHEELS_DEBUG, SOURCE_DATE_EPOCH, the Actions files
        code = _run_stage(args)
    except DswheelsError as exc:
        sys.stdout.flush()
        reporter = get_reporter()
        if isinstance(reporter, GitHubReporter):
            reporter.error(exc.message)  # an annotation, and it closes the open group so the error shows
        sys.stderr.write(exc.render() + "\n")
        if named := env_sources_named(args, exc.message):
            sys.stderr.write(f"({'; '.join(named)})\n")
        if debug:
            traceback.print_exc()
        return exc.exit_code
    except Terminated:
        sys.stderr.write("terminated\n")
        return 143
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except BrokenPipeError:
        # `dswheels plan | head`: the reader went away, which is not our failure
        sys.stderr.close()
        return 0
    finally:
        reset_reporter(token)
    return code


def _run_stage(args: argparse.Namespace) -> int:
    """Run the command, timed; with ``--report FILE``, its result (or the error that ended it) is written
    there before the error is raised, so a failed stage leaves its report too. A command whose flags or
    paths are refused before it starts (a bad variable, an output that cannot be written or would replace
    an input or a published file) writes nothing."""
    command: Command[object] = getattr(args, COMMAND_DEST)
    command.settle(args, os.environ)  # refused: nothing is written, not even the report (it may be the bad path)
    report: Path | None = getattr(args, REPORT_DEST, None)
    stage: str = getattr(args, STAGE_DEST, "")
    start = monotonic()
    try:
        returned: Done | int = command(args)
    except (DswheelsError, KeyboardInterrupt) as exc:
        if report is not None:
            code = exc.exit_code if isinstance(exc, DswheelsError) else 143 if isinstance(exc, Terminated) else 130
            _write_report_beside(report, failed_result(stage, exc, monotonic() - start, exit_code=code))
        raise
    done = returned if isinstance(returned, Done) else Done(exit_code=returned)
    if report is not None:
        write_report(report, done.result(stage, monotonic() - start))
    if done.error is not None:
        raise done.error
    return done.exit_code


def _write_report_beside(report: Path, result: StageResult) -> None:
    """The report of a stage that failed: a report that cannot be written is a warning, so the stage's
    own error is the one shown."""
    try:
        write_report(report, result)
    except DswheelsError as exc:
        get_reporter().warning(exc.message)
