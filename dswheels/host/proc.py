"""The one place dswheels runs other programs.

Every command is echoed, resolved on ``PATH`` first (a missing tool is a clear error, not a
traceback), streamed live to the reporter and tee'd to a log file, and followed by a
heartbeat when it has been quiet for a while (compilers can be silent for minutes). On
failure the caller's error class is raised with the log tail and the log's path. Ctrl-C
interrupts the child, then terminates it, then kills it.

The output is read to its end whatever it holds: bytes that are not UTF-8 (cl prints in the OEM
code page) are kept as escapes, and a line that cannot be shown, logged or handled is counted and
reported once the child is done. A reader that stopped would leave the child blocked on a full
pipe until the job's timeout.

What is kept of the output is bounded, for every caller (docs/hostile-input.md, round three): a line
shown, logged or kept in the tail is cut at :data:`MAX_LINE` characters, the tail is the last
:data:`TAIL_LINES` lines, and a capture holds at most :data:`MAX_CAPTURE` characters (its lines whole:
a probe's one-line JSON answer is longer than a line shown). A program whose captured output passes that bound is
stopped and the caller's error raised, as for one that runs past its time: its output is data, and
no answer dswheels asks a program for is that long. Output that is only shown and logged is read to
its end, keeping only the tail.
"""

from __future__ import annotations

import collections
import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from dswheels.host.clock import monotonic, utc_now
from dswheels.host.log import TEXT_ERRORS, format_duration, get_reporter
from dswheels.kernel.errors import DswheelsError
from dswheels.kernel.urls import redact_text

__all__ = [
    "MAX_CAPTURE",
    "MAX_LINE",
    "RunResult",
    "capture",
    "find_tool",
    "marked_json",
    "marked_line",
    "run",
]

TAIL_LINES = 60
MAX_LINE = 64 * 1024  # characters of one line kept (a compile command line is a few KiB); the rest is cut
MAX_CAPTURE = 16 * 1024 * 1024  # characters a capture keeps (the largest real one, op flags, is < 1 MiB)
CUT = " [... line cut by dswheels]"
_HEAD_LINES = 10  # of a capture that overflowed, shown with its tail


@dataclass(frozen=True, slots=True)
class RunResult:
    argv: tuple[str, ...]
    returncode: int
    duration: float
    tail: tuple[str, ...]  # the last lines of output
    output: str  # the whole output when capture=True, else ""
    log_path: Path | None


def find_tool(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """``shutil.which`` against the PATH the child will see."""
    path = (env if env is not None else os.environ).get("PATH")
    return shutil.which(name, path=path)


def _stop(process: subprocess.Popen[str]) -> None:
    """Interrupt, then terminate, then kill: give the child a chance to clean up."""
    steps: list[Callable[[], None]] = []
    if sys.platform != "win32":
        steps.append(lambda: process.send_signal(signal.SIGINT))
    steps += [process.terminate, process.kill]
    for step in steps:
        if process.poll() is not None:
            return
        step()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            continue


def _resolve(program: str, env: Mapping[str, str] | None, error: type[DswheelsError]) -> str:
    """``program`` as a path: given with a folder, or found on the PATH the child will see."""
    resolved = program if Path(program).parent != Path() else find_tool(program, env)
    if resolved is None:
        raise error(
            f"{program} is not installed or not on PATH",
            hint=f"install {program} (or put it on PATH) and run again",
        )
    return resolved


def _open_log(log_file: Path | None, args: Sequence[str]) -> IO[str] | None:
    """The log file opened for appending, starting with the command line."""
    if log_file is None:
        return None
    log_file.parent.mkdir(parents=True, exist_ok=True)
    log = log_file.open("a", encoding="utf-8", errors=TEXT_ERRORS)
    log.write(redact_text(f"+ {' '.join(args)}\n"))  # a log is shown (CI artifacts): no URL's credentials
    log.flush()
    return log


class _Pump:
    """Reads the child's output (in a thread): keeps its tail (all of it with ``capture``, up to
    :data:`MAX_CAPTURE`), tees the log, streams. Nothing it keeps grows past a bound."""

    def __init__(
        self,
        *,
        capture: bool,
        log: IO[str] | None,
        timestamps: bool,
        stream: bool,
        on_line: Callable[[str], None] | None,
    ) -> None:
        self.capture = capture
        self.log = log
        self.timestamps = timestamps
        self.stream = stream
        self.on_line = on_line
        self.reporter = get_reporter()  # the reader thread does not see the context's reporter
        self.tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self.captured = io.StringIO()  # one growing buffer: a list of lines costs ~50 bytes more per line
        self.captured_chars = 0
        self.head: list[str] = []  # the first lines, for the error when a capture overflows
        self.overflowed = False  # the capture passed MAX_CAPTURE: the child is to be stopped
        self.wake = threading.Event()  # set when the capture overflows and when the reading ends
        self.last_output = monotonic()
        self.faults = 0  # lines that could not be shown, logged or handled
        self.fault: Exception | None = None  # the first failure

    def __call__(self, stdout: IO[str]) -> None:
        try:
            self._read(stdout)
        except Exception as exc:  # noqa: BLE001 - reading itself failed: drain the rest unread, or the child blocks
            self._failed(exc)
            with contextlib.suppress(OSError, ValueError):
                while os.read(stdout.fileno(), 65536):
                    pass
        finally:
            self.wake.set()

    def _read(self, stdout: IO[str]) -> None:
        """Every line, read in pieces of at most MAX_LINE characters (``readline``'s limit: a line without an
        end never fills memory). What is shown, logged and kept in the tail is the line's first MAX_LINE
        characters, marked when cut; a capture keeps the line whole (a probe answers in one JSON line of
        more than MAX_LINE), within MAX_CAPTURE for the whole capture."""
        shown = ""  # the current line's first MAX_LINE characters
        cut = False  # the current line is longer than that
        whole: list[str] | None = [] if self.capture else None  # the current line, for the capture
        size = 0  # characters in ``whole``
        started = False  # a piece of the current line was read
        while piece := stdout.readline(MAX_LINE):
            started = True
            ended = piece.endswith("\n")
            body = piece[:-1] if ended else piece
            room = MAX_LINE - len(shown)
            shown += body[:room]
            cut = cut or len(body) > room
            if whole is not None and not self.overflowed:
                whole.append(body)
                size += len(body)
                if self.captured_chars + size > MAX_CAPTURE:
                    self._overflow()
            if ended:
                self._line(shown, cut, whole)
                shown, cut, size, started = "", False, 0, False
                whole = [] if self.capture else None
        if started:
            self._line(shown, cut, whole)

    def _line(self, shown: str, cut: bool, whole: list[str] | None) -> None:
        line = shown.removesuffix("\r")
        kept = None if whole is None or self.overflowed else "".join(whole).removesuffix("\r")
        self._take(line + CUT if cut else line, kept)

    def _overflow(self) -> None:
        self.overflowed = True
        self.wake.set()

    def _keep(self, line: str) -> None:
        """Keep ``line`` of a capture, unless that passes MAX_CAPTURE: then nothing more is kept."""
        if self.overflowed:
            return
        if self.captured_chars + len(line) + 1 > MAX_CAPTURE:
            self._overflow()
            return
        if self.captured_chars:
            self.captured.write("\n")
        self.captured.write(line)
        self.captured_chars += len(line) + 1
        if len(self.head) < _HEAD_LINES:
            self.head.append(line[:MAX_LINE])

    @property
    def output(self) -> str:
        return self.captured.getvalue()

    def _take(self, line: str, kept: str | None = None) -> None:
        """``line`` (cut at MAX_LINE) to the tail, log, reporter and ``on_line``; ``kept`` (whole) to the capture."""
        self.last_output = monotonic()
        self.tail.append(line)
        if kept is not None:
            self._keep(kept)
        ok = True
        if self.log is not None:
            stamp = f"[{utc_now():%H:%M:%S}] " if self.timestamps else ""
            ok &= self._guarded(self.log.write, stamp + redact_text(line) + "\n")
        if self.stream:
            ok &= self._guarded(self.reporter.output, line)
        if self.on_line is not None:
            ok &= self._guarded(self.on_line, line)
        if not ok:
            self.faults += 1

    def _guarded(self, sink: Callable[[str], object], text: str) -> bool:
        try:
            sink(text)
        except Exception as exc:  # noqa: BLE001 - one line must not stop the reading (reported after the run)
            self.fault = self.fault or exc
            return False
        return True

    def _failed(self, exc: Exception) -> None:
        self.faults += 1
        self.fault = self.fault or exc

    def report_faults(self, label: str, log: IO[str] | None) -> None:
        """Say, after the run, that some output could not be shown, logged or handled, and why."""
        if self.fault is None:
            return
        text = (
            f"{self.faults} line(s) of {label}'s output could not be shown, logged or handled "
            f"({type(self.fault).__name__}: {self.fault}); the output was read to its end"
        )
        if log is not None:
            with contextlib.suppress(Exception):
                log.write(f"dswheels: {text}\n")
        with contextlib.suppress(Exception):  # a reporter that cannot write either: the log has it
            self.reporter.warning(text)


def _wait(
    process: subprocess.Popen[str],
    reader: threading.Thread,
    pump: _Pump,
    *,
    start: float,
    timeout: float | None,
    heartbeat: float | None,
    label: str,
) -> tuple[int, bool]:
    """The exit code, and whether the child was stopped for running past ``timeout``.

    While it runs: a heartbeat line after every ``heartbeat`` seconds without output. Ctrl-C stops it,
    and so does a capture that passed its bound (the reader keeps draining the pipe meanwhile).
    """
    timed_out = False
    try:
        while reader.is_alive():
            if pump.wake.wait(timeout=1.0) and not pump.overflowed:
                reader.join(timeout=1.0)  # the reading ended: the reader is about to
            now = monotonic()
            if pump.overflowed:
                _stop(process)
                break
            if timeout is not None and now - start > timeout:
                timed_out = True
                _stop(process)
                break
            if heartbeat is not None and now - pump.last_output >= heartbeat:
                quiet = format_duration(now - pump.last_output)
                pump.reporter.info(f"... still running {label} ({format_duration(now - start)}, quiet {quiet})")
                pump.last_output = now
        returncode = process.wait()
        reader.join(timeout=5)
    except KeyboardInterrupt:
        _stop(process)
        raise
    return returncode, timed_out


def run(
    argv: Sequence[str | os.PathLike[str]],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    log_file: Path | None = None,
    capture: bool = False,
    echo: bool = True,
    stream: bool = True,
    heartbeat: float | None = 60.0,
    heartbeat_label: str = "",
    timeout: float | None = None,
    check: bool = True,
    error: type[DswheelsError] = DswheelsError,
    what: str = "",
    on_line: Callable[[str], None] | None = None,
    timestamps: bool = False,
) -> RunResult:
    """Run ``argv`` to completion.

    ``capture`` keeps the whole output in the result, up to :data:`MAX_CAPTURE` characters (past that
    the program is stopped and ``error`` raised); ``stream`` shows it live through the
    reporter; ``log_file`` (appended to) always gets every line. With ``check`` a non-zero
    exit raises ``error`` naming ``what`` (default: the program), with the output's tail.
    ``on_line`` sees every line as it arrives (from the reader thread), e.g. to report progress;
    ``timestamps`` prefixes each line of the log file with the wall-clock time.
    """
    args = [os.fspath(a) for a in argv]
    program = args[0]
    args[0] = _resolve(program, env, error)
    label = what or Path(program).name
    if echo:
        get_reporter().command([program, *args[1:]])
    log = _open_log(log_file, args)
    pump = _Pump(capture=capture, log=log, timestamps=timestamps, stream=stream, on_line=on_line)
    start = monotonic()
    try:
        process = subprocess.Popen(
            args,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            encoding="utf-8",
            errors=TEXT_ERRORS,
            bufsize=1,
        )
    except OSError as exc:
        if log is not None:
            log.close()
        raise error(f"could not start {label}: {exc}") from exc
    assert process.stdout is not None  # noqa: S101 - set by stdout=PIPE
    reader = threading.Thread(target=pump, args=(process.stdout,), daemon=True)
    reader.start()
    try:
        returncode, timed_out = _wait(
            process, reader, pump, start=start, timeout=timeout, heartbeat=heartbeat, label=heartbeat_label or label
        )
    finally:
        pump.report_faults(label, log)
        if log is not None:
            log.close()
        if not reader.is_alive():
            process.stdout.close()  # the reader is done with it (an unclosed pipe is a ResourceWarning)
    tail = tuple(pump.tail)
    hint = f"full log: {log_file}" if log_file else None
    if pump.overflowed:
        shown = [*pump.head, f"[... more than {MAX_CAPTURE:,} characters; the last lines:]", *tail[-20:]]
        raise error(
            f"{label} printed more than {MAX_CAPTURE:,} characters of output and was stopped "
            "(no answer dswheels asks a program for is that long)",
            details="\n".join(shown),
            hint=hint,
        )
    if timed_out:
        raise error(
            f"{label} did not finish within {format_duration(timeout or 0)}", details="\n".join(tail[-30:]), hint=hint
        )
    if check and returncode != 0:
        raise error(f"{label} failed (exit code {returncode})", details="\n".join(tail[-40:]), hint=hint)
    return RunResult(
        argv=tuple(args),
        returncode=returncode,
        duration=monotonic() - start,
        tail=tail,
        output=pump.output,
        log_path=log_file,
    )


def capture(
    argv: Sequence[str | os.PathLike[str]],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    log_file: Path | None = None,
    heartbeat: float | None = None,
    heartbeat_label: str = "",
    timeout: float | None = None,
    error: type[DswheelsError] = DswheelsError,
    what: str = "",
) -> RunResult:
    """:func:`run` for a probe or helper script whose output is data, not progress.

    Not echoed, not shown live, and not checked: the caller reads ``returncode`` and ``output``.
    ``error`` is still raised when the program is missing, cannot start, or runs past ``timeout``.
    """
    return run(
        argv,
        cwd=cwd,
        env=env,
        log_file=log_file,
        capture=True,
        echo=False,
        stream=False,
        heartbeat=heartbeat,
        heartbeat_label=heartbeat_label,
        timeout=timeout,
        check=False,
        error=error,
        what=what,
    )


def marked_line(output: str, mark: str) -> str | None:
    r"""What follows ``mark`` on the last line of ``output`` that starts with it; None if no line does.

    Helper scripts run in another interpreter print their result as one ``MARK payload`` line, so
    whatever else the interpreter prints (warnings, a sitecustomize) cannot be mistaken for it.

    >>> marked_line('warning: x\nDSWHEELS-X {"a": 1}', "DSWHEELS-X ")
    '{"a": 1}'
    """
    for line in reversed(output.splitlines()):
        if line.startswith(mark):
            return line.removeprefix(mark)
    return None


def marked_json(output: str, mark: str) -> object:
    r"""The JSON a :mod:`dswheels.probes` script printed after ``mark`` (:func:`marked_line`); None when it
    printed none (it crashed: the run's ``tail`` says why) or the line was cut short (it was killed).

    >>> marked_json('Traceback ...\nDSWHEELS-X {"a": [1]}', "DSWHEELS-X ")
    {'a': [1]}
    """
    payload = marked_line(output, mark)
    try:
        return json.loads(payload) if payload is not None else None
    except ValueError:
        return None
