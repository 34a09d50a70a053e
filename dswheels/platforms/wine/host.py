"""Wine itself: the program, a prefix of our own, and the scripts that run each Windows tool.

The prefix (Wine's ``C:`` drive and registry) is made once per cache by ``wineboot -i`` and
shared by every build; Mono and Gecko are declined (no .NET or HTML engine is needed by console
compilers). Every Windows tool is reached through a script named as the build expects it
(``cl``, ``cl.exe``, ``link.exe``, ``nvcc``...) that runs :mod:`dswheels.probes.wine_tool`
with one JSON config: the ``.exe`` of each tool, the Windows environment (INCLUDE, LIB, the
``PATH`` Wine gives Windows programs), and the prefix.
"""

from __future__ import annotations

import json
import shutil
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dswheels import probes
from dswheels.host import proc
from dswheels.host.cache import CacheLayout
from dswheels.host.files import exclusive, write_text_atomic
from dswheels.host.log import get_reporter
from dswheels.kernel.errors import DswheelsError, EnvironmentMismatchError

__all__ = [
    "WineHost",
    "find_wine",
    "install_for_windows",
    "wait_for_wineserver",
    "windows_path",
    "write_tool_scripts",
]

WINE_TOOL = Path(probes.__file__).resolve().parent / "wine_tool.py"
# Wine maps Z: to the root of this machine's file system (its default drive configuration)
DRIVES = {"/": "Z"}


def windows_path(path: Path | str) -> str:
    """``/work/x`` as a Windows program under Wine names it: ``Z:\\work\\x``."""
    return "Z:" + str(path).replace("/", "\\")


@dataclass(frozen=True, slots=True)
class WineHost:
    wine: str  # the wine program
    prefix: Path  # WINEPREFIX
    version: str  # `wine --version`

    @property
    def env(self) -> dict[str, str]:
        """What every Wine process of a build gets (on top of the build's environment)."""
        return {
            "WINEPREFIX": str(self.prefix),
            "WINEDEBUG": "-all",
            # no .NET or HTML engine: wineboot would offer to download Mono and Gecko
            "WINEDLLOVERRIDES": "mscoree=d;mshtml=d",
        }


def find_wine(env: Mapping[str, str], *, cache: CacheLayout) -> WineHost:
    """Wine on PATH and the cache's prefix, ready (made once, by the first build that needs it; its builds share it)."""
    wine = proc.find_tool("wine", env) or proc.find_tool("wine64", env)
    if wine is None:
        raise EnvironmentMismatchError(
            "building a Windows cell here needs Wine, and `wine` is not on PATH",
            hint="install it (Debian/Ubuntu: apt-get install wine64), or build the cell on Windows",
        )
    said = proc.capture([wine, "--version"], env=dict(env), timeout=60).output
    # Debian's wine64 also warns that wine32 is missing: only 64-bit programs run here, which is all we run
    version = next((ln.strip() for ln in said.splitlines() if ln.startswith("wine-")), said.strip()[-80:])
    host = WineHost(wine=wine, prefix=cache.wine_prefix, version=version)
    marker = host.prefix / ".dswheels-ready"
    if not marker.is_file():
        with exclusive(host.prefix.parent, what="making the Wine prefix", error=EnvironmentMismatchError):
            if not marker.is_file():
                get_reporter().info(f"making a Wine prefix in {host.prefix} ({version}; once per cache)")
                shutil.rmtree(host.prefix, ignore_errors=True)
                proc.run(
                    [wine, "wineboot", "-i"],
                    env={**env, **host.env},
                    error=EnvironmentMismatchError,
                    what="wineboot -i",
                    timeout=600,
                    stream=False,
                )
                wait_for_wineserver(host.prefix, env)  # the registry written before anyone uses the prefix
                marker.write_text(version + "\n", encoding="utf-8")
    return host


def wait_for_wineserver(prefix: Path, env: Mapping[str, str], *, timeout: float = 120) -> None:
    """Wait for the prefix's wineserver (and Wine's services with it) to end, as it does a few seconds after
    the last Windows program: a build leaves no process behind. A server another build still uses is left
    to it after ``timeout``."""
    server = proc.find_tool("wineserver", env)
    if server is None or not prefix.is_dir():
        return
    try:
        proc.capture([server, "-w"], env={**env, "WINEPREFIX": str(prefix)}, timeout=timeout)
    except DswheelsError:
        get_reporter().info(f"Wine's server for {prefix} still runs after {timeout:.0f} s: another build uses it")


def write_tool_scripts(
    folder: Path,
    *,
    python: Path,
    host: WineHost,
    tools: Mapping[str, Path],
    windows_env: Mapping[str, str],
    extra: Mapping[str, object] | None = None,
) -> Path:
    """One script per tool name in ``folder`` (``cl`` and ``cl.exe`` may both be asked for); returns the config."""
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "wine-tools.json"
    payload = {
        "wine": host.wine,
        "drives": DRIVES,
        "tools": {name: windows_path(exe) for name, exe in tools.items()},
        "env": {**host.env, **windows_env},
        **(extra or {}),
    }
    write_text_atomic(config, json.dumps(payload, indent=1, sort_keys=True) + "\n")
    for name in tools:
        script = folder / name
        script.write_text(f'#!/bin/sh\nexec "{python}" "{WINE_TOOL}" "{config}" "{name}" "$@"\n', encoding="utf-8")
        script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return config


def install_for_windows(
    uv: str, target: Path, requirements: Sequence[str], *, python: str, log: Path, extra: Sequence[str] = ()
) -> None:
    """win_amd64 wheels of ``requirements`` unpacked into ``target`` by uv, as a Windows ``python`` would get them."""
    proc.run(
        [
            uv,
            "pip",
            "install",
            "--quiet",
            "--no-compile",
            "--target",
            target,
            "--python-platform",
            "x86_64-pc-windows-msvc",
            "--python-version",
            python,
            *extra,
            *requirements,
        ],
        log_file=log,
        stream=False,
        error=EnvironmentMismatchError,
        what=f"uv pip install {' '.join(requirements)} (win_amd64)",
        timeout=1800,
    )
