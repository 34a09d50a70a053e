"""A Windows CUDA root for the Wine host, from compat.yml's one list of components: two transports.

* **NVIDIA's redistributable archives**, as the runners take them (``dswheels cuda install`` for
  ``windows-x86_64``: :mod:`dswheels.cuda.effects.install_toolkit`), where NVIDIA's server (or a mirror,
  ``DSWHEELS_CUDA_REDIST_URL``) is reachable and compat.yml pins the release's JSON;
* **NVIDIA's PyPI wheels**: each component from the extra of NVIDIA's ``cuda-toolkit`` wheel that
  carries it, pinned to the plan's toolkit release (``cuda-toolkit[nvcc,cudart,...]==13.0.3`` pins
  every component wheel), installed for win_amd64 by uv into a folder of its own.

``auto`` takes PyPI's wheels from CUDA 13 (where they carry ``nvcc.exe``) and NVIDIA's archives
for CUDA 12. Either way nothing the list does not name is asked for, so a component missing from
the list is missing here exactly as on a runner (a header it carries fails the compile with C1083).

CUDA 13 wheels unpack into one CUDA_HOME layout (``nvidia/cu13/{bin,include,lib/x64,nvvm}``);
CUDA 12 wheels into one folder per component, merged here. Two things the wheels lack are made:

* import libraries for cuBLAS and cuRAND (their wheels carry DLLs and headers, no ``.lib``),
  by ``lib /def:`` from each DLL's own export table (``dumpbin /exports``): the names the DLL
  really has;
* nothing else: a component whose file is absent (``provides``) is an error naming it. CUDA 12's
  ``nvidia-cuda-nvcc-cu12`` wheels carry ptxas and nvvm but no ``nvcc.exe``, so 12.x cells need
  the archives (docs/build.md#windows-under-wine).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dswheels.cuda.effects.install_toolkit import CudaInstallOptions, install_cuda
from dswheels.cuda.redist import REDIST_URL
from dswheels.host.cache import CacheLayout
from dswheels.host.files import exclusive, staging_dir, write_text_atomic
from dswheels.host.log import get_reporter
from dswheels.kernel.compat import Compat
from dswheels.kernel.compat.entries import CudaComponent
from dswheels.kernel.errors import EnvironmentMismatchError
from dswheels.kernel.model import PlannedCell, Platform
from dswheels.kernel.platform_traits import WineCudaSource
from dswheels.platforms.wine.host import install_for_windows
from dswheels.platforms.wine.import_libs import import_library_from_dll

__all__ = ["WindowsCuda", "assemble_windows_cuda", "cuda_source"]

# DLL stem -> the import library torch's and DeepSpeed's builders name (``libraries``)
_MADE_LIBS = {"cublas64_": "cublas.lib", "cublasLt64_": "cublasLt.lib", "curand64_": "curand.lib"}


@dataclass(frozen=True, slots=True)
class WindowsCuda:
    root: Path  # a CUDA_HOME layout: bin/nvcc.exe, include/, lib/x64/, nvvm/
    toolkit: str  # the release (13.0.3)
    components: tuple[str, ...]  # compat.yml names
    wheels: tuple[str, ...]  # what was installed: name==version of each wheel, or each archive's file name
    made_libs: tuple[str, ...]  # import libraries made from a DLL's exports (``cublas.lib <- cublas64_13.dll``)
    source: WineCudaSource = WineCudaSource.PYPI  # PYPI or NVIDIA (never AUTO)


def cuda_source(planned: PlannedCell, wanted: WineCudaSource) -> WineCudaSource:
    """PYPI or NVIDIA; AUTO: PyPI's wheels from CUDA 13 (they carry nvcc.exe), NVIDIA's archives before."""
    if wanted is not WineCudaSource.AUTO:
        return wanted
    nvcc = planned.toolchain.nvcc
    return WineCudaSource.PYPI if nvcc is not None and nvcc >= (13, 0) else WineCudaSource.NVIDIA


def _key(toolkit: str, extras: Sequence[str]) -> str:
    return hashlib.sha256(json.dumps([toolkit, sorted(extras)]).encode()).hexdigest()[:12]


def assemble_windows_cuda(
    planned: PlannedCell,
    *,
    compat: Compat,
    cache: CacheLayout,
    uv: str,
    dumpbin: Path,
    lib_tool: Path,
    log: Path,
    source: WineCudaSource = WineCudaSource.AUTO,
    redist_url: str = REDIST_URL,
) -> WindowsCuda:
    """The plan's toolkit for Windows, from the list's components (cached by release and component list)."""
    tc = planned.toolchain
    if tc.nvcc is None or not tc.cuda_toolkit:
        msg = "a CUDA cell has an nvcc and a toolkit release"
        raise ValueError(msg)
    components = compat.components_for(tc.nvcc)
    if cuda_source(planned, source) is WineCudaSource.NVIDIA:
        return _from_archives(tc.cuda_toolkit, compat, cache, redist_url, dumpbin=dumpbin, lib_tool=lib_tool, log=log)
    extras = [c.pypi for c in components]
    folder = cache.wine_cuda(f"{tc.cuda_toolkit}-{_key(tc.cuda_toolkit, extras)}")
    record = folder / "dswheels-cuda.json"
    with exclusive(
        folder.parent, what=f"assembling CUDA {tc.cuda_toolkit} for Windows", error=EnvironmentMismatchError
    ):
        if not record.is_file():
            _assemble(folder, tc.cuda_toolkit, components, uv=uv, dumpbin=dumpbin, lib_tool=lib_tool, log=log)
    data = json.loads(record.read_text(encoding="utf-8"))
    root = folder / data["root"]
    _check_provides(root, components, tc.cuda_toolkit)
    return WindowsCuda(
        root=root,
        toolkit=tc.cuda_toolkit,
        components=tuple(c.name for c in components),
        wheels=tuple(data["wheels"]),
        made_libs=tuple(data["made_libs"]),
    )


def _assemble(
    folder: Path,
    toolkit: str,
    components: Sequence[CudaComponent],
    *,
    uv: str,
    dumpbin: Path,
    lib_tool: Path,
    log: Path,
) -> None:
    requirement = f"cuda-toolkit[{','.join(c.pypi for c in components)}]=={toolkit}"
    get_reporter().info(f"assembling the Windows CUDA {toolkit} root from NVIDIA's PyPI wheels: {requirement}")
    with staging_dir(folder.parent, folder.name) as staged:
        # the wheels' CPython ABI does not matter (py3-none-win_amd64); uv needs one
        install_for_windows(uv, staged / "wheels", [requirement], python="3.11", log=log)
        nvidia = staged / "wheels" / "nvidia"
        single = sorted(p for p in nvidia.glob("cu[0-9]*") if p.is_dir())
        if single:  # CUDA 13+: the wheels share one CUDA_HOME layout
            root = single[0]
        else:  # CUDA 12: one folder per component, merged
            root = staged / "wheels" / "cuda"
            for part in sorted(p for p in nvidia.iterdir() if p.is_dir()):
                shutil.copytree(
                    part, root, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__init__.py", "__pycache__")
                )
        made = _make_import_libs(root, dumpbin=dumpbin, lib_tool=lib_tool, log=log)
        wheels = sorted(
            d.name.removesuffix(".dist-info").replace("-", "==", 1).replace("_", "-")
            for d in (staged / "wheels").glob("*.dist-info")
        )
        write_text_atomic(
            staged / "dswheels-cuda.json",
            json.dumps({"root": str(root.relative_to(staged)), "wheels": wheels, "made_libs": made}, indent=1) + "\n",
        )
        shutil.rmtree(folder, ignore_errors=True)
        staged.replace(folder)


def _from_archives(
    toolkit: str, compat: Compat, cache: CacheLayout, redist_url: str, *, dumpbin: Path, lib_tool: Path, log: Path
) -> WindowsCuda:
    """The toolkit as a windows-2022 runner gets it: NVIDIA's archives for windows-x86_64, sha256-checked."""
    get_reporter().info(f"assembling the Windows CUDA {toolkit} root from NVIDIA's redistributable archives")
    installed = install_cuda(
        compat, CudaInstallOptions(toolkit=toolkit, platform=Platform.WIN_AMD64, cache=cache, redist_url=redist_url)
    )
    made = _make_import_libs(installed.root, dumpbin=dumpbin, lib_tool=lib_tool, log=log)  # archives carry .lib
    _check_provides(installed.root, installed.components, toolkit)
    return WindowsCuda(
        root=installed.root,
        toolkit=toolkit,
        components=tuple(c.name for c in installed.components),
        wheels=tuple(a.filename for a in installed.archives),
        made_libs=tuple(made),
        source=WineCudaSource.NVIDIA,
    )


def _make_import_libs(root: Path, *, dumpbin: Path, lib_tool: Path, log: Path) -> list[str]:
    """``cublas.lib`` and friends from the DLLs the wheels carry, where the wheels have no ``.lib``."""
    lib_dir = root / "lib" / "x64"
    lib_dir.mkdir(parents=True, exist_ok=True)
    made: list[str] = []
    for dll in sorted(root.glob("bin/**/*.dll")):
        lib_name = next((lib for stem, lib in _MADE_LIBS.items() if dll.name.startswith(stem)), None)
        if lib_name is None or (lib_dir / lib_name).is_file():
            continue
        import_library_from_dll(dll, lib_dir / lib_name, dumpbin=dumpbin, lib_tool=lib_tool, log=log)
        made.append(f"{lib_name} <- {dll.name}")
    return made


def _check_provides(root: Path, components: Sequence[CudaComponent], toolkit: str) -> None:
    missing = [c for c in components if not (root / c.provided_path("windows")).is_file()]
    if missing:
        raise EnvironmentMismatchError(
            f"the Windows CUDA {toolkit} root assembled from NVIDIA's PyPI wheels lacks "
            + ", ".join(f"{c.provided_path('windows')} ({c.name}: cuda-toolkit[{c.pypi}])" for c in missing),
            hint="CUDA 12's nvidia-cuda-nvcc-cu12 wheels carry no nvcc.exe: build 12.x Windows cells on a runner "
            "(or where NVIDIA's archives are reachable); for another component, check compat.yml cuda_components"
            if any(c.name == "nvcc" for c in missing)
            else "check compat.yml cuda_components against the cuda-toolkit wheel's extras",
        )
