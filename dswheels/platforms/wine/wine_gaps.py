"""What Wine 8 (Debian 12's) lacks that a Windows Python with torch and DeepSpeed meets, each handled here.

Measured on this kind of machine (docs/build.md#windows-under-wine):

* **vcruntime140_threads.dll**: ``torch_cpu.dll`` imports it; Windows has it from the Visual C++
  redistributable, Wine has no builtin one. It is copied from the MSVC root beside ``python.exe``
  (with ``vcruntime140.dll``/``vcruntime140_1.dll``, which python.org's installer ships there too).
* **ProcessPrng** (``bcryptprimitives.dll``): Rust's standard library (pydantic_core) imports it;
  Wine 8 has no such DLL. A small one is built here with the same MSVC (``ProcessPrng`` over
  ``BCryptGenRandom``, which Wine has) and placed beside ``python.exe``.
* **crealf** (``ucrtbase.dll``): numpy 2 calls it; Wine 8's ucrtbase exports it as a stub that aborts
  the process. The venv's installs are held to ``numpy<2`` when calling it fails here (asked, not
  assumed: a newer Wine implements it); numpy 1.x has no wheels for Python 3.13+, which then cannot
  run DeepSpeed under this Wine.
* **winedbg**: a crashing Windows program starts winedbg, which then holds the program's pipes open and
  never ends here (with or without its crash dialog: measured): every run would stall until its timeout.
  Windows programs run with winedbg switched off (``WINEDLLOVERRIDES=winedbg.exe=d``): a crash ends the
  program at once, its "Unhandled page fault" line in the output.
* **wmic**: py-cpuinfo (DeepSpeedCPUAdam asks it the CPU vendor) runs ``wmic os get Version``, which
  never returns under Wine 8 (no WMI service). It is switched off the same way; py-cpuinfo then reads
  the registry and CPUID, as on a Windows 11 without wmic.
* **OpenMP's topology**: torch's ``libiomp5md.dll`` asks ``GetNumaNodeProcessorMaskEx``, which Wine 8 does
  not implement, and aborts (``OMP: Error #179``) at torch's first thread query. Its affinity support is
  switched off for every Windows program run here (``KMP_AFFINITY=disabled``); threads still run.
* **CopyFile2** (``kernel32.dll``): ``shutil.copy2`` calls it from Python 3.12 (``_winapi.CopyFile2``);
  Wine 8 exports a stub that aborts the process, so ``python -m venv`` dies copying its launcher. Where
  the release's shutil calls it and calling it fails here, the Windows CPython gets a ``sitecustomize``
  that hides it from ``_winapi``: shutil then copies as it did before 3.12 (:func:`hide_copyfile2`).
* **stdout on a regular file**: Wine 8 hands a Windows program a file handle that
  ``GetFileInformationByHandle`` refuses, and Python dies initialising ``sys.stdout``. Windows programs
  here always write to a pipe (:func:`run_windows`, through
  :mod:`dswheels.host.proc`), and what must end in a file is written by the program itself.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from dswheels.host import proc
from dswheels.kernel.errors import EnvironmentMismatchError
from dswheels.platforms.wine.host import WineHost, windows_path
from dswheels.platforms.wine.msvc_driver import Unit, WineMsvc, compile_units, link
from dswheels.platforms.wine.server import start_server

__all__ = [
    "COPYFILE2_SITECUSTOMIZE",
    "NUMPY_WITHOUT_CREALF",
    "PROCESS_PRNG_SOURCE",
    "RUNTIME_DLLS",
    "SWITCHED_OFF",
    "add_runtime_files",
    "has_crealf",
    "hide_copyfile2",
    "numpy_constraints",
    "run_windows",
    "windows_program_env",
]

# programs of the prefix that must not start when a Windows program asks for them (see above)
SWITCHED_OFF = ("winedbg.exe", "wmic.exe")
RUNTIME_DLLS = ("vcruntime140.dll", "vcruntime140_1.dll", "vcruntime140_threads.dll")
NUMPY_WITHOUT_CREALF = "numpy<2"
PROCESS_PRNG_SOURCE = """\
/* bcryptprimitives.dll for Wine 8, which has none: ProcessPrng as Windows 10+ exports it (written by dswheels). */
#include <windows.h>
#include <bcrypt.h>

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T size)
{
    while (size) {
        ULONG chunk = size > 0x10000000 ? 0x10000000 : (ULONG)size;
        if (BCryptGenRandom(NULL, data, chunk, BCRYPT_USE_SYSTEM_PREFERRED_RNG) != 0)
            return FALSE;
        data += chunk;
        size -= chunk;
    }
    return TRUE;
}
"""


def _runtime_dll(tools: WineMsvc, name: str) -> Path:
    """``name`` from the MSVC root: the redistributable's folder (VS, msvc-wine), else the x64 tools' own."""
    redist = tools.msvc.root / "VC" / "Redist" / "MSVC"
    for found in sorted(redist.glob(f"*/x64/Microsoft.VC*.CRT/{name}"), reverse=True):
        return found
    found = tools.msvc.bin_dir / name
    if not found.is_file():
        raise EnvironmentMismatchError(
            f"the MSVC root {tools.msvc.root} has no x64 {name}",
            hint="a root with the Visual C++ redistributable (VC/Redist/MSVC) or the x64 host tools",
        )
    return found


def add_runtime_files(root: Path, *, tools: WineMsvc, log: Path, obj: Path) -> None:
    """Beside ``root/python.exe``: the VC++ runtime DLLs and a ``bcryptprimitives.dll`` with ProcessPrng."""
    for name in RUNTIME_DLLS:
        shutil.copy2(_runtime_dll(tools, name), root / name)
    obj.mkdir(parents=True, exist_ok=True)
    source = obj / "bcryptprimitives.c"
    source.write_text(PROCESS_PRNG_SOURCE, encoding="utf-8")
    objects = compile_units(
        tools,
        [Unit(source=source, flags=("/O2", "/GS-", "/W3"))],
        obj_root=obj,
        label="bcryptprimitives",
        jobs=1,
        log=log,
    )
    dll = link(
        tools,
        objects,
        out=obj / "bcryptprimitives.dll",
        flags=["/DLL", "/NOENTRY", "/NODEFAULTLIB", "/EXPORT:ProcessPrng"],
        libs=["bcrypt.lib", "kernel32.lib"],
        lib_dirs=[],
        log=log,
    )
    shutil.copy2(dll, root / dll.name)


def windows_program_env(host: WineHost) -> dict[str, str]:
    """What a Windows program run under ``host`` gets on top of this machine's environment, for Wine's sake
    (a Windows machine needs none of it)."""
    overrides = [part for part in host.env.get("WINEDLLOVERRIDES", "").split(";") if part]
    overrides += [f"{program}=d" for program in SWITCHED_OFF]
    return {**host.env, "WINEDLLOVERRIDES": ";".join(overrides), "KMP_AFFINITY": "disabled"}


def run_windows(
    host: WineHost,
    exe: Path,
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    log: Path | None,
    what: str,
    timeout: float = 600,
    capture: bool = False,
    check: bool = True,
) -> proc.RunResult:
    """``exe`` (a Windows program) under Wine with :func:`windows_program_env`, its output on a pipe (never a
    file: see above)."""
    start_server(host, env)
    return proc.run(
        [host.wine, windows_path(exe), *args],
        env={**env, **windows_program_env(host)},
        log_file=log,
        echo=False,
        stream=False,
        capture=capture,
        heartbeat=60,  # pip unpacking torch under Wine is quiet for minutes
        heartbeat_label=what,
        timeout=timeout,
        check=check,
        error=EnvironmentMismatchError,
        what=what,
    )


def has_crealf(host: WineHost, python: Path, env: Mapping[str, str]) -> bool:
    """Whether ``crealf`` of the Windows ``python``'s ucrtbase.dll works (numpy 2 calls it).

    Called, not looked up: Wine exports what it does not implement as a stub, which GetProcAddress finds
    and which aborts the process when called ("unimplemented function ucrtbase.dll.crealf")."""
    probe = (
        "import ctypes\n"
        "class C(ctypes.Structure):\n    _fields_ = [('re', ctypes.c_float), ('im', ctypes.c_float)]\n"
        "f = ctypes.CDLL('ucrtbase').crealf\nf.restype = ctypes.c_float\nf.argtypes = [C]\n"
        "print('CREALF', f(C(3.0, 4.0)))\n"
    )
    result = run_windows(
        host, python, ["-c", probe], env=env, log=None, what="calling ucrtbase's crealf", capture=True, check=False
    )
    return result.returncode == 0 and "CREALF 3.0" in result.output


def numpy_constraints(host: WineHost, python: Path, env: Mapping[str, str]) -> tuple[str, ...]:
    """What the venv's installs are held to on this Wine: ``numpy<2`` where ucrtbase has no crealf."""
    return () if has_crealf(host, python, env) else (NUMPY_WITHOUT_CREALF,)


COPYFILE2_SITECUSTOMIZE = """\
# Written by dswheels into this Windows CPython, which runs only under Wine: the Wine it was built under
# exports kernel32's CopyFile2 as a stub that aborts the process, and shutil.copy2 calls it (Python 3.12+).
# Without it, shutil copies as it did before 3.12.
import _winapi

if hasattr(_winapi, "CopyFile2"):
    del _winapi.CopyFile2
"""


def hide_copyfile2(host: WineHost, root: Path, env: Mapping[str, str], *, log: Path | None) -> bool:
    """Write ``Lib/sitecustomize.py`` into the Windows CPython at ``root`` when its shutil calls CopyFile2 and
    calling it aborts here; whether it was written."""
    if "CopyFile2" not in (root / "Lib" / "shutil.py").read_text(encoding="utf-8"):
        return False  # before 3.12: shutil never calls it
    probe = (
        "import _winapi, os, tempfile\nd = tempfile.mkdtemp()\na = os.path.join(d, 'a')\n"
        "open(a, 'w').close()\n_winapi.CopyFile2(a, os.path.join(d, 'b'), 0)\nprint('COPYFILE2 ok')\n"
    )
    result = run_windows(
        host, root / "python.exe", ["-c", probe], env=env, log=log, what="calling CopyFile2", capture=True, check=False
    )
    if result.returncode == 0 and "COPYFILE2 ok" in result.output:
        return False
    (root / "Lib" / "sitecustomize.py").write_text(COPYFILE2_SITECUSTOMIZE, encoding="utf-8")
    return True
