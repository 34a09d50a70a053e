"""The one place dswheels runs other programs.

Every command is echoed, resolved on ``PATH`` first (a missing tool is a clear error, not a
traceback), streamed live to the reporter and tee'd to a log file, and followed by a
heartbeat when it has been quiet for a while (compilers can be silent for minutes). On
failure the caller's error class is raised with the log tail and the log's path. Ctrl-C
interrupts the child, then terminates it, then kills it.
"""

from __future__ import annotations

import collections
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

from dswheels.effects.clock import monotonic, utc_now
from dswheels.errors import DswheelsError
from dswheels.log import format_duration, get_reporter

__all__ = ["RunResult", "Runner", "capture", "find_tool", "marked_json", "marked_line", "run"]

TAIL_LINES = 60


@dataclass(frozen=True, slots=True)
class RunResult:
    argv: tuple[str, ...]
    returncode: int
    duration: float
    tail: tuple[str, ...]  # the last lines of output
    output: str  # the whole output when capture=True, else ""
    log_path: Path | None


Runner = Callable[..., RunResult]


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

    ``capture`` keeps the whole output in the result; ``stream`` shows it live through the
    reporter; ``log_file`` (appended to) always gets every line. With ``check`` a non-zero
    exit raises ``error`` naming ``what`` (default: the program), with the output's tail.
    ``on_line`` sees every line as it arrives (from the reader thread), e.g. to report progress;
    ``timestamps`` prefixes each line of the log file with the wall-clock time.
    """
    args = [os.fspath(a) for a in argv]
    reporter = get_reporter()
    program = args[0]
    resolved = program if Path(program).parent != Path() else find_tool(program, env)
    if resolved is None:
        raise error(
            f"{program} is not installed or not on PATH",
            hint=f"install {program} (or put it on PATH) and run again",
        )
    args[0] = resolved
    label = what or Path(program).name
    if echo:
        reporter.command([program, *args[1:]])
    log: IO[str] | None = None
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        log = log_file.open("a", encoding="utf-8", errors="replace")
        log.write(f"+ {' '.join(args)}\n")
        log.flush()
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    captured: list[str] = []
    last_output = [monotonic()]
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
            errors="replace",
            bufsize=1,
        )
    except OSError as exc:
        if log is not None:
            log.close()
        raise error(f"could not start {label}: {exc}") from exc

    def pump() -> None:
        assert process.stdout is not None  # noqa: S101 - set by stdout=PIPE
        for raw in process.stdout:
            line = raw.rstrip("\r\n")
            last_output[0] = monotonic()
            tail.append(line)
            if capture:
                captured.append(line)
            if log is not None:
                log.write((f"[{utc_now():%H:%M:%S}] " if timestamps else "") + line + "\n")
            if stream:
                reporter.output(line)
            if on_line is not None:
                on_line(line)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    timed_out = False
    try:
        while reader.is_alive():
            reader.join(timeout=1.0)
            now = monotonic()
            if timeout is not None and now - start > timeout:
                timed_out = True
                _stop(process)
                break
            if heartbeat is not None and now - last_output[0] >= heartbeat:
                quiet = format_duration(now - last_output[0])
                reporter.info(
                    f"... still running {heartbeat_label or label} ({format_duration(now - start)}, quiet {quiet})"
                )
                last_output[0] = now
        returncode = process.wait()
        reader.join(timeout=5)
    except KeyboardInterrupt:
        _stop(process)
        raise
    finally:
        if log is not None:
            log.close()
        if process.stdout is not None and not reader.is_alive():
            process.stdout.close()  # the reader is done with it (an unclosed pipe is a ResourceWarning)
    duration = monotonic() - start
    result = RunResult(
        argv=tuple(args),
        returncode=returncode,
        duration=duration,
        tail=tuple(tail),
        output="\n".join(captured),
        log_path=log_file,
    )
    if timed_out:
        raise error(
            f"{label} did not finish within {format_duration(timeout or 0)}",
            details="\n".join(list(tail)[-30:]),
            hint=f"full log: {log_file}" if log_file else None,
        )
    if check and returncode != 0:
        raise error(
            f"{label} failed (exit code {returncode})",
            details="\n".join(list(tail)[-40:]),
            hint=f"full log: {log_file}" if log_file else None,
        )
    return result


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
