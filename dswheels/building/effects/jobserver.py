"""One pool of compile slots for every op of a build: a GNU make jobserver that ninja joins.

setuptools builds several extensions at once (one thread each) and torch runs one ninja per
extension; alone, each ninja would compile its units one at a time (or ``MAX_JOBS`` at a time,
every ninja at once). With a jobserver the build's ``jobs`` slots are tokens: each extension's
thread takes one before its ninja starts (the patched setup.py: dswheels.building.patches)
and ninja takes one more for every further unit it runs at once (ninja >= 1.13 joins the
jobserver that ``MAKEFLAGS`` names when it is given no ``-j``). So while many ops build, each gets
one slot; when the last ones are left, their units take every slot the others gave back: the
big ops (started first: longest first by the cost model) do not finish alone on one core.

POSIX: a named pipe (``MAKEFLAGS=--jobserver-auth=fifo:PATH``, GNU make 4.4's form) holding one
byte per slot. Windows: a named semaphore (``--jobserver-auth=NAME``, as GNU make and ninja use
it there), made with ``CreateSemaphoreW``.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from dswheels.platforms.find_tools import tool_version

__all__ = ["Jobserver", "jobserver", "ninja_joins_jobservers"]

# ninja joins a jobserver from 1.13.0 (ninja-build/ninja#2450; its ChangeLog: "Ninja now automatically joins a
# GNU Make jobserver as a client")
NINJA_JOBSERVER = (1, 13)


@dataclass(frozen=True, slots=True)
class Jobserver:
    """What the build's environment names: ``MAKEFLAGS`` for ninja, ``DSWHEELS_JOBSERVER`` for setup.py."""

    auth: str  # fifo:PATH or a semaphore's name
    slots: int

    def env(self) -> dict[str, str]:
        return {"MAKEFLAGS": f" -j{self.slots} --jobserver-auth={self.auth}", "DSWHEELS_JOBSERVER": self.auth}


def ninja_joins_jobservers(env: Mapping[str, str]) -> str:
    """The ninja the build will run ("" if it would not join a jobserver: missing, or older than 1.13).

    >>> ninja_joins_jobservers({"PATH": ""})
    ''
    """
    line = tool_version(["ninja", "--version"], env)
    match = re.match(r"([0-9]+)\.([0-9]+)", line)
    if match is None or (int(match.group(1)), int(match.group(2))) < NINJA_JOBSERVER:
        return ""
    return line


@contextlib.contextmanager
def jobserver(slots: int, folder: Path) -> Iterator[Jobserver]:
    """A jobserver with ``slots`` tokens for the duration of the block (its pipe in ``folder``)."""
    if sys.platform == "win32":
        with _semaphore(slots) as name:
            yield Jobserver(auth=name, slots=slots)
    else:  # each platform in one branch: mypy checks the other's as not run there
        fifo = folder / "jobserver.fifo"
        with contextlib.suppress(FileNotFoundError):
            fifo.unlink()
        os.mkfifo(fifo, 0o600)
        # opened for reading and writing: neither end blocks, and the pipe lives while the build runs
        fd = os.open(fifo, os.O_RDWR)
        try:
            os.write(fd, b"+" * slots)
            yield Jobserver(auth=f"fifo:{fifo}", slots=slots)
        finally:
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                fifo.unlink()


@contextlib.contextmanager
def _semaphore(slots: int) -> Iterator[str]:  # pragma: no cover - Windows only (ci.yml's windows-2022 jobs)
    import ctypes  # noqa: PLC0415 - Windows only
    from ctypes import wintypes  # noqa: PLC0415

    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined,unused-ignore]
    kernel32.CreateSemaphoreW.restype = wintypes.HANDLE
    kernel32.CreateSemaphoreW.argtypes = (wintypes.LPVOID, wintypes.LONG, wintypes.LONG, wintypes.LPCWSTR)
    kernel32.CloseHandle.argtypes = (wintypes.HANDLE,)
    name = f"dswheels_jobserver_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    handle = kernel32.CreateSemaphoreW(None, slots, slots, name)
    if not handle:
        raise OSError(ctypes.get_last_error(), f"CreateSemaphoreW({name}) failed")  # type: ignore[attr-defined,unused-ignore]
    try:
        yield name
    finally:
        kernel32.CloseHandle(handle)
