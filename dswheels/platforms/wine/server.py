"""Wine's server for a prefix, started detached before a Windows program whose output is read.

The first Windows program of a prefix starts ``wineserver``, which inherits that program's stdout
and stderr and keeps them open as long as it runs: the reader of the program's pipe
(:mod:`dswheels.host.proc`) waits for the server, not the program, and the server lives on while
any other program of the prefix runs (measured: a ``_freeze_module`` of a few seconds held for over
5 minutes while a verify used the prefix). So the server is started here first, its own output on
``/dev/null``; a server already running is left as it is (``wineserver`` exits 2).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from dswheels.host import proc
from dswheels.kernel.errors import EnvironmentMismatchError
from dswheels.platforms.wine.host import WineHost

__all__ = ["PERSIST", "start_server"]

PERSIST = 30  # seconds the server stays after its last program: the next batch of a build finds it


def start_server(host: WineHost, env: Mapping[str, str]) -> None:
    """The prefix's server running, detached from every pipe of ours."""
    server = proc.find_tool("wineserver", env)
    if server is None:
        return  # a Wine without it on PATH starts its own (and the pipe waits for it, as before)
    command = f"exec {shlex.quote(server)} -p {PERSIST} </dev/null >/dev/null 2>&1"
    proc.run(
        ["sh", "-c", command],
        env={**env, **host.env},
        echo=False,
        stream=False,
        heartbeat=None,
        timeout=120,
        check=False,
        error=EnvironmentMismatchError,
        what="wineserver",
    )
