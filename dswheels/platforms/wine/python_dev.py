"""CPython's Windows headers and import library for the cell's Python, from CPython's own sources.

An extension for Windows includes ``PC/pyconfig.h`` (not the Linux one the build interpreter
has) and links ``pythonXY.lib`` (pyconfig.h names it with ``#pragma comment(lib, ...)``). Both
come from the source release compat.yml pins for the cell's Python minor (``cpython_sources``,
checked by sha256): ``Include/`` with ``PC/pyconfig.h`` beside it, and an import library made by
MSVC's ``lib /def:`` from the names CPython's headers declare ``PyAPI_FUNC``/``PyAPI_DATA`` (what
``python3XY.dll`` exports: the macros mean ``__declspec(dllexport)`` when CPython itself is built).
That library proves names, not the DLL they will bind to: the manifest says so.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from dswheels.host.cache import CacheLayout
from dswheels.host.downloads import Downloader
from dswheels.host.files import exclusive, staging_dir
from dswheels.host.unpack import extract_archive
from dswheels.kernel.compat import Compat
from dswheels.kernel.errors import EnvironmentMismatchError, SourceError
from dswheels.kernel.model import Python
from dswheels.kernel.versions import format_version
from dswheels.platforms.wine.import_libs import import_library

__all__ = ["WindowsPython", "exported_names", "prepare_windows_python"]

_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_TYPE = r"\((?:[^()]|\([^()]*\))*\)"  # PyAPI_FUNC(type): one level of nested parentheses (function pointers)
_FUNC = re.compile(r"PyAPI_FUNC\s*" + _TYPE + r"\s*\(?\s*(\w+)\s*\)?\s*\(")
_DATA = re.compile(r"PyAPI_DATA\s*" + _TYPE + r"\s*\(?\s*\*?\s*(\w+)")


@dataclass(frozen=True, slots=True)
class WindowsPython:
    version: str  # the source release (3.11.2)
    include: Path  # Include/ with PC/pyconfig.h
    libs: Path  # pythonXY.lib
    import_library: str  # pythonXY.lib
    exports: int  # names in it


def exported_names(include: Path) -> tuple[list[str], list[str]]:
    """(functions, data) CPython's public headers declare with ``PyAPI_FUNC``/``PyAPI_DATA``.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()); _ = (d / "a.h").write_text(
    ...     "PyAPI_FUNC(PyObject *) PyList_New(Py_ssize_t);\\nPyAPI_DATA(PyTypeObject) PyList_Type;\\n"
    ...     "/* PyAPI_FUNC(int) Commented(void); */ PyAPI_DATA(int) (*PyOS_InputHook)(void);")
    >>> exported_names(d)
    (['PyList_New'], ['PyList_Type', 'PyOS_InputHook'])
    """
    functions: set[str] = set()
    data: set[str] = set()
    for header in sorted(include.rglob("*.h")):
        if "internal" in header.relative_to(include).parts:  # Py_BUILD_CORE only: not exported to extensions
            continue
        text = _COMMENT.sub("", header.read_text(encoding="utf-8", errors="replace"))
        functions.update(m.group(1) for m in _FUNC.finditer(text))
        data.update(m.group(1) for m in _DATA.finditer(text))
    return sorted(functions), sorted(data - functions)


def prepare_windows_python(
    python: Python, *, compat: Compat, cache: CacheLayout, downloader: Downloader, lib_tool: Path, log: Path
) -> WindowsPython:
    """The Windows headers and import library of ``python``'s minor (cached by the source's sha256)."""
    pinned = compat.cpython_sources.get(python.version)
    if pinned is None:
        known = ", ".join(format_version(v) for v in sorted(compat.cpython_sources)) or "none"
        raise EnvironmentMismatchError(
            f"no CPython {python} source release is pinned for the Wine host (pinned: {known})",
            hint="add one to compat.yml `cpython_sources` (its sha256 from python.org), or build the cell on Windows",
        )
    tag = f"{python.version[0]}{python.version[1]}"
    target = cache.wine_python(f"{pinned.version}-{pinned.sha256[:12]}")
    done = target / "libs" / f"python{tag}.lib"
    with exclusive(
        target.parent, what=f"preparing CPython {pinned.version}'s Windows headers", error=EnvironmentMismatchError
    ):
        if not done.is_file():
            archive = _fetch(pinned.urls, pinned.sha256, downloader)
            with staging_dir(target.parent, target.name) as staged:
                extract_archive(archive, staged / "src")
                top = staged / "src"  # the archive's top folder (Python-3.11.2/) is not kept
                if not (top / "PC" / "pyconfig.h").is_file():
                    raise EnvironmentMismatchError(f"{archive} has no PC/pyconfig.h: not CPython's sources")
                shutil.copytree(top / "Include", staged / "include")
                shutil.copyfile(top / "PC" / "pyconfig.h", staged / "include" / "pyconfig.h")
                shutil.rmtree(staged / "src")
                functions, data = exported_names(staged / "include")
                (staged / "libs").mkdir()
                import_library(
                    f"python{tag}.dll",
                    functions,
                    data=data,
                    out=staged / "libs" / done.name,
                    lib_tool=lib_tool,
                    log=log,
                )
                shutil.rmtree(target, ignore_errors=True)
                staged.replace(target)
    functions, data = exported_names(target / "include")
    return WindowsPython(
        version=pinned.version,
        include=target / "include",
        libs=target / "libs",
        import_library=done.name,
        exports=len(functions) + len(data),
    )


def _fetch(urls: tuple[str, ...], sha256: str, downloader: Downloader) -> Path:
    failures: list[str] = []
    for url in urls:
        try:
            return downloader.fetch(url, sha256=sha256)[0]
        except SourceError as exc:  # noqa: PERF203 - the next mirror; all failures are reported together
            failures.append(f"{url}: {exc.message}")
    raise EnvironmentMismatchError(
        "CPython's sources could not be downloaded from any pinned mirror", details="\n".join(failures)
    )
