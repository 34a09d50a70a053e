"""Wine's server for a prefix, started detached before a Windows program whose output is read.

The first Windows program of a prefix starts ``wineserver`` and Wine's services (``services.exe``,
``winedevice.exe``, ``plugplay.exe``, ``rpcss.exe``...), which inherit that program's stdout and stderr
and keep them open as long as they run: the reader of the program's pipe (:mod:`dswheels.host.proc`)
waits for them, not the program, and they live on while any other program of the prefix runs
(measured: a ``_freeze_module`` of a few seconds held for over 5 minutes while a verify used the
prefix). So the server is started here first and, when it was not running, the services with it by a
program that ends at once (``cmd /c exit``), all of it on ``/dev/null``; a server already running is
left as it is (``wineserver`` exits 2).
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
    quiet = "</dev/null >/dev/null 2>&1"
    started = f"{shlex.quote(server)} -p{PERSIST} {quiet}"  # -p30: wineserver reads the number attached
    services = f"{shlex.quote(host.wine)} cmd /c exit {quiet}"
    proc.run(
        ["sh", "-c", f"if {started}; then {services}; fi; exit 0"],
        env={**env, **host.env},
        echo=False,
        stream=False,
        heartbeat=None,
        timeout=300,
        check=False,
        error=EnvironmentMismatchError,
        what="wineserver",
    )
