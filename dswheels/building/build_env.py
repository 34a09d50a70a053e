"""The environment of a DeepSpeed wheel build, computed from a planned cell and the tools found.

Pure: the effectful builder (:mod:`dswheels.building.effects.cell`) finds the tools (CUDA home,
compiler cache, versioned compilers), then asks this module for the exact environment
variables to set. The planner already decided the ops, the arch list, the nvcc,
``DS_SKIP_CUDA_CHECK``, the ``NVCC_APPEND_FLAGS`` and the CPU baseline; this module only
spells those decisions the way DeepSpeed's ``setup.py`` and torch's ``cpp_extension`` read
them. The source patches are :mod:`dswheels.building.patches`, the parallelism
:mod:`dswheels.building.parallelism`.
"""

from __future__ import annotations

from dataclasses import dataclass

from dswheels.kernel.compat.entries import CpuBaseline
from dswheels.kernel.model import OS, PlannedCell
from dswheels.kernel.naming import build_string
from dswheels.kernel.platform_traits import traits
from dswheels.plan.compiler_cache_keys import CacheTool

__all__ = [
    "BuildSetup",
    "CompilerCache",
    "baseline_flag",
    "build_env",
    "dist_extra_config",
]

# Headers of the CUDA libraries torch's ATen/cuda headers include (CUDAContextLight.h and friends)
# and DeepSpeed's kernels use; a toolkit without them (a minimal nvcc install) cannot build ops.


@dataclass(frozen=True, slots=True)
class CompilerCache:
    """A compiler cache the builder found: ``ccache`` (C++ via a masquerade dir) or ``sccache`` (C++ via ``CXX``)."""

    tool: CacheTool
    executable: str  # absolute path of the tool
    masquerade_dir: str  # directory of compiler-named links to ccache, put first on PATH ("" for sccache)
    stats_log: str  # ccache's per-build stats log ("" for sccache)
    base_dir: str  # paths below it are hashed relative (the work directory)
    cxx: str = ""  # sccache on Linux: a script running the C++ compiler through it, for CXX


@dataclass(frozen=True, slots=True)
class BuildSetup:
    """Everything besides the plan that the environment depends on (found by the builder)."""

    os: OS
    path: str  # the PATH the build starts from
    path_sep: str  # os.pathsep of the build machine
    jobs: int  # parallel compile jobs (ninja -j via MAX_JOBS; 0: none given, ninja takes its slots from a jobserver)
    cuda_home: str | None  # toolkit root for CUDA variants
    nvcc: str | None  # the nvcc executable inside cuda_home
    cache: CompilerCache | None
    compilers: tuple[str, str] | None  # (CC, CXX) when the plan's GCC is not the default compiler
    extra_config: str | None  # DIST_EXTRA_CONFIG file (setuptools [build_ext] parallel)
    # CUDA library headers the toolkit lacks, from the nvidia-* wheels torch itself depends on
    include_dirs: tuple[str, ...] = ()
    include_var_value: str = ""  # CPATH (Linux) / INCLUDE (Windows) as inherited
    debug_symbols: bool = False  # keep -g (else -g0 for every op, also those that take -g from Python's CFLAGS)
    cflags_value: str = ""  # the CFLAGS setuptools would use: inherited, else the interpreter's own
    nvcc_threads: int = 1  # archs one nvcc compiles at once (DS_NVCC_THREADS)
    # PYTHONPATH: a link at a fixed place in the work directory to the directory torch is imported
    # from, so torch's (and the nvidia wheels') headers have the same path for every Python and venv
    python_path: str = ""


def baseline_flag(baseline: CpuBaseline, os: OS) -> str:
    """The compiler flag that replaces ``-march=native``: GCC's ``-march=...`` or MSVC's ``/arch:...``."""
    return {"msvc": baseline.msvc, "gcc": baseline.gcc}[traits(os).compiler]


def build_env(planned: PlannedCell, setup: BuildSetup) -> dict[str, str]:
    """The variables dswheels sets for ``python -m build`` (to be laid over the inherited environment).

    >>> from dswheels.kernel.model import *
    >>> from dswheels.kernel.naming import parse_cell_id
    >>> tc = Toolchain(runner_image="local", runs_on=(), host_compiler=HostCompiler("gcc", "12", ""),
    ...     nvcc=None, cuda_toolkit="", arch_list=(), skip_cuda_check=False, cuda_check="",
    ...     nvcc_flags=(), cpu_baseline="x86-64-v2", cuda_components=(), notes=())
    >>> cell = PlannedCell(cell=parse_cell_id("ds0.19.8-torch2.13-cpu-cp311-linux_x86_64"), torch_version="2.13.0",
    ...     torch_index="", toolchain=tc, ops=OpPlan(build=(("cpu_adam", "CPU_ADAM"),), left_out=()),
    ...     source=Source(SourceKind.SDIST, "", ""), smoke_runs_on=())
    >>> env = build_env(cell, BuildSetup(os="linux", path="/usr/bin", path_sep=":", jobs=2, cuda_home=None,
    ...     nvcc=None, cache=None, compilers=None, extra_config=None))
    >>> env["DS_BUILD_OPS"], env["DS_BUILD_CPU_ADAM"], env["DS_ACCELERATOR"], env["DS_BUILD_STRING"]
    ('0', '1', 'cpu', '+cputorch2.13')
    """
    env: dict[str, str] = {
        # exactly the planned ops: everything off, then each planned op on
        "DS_BUILD_OPS": "0",
        **{f"DS_BUILD_{var}": "1" for _name, var in planned.ops.build},
        # GPU-less builders would otherwise detect the cpu accelerator and build CPU variants of the ops
        "DS_ACCELERATOR": planned.cell.variant.accelerator.value,
        "DS_BUILD_STRING": build_string(planned.cell),
        # ninja compiles an op's sources in parallel (setup.py turns it off unless this is set)
        "DS_ENABLE_NINJA": "1",
        # "" when a jobserver gives the slots: torch passes ninja no -j, and a ninja given no -j joins it
        "MAX_JOBS": str(setup.jobs) if setup.jobs > 0 else "",
        # the pip/uv/build output stays readable in logs
        "PYTHONUNBUFFERED": "1",
    }
    if planned.cell.variant.is_cuda:
        env.update(_cuda_env(planned, setup))
    env.update(_compiler_env(setup))
    if setup.python_path:
        # torch computes its include paths from where it is imported: from here, the same for all Pythons
        env["PYTHONPATH"] = setup.python_path
    if setup.compilers is not None:
        env["CC"], env["CXX"] = setup.compilers
    if setup.extra_config is not None:
        env["DIST_EXTRA_CONFIG"] = setup.extra_config
    if setup.cache is not None:
        env.update(_cache_env(setup))
    return env


def _cuda_env(planned: PlannedCell, setup: BuildSetup) -> dict[str, str]:
    """What nvcc and DeepSpeed's CUDA op builders read: the toolkit, the arch list, the planned flags."""
    tc = planned.toolchain
    if setup.cuda_home is None:
        msg = "a CUDA variant needs cuda_home"
        raise ValueError(msg)
    env = {
        "CUDA_HOME": setup.cuda_home,
        "TORCH_CUDA_ARCH_LIST": tc.arch_list_text,
        # DeepSpeed's default is min(cores, 8) threads per nvcc, on top of ninja's jobs
        "DS_NVCC_THREADS": str(max(1, setup.nvcc_threads)),
    }
    if tc.skip_cuda_check:
        env["DS_SKIP_CUDA_CHECK"] = "1"
    if tc.nvcc_flags:
        env["NVCC_APPEND_FLAGS"] = " ".join(tc.nvcc_flags)
    if root_var := traits(setup.os).cuda_root_var:
        env[root_var] = setup.cuda_home
    if setup.include_dirs:
        # searched after the -I paths, so the toolkit's own headers win where both have one
        env[traits(setup.os).include_var] = setup.path_sep.join(
            [*setup.include_dirs, *([setup.include_var_value] if setup.include_var_value else [])]
        )
    return env


def _compiler_env(setup: BuildSetup) -> dict[str, str]:
    """What the C++ compiler needs on this OS: MSVC's SDK switch, or GCC's flags without debug info."""
    if traits(setup.os).compiler == "msvc":
        # torch refuses an active VC environment without it, and it makes setuptools use the PATH's cl
        return {"DISTUTILS_USE_SDK": "1"}
    if setup.debug_symbols:
        return {}
    # Python's own CFLAGS carry -g; $CFLAGS replaces them (setuptools 84) or is appended (older ones),
    # so the same flags plus a final -g0 turn debug info off for ops that set no -g themselves
    # (deepspeed_shm_comm, pin_memory); the patched '-g0' covers the rest
    return {"CFLAGS": " ".join(part for part in (setup.cflags_value, "-g0") if part)}


def _quote(path: str) -> str:
    """Quote a path for a ninja command line (sh on Linux, CreateProcess on Windows)."""
    return f'"{path}"' if " " in path else path


def _cache_env(setup: BuildSetup) -> dict[str, str]:
    cache = setup.cache
    assert cache is not None  # noqa: S101 - checked by the caller
    env: dict[str, str] = {}
    if cache.tool is CacheTool.CCACHE:
        # paths below the work directory are hashed relative to it, and the cwd is not hashed
        env["CCACHE_BASEDIR"] = cache.base_dir
        env["CCACHE_NOHASHDIR"] = "1"
        if cache.stats_log:
            env["CCACHE_STATSLOG"] = cache.stats_log
    else:
        # sccache's CCACHE_BASEDIR (0.14+); the server reads it when it starts (the builder starts it)
        env["SCCACHE_BASEDIRS"] = cache.base_dir
        # torch's ninja rule gives nvcc -MD -MF (older torch --generate-dependencies-with-compile),
        # which sccache before 0.9 does not cache; a one-shot build in a fresh tree needs no depfile
        env["TORCH_EXTENSION_SKIP_NVCC_GEN_DEPENDENCIES"] = "1"
    if cache.masquerade_dir:
        # ccache: the C++ compiler (and nvcc's host compiler) through compiler-named links first on PATH,
        # with every torch; torch >= 2.13 would prepend the first of ccache/sccache on PATH itself: once,
        # and the chosen one, is enough
        env["PATH"] = cache.masquerade_dir + setup.path_sep + setup.path
        env["TORCH_NO_COMPILER_WRAPPER"] = "1"
    if cache.cxx:
        # sccache: ninja's C++ rule through a script (torch reads CXX); not nvcc's host compiler, which
        # sccache's server runs (docs/costs.md)
        env["CXX"] = cache.cxx
        env["TORCH_NO_COMPILER_WRAPPER"] = "1"
    if setup.nvcc is not None:
        # read verbatim by torch's ninja writer (on Windows the only compiler a cache can wrap: torch's
        # ninja rule runs `cl` itself)
        env["PYTORCH_NVCC"] = f"{_quote(cache.executable)} {_quote(setup.nvcc)}"
        env["TORCH_NO_COMPILER_WRAPPER"] = "1"
    return env


def dist_extra_config(parallel: int, *, compiler: str | None = None, library_dirs: tuple[str, ...] = ()) -> str:
    """setuptools reads ``DIST_EXTRA_CONFIG`` like a setup.cfg: build several extensions at once; under Wine
    also the compiler (setuptools would pick the Unix one on Linux) and CPython's Windows library folder.

    >>> print(dist_extra_config(2, compiler="msvc", library_dirs=("/c/libs",)), end="")
    [build_ext]
    parallel = 2
    compiler = msvc
    library_dirs = /c/libs
    """
    lines = ["[build_ext]"]
    if parallel > 1:
        lines.append(f"parallel = {parallel}")
    if compiler:
        lines.append(f"compiler = {compiler}")
    if library_dirs:
        lines.append(f"library_dirs = {':'.join(library_dirs)}")
    return "\n".join(lines) + "\n"
