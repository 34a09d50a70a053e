"""The environment a cell compiles in, from the tools its platform's host checked and put together.

The host (:mod:`dswheels.platforms.hosts`) checks its tools before the source is downloaded and puts
together what it runs once the interpreter is ready; the build sees only the Protocols.
:func:`compile_environment` then sets PATH (a cross host's tool scripts, the interpreter's scripts,
whose ninja torch finds, then MSVC's tools), ``<work>/site`` first on
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
from dswheels.host.log import get_reporter
from dswheels.host.venvs import Interpreter
from dswheels.kernel.errors import EnvironmentMismatchError
from dswheels.kernel.model import PlannedCell
from dswheels.kernel.platform_traits import traits
from dswheels.plan.compiler_cache_keys import CacheTool, CompilerCacheChoice, SccacheSettings
from dswheels.platforms.find_tools import CudaInstall, MsvcEnv, check_msvc_link, cuda_header_dirs, pick_compilers
from dswheels.platforms.hosts import CheckedTools, CrossToolchain

__all__ = ["CompileEnv", "compile_environment", "inherited_env"]

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
class CompileEnv:
    env: Mapping[str, str]  # everything the compile sees
    set_by_dswheels: Mapping[str, str]  # what dswheels set in it (the log and the manifest say which)
    outer_path: str  # the PATH dswheels was started with
    cuda: CudaInstall | None
    msvc: MsvcEnv | None
    compilers: tuple[str, str] | None  # (CC, CXX) when the plan's GCC is not the default compiler
    cache: CompilerCache | None
    cross: CrossToolchain | None = None  # another OS's toolchain run here (a Windows cell built on Linux: Wine)


def compile_environment(
    planned: PlannedCell,
    *,
    interp: Interpreter,
    work: Path,
    inherited: Mapping[str, str],
    tools: CheckedTools,
    parallelism: Parallelism,
    compiler_cache: CompilerCacheChoice,
    sccache: SccacheSettings,
    debug_symbols: bool,
    log: Path,
    cross: CrossToolchain | None = None,
) -> CompileEnv:
    """The environment the compile runs in; noted in the log, and sccache's server started when it is used."""
    cuda, msvc = tools.cuda, tools.msvc
    outer_path = inherited.get("PATH", "")
    # the interpreter's scripts first (its ninja is the one torch finds), then MSVC's own tools; a cross
    # host's scripts that run the other OS's tools come before everything (Wine's cl, link.exe, ...)
    path = os.pathsep.join(
        [*([str(cross.bin_dir)] if cross else []), interp.info.scripts, *([msvc.bin_dir] if msvc else []), outer_path]
    )
    # torch (and the nvidia-* wheels beside it) imported through <work>/site: the same header paths
    # for every Python (dswheels/building/effects/workdir.py)
    site = link_site(work, Path(interp.info.torch_parent or interp.info.purelib))
    if interp.origin.is_venv:
        settle_header_times(site)
    python_path = os.pathsep.join([str(site), *([inherited["PYTHONPATH"]] if inherited.get("PYTHONPATH") else [])])
    include_dirs = _header_dirs(planned, cuda, site)
    compilers = pick_compilers(planned, inherited)
    if cross is not None and compiler_cache is not CompilerCacheChoice.NONE:
        get_reporter().info(f"no compiler cache {cross.no_compiler_cache}")
    cache = find_compiler_cache(
        CompilerCacheChoice.NONE if cross else compiler_cache, env=inherited, work_dir=work, compilers=compilers
    )
    cuda_home = str(cuda.home) if cuda else (str(cross.cuda_home) if cross and cross.cuda_home else None)
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
        extra_config=_extra_config(work, parallelism.at_once, cross),
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
    if cross is not None:
        cell = planned.cell
        dswheels_env.update(
            cross.env(ext_suffix=f".{cell.python.tag}-{cell.platform.value}{traits(cell.platform).extension_suffix}")
        )
    env = {**inherited, **dswheels_env}
    if msvc is not None:
        check_msvc_link(env["PATH"], msvc)
    if cross is not None:  # the cross host's link.exe script must win over any other (GNU coreutils' link)
        check_msvc_link(env["PATH"], cross.msvc)
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
        cross=cross,
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


def _extra_config(work: Path, at_once: int, cross: CrossToolchain | None) -> str | None:
    """A ``DIST_EXTRA_CONFIG`` file: setuptools builds ``at_once`` extensions in parallel (None: one at a time);
    under a cross host it also names the compiler and where the interpreter's import library is."""
    if at_once <= 1 and cross is None:
        return None
    config_file = work / "dswheels-setup.cfg"
    compiler, libs = (cross.setuptools_compiler, cross.library_dirs) if cross else (None, ())
    config_file.write_text(dist_extra_config(at_once, compiler=compiler, library_dirs=libs), encoding="utf-8")
    return str(config_file)
