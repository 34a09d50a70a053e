"""Which builds can share a translation unit's object: read from the ``#include`` graph of the sources.

A DeepSpeed op compiles its sources one translation unit each. The object a unit compiles to
depends on the headers it reaches (and the flags, which are the same for every cell of a
toolchain). So a unit's **scope**, the widest set of cells that compile it to the same object, is:

* ``cell``: it reaches a Python header (``Python.h``, pybind11, ``torch/extension.h``): every
  Python compiles it again;
* ``torch``: it reaches torch's headers (ATen, c10, torch) but no Python header: the Pythons of one
  torch minor share it (docs/costs.md: the ``.cu`` objects a later Python takes from the cache);
* ``toolkit``: it reaches neither, only DeepSpeed's own and the system's/CUDA's headers: every
  torch minor and Python of the same CUDA toolkit, arch list and host compiler share it.

Pure: the caller reads the files (:func:`unit_scope` takes a reader). Includes are followed from
the unit as a compiler would search them: a quoted include beside the including file first, then
the op's include directories, then torch's and Python's include directories, each in order. A
header found under torch's directories counts as torch's (and is followed: torch's
``torch/extension.h`` reaches ``Python.h``), one under Python's as Python's; a header found
nowhere is a system or CUDA header and ends the walk there, unless its name is torch's (``ATen/``,
``c10/``, ``caffe2/``: torch; ``torch/``: the cell, not knowing which it reaches). Every ``#include`` line counts,
whatever ``#if`` it stands in: a unit may be put in a narrower scope than it needs (a missed
reuse), never a wider one on that account. The compiler cache decides hits by content, so a scope
never changes what is built: it is what the cost model and the benchmarks expect to be reused.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

__all__ = ["Scope", "SearchPath", "include_names", "unit_scope"]

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.MULTILINE)
# headers that mean Python wherever they are found (torch's own copy of pybind11 included)
_PYTHON_HEADERS = ("Python.h", "pybind11/", "torch/extension.h", "torch/python.h")
_TORCH_NAMES = ("ATen/", "c10/", "caffe2/")  # torch's headers found nowhere: torch's, without Python
_MAX_FILES = 20_000  # torch's headers are some 5,000 files; more is a loop the walk must not chase


class Scope(str, Enum):
    CELL = "cell"  # reaches a Python header: compiled for every Python
    TORCH = "torch"  # reaches torch's headers only: shared by the Pythons of one torch minor
    TOOLKIT = "toolkit"  # reaches neither: shared by every torch and Python of a toolkit, archs and compiler

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class SearchPath:
    """Where a compile looks for headers, in order, each directory with what a header found there is."""

    op: tuple[str, ...]  # the op's include directories (its builder's include_paths()), "/"-separated
    torch: tuple[str, ...] = ()  # torch's include directories
    python: tuple[str, ...] = ()  # the interpreter's include directory


def include_names(text: str) -> list[tuple[bool, str]]:
    """Every ``#include`` of ``text``: (quoted, name), in order; comments' ``//`` lines are not includes.

    >>> include_names('#include "a.h"\\n  # include <cuda.h>\\n// #include <torch/all.h>\\n')
    [(True, 'a.h'), (False, 'cuda.h')]
    """
    return [(quote == '"', name.strip()) for quote, name in _INCLUDE.findall(text)]


def _join(folder: str, name: str) -> str:
    return posixpath.normpath(posixpath.join(folder, name)) if folder else posixpath.normpath(name)


def unit_scope(unit: str, search: SearchPath, read: Callable[[str], str | None]) -> Scope:
    """The scope of the translation unit ``unit`` (a path ``read`` understands).

    ``read(path)`` returns a file's text, or None when there is no such file.

    >>> files = {"k.cu": '#include "u.h"', "inc/u.h": "#include <cuda_fp16.h>", "t/ATen/ATen.h": "",
    ...          "b.cu": '#include <ATen/ATen.h>', "p.cpp": '#include <torch/extension.h>'}
    >>> search = SearchPath(op=("inc",), torch=("t",))
    >>> [str(unit_scope(u, search, files.get)) for u in ("k.cu", "b.cu", "p.cpp")]
    ['toolkit', 'torch', 'cell']
    """
    roots: list[tuple[str, Scope | None]] = [
        *((d, None) for d in search.op),
        *((d, Scope.TORCH) for d in search.torch),
        *((d, Scope.CELL) for d in search.python),
    ]
    scope = Scope.TOOLKIT
    seen: set[str] = set()
    stack = [posixpath.normpath(unit)]
    while stack:
        if len(seen) >= _MAX_FILES:
            return Scope.CELL  # not walked to the end: assume the narrowest
        path = stack.pop()
        if path in seen:
            continue
        seen.add(path)
        for quoted, name in include_names(read(path) or ""):
            found, kind = _classify(name, quoted=quoted, beside=posixpath.dirname(path), roots=roots, read=read)
            if kind is Scope.CELL:
                return Scope.CELL
            if kind is Scope.TORCH:
                scope = Scope.TORCH
            if found:
                stack.append(found)
    return scope


def _classify(
    name: str,
    *,
    quoted: bool,
    beside: str,
    roots: Sequence[tuple[str, Scope | None]],
    read: Callable[[str], str | None],
) -> tuple[str, Scope | None]:
    """Where an include leads ("": nowhere to follow) and what it makes the unit (None: nothing)."""
    if name.startswith(_PYTHON_HEADERS):
        return "", Scope.CELL
    found = _find(name, quoted=quoted, beside=beside, roots=roots, read=read)
    if found is not None:
        return found
    if name.startswith("torch/"):
        return "", Scope.CELL  # torch's, but which of its headers reach Python is not known here
    return "", Scope.TORCH if name.startswith(_TORCH_NAMES) else None  # else a system or CUDA header


def _find(
    name: str,
    *,
    quoted: bool,
    beside: str,
    roots: Sequence[tuple[str, Scope | None]],
    read: Callable[[str], str | None],
) -> tuple[str, Scope | None] | None:
    """Where the compiler finds ``name``, and what it is there (None: the op's own or beside)."""
    if quoted:
        here = _join(beside, name)
        if read(here) is not None:
            # beside a torch header is torch's: its directory tells
            kind = next((k for d, k in roots if k is not None and here.startswith(posixpath.normpath(d) + "/")), None)
            return here, kind
    for folder, kind in roots:
        path = _join(folder, name)
        if read(path) is not None:
            return path, kind
    return None
