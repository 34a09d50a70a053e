"""The Wine host's toolchain for one cell: checked before anything is downloaded, then put together.

:func:`check_wine` runs where the native host checks the active MSVC: Wine is there and the MSVC
root has the plan's toolset. :func:`prepare_wine` runs once the build interpreter is ready:
CPython's Windows headers and import library, torch's win_amd64 wheel, the Windows CUDA root (CUDA
cells), and a folder of scripts, first on the build's ``PATH``, that run each Windows tool under
Wine (``cl``, ``link.exe``, ``nvcc``, ...) and the interpreter as Windows (``win32-python``:
:mod:`dswheels.probes.win32_python`). Its :class:`WineBuild` is what the build's environment and
manifest need from it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dswheels import probes
from dswheels.cuda.redist import REDIST_URL
from dswheels.host import proc
from dswheels.host.cache import CacheLayout
from dswheels.host.downloads import Downloader
from dswheels.host.files import write_text_atomic
from dswheels.host.log import get_reporter
from dswheels.kernel.compat import Compat
from dswheels.kernel.errors import EnvironmentMismatchError
from dswheels.kernel.model import PlannedCell
from dswheels.kernel.platform_traits import WineCudaSource
from dswheels.kernel.versions import format_version
from dswheels.platforms.find_tools import MsvcEnv
from dswheels.platforms.wine.cuda_root import WindowsCuda, assemble_windows_cuda
from dswheels.platforms.wine.host import WineHost, find_wine, windows_path, write_tool_scripts
from dswheels.platforms.wine.msvc_root import MsvcRoot, find_msvc_root
from dswheels.platforms.wine.python_dev import WindowsPython, prepare_windows_python
from dswheels.platforms.wine.windows_torch import WindowsTorch, prepare_windows_torch

__all__ = ["WINE_LAUNCHER", "WineBuild", "WineTools", "check_wine", "cuda_view", "prepare_wine", "write_wine_tools"]

WINE_LAUNCHER = Path(probes.__file__).resolve().parent / "win32_python.py"
# the tool scripts need only the standard library: dswheels' own interpreter runs them
_TOOL_PYTHON = Path(sys.executable)
_MSVC_TOOLS = ("cl.exe", "link.exe", "lib.exe", "dumpbin.exe", "rc.exe", "mt.exe")
# c10::cuda lives in c10_cuda.dll, at::cuda and torch::cuda in torch_cuda.dll (torch's CMake targets)
_SYNTHESIZE = {
    "c10_cuda.lib": {"dll": "c10_cuda.dll", "markers": ["@cuda@c10@@"]},
    "torch_cuda.lib": {"dll": "torch_cuda.dll", "markers": ["@cuda@at@@", "@cuda@torch@@"]},
}


@dataclass(frozen=True, slots=True)
class WineTools:
    """Checked before anything is downloaded: Wine and the MSVC root; where the CUDA components come from."""

    host: WineHost
    msvc: MsvcRoot
    cuda_source: WineCudaSource = WineCudaSource.AUTO
    cuda_redist_url: str = REDIST_URL  # NVIDIA's redist folder or a mirror (cuda_source nvidia)


@dataclass(frozen=True, slots=True)
class WineBuild:
    tools: WineTools
    bin_dir: Path  # the tool scripts and the launcher, first on PATH
    python: Path  # the launcher: the build interpreter answering as Windows
    python_windows: WindowsPython
    torch: WindowsTorch
    cuda: WindowsCuda | None
    cuda_home: Path | None  # a view of the CUDA root whose bin/nvcc runs nvcc.exe under Wine
    synthesized_log: Path  # one JSON line per link that made import libraries from unresolved names
    cl_version: str  # cl's banner: Microsoft (R) C/C++ Optimizing Compiler Version 19.44.35229 for x64
    nvcc_version: str  # nvcc --version's release line ("" for a CPU cell)

    @property
    def msvc(self) -> MsvcEnv:
        """The root's MSVC as the build sees it: its link.exe is the script in :attr:`bin_dir`."""
        return MsvcEnv(toolset=self.tools.msvc.toolset, bin_dir=str(self.bin_dir))

    @property
    def setuptools_compiler(self) -> str:
        return "msvc"

    @property
    def library_dirs(self) -> tuple[str, ...]:
        """CPython's Windows import library (made here: the Linux interpreter has none)."""
        return (str(self.python_windows.libs),)

    @property
    def no_compiler_cache(self) -> str:
        return "under Wine: neither ccache nor Linux sccache runs MSVC's cl"

    def tool_versions(self) -> dict[str, str]:
        """The manifest's toolchain entries: the root's MSVC toolset, cl's banner, and nvcc's (CUDA cells)."""
        versions = {"msvc": self.tools.msvc.toolset, "cl": self.cl_version}
        if self.cuda_home is not None:
            versions["nvcc"] = self.nvcc_version
            versions["cuda_home"] = str(self.cuda_home)
        return versions

    def env(self, *, ext_suffix: str) -> dict[str, str]:
        """What the build's environment gets from the Wine host (on top of a Windows build's own)."""
        msvc = self.tools.msvc
        return {
            # setuptools' cross-build switches: the target platform and the extensions' suffix
            "_PYTHON_HOST_PLATFORM": "win-amd64",
            "SETUPTOOLS_EXT_SUFFIX": ext_suffix,
            # what a VS developer prompt sets: setuptools adds INCLUDE/LIB as -I and /LIBPATH: (this
            # machine's paths here, translated for the tools); torch reads VSCMD_ARG_TGT_ARCH
            "INCLUDE": os.pathsep.join(str(p) for p in msvc.include_dirs),
            "LIB": os.pathsep.join(str(p) for p in msvc.lib_dirs),
            "VSCMD_ARG_TGT_ARCH": "x64",
            "VCToolsVersion": msvc.toolset,
            "MSSdk": "1",
        }

    def describe(self) -> dict[str, object]:
        """The manifest's record of the Wine host (docs/manifest.md)."""
        record: dict[str, object] = {
            "host": "wine",
            "wine": self.tools.host.version,
            "msvc_toolset": self.tools.msvc.toolset,
            "windows_sdk": self.tools.msvc.sdk,
            "windows_torch": self.torch.version,
            "windows_torch_cuda": self.torch.cuda,
            "python_headers": f"CPython {self.python_windows.version} (PC/pyconfig.h, Include/)",
            "python_import_library": f"{self.python_windows.import_library}: made by lib /def: from the "
            f"{self.python_windows.exports} names CPython {self.python_windows.version}'s headers export",
        }
        if self.torch.added_headers:
            record["torch_headers_added"] = list(self.torch.added_headers)
        if self.cuda is not None:
            record["cuda_components"] = list(self.cuda.components)
            record["cuda_from"] = (
                "NVIDIA's redistributable archives" if self.cuda.source is WineCudaSource.NVIDIA else "PyPI"
            )
            record["cuda_wheels"] = list(self.cuda.wheels)
            record["cuda_import_libraries_made"] = list(self.cuda.made_libs)
        synthesized = self.synthesized()
        if synthesized:
            record["import_libraries_synthesized"] = synthesized
        return record

    def synthesized(self) -> dict[str, dict[str, list[str]]]:
        """extension file -> import library -> the names its link made it from (CPU torch, CUDA cells)."""
        found: dict[str, dict[str, list[str]]] = {}
        if self.synthesized_log.is_file():
            for line in self.synthesized_log.read_text(encoding="utf-8").splitlines():
                entry = json.loads(line)
                found[Path(entry["output"]).name] = entry["libraries"]
        return found


def check_wine(
    planned: PlannedCell,
    *,
    msvc_root: Path,
    env: Mapping[str, str],
    cache: CacheLayout,
    cuda_source: WineCudaSource = WineCudaSource.AUTO,
    cuda_redist_url: str = REDIST_URL,
) -> WineTools:
    """Wine and the plan's MSVC toolset in ``msvc_root``; nothing is downloaded yet."""
    hc = planned.toolchain.host_compiler
    if hc.kind != "msvc":
        msg = "a Windows cell is planned with MSVC"
        raise ValueError(msg)
    msvc = find_msvc_root(msvc_root, toolset=hc.version)
    host = find_wine(env, cache=cache)
    get_reporter().info(
        f"Windows under Wine: {host.version}, MSVC {msvc.toolset} + SDK {msvc.sdk} from {msvc.root} "
        f"(the plan's {hc.version}: {hc.why})"
    )
    return WineTools(host=host, msvc=msvc, cuda_source=cuda_source, cuda_redist_url=cuda_redist_url)


def prepare_wine(
    planned: PlannedCell,
    tools: WineTools,
    *,
    compat: Compat,
    work: Path,
    cache: CacheLayout,
    build_python: Path,  # the build interpreter: the launcher runs it as Windows
    linux_torch: Path | None,
    uv: str,
    index_args: Sequence[str],
    log: Path,
) -> WineBuild:
    """Everything the Windows build of ``planned`` needs besides the source, in ``cache`` and ``work``."""
    bin_dir = work / "wine-bin"
    synthesized_log = work / "wine-synthesized.jsonl"
    synthesized_log.unlink(missing_ok=True)
    config = write_wine_tools(tools, bin_dir)
    python_windows = prepare_windows_python(
        planned.cell.python,
        compat=compat,
        cache=cache,
        downloader=Downloader(cache.downloads),
        lib_tool=bin_dir / "lib.exe",
        log=log,
    )
    torch = prepare_windows_torch(planned, cache=cache, uv=uv, index_args=index_args, linux_torch=linux_torch, log=log)
    cuda: WindowsCuda | None = None
    cuda_home: Path | None = None
    extra: dict[str, object] = {}
    if planned.cell.variant.is_cuda:
        cuda = assemble_windows_cuda(
            planned,
            compat=compat,
            cache=cache,
            uv=uv,
            dumpbin=bin_dir / "dumpbin.exe",
            lib_tool=bin_dir / "lib.exe",
            log=log,
            source=tools.cuda_source,
            redist_url=tools.cuda_redist_url,
        )
        if torch.synthesized_libs:
            extra = {
                "synthesize": {lib: _SYNTHESIZE[lib] for lib in torch.synthesized_libs},
                "synthesized_dir": str(work / "wine-synthesized"),
                "synthesized_log": str(synthesized_log),
            }
            get_reporter().warning(
                f"torch {torch.version}'s Windows wheel here is a CPU build: each CUDA op's link makes "
                f"{' and '.join(torch.synthesized_libs)} from the names it needs (the manifest lists them; "
                "they prove torch's headers declare them, not that torch_cuda.dll exports them)"
            )
        config = write_wine_tools(tools, bin_dir, cuda_root=cuda.root, extra=extra)
        cuda_home = cuda_view(work / "wine-cuda", cuda.root, bin_dir)
    launcher_config = bin_dir / "win32-python.json"
    launcher = bin_dir / "win32-python"  # not `python`: this folder is first on PATH
    write_text_atomic(
        launcher_config,
        json.dumps(
            {
                "launcher": str(launcher),
                "windows_torch": str(torch.root),
                "python_include": str(python_windows.include),
                "cuda": format_version(planned.toolchain.nvcc) if cuda is not None and planned.toolchain.nvcc else None,
                "cuda_home": str(cuda_home) if cuda_home else None,
                "tools": str(config),
            },
            indent=1,
        )
        + "\n",
    )
    launcher.write_text(
        f'#!/bin/sh\nexec "{build_python}" "{WINE_LAUNCHER}" "{launcher_config}" "$@"\n', encoding="utf-8"
    )
    launcher.chmod(0o755)
    cl = proc.capture([bin_dir / "cl.exe"], log_file=log, timeout=300, error=EnvironmentMismatchError)
    cl_version = next((ln.strip() for ln in cl.output.splitlines() if "Compiler Version" in ln), "")
    if not cl_version:
        raise EnvironmentMismatchError(
            "cl.exe does not run under Wine", details="\n".join(cl.tail[-15:]), hint=f"full log: {log}"
        )
    nvcc_version = ""
    if cuda_home is not None:
        nvcc = proc.capture([cuda_home / "bin" / "nvcc", "--version"], log_file=log, timeout=300)
        nvcc_version = next((ln.strip() for ln in nvcc.output.splitlines() if "release" in ln), "")
    get_reporter().info(f"under Wine: {cl_version}" + (f"; nvcc {nvcc_version}" if nvcc_version else ""))
    return WineBuild(
        tools=tools,
        bin_dir=bin_dir,
        python=launcher,
        python_windows=python_windows,
        torch=torch,
        cuda=cuda,
        cuda_home=cuda_home,
        synthesized_log=synthesized_log,
        cl_version=cl_version,
        nvcc_version=nvcc_version,
    )


def write_wine_tools(
    tools: WineTools, bin_dir: Path, *, cuda_root: Path | None = None, extra: Mapping[str, object] | None = None
) -> Path:
    """The scripts that run MSVC's tools (and ``cuda_root``'s nvcc) under Wine, in ``bin_dir``; returns the config."""
    msvc = tools.msvc
    windows_env = {
        "INCLUDE": ";".join(windows_path(p) for p in msvc.include_dirs),
        "LIB": ";".join(windows_path(p) for p in msvc.lib_dirs),
        # the PATH Windows programs see: nvcc finds cl.exe on it
        "WINEPATH": ";".join(windows_path(p) for p in (msvc.bin_dir, msvc.sdk_bin_dir)),
    }
    tool_paths = {name: msvc.tool(name) for name in _MSVC_TOOLS}
    tool_paths["cl"] = msvc.tool("cl.exe")  # torch's ninja rule runs `cl`
    if cuda_root is not None:
        tool_paths["nvcc"] = cuda_root / "bin" / "nvcc.exe"
    return write_tool_scripts(
        bin_dir, python=_TOOL_PYTHON, host=tools.host, tools=tool_paths, windows_env=windows_env, extra=extra
    )


def cuda_view(view: Path, root: Path, bin_dir: Path) -> Path:
    """A CUDA_HOME whose folders are ``root``'s and whose ``bin/nvcc`` (and ``nvcc.exe``, which torch looks for)
    is the Wine tool script in ``bin_dir``."""
    if not (root / "bin" / "nvcc.exe").is_file():
        raise EnvironmentMismatchError(f"{root} has no bin/nvcc.exe")
    view.mkdir(parents=True, exist_ok=True)
    for part in ("include", "lib", "nvvm"):
        link = view / part
        if link.is_symlink() or link.exists():
            link.unlink()
        if (root / part).exists():
            link.symlink_to(root / part)
    (view / "bin").mkdir(exist_ok=True)
    for name in ("nvcc", "nvcc.exe"):
        (view / "bin" / name).unlink(missing_ok=True)
        (view / "bin" / name).symlink_to(bin_dir / "nvcc")
    return view
