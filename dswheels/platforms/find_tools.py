"""Find the build machine's tools: the CUDA toolkit the plan names, compilers, MSVC, ninja.

Where an OS keeps its toolkits is its platform module's to say (``cuda_roots``): the callers pass
those places in, so this module sits below the platform modules. The compiler cache (ccache,
sccache) is :mod:`dswheels.building.effects.compiler_cache`.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dswheels.host import proc
from dswheels.host.log import get_reporter
from dswheels.host.machine import host_os
from dswheels.kernel.errors import EnvironmentMismatchError
from dswheels.kernel.model import HostCompiler, PlannedCell
from dswheels.kernel.platform_traits import CUDA_LIBRARY_HEADERS, first_on_path, msvc_bin_dir, traits
from dswheels.kernel.versions import VersionTuple, format_version, parse_nvcc_version

__all__ = [
    "CudaInstall",
    "HostTools",
    "MsvcEnv",
    "check_msvc",
    "check_msvc_link",
    "cuda_header_dirs",
    "find_cuda",
    "find_nvcc_version",
    "gcc_major",
    "pick_compilers",
    "tool_version",
]

EXE = traits(host_os()).exe_suffix


@dataclass(frozen=True, slots=True)
class CudaInstall:
    home: Path
    nvcc: Path
    version: VersionTuple
    version_line: str


def _nvcc_version(nvcc: Path) -> tuple[VersionTuple | None, str]:
    result = proc.capture([str(nvcc), "--version"], timeout=60)
    line = next((ln for ln in result.output.splitlines() if "release" in ln), "")
    return parse_nvcc_version(result.output), line.strip()


def _cuda_candidates(env: Mapping[str, str], roots: Sequence[Path]) -> list[Path]:
    """CUDA_HOME, CUDA_PATH, the OS's ``roots``, then the toolkit of the nvcc on PATH; each once."""
    found: list[Path] = [Path(env[key]) for key in ("CUDA_HOME", "CUDA_PATH") if env.get(key)]
    found += roots
    if nvcc := shutil.which("nvcc", path=env.get("PATH")):
        found.append(Path(nvcc).resolve().parent.parent)
    unique: list[Path] = []
    for path in found:
        if path not in unique:
            unique.append(path)
    return unique


def find_cuda(want: VersionTuple, env: Mapping[str, str], roots: Sequence[Path]) -> CudaInstall:
    """The toolkit whose nvcc is exactly ``want`` (the plan's); a clear error listing what exists otherwise.

    ``roots``: where this machine's OS keeps toolkits, looked at after CUDA_HOME and CUDA_PATH.

    A toolkit counts only with its headers (``include/cuda_runtime.h``): a bare ``nvcc`` wrapper on
    PATH (``/usr/local/bin/nvcc``) is not a ``CUDA_HOME``.
    """
    seen: list[str] = []
    for home in _cuda_candidates(env, roots):
        nvcc = home / "bin" / f"nvcc{EXE}"
        if not nvcc.is_file() or not (home / "include" / "cuda_runtime.h").is_file():
            continue
        version, line = _nvcc_version(nvcc)
        if version is None:
            seen.append(f"{home}: nvcc --version gave no release line")
            continue
        if version == want:
            return CudaInstall(home=home, nvcc=nvcc, version=version, version_line=line)
        seen.append(f"{home}: nvcc {format_version(version)}")
    need = format_version(want)
    raise EnvironmentMismatchError(
        f"the plan builds with nvcc {need}, and no CUDA {need} toolkit was found",
        details="toolkits found:\n" + ("\n".join(f"  {s}" for s in seen) if seen else "  none"),
        hint=f"install CUDA {need} and set CUDA_HOME to it, or plan for the nvcc you have with --nvcc X.Y "
        "(dswheels plan --nvcc shows what that changes)",
    )


def cuda_header_dirs(cuda_home: Path, site_packages: Path) -> tuple[list[Path], list[str], list[str]]:
    """Find CUDA library headers the toolkit lacks in the nvidia-* wheels next to torch.

    Returns (directories to add, headers taken from them, headers found nowhere). Those wheels
    are the libraries torch itself loads at run time, for the same CUDA version.
    """
    include_dirs = [cuda_home / "include", *sorted((cuda_home / "targets").glob("*/include"))]
    missing = [h for h in CUDA_LIBRARY_HEADERS if not any((d / h).is_file() for d in include_dirs)]
    if not missing:
        return [], [], []
    candidates = sorted((site_packages / "nvidia").glob("*/include"))
    added: list[Path] = []
    taken: list[str] = []
    for header in missing:
        for directory in candidates:
            if (directory / header).is_file():
                if directory not in added:
                    added.append(directory)
                taken.append(header)
                break
    return added, taken, [h for h in missing if h not in taken]


def tool_version(argv: list[str], env: Mapping[str, str] | None = None) -> str:
    """The first line a tool prints for its version, or ''."""
    if proc.find_tool(argv[0], env) is None and not Path(argv[0]).is_file():
        return ""
    result = proc.capture(argv, env=env, timeout=60)
    lines = [ln.strip() for ln in result.output.splitlines() if ln.strip()]
    return lines[0] if result.returncode == 0 and lines else ""


def gcc_major(compiler: str, env: Mapping[str, str] | None = None) -> str:
    """``12`` for the GCC behind ``compiler`` ('' if it is not GCC or missing)."""
    text = tool_version([compiler, "-dumpversion"], env)
    match = re.match(r"^([0-9]+)", text)
    return match.group(1) if match else ""


def pick_compilers(planned: PlannedCell, env: Mapping[str, str]) -> tuple[str, str] | None:
    """(CC, CXX) when the plan's GCC is installed but not the default compiler; None: use the default."""
    hc = planned.toolchain.host_compiler
    if sys.platform != "win32" and hc.kind == "gcc":  # the platform in the condition: mypy --platform win32
        return _gcc_of_the_plan(hc, env)
    return None


def _gcc_of_the_plan(hc: HostCompiler, env: Mapping[str, str]) -> tuple[str, str] | None:
    default = gcc_major("c++", env)
    if default == hc.version:
        return None
    cc, cxx = f"gcc-{hc.version}", f"g++-{hc.version}"
    if proc.find_tool(cxx, env) and proc.find_tool(cc, env):
        return cc, cxx
    get_reporter().warning(
        f"the plan assumed GCC {hc.version} ({hc.why}); this machine's c++ is GCC {default or '?'} and "
        f"{cxx} is not installed: building with the default compiler",
    )
    return None


@dataclass(frozen=True, slots=True)
class HostTools:
    os: str
    gcc: str  # GCC major of c++ (Linux)
    msvc: tuple[str, ...]  # the active MSVC toolset (Windows, from a VS developer environment)
    nvcc: VersionTuple | None


@dataclass(frozen=True, slots=True)
class MsvcEnv:
    toolset: str  # VCToolsVersion, e.g. 14.44.35207
    bin_dir: str  # where its cl.exe and link.exe are


def check_msvc(planned: PlannedCell, env: Mapping[str, str]) -> MsvcEnv | None:
    """On Windows: the active MSVC (a VS developer environment), checked against the plan's toolset."""
    hc = planned.toolchain.host_compiler
    if hc.kind != "msvc":
        return None
    active = env.get("VCToolsVersion", "")
    bin_dir = msvc_bin_dir(env)
    if proc.find_tool("cl", env) is None or not active or bin_dir is None:
        raise EnvironmentMismatchError(
            "no MSVC environment is active (cl.exe is not on PATH)",
            hint=f"run from a VS developer prompt for toolset {hc.version} "
            f"(vcvarsall.bat x64 -vcvars_ver={hc.version}; in GitHub Actions e.g. ilammy/msvc-dev-cmd with "
            f"toolset: {hc.version})",
        )
    if not active.startswith(hc.version):
        get_reporter().warning(
            f"the plan chose MSVC {hc.version} ({hc.why}); the active toolset is {active}: nvcc may reject it",
        )
    return MsvcEnv(toolset=active, bin_dir=bin_dir)


def check_msvc_link(path: str, msvc: MsvcEnv, *, sep: str = os.pathsep) -> None:
    """The ``link.exe`` the build will run is MSVC's, not GNU coreutils' ``link`` that Git Bash puts first.

    setuptools links every extension with the first ``link.exe`` on PATH when DISTUTILS_USE_SDK is
    set; under Git Bash (``shell: bash`` on a Windows runner) that is ``/usr/bin/link.exe`` and every
    link fails with "extra operand" (ilammy/msvc-dev-cmd README, "Name conflicts with shell: bash").
    """
    first = first_on_path(path, sep, lambda d: (Path(d) / "link.exe").is_file())
    if first is not None and os.path.normcase(os.path.normpath(first)) == os.path.normcase(
        os.path.normpath(msvc.bin_dir)
    ):
        return
    raise EnvironmentMismatchError(
        f"the build would link with {Path(first) / 'link.exe' if first else 'no link.exe at all'}, "
        f"not MSVC's ({Path(msvc.bin_dir) / 'link.exe'})",
        hint="GNU coreutils' link.exe (Git Bash's /usr/bin) must not come first: run the build from pwsh or cmd, "
        "or remove /usr/bin/link.exe (as xformers' CI does); check the VS developer environment",
    )


def find_nvcc_version(env: Mapping[str, str], roots: Sequence[Path]) -> VersionTuple | None:
    """The version of the first toolkit found (CUDA_HOME/CUDA_PATH first, then ``roots``), or None."""
    for home in _cuda_candidates(env, roots):
        nvcc = home / "bin" / f"nvcc{EXE}"
        if nvcc.is_file() and (home / "include" / "cuda_runtime.h").is_file():
            version, _line = _nvcc_version(nvcc)
            if version is not None:
                return version
    return None
