"""The real command line run as a child with bounded memory, time and a temporary folder of its own.

A hostile input that makes dswheels allocate without bound must end in the documented exit code,
not in a MemoryError traceback: the child gets an address-space limit (POSIX ``setrlimit``), and
``TMPDIR`` points at a folder the test then finds empty (what a run leaves behind is a leak).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import ROOT

__all__ = ["Limited", "run_limited"]


@dataclass(frozen=True)
class Limited:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    left_in_tmp: tuple[str, ...]  # what the run left in its TMPDIR


def run_limited(
    args: list[str], *, tmp: Path, memory: int = 2560 * 1024**2, timeout: float = 120, env: dict[str, str] | None = None
) -> Limited:
    """``python -m dswheels ARGS`` with at most ``memory`` bytes of address space and ``tmp`` as its TMPDIR."""

    def limit() -> None:
        import resource  # POSIX only: the tests using it are skipped on Windows

        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    tmp.mkdir(parents=True, exist_ok=True)
    child_env = dict(os.environ if env is None else env, TMPDIR=str(tmp))
    start = time.monotonic()
    result = subprocess.run(  # noqa: PLW1510 - the caller checks the exit code
        [sys.executable, "-m", "dswheels", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=child_env,
        timeout=timeout,
        preexec_fn=limit,
    )
    return Limited(
        returncode=result.returncode,
        stdout=result.stdout,
        stderr=result.stderr,
        seconds=time.monotonic() - start,
        left_in_tmp=tuple(sorted(p.name for p in tmp.iterdir())),
    )
