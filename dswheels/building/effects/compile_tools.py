"""The tools a cell compiles with, checked before anything runs, and the environment it compiles in.

:func:`check_toolchain` comes first, before the source is downloaded: the plan's nvcc and, on
Windows, the active MSVC. A cell of another OS is only prepared here (``--prepare-only``), so its
tools are not looked for. :func:`compile_environment` comes once the interpreter is ready: PATH
(the interpreter's scripts, whose ninja torch finds, then MSVC's tools), ``<work>/site`` first on
PYTHONPATH (the same header paths for every Python: :mod:`dswheels.building.effects.workdir`), the CUDA
header directories, the compilers, the compiler cache, and the variables
:func:`dswheels.building.build_env.build_env` decides. Inherited variables that would change which
ops DeepSpeed builds, or how, are dropped first: the plan decides them (:func:`inherited_env`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from dswheels.building.build_env import BuildSetup, CompilerCache, build_env, dist_extra_config
from dswheels.building.effects.cell_log import log_note
from dswheels.building.effects.compiler_cache import find_compiler_cache, start_sccache
from dswheels.building.effects.workdir import link_site, settle_header_times
from dswheels.building.parallelism import Parallelism
from dswheels.cuda.redist import REDIST_URL
from dswheels.host.cache import CacheLayout
from dswheels.host.log import get_reporter
from dswheels.host.machine import host_os
from dswheels.host.venvs import Interpreter
from dswheels.kernel.errors import EnvironmentMismatchError
from dswheels.kernel.model import OS, PlannedCell
from dswheels.kernel.naming import cell_id
from dswheels.kernel.platform_traits import WineCudaSource, traits
from dswheels.kernel.versions import format_version
from dswheels.plan.compiler_cache_keys import CacheTool, CompilerCacheChoice, SccacheSettings
from dswheels.platforms import platform_module
from dswheels.platforms.find_tools import (
    CudaInstall,
    MsvcEnv,
    check_msvc_link,
    cuda_header_dirs,
    find_cuda,
    pick_compilers,
)
from dswheels.platforms.wine.assembly import WineBuild, WineTools

__all__ = [
    "BuildTools",
    "CompileEnv",
    "check_toolchain",
    "compile_environment",
    "foreign_tools",
    "inherited_env",
    "planned_cuda",
]

# Variables an outer environment may carry that would change which ops DeepSpeed builds or how:
# the plan decides them, so inherited values are dropped.
_SCRUB_PREFIXES = ("DS_BUILD_",)
_SCRUB = (
    "DS_ACCELERATOR",
    "DS_SKIP_CUDA_CHECK",
    "DS_ENABLE_NINJA",
    "DS_NVCC_THREADS",
    "TORCH_CUDA_ARCH_LIST",
    "NVCC_APPEND_FLAGS",
    "PYTORCH_NVCC",
    "CCACHE_STATSLOG",
    "DIST_EXTRA_CONFIG",
    "MAX_JOBS",
    "MAKEFLAGS",  # an outer make's jobserver: the build's own pool decides (dswheels.building.effects.jobserver)
    "DSWHEELS_JOBSERVER",
    "DSWHEELS_EXT_ORDER",
    "CC",
    "CXX",
)


def inherited_env(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without the variables the plan decides."""
    return {k: v for k, v in environ.items() if k not in _SCRUB and not k.startswith(_SCRUB_PREFIXES)}


@dataclass(frozen=True, kw_only=True, slots=True)
class BuildTools:
    foreign: bool  # the cell is for another OS: only its source is prepared here
    cuda: CudaInstall | None  # the plan's toolkit (CUDA variants built here)
    msvc: MsvcEnv | None  # the active MSVC (Windows)
    wine: WineTools | None = None  # a Windows cell built on Linux: Wine and the MSVC root (docs/build.md)


def check_toolchain(
    planned: PlannedCell,
    inherited: Mapping[str, str],
    *,
    prepare_only: bool,
    msvc_root: Path | None = None,
    cache: CacheLayout | None = None,
    wine_cuda: tuple[WineCudaSource, str] = (WineCudaSource.AUTO, REDIST_URL),
) -> BuildTools:
    """The plan's nvcc (and MSVC) on this machine, checked before anything is downloaded, installed or compiled.

    The cell's platform module decides (:mod:`dswheels.platforms`): a Windows cell on Linux with ``msvc_root`` is
    built under Wine (:mod:`dswheels.platforms.wine`): Wine and the root's toolset are checked here, the rest of its
    toolchain is put together once the interpreter is ready.
    """
    return platform_module(planned.cell.platform).check_build_tools(
        planned,
        inherited,
        host=host_os(),
        prepare_only=prepare_only,
        msvc_root=msvc_root,
        cache=cache,
        wine_cuda=wine_cuda,
    )


def foreign_tools(planned: PlannedCell, *, host: OS, prepare_only: bool, wine_host: bool) -> BuildTools:
    """A cell of another OS than ``host``'s: only prepared here (``wine_host``: or built under Wine)."""
    os_name = planned.cell.platform.os
    if not prepare_only:
        raise EnvironmentMismatchError(
            f"{cell_id(planned.cell)} is built on {os_name.capitalize()}, and this machine runs {host.capitalize()}",
            hint="build it on such a machine (wheels.yml does, on GitHub's runners)"
            + ("; or here under Wine with --msvc-root DIR (docs/build.md#windows-under-wine)" if wine_host else "")
            + "; --prepare-only fetches, checks and patches its source here without compiling",
        )
    get_reporter().info(f"preparing a {planned.cell.platform.value} cell here: its toolchain is not checked")
    return BuildTools(foreign=True, cuda=None, msvc=None)


def planned_cuda(planned: PlannedCell, inherited: Mapping[str, str]) -> CudaInstall | None:
    """The plan's toolkit on this machine, for a CUDA cell built natively (EnvironmentMismatchError if absent)."""
    if not planned.cell.variant.is_cuda:
        return None
    tc = planned.toolchain
    assert tc.nvcc is not None  # noqa: S101 - the plan gives CUDA variants an nvcc
    cuda = find_cuda(tc.nvcc, inherited)
    get_reporter().info(f"nvcc {format_version(cuda.version)} at {cuda.home} (the plan's {format_version(tc.nvcc)})")
    return cuda


@dataclass(frozen=True, kw_only=True, slots=True)
class CompileEnv:
    env: Mapping[str, str]  # everything the compile sees
    set_by_dswheels: Mapping[str, str]  # what dswheels set in it (the log and the manifest say which)
    outer_path: str  # the PATH dswheels was started with
    cuda: CudaInstall | None
    msvc: MsvcEnv | None
    compilers: tuple[str, str] | None  # (CC, CXX) when the plan's GCC is not the default compiler
    cache: CompilerCache | None
    wine: WineBuild | None = None  # the Windows toolchain under Wine (a Windows cell built on Linux)


def compile_environment(
    planned: PlannedCell,
    *,
    interp: Interpreter,
    work: Path,
    inherited: Mapping[str, str],
    tools: BuildTools,
    parallelism: Parallelism,
    compiler_cache: CompilerCacheChoice,
    sccache: SccacheSettings,
    debug_symbols: bool,
    log: Path,
    wine: WineBuild | None = None,
) -> CompileEnv:
    """The environment the compile runs in; noted in the log, and sccache's server started when it is used."""
    cuda, msvc = tools.cuda, tools.msvc
    outer_path = inherited.get("PATH", "")
    # the interpreter's scripts first (its ninja is the one torch finds), then MSVC's own tools; under
    # Wine the scripts that run the Windows tools come before everything (cl, link.exe, ...)
    path = os.pathsep.join(
        [*([str(wine.bin_dir)] if wine else []), interp.info.scripts, *([msvc.bin_dir] if msvc else []), outer_path]
    )
    # torch (and the nvidia-* wheels beside it) imported through <work>/site: the same header paths
    # for every Python (dswheels/building/effects/workdir.py)
    site = link_site(work, Path(interp.info.torch_parent or interp.info.purelib))
    if interp.origin.is_venv:
        settle_header_times(site)
    python_path = os.pathsep.join([str(site), *([inherited["PYTHONPATH"]] if inherited.get("PYTHONPATH") else [])])
    include_dirs = _header_dirs(planned, cuda, site)
    compilers = pick_compilers(planned, inherited)
    if wine is not None and compiler_cache is not CompilerCacheChoice.NONE:
        get_reporter().info("no compiler cache under Wine: neither ccache nor Linux sccache runs MSVC's cl")
    cache = find_compiler_cache(
        CompilerCacheChoice.NONE if wine else compiler_cache, env=inherited, work_dir=work, compilers=compilers
    )
    cuda_home = str(cuda.home) if cuda else (str(wine.cuda_home) if wine and wine.cuda_home else None)
    setup = BuildSetup(
        os=planned.cell.platform.os,
        path=path,
        path_sep=os.pathsep,
        jobs=parallelism.ninja_jobs,
        nvcc_threads=parallelism.nvcc_threads,
        cuda_home=cuda_home,
        nvcc=str(cuda.nvcc) if cuda else (f"{cuda_home}/bin/nvcc" if cuda_home else None),
        cache=cache,
        compilers=compilers,
        extra_config=_extra_config(work, parallelism.at_once, wine),
        include_dirs=tuple(str(d) for d in include_dirs),
        include_var_value=inherited.get(traits(planned.cell.platform).include_var, ""),
        debug_symbols=debug_symbols,
        # setuptools replaces Python's CFLAGS with $CFLAGS (84 does) or appends it (older): start from
        # what it would use anyway, so only -g0 is added
        cflags_value=inherited.get("CFLAGS") or interp.info.cflags,
        python_path=python_path,
    )
    dswheels_env = build_env(planned, setup)
    dswheels_env.setdefault("PATH", path)
    if wine is not None:
        dswheels_env.update(wine.env(ext_suffix=f".{planned.cell.python.tag}-{planned.cell.platform.value}.pyd"))
    env = {**inherited, **dswheels_env}
    if msvc is not None:
        check_msvc_link(env["PATH"], msvc)
    if wine is not None:  # the Wine host's link.exe script must win over any other (GNU coreutils' link)
        check_msvc_link(env["PATH"], MsvcEnv(toolset=wine.tools.msvc.toolset, bin_dir=str(wine.bin_dir)))
    log_note(log, "environment set by dswheels:\n" + "\n".join(f"  {k}={v}" for k, v in sorted(dswheels_env.items())))
    get_reporter().info(
        f"building {len(planned.ops.build)} op(s), {parallelism.describe()}"
        + (f", {cache.tool}" if cache else ", no compiler cache")
        + (f", CC/CXX {compilers[0]}/{compilers[1]}" if compilers else ""),
    )
    if cache is not None and cache.tool is CacheTool.SCCACHE:
        env.update(start_sccache(cache, sccache, inherited=inherited, env=env, log=log))
    return CompileEnv(
        env=env,
        set_by_dswheels=dswheels_env,
        outer_path=outer_path,
        cuda=cuda,
        msvc=msvc,
        compilers=compilers,
        cache=cache,
        wine=wine,
    )


def _header_dirs(planned: PlannedCell, cuda: CudaInstall | None, site: Path) -> list[Path]:
    """CUDA library headers torch's headers include and the toolkit lacks: from the nvidia-* wheels torch runs with."""
    if cuda is None:
        return []
    include_dirs, taken, absent = cuda_header_dirs(cuda.home, site)
    if absent:
        components = " ".join(planned.toolchain.cuda_components) or "compat.yml cuda_components"
        toolkit = planned.toolchain.cuda_toolkit or "X.Y.Z"
        raise EnvironmentMismatchError(
            f"the CUDA toolkit at {cuda.home} lacks {', '.join(absent)}, which torch's CUDA headers include",
            hint=f"install the plan's components ({components}): `dswheels cuda install --toolkit {toolkit}` "
            "assembles them from NVIDIA's archives; or the toolkit's library development packages (cublas, "
            "cusparse, cusolver, curand)",
        )
    if taken:
        get_reporter().info(
            f"the toolkit at {cuda.home} lacks {', '.join(taken)}: using the headers of the nvidia-* wheels "
            f"torch runs with ({', '.join(str(d) for d in include_dirs)})",
        )
    return include_dirs


def _extra_config(work: Path, at_once: int, wine: WineBuild | None) -> str | None:
    """A ``DIST_EXTRA_CONFIG`` file: setuptools builds ``at_once`` extensions in parallel (None: one at a time);
    under Wine it also names MSVC as the compiler and where CPython's Windows import library is."""
    if at_once <= 1 and wine is None:
        return None
    config_file = work / "dswheels-setup.cfg"
    libs = (str(wine.python_windows.libs),) if wine else ()
    config_file.write_text(
        dist_extra_config(at_once, compiler="msvc" if wine else None, library_dirs=libs), encoding="utf-8"
    )
    return str(config_file)
