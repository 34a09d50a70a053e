"""Progress output for people and for GitHub Actions, behind one small interface.

Library code never prints: it asks the current :class:`Reporter` (held in a context
variable, so tests can capture it). The terminal reporter shows step headers and
durations; the GitHub reporter folds steps into ``::group::`` blocks and turns warnings
and errors into annotations. An error always closes the open group first, or GitHub would
hide it inside a collapsed block.

A command's own output goes through the reporter too, so it is the only door out: :meth:`Reporter.emit`
is the command's result on stdout (a table, plan JSON, ``CUDA_HOME=...``: what a script reads),
:meth:`Reporter.aside` a line for people on stderr (kept off stdout because stdout carries the result),
:meth:`Reporter.summary` Markdown for the GitHub job summary (``$GITHUB_STEP_SUMMARY``).

Text dswheels shows never fails on a character (:data:`TEXT_ERRORS`): piped stdout on Windows is
the ANSI code page (cp1252), and a compiler line quoting a source comment in another script must
not stop a build.
"""

from __future__ import annotations

import contextvars
import shlex
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol, TextIO

from dswheels.host.clock import monotonic
from dswheels.kernel.duration import format_duration

__all__ = [
    "TEXT_ERRORS",
    "GitHubReporter",
    "NullReporter",
    "Reporter",
    "TerminalReporter",
    "format_duration",
    "get_reporter",
    "reset_reporter",
    "set_reporter",
    "write_line",
    "write_text",
]

# How every text stream dswheels writes for people (the terminal, log files, the job summary) and its
# reading of other programs' output treat what they cannot encode or decode: as an escape (\uff0c,
# \x82), so nothing is lost from sight and nothing raises.
TEXT_ERRORS = "backslashreplace"


def write_text(stream: TextIO, text: str) -> None:
    """``text`` as it is on ``stream``, flushed; a character its encoding lacks is written as its escape."""
    try:
        stream.write(text)
    except UnicodeEncodeError:  # nothing was written: the whole text is encoded first
        encoding = stream.encoding or "utf-8"
        stream.write(text.encode(encoding, TEXT_ERRORS).decode(encoding))
    stream.flush()


def write_line(stream: TextIO, text: str) -> None:
    """``text`` and a newline on ``stream``, flushed; a character its encoding lacks is written as its escape."""
    write_text(stream, text + "\n")


class Reporter(Protocol):
    """What long-running steps tell the user."""

    @contextmanager
    def group(self, title: str) -> Iterator[None]:
        """A step: shown as a header (terminal) or a foldable group (GitHub)."""
        ...

    def info(self, message: str) -> None: ...

    def notice(self, title: str, message: str) -> None:
        """Something the user should see but that is not wrong (GitHub: an annotation on the run)."""
        ...

    def warning(self, message: str) -> None: ...

    def error(self, message: str) -> None: ...

    def command(self, argv: Sequence[str]) -> None:
        """Echo a command about to run."""
        ...

    def output(self, line: str) -> None:
        """One line of a subprocess's output (already without its newline)."""
        ...

    def emit(self, text: str) -> None:
        """The command's result, as it is (newlines included), on stdout: what a script or a pipe reads."""
        ...

    def aside(self, line: str) -> None:
        """A line for people on stderr, beside a result on stdout that it must not mix into."""
        ...

    def summary(self, markdown: str) -> None:
        """Markdown for the job summary of a GitHub Actions run (nothing elsewhere)."""
        ...


class _Doors:
    """The command's own output of a reporter that shows it: stdout, stderr and the job summary (looked
    up when written, so a redirected or captured stream gets it)."""

    def emit(self, text: str) -> None:
        write_text(sys.stdout, text)

    def aside(self, line: str) -> None:
        sys.stdout.flush()  # in order with what came before it
        write_line(sys.stderr, line)

    def summary(self, markdown: str) -> None:
        from dswheels.host.gha import write_summary  # noqa: PLC0415 - gha warns through this module

        write_summary(markdown)


@dataclass
class TerminalReporter(_Doors):
    stream: TextIO = field(default_factory=lambda: sys.stdout)
    color: bool = False
    quiet_output: bool = False  # True: subprocess output goes only to the log file
    _depth: int = 0

    @classmethod
    def on_stderr(cls) -> TerminalReporter:
        """Progress on stderr: for a command whose stdout is a document (``doctor --json``)."""
        return cls(stream=sys.stderr)

    def _style(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.color else text

    def _write(self, text: str) -> None:
        write_line(self.stream, text)

    @contextmanager
    def group(self, title: str) -> Iterator[None]:
        self._write(self._style(f"==> {title}", "1"))
        start = monotonic()
        self._depth += 1
        try:
            yield
        except BaseException:
            self._depth -= 1
            self._write(self._style(f"x {title} failed after {format_duration(monotonic() - start)}", "31"))
            raise
        self._depth -= 1
        self._write(self._style(f"ok {title} ({format_duration(monotonic() - start)})", "32"))

    def info(self, message: str) -> None:
        self._write(message)

    def notice(self, title: str, message: str) -> None:
        self._write(self._style(f"note: {title}: {message}", "36"))

    def warning(self, message: str) -> None:
        self._write(self._style(f"warning: {message}", "33"))

    def error(self, message: str) -> None:
        self._write(self._style(f"error: {message}", "31"))

    def command(self, argv: Sequence[str]) -> None:
        self._write(self._style("+ " + shlex.join(argv), "2"))

    def output(self, line: str) -> None:
        if not self.quiet_output:
            self._write(line)


@dataclass
class GitHubReporter(_Doors):
    """GitHub Actions workflow commands: groups, annotations."""

    stream: TextIO = field(default_factory=lambda: sys.stdout)
    _open: list[str] = field(default_factory=list)

    def _write(self, text: str) -> None:
        write_line(self.stream, text)

    @staticmethod
    def _escape(message: str) -> str:
        # workflow-command data escaping (actions/toolkit: escapeData)
        return message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")

    @contextmanager
    def group(self, title: str) -> Iterator[None]:
        if self._open:  # GitHub groups do not nest: close the outer one
            self._write("::endgroup::")
        self._write(f"::group::{title}")
        self._open.append(title)
        start = monotonic()
        try:
            yield
        except BaseException:
            self._open.pop()
            self._write("::endgroup::")
            self._write(f"x {title} failed after {format_duration(monotonic() - start)}")
            raise
        self._open.pop()
        self._write("::endgroup::")
        self._write(f"ok {title} ({format_duration(monotonic() - start)})")
        if self._open:
            self._write(f"::group::{self._open[-1]} (continued)")

    def info(self, message: str) -> None:
        self._write(message)

    def notice(self, title: str, message: str) -> None:
        # a property value escapes ',' and ':' too (actions/toolkit: escapeProperty)
        prop = self._escape(title).replace(":", "%3A").replace(",", "%2C")
        self._write(f"::notice title={prop}::{self._escape(message)}")

    def warning(self, message: str) -> None:
        self._write(f"::warning::{self._escape(message)}")

    def error(self, message: str) -> None:
        while self._open:
            self._open.pop()
            self._write("::endgroup::")
        self._write(f"::error::{self._escape(message)}")

    def command(self, argv: Sequence[str]) -> None:
        self._write("+ " + shlex.join(argv))

    def output(self, line: str) -> None:
        self._write(line)


class NullReporter:
    @contextmanager
    def group(self, title: str) -> Iterator[None]:  # noqa: ARG002
        yield

    def info(self, message: str) -> None:
        pass

    def notice(self, title: str, message: str) -> None:
        pass

    def warning(self, message: str) -> None:
        pass

    def error(self, message: str) -> None:
        pass

    def command(self, argv: Sequence[str]) -> None:
        pass

    def output(self, line: str) -> None:
        pass

    def emit(self, text: str) -> None:
        pass

    def aside(self, line: str) -> None:
        pass

    def summary(self, markdown: str) -> None:
        pass


_REPORTER: contextvars.ContextVar[Reporter | None] = contextvars.ContextVar("dswheels_reporter", default=None)
_NULL = NullReporter()


def get_reporter() -> Reporter:
    return _REPORTER.get() or _NULL


def set_reporter(reporter: Reporter) -> contextvars.Token[Reporter | None]:
    return _REPORTER.set(reporter)


def reset_reporter(token: contextvars.Token[Reporter | None]) -> None:
    _REPORTER.reset(token)
