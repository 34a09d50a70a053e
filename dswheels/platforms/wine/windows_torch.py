"""torch's win_amd64 wheel for the Wine host: the headers and import libraries an op compiles and links against.

Installed for Windows by uv (``--python-platform x86_64-pc-windows-msvc --target``) from the same
index the build interpreter's torch comes from: the plan's (download.pytorch.org/whl/<variant>:
torch's CUDA build for Windows, with ``torch_cuda.lib`` and ``c10_cuda.lib``) or, with
``--torch-index pip``, PyPI's, whose Windows wheels are CPU builds. A CPU build lacks what a CUDA
op needs from torch:

* the header torch's CUDA build generates, ``c10/cuda/impl/cuda_cmake_macros.h``: taken from the
  build interpreter's torch when it is a CUDA build of the same version (the same CMake template;
  it says only that c10_cuda is a shared library) and noted;
* ``torch_cuda.lib`` and ``c10_cuda.lib``: not made up front. The link of each CUDA op makes
  them from the names its objects leave unresolved (:mod:`dswheels.probes.wine_tool`), which
  proves the names torch's headers promise, not that torch_cuda.dll has them: the manifest lists
  every such name.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dswheels.host.cache import CacheLayout
from dswheels.host.files import exclusive, staging_dir, write_text_atomic
from dswheels.host.log import get_reporter
from dswheels.kernel.errors import EnvironmentMismatchError
from dswheels.kernel.model import PlannedCell
from dswheels.kernel.versions import format_version
from dswheels.platforms.wine.host import install_for_windows

__all__ = ["GENERATED_CUDA_HEADERS", "WindowsTorch", "prepare_windows_torch"]

# Headers torch's CUDA build generates and its CPU wheels lack (c10/cuda/CUDAMacros.h includes it)
GENERATED_CUDA_HEADERS = ("c10/cuda/impl/cuda_cmake_macros.h",)
_CUDA_IMPORT_LIBS = ("c10_cuda.lib", "torch_cuda.lib")
_VERSION = re.compile(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", re.MULTILINE)
_CUDA = re.compile(r"^cuda\s*(?::\s*[^=]+)?=\s*['\"]?([0-9.]+|None)['\"]?", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class WindowsTorch:
    root: Path  # the torch package folder: include/, lib/
    version: str  # 2.14.1 or 2.14.1+cu130
    cuda: str | None  # torch.version.cuda of the Windows build (None: a CPU build)
    added_headers: tuple[str, ...]  # generated CUDA headers taken from the build interpreter's torch
    synthesized_libs: tuple[str, ...]  # CUDA import libraries the links make from the objects' names


def _key(version: str, python: str, index_args: Sequence[str]) -> str:
    return hashlib.sha256("\0".join([version, python, *index_args]).encode()).hexdigest()[:12]


def prepare_windows_torch(
    planned: PlannedCell, *, cache: CacheLayout, uv: str, index_args: Sequence[str], linux_torch: Path | None, log: Path
) -> WindowsTorch:
    """The cell's torch for win_amd64, installed once per version, Python and index; checked for a CUDA cell."""
    python = format_version(planned.cell.python.version)
    key = _key(planned.torch_version, python, index_args)
    folder = cache.wine_torch(f"{planned.torch_version}-{planned.cell.python.tag}-{key}")
    torch_dir = folder / "torch"
    with exclusive(
        folder.parent, what=f"installing torch {planned.torch_version} for Windows", error=EnvironmentMismatchError
    ):
        if not (torch_dir / "version.py").is_file():
            get_reporter().info(f"installing torch {planned.torch_version}'s win_amd64 wheel for the Wine host")
            with staging_dir(folder.parent, folder.name) as staged:
                install_for_windows(
                    uv,
                    staged,
                    [f"torch=={planned.torch_version}"],
                    python=python,
                    log=log,
                    extra=["--no-deps", *index_args],
                )
                shutil.rmtree(folder, ignore_errors=True)
                staged.replace(folder)
        text = (torch_dir / "version.py").read_text(encoding="utf-8")
        version = (_VERSION.search(text) or _missing(torch_dir)).group(1)
        cuda_match = _CUDA.search(text)
        cuda = cuda_match.group(1) if cuda_match and cuda_match.group(1) != "None" else None
        added: list[str] = []
        synthesized: list[str] = []
        if planned.cell.variant.is_cuda:
            added = _add_generated_headers(torch_dir, linux_torch, version)
            synthesized = [lib for lib in _CUDA_IMPORT_LIBS if not (torch_dir / "lib" / lib).is_file()]
    return WindowsTorch(
        root=torch_dir,
        version=version,
        cuda=cuda,
        added_headers=tuple(added),
        synthesized_libs=tuple(synthesized),
    )


def _missing(torch_dir: Path) -> re.Match[str]:
    raise EnvironmentMismatchError(f"{torch_dir / 'version.py'} names no __version__: not a torch wheel")


def _add_generated_headers(torch_dir: Path, linux_torch: Path | None, version: str) -> list[str]:
    """The generated CUDA headers a CPU wheel lacks, from the build interpreter's CUDA torch of the same version."""
    added: list[str] = []
    note = torch_dir / "dswheels-added.json"
    recorded: list[str] = json.loads(note.read_text(encoding="utf-8")) if note.is_file() else []
    for header in GENERATED_CUDA_HEADERS:
        target = torch_dir / "include" / header
        if target.is_file():
            if header in recorded:
                added.append(header)
            continue
        source = linux_torch / "include" / header if linux_torch is not None else None
        if source is None or not source.is_file():
            raise EnvironmentMismatchError(
                f"torch {version}'s Windows wheel is a CPU build and lacks {header}, which a CUDA op includes",
                hint="give the build a torch index with torch's Windows CUDA builds (the plan's: "
                "download.pytorch.org), or a build interpreter with torch's Linux CUDA build of the same "
                "version (its generated header is the same)",
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        added.append(header)
    if added:
        write_text_atomic(note, json.dumps(sorted(set(added) | set(recorded))) + "\n")
    return added
