"""Where a cell compiles: paths that are the same for every cell of a compile family.

A compiler cache finds an object again only when the compile looks the same, and paths are
part of how it looks: ccache hashes every ``-I`` path and, in its preprocessor mode, every
``# line "path"`` marker of the preprocessed output; sccache hashes the preprocessed output.
Paths under the base directory (``CCACHE_BASEDIR``, ``SCCACHE_BASEDIRS``) are hashed relative,
all others verbatim. So before this module, a cu130 cell rebuilt for Python 3.12 right after 3.11
missed on every object: its source tree was another per-cell directory, and torch's headers,
which torch finds relative to where it is imported, lived in the 3.12 venv
(``venvs/cp312-.../lib/python3.12/site-packages/torch/include``, 15,677 line markers in the
preprocessed ``multi_tensor_adam.cu``, none of them a Python header).

Here every path a compile sees is fixed per compile family (the runner image, CUDA toolkit, host
compiler and arch list: dswheels.plan.compiler_cache_keys.compile_family), whatever the
DeepSpeed version, torch or Python:

* the work directory is ``<root>/<10 hex of the family>`` (wiped before each build), so the
  sources and ninja's build directories have the same paths for every cell of the family. Per
  torch it was not enough: sccache hashes nvcc's preprocessed device code, whose line markers
  are absolute paths (``SCCACHE_BASEDIRS`` rewrites arguments, not them), so torch 2.14 after
  torch 2.13 in a directory of its own took only ptxas' results from the cache (quantizer, 35 of
  71 compiles) and ran cicc again on units that reach no torch header;
* ``<work>/site`` is a link to the directory the build interpreter imports torch from, and the
  build puts it first on ``PYTHONPATH``: torch's include paths, and the nvidia-* wheels' headers,
  are then ``<work>/site/torch/include`` and ``<work>/site/nvidia/...`` for every Python.

One more thing differs between venvs, and it took a debug log to see: GCC's ``#pragma once``
takes two header files for one when their size, contents and modification time (in whole
seconds) agree. torch ships eleven byte-identical 676-byte ``ATen/ops/*_native.h`` headers, and
which of them share a second depends on when the installer wrote them: the cp311 venv's
preprocessed ``multi_tensor_adam.cu`` had one more header than the cp312 venv's, and so another
cache key. So the headers of a venv dswheels made get one fixed time (:func:`settle_header_times`).

What is left differs for a reason: ``-I<python>/include/python3.X`` (only the translation units
that include ``Python.h``, through ``torch/extension.h``, see its files; the others hit the cache
in preprocessor mode) and the build directory's ``cpython-3X`` name (the cwd, which neither cache
hashes without ``-g``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

from dswheels.host import proc
from dswheels.kernel.errors import BuildError

__all__ = ["HEADER_TIME", "link_site", "set_aside", "settle_header_times", "wipe", "work_dir_for"]

SITE = "site"
# 2000-01-01T00:00:00Z: the time every header of a venv's torch gets (settle_header_times)
HEADER_TIME = 946684800


def work_dir_for(work_root: Path, key: str) -> Path:
    """A short directory (Windows MAX_PATH): the root plus 10 hex digits of ``key``."""
    return work_root / hashlib.sha256(key.encode()).hexdigest()[:10]


def wipe(work: Path) -> None:
    """Remove a work directory. Its ``site`` link goes as a link: rmtree never follows a symlink,
    nor (Python >= 3.8) a Windows junction, so the venv it points to is untouched."""
    if work.exists():
        shutil.rmtree(work)


def link_site(work: Path, target: Path) -> Path:
    """``<work>/site`` -> ``target`` (a directory); a junction on Windows when symlinks are not allowed."""
    link = work / SITE
    try:
        link.symlink_to(target, target_is_directory=True)
    except OSError as exc:
        if sys.platform == "win32":  # a junction needs no privilege (symlinks need Developer Mode or an admin)
            proc.run(
                ["cmd", "/c", "mklink", "/J", str(link), str(target)],
                capture=True,
                stream=False,
                error=BuildError,
                what="linking the build interpreter's site-packages",
            )
        else:
            raise BuildError(f"cannot link {link} to {target}: {exc}") from None
    return link


def set_aside(work: Path, tag: str) -> Path | None:
    """Keep a failed build's tree for inspection (the next cell of the family wipes ``work``)."""
    if not work.exists():
        return None
    aside = work.with_name(f"{work.name}-{tag}-failed")
    wipe(aside)
    work.replace(aside)
    return aside


def settle_header_times(site: Path) -> int:
    """Give every header under ``site``'s torch and nvidia-* include directories :data:`HEADER_TIME`.

    Only for venvs dswheels made (a user's own environment is left alone). Files uv hard-linked
    from its cache share the time, which nothing there reads. Returns how many files changed.
    """
    changed = 0
    for include in [site / "torch" / "include", *sorted(site.glob("nvidia/*/include"))]:
        for path in include.rglob("*"):
            if path.is_file() and not path.is_symlink() and int(path.stat().st_mtime) != HEADER_TIME:
                os.utime(path, (HEADER_TIME, HEADER_TIME))
                changed += 1
    return changed
