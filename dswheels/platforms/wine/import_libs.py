"""Import libraries (``.lib``) made by MSVC's ``lib /def:`` where the Windows pieces the Wine host takes lack one.

A module-definition file names a DLL and the names it exports; ``lib /def:`` turns it into the
import library a link needs. What the names come from decides what the library proves: a DLL's
own export table (``dumpbin /exports``: cuBLAS, cuRAND) proves the DLL has them; a header's
declarations (CPython's ``PyAPI_FUNC``) prove only that they are declared.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dswheels.host import proc
from dswheels.host.files import write_text_atomic
from dswheels.kernel.errors import EnvironmentMismatchError
from dswheels.kernel.numbers import is_ascii_digits

__all__ = ["import_library", "import_library_from_dll"]


def import_library(
    dll: str, functions: Sequence[str], *, data: Sequence[str] = (), out: Path, lib_tool: Path, log: Path
) -> None:
    """``out``: the import library of ``dll`` with ``functions`` and ``data`` (variables) as its exports."""
    definition = out.with_suffix(".def")
    lines = [f"LIBRARY {dll}", "EXPORTS", *functions, *(f"{name} DATA" for name in data)]
    write_text_atomic(definition, "\n".join(lines) + "\n")
    try:
        proc.run(
            [lib_tool, "/nologo", f"/def:{definition}", "/machine:x64", f"/out:{out}"],
            log_file=log,
            stream=False,
            error=EnvironmentMismatchError,
            what=f"lib /def:{definition.name}",
        )
    finally:  # lib also writes an export file nothing links
        definition.unlink(missing_ok=True)
        out.with_suffix(".exp").unlink(missing_ok=True)


def import_library_from_dll(dll: Path, out: Path, *, dumpbin: Path, lib_tool: Path, log: Path) -> int:
    """An import library of every name ``dll`` exports (``dumpbin /exports``, then ``lib /def:``); the count."""
    listed = proc.capture([dumpbin, "/nologo", "/exports", dll], log_file=log, error=EnvironmentMismatchError)
    if listed.returncode != 0:
        raise EnvironmentMismatchError(f"dumpbin /exports {dll.name} failed", details="\n".join(listed.tail[-20:]))
    names = _export_names(listed.output)
    if not names:
        raise EnvironmentMismatchError(f"{dll.name} exports no names (dumpbin /exports)")
    import_library(dll.name, names, out=out, lib_tool=lib_tool, log=log)
    return len(names)


def _export_names(output: str) -> list[str]:
    """The names of ``dumpbin /exports``' table (``ordinal hint RVA name``; forwarded ones too).

    >>> _export_names('''    ordinal hint RVA      name
    ...
    ...           1    0 00001000 cublasAxpyEx
    ...           2    1          cublasCreate_v2 (forwarded to X.Y)
    ...
    ...   Summary''')
    ['cublasAxpyEx', 'cublasCreate_v2']
    """
    names: list[str] = []
    in_table = False
    for line in output.splitlines():
        words = line.split()
        if words[:4] == ["ordinal", "hint", "RVA", "name"]:
            in_table = True
            continue
        if not in_table:
            continue
        if words and words[0] == "Summary":
            break
        if len(words) >= 3 and is_ascii_digits(words[0]):
            name = words[3] if len(words) >= 4 and all(c in "0123456789ABCDEF" for c in words[2]) else words[2]
            names.append(name)
    return names
