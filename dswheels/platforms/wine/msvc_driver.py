"""MSVC driven directly under Wine, without MSBuild: compile units in parallel batches, link, run the result.

:mod:`~dswheels.platforms.wine.cpython_build` says what to compile (from CPython's project files);
this module does it: each batch of sources with the same options is one ``cl /c`` (a Wine start
costs about a second, a batch pays it once), batches run ``jobs`` at a time, a batch that finished
in an earlier attempt (its stamp is there) is not compiled again, and the link gets its objects and
options in a response file (a DLL's command line would pass Windows' 32k limit). Every tool runs
through the scripts of :mod:`dswheels.platforms.wine.host`, which translate this machine's paths;
progress is one line per tenth of a target's units.
"""

from __future__ import annotations

import contextvars
import hashlib
import os
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from dswheels.host import proc
from dswheels.host.clock import monotonic
from dswheels.host.log import format_duration, get_reporter
from dswheels.kernel.errors import EnvironmentMismatchError
from dswheels.platforms.wine.host import WineHost, windows_path, write_tool_scripts
from dswheels.platforms.wine.msvc_root import MsvcRoot
from dswheels.platforms.wine.server import start_server

__all__ = ["BATCH", "Unit", "WineMsvc", "compile_units", "link", "wine_msvc"]

BATCH = 10  # sources per cl: a Wine start per batch, not per file, and still several batches per target
_TOOLS = ("cl.exe", "link.exe", "lib.exe", "ml64.exe")


@dataclass(frozen=True, slots=True)
class WineMsvc:
    host: WineHost
    msvc: MsvcRoot
    bin_dir: Path  # cl.exe, link.exe, lib.exe, ml64.exe: scripts that run them under Wine

    def tool(self, name: str) -> Path:
        return self.bin_dir / name


@dataclass(frozen=True, slots=True)
class Unit:
    """One source and the options ``cl`` compiles it with (``/c``, ``/Fo`` and ``/nologo`` are added)."""

    source: Path
    flags: tuple[str, ...]


def wine_msvc(host: WineHost, msvc: MsvcRoot, folder: Path) -> WineMsvc:
    """The tool scripts in ``folder``, with the environment a VS x64 developer prompt gives."""
    windows_env = {
        "INCLUDE": ";".join(windows_path(p) for p in msvc.include_dirs),
        "LIB": ";".join(windows_path(p) for p in msvc.lib_dirs),
        "WINEPATH": ";".join(windows_path(p) for p in (msvc.bin_dir, msvc.sdk_bin_dir)),
    }
    write_tool_scripts(
        folder,
        python=Path(sys.executable),  # the scripts need only the standard library
        host=host,
        tools={name: msvc.tool(name) for name in _TOOLS},
        windows_env=windows_env,
    )
    return WineMsvc(host=host, msvc=msvc, bin_dir=folder)


def _digest(parts: Sequence[str]) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:10]


def _batches(units: Sequence[Unit], obj_root: Path) -> list[tuple[Path, tuple[str, ...], list[Unit]]]:
    """(object folder, options, units): one folder per set of options, a second where two sources share a stem.
    A unit given twice (two targets with the same source and options) is compiled once."""
    batches: list[tuple[Path, tuple[str, ...], list[Unit]]] = []
    groups: dict[tuple[str, ...], list[Unit]] = {}
    for unit in dict.fromkeys(units):
        groups.setdefault(unit.flags, []).append(unit)
    for flags, members in groups.items():
        folders: list[tuple[Path, set[str], list[Unit]]] = []
        for unit in members:
            stem = unit.source.stem.lower()
            slot = next((f for f in folders if stem not in f[1]), None)
            if slot is None:
                slot = (obj_root / f"{_digest(flags)}-{len(folders)}", set(), [])
                folders.append(slot)
            slot[1].add(stem)
            slot[2].append(unit)
        for folder, _stems, in_folder in folders:
            batches += [(folder, flags, in_folder[i : i + BATCH]) for i in range(0, len(in_folder), BATCH)]
    return batches


def object_path(folder: Path, unit: Unit) -> Path:
    return folder / f"{unit.source.stem}.obj"


def compile_units(
    tools: WineMsvc, units: Sequence[Unit], *, obj_root: Path, label: str, jobs: int, log: Path
) -> list[Path]:
    """Compile ``units`` (in their order: the objects come back in it) under ``obj_root``."""
    batches = _batches(units, obj_root)
    objects = {unit: object_path(folder, unit) for folder, _f, members in batches for unit in members}
    todo = [b for b in batches if not _stamp(b).is_file()]
    reporter = get_reporter()
    if todo:
        total = sum(len(b[2]) for b in todo)
        reporter.info(f"{label}: compiling {total} units ({len(todo)} batches, {jobs} at a time)")
        start = monotonic()
        done = 0
        shown = 0
        parent = contextvars.copy_context()  # the workers log through the caller's reporter
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futures = [pool.submit(parent.copy().run, _compile_batch, tools, b, log) for b in todo]
            for future in futures:
                done += future.result()
                if done == total or done - shown >= max(1, total // 10):
                    shown = done
                    reporter.info(f"{label}: {done}/{total} compiled ({format_duration(monotonic() - start)})")
    return [objects[unit] for unit in units]


def _stamp(batch: tuple[Path, tuple[str, ...], list[Unit]]) -> Path:
    folder, _flags, members = batch
    return folder / f".done-{_digest([str(u.source) for u in members])}"


def _compile_batch(tools: WineMsvc, batch: tuple[Path, tuple[str, ...], list[Unit]], log: Path) -> int:
    folder, flags, members = batch
    folder.mkdir(parents=True, exist_ok=True)
    start_server(tools.host, os.environ)
    names = ", ".join(u.source.name for u in members)
    proc.run(
        [tools.tool("cl.exe"), "/nologo", "/c", *flags, f"/Fo{folder}/", *(str(u.source) for u in members)],
        log_file=log,
        echo=False,
        stream=False,
        heartbeat=None,
        timeout=3600,
        error=EnvironmentMismatchError,
        what=f"cl ({names})",
    )
    missing = [u.source.name for u in members if not object_path(folder, u).is_file()]
    if missing:
        raise EnvironmentMismatchError(f"cl left no object for {', '.join(missing)}", hint=f"full log: {log}")
    _stamp(batch).write_text("", encoding="utf-8")
    return len(members)


def link(
    tools: WineMsvc,
    objects: Sequence[Path],
    *,
    out: Path,
    flags: Sequence[str],
    libs: Sequence[str],
    lib_dirs: Sequence[Path],
    log: Path,
    implib: Path | None = None,
) -> Path:
    """``link`` ``objects`` into ``out`` (a DLL when ``flags`` has ``/DLL``), everything in a response file.

    The linker writes into a ``.partial`` folder first, and ``out`` is moved from there once it succeeded: an
    ``out`` that is there is whole (a link stopped half-way would otherwise be taken as done by the next attempt).
    The file keeps its name: a DLL's name is written into it and into its import library."""
    partial = out.parent / ".partial" / out.name
    partial.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        "/nologo",
        *flags,
        f'/OUT:"{windows_path(partial)}"',
        *([f'/IMPLIB:"{windows_path(implib)}"'] if implib else []),
        *(f'/LIBPATH:"{windows_path(d)}"' for d in lib_dirs),
        *(f'"{windows_path(o)}"' for o in objects),
        *libs,
    ]
    response = out.with_name(out.name + ".rsp")
    text = "\n".join(lines) + "\n"
    if _up_to_date(out, response, text, objects):
        return out  # an earlier attempt linked exactly this (a DLL's whole-program link takes minutes)
    out.unlink(missing_ok=True)
    response.write_text(text, encoding="utf-8")
    start_server(tools.host, os.environ)
    proc.run(
        [tools.tool("link.exe"), f"@{response}"],
        log_file=log,
        echo=False,
        stream=False,
        timeout=3600,
        error=EnvironmentMismatchError,
        what=f"link {out.name}",
    )
    if not partial.is_file():
        raise EnvironmentMismatchError(f"link made no {out.name}", hint=f"full log: {log}")
    partial.replace(out)
    return out


def _up_to_date(out: Path, response: Path, text: str, objects: Sequence[Path]) -> bool:
    if not out.is_file() or not response.is_file() or response.read_text(encoding="utf-8") != text:
        return False
    built = out.stat().st_mtime
    return all(o.stat().st_mtime <= built for o in objects)
