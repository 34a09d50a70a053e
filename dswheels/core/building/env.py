"""What a DeepSpeed wheel build needs, computed from a planned cell: environment and source patches.

Pure: the effectful builder (:mod:`dswheels.effects.build`) finds the tools (CUDA home,
compiler cache, versioned compilers), then asks this module for the exact environment
variables to set and the text of the patched op builder. The planner already decided the
ops, the arch list, the nvcc, ``DS_SKIP_CUDA_CHECK``, the ``NVCC_APPEND_FLAGS`` and the CPU
baseline; this module only spells those decisions the way DeepSpeed's ``setup.py`` and
torch's ``cpp_extension`` read them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from dswheels.core.building.compiler_cache import CacheTool
from dswheels.core.compat import CpuBaseline
from dswheels.core.model import PlannedCell
from dswheels.core.naming import build_string

__all__ = [
    "BUILDER_FILES",
    "CPU_BUILDER_FILES",
    "CUDA_LIBRARY_HEADERS",
    "DEBUG_FLAG_FILES",
    "BuildSetup",
    "CompilerCache",
    "Parallelism",
    "PatchError",
    "baseline_flag",
    "build_env",
    "dist_extra_config",
    "first_on_path",
    "fit_jobs",
    "msvc_bin_dir",
    "patch_arch_list_leak",
    "patch_cpu_builder_win32",
    "patch_debug_flags",
    "patch_parallel_extensions",
    "patch_portable_cpu",
    "patch_torch_requirement",
    "split_jobs",
    "split_parallelism",
]

# The op builder exists twice in a DeepSpeed source tree: setup.py compiles from op_builder/,
# the installed package JIT-builds from deepspeed/ops/op_builder/ (a symlink in git, a copy
# in the sdist). Patch both, so a JIT build of a left-out op is portable too.
BUILDER_FILES = ("op_builder/builder.py", "deepspeed/ops/op_builder/builder.py")
# Where DeepSpeed hard-codes '-g' for the ops we build (CUDAOpBuilder, TorchCPUOpBuilder <=0.19.7,
# CPUOpBuilder); async_io.py carried its own in 0.14.x.
DEBUG_FLAG_FILES = (
    "op_builder/builder.py",
    "op_builder/cpu/builder.py",
    "op_builder/async_io.py",
    "deepspeed/ops/op_builder/builder.py",
    "deepspeed/ops/op_builder/cpu/builder.py",
    "deepspeed/ops/op_builder/async_io.py",
)

_MARK = "# dswheels:"

# Headers of the CUDA libraries torch's ATen/cuda headers include (CUDAContextLight.h and friends)
# and DeepSpeed's kernels use; a toolkit without them (a minimal nvcc install) cannot build ops.
CUDA_LIBRARY_HEADERS = ("cublas_v2.h", "cublasLt.h", "cusparse.h", "cusolverDn.h", "curand.h")


class PatchError(ValueError):
    """The DeepSpeed source does not look the way the patch expects (a new DeepSpeed layout)."""


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

    os: str  # "linux" | "windows"
    path: str  # the PATH the build starts from
    path_sep: str  # os.pathsep of the build machine
    jobs: int  # parallel compile jobs (ninja -j via MAX_JOBS)
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


def msvc_bin_dir(env: Mapping[str, str]) -> str | None:
    """The directory of the active MSVC's ``cl.exe``/``link.exe`` (a VS developer environment), or None.

    >>> msvc_bin_dir({"VCToolsInstallDir": "C:/VC/Tools/MSVC/14.44.35207/", "VSCMD_ARG_TGT_ARCH": "x64"})
    'C:/VC/Tools/MSVC/14.44.35207\\\\bin\\\\Hostx64\\\\x64'
    """
    root = env.get("VCToolsInstallDir", "").rstrip("\\/")
    if not root:
        return None
    host, target = env.get("VSCMD_ARG_HOST_ARCH", "x64"), env.get("VSCMD_ARG_TGT_ARCH", "x64")
    return f"{root}\\bin\\Host{host}\\{target}"


def first_on_path(path: str, sep: str, has_it: Callable[[str], bool]) -> str | None:
    """The first directory of ``path`` where ``has_it(dir)``: how CreateProcess and setuptools' MSVC
    compiler find ``link.exe`` (in PATH order; the first one wins).

    >>> first_on_path("C:/Git/usr/bin;C:/VC/bin", ";", lambda d: True)
    'C:/Git/usr/bin'
    """
    return next((d for d in path.split(sep) if d and has_it(d)), None)


def baseline_flag(baseline: CpuBaseline, os: str) -> str:
    """The compiler flag that replaces ``-march=native``: GCC's ``-march=...`` or MSVC's ``/arch:...``."""
    return baseline.msvc if os == "windows" else baseline.gcc


def build_env(planned: PlannedCell, setup: BuildSetup) -> dict[str, str]:
    """The variables dswheels sets for ``python -m build`` (to be laid over the inherited environment).

    >>> from dswheels.core.model import *
    >>> from dswheels.core.naming import parse_cell_id
    >>> tc = Toolchain(runner_image="local", runs_on=(), host_compiler=HostCompiler("gcc", "12", ""),
    ...     nvcc=None, cuda_toolkit="", arch_list=(), skip_cuda_check=False, cuda_check="",
    ...     nvcc_flags=(), cpu_baseline="x86-64-v2", cuda_subpackages=(), notes=())
    >>> cell = PlannedCell(cell=parse_cell_id("ds0.19.8-torch2.13-cpu-cp311-linux_x86_64"), torch_version="2.13.0",
    ...     torch_index="", toolchain=tc, ops=OpPlan(build=(("cpu_adam", "CPU_ADAM"),), left_out=()),
    ...     source=Source(SourceKind.SDIST, "", ""), smoke_runs_on=())
    >>> env = build_env(cell, BuildSetup(os="linux", path="/usr/bin", path_sep=":", jobs=2, cuda_home=None,
    ...     nvcc=None, cache=None, compilers=None, extra_config=None))
    >>> env["DS_BUILD_OPS"], env["DS_BUILD_CPU_ADAM"], env["DS_ACCELERATOR"], env["DS_BUILD_STRING"]
    ('0', '1', 'cpu', '+cputorch2.13')
    """
    tc = planned.toolchain
    env: dict[str, str] = {
        # exactly the planned ops: everything off, then each planned op on
        "DS_BUILD_OPS": "0",
        **{f"DS_BUILD_{var}": "1" for _name, var in planned.ops.build},
        # GPU-less builders would otherwise detect the cpu accelerator and build CPU variants of the ops
        "DS_ACCELERATOR": planned.cell.variant.accelerator.value,
        "DS_BUILD_STRING": build_string(planned.cell),
        # ninja compiles an op's sources in parallel (setup.py turns it off unless this is set)
        "DS_ENABLE_NINJA": "1",
        "MAX_JOBS": str(max(1, setup.jobs)),
        # the pip/uv/build output stays readable in logs
        "PYTHONUNBUFFERED": "1",
    }
    if planned.cell.variant.is_cuda:
        if setup.cuda_home is None:
            msg = "a CUDA variant needs cuda_home"
            raise ValueError(msg)
        env["CUDA_HOME"] = setup.cuda_home
        env["TORCH_CUDA_ARCH_LIST"] = tc.arch_list_text
        # DeepSpeed's default is min(cores, 8) threads per nvcc, on top of ninja's jobs
        env["DS_NVCC_THREADS"] = str(max(1, setup.nvcc_threads))
        if tc.skip_cuda_check:
            env["DS_SKIP_CUDA_CHECK"] = "1"
        if tc.nvcc_flags:
            env["NVCC_APPEND_FLAGS"] = " ".join(tc.nvcc_flags)
        if setup.os == "windows":
            env["CUDA_PATH"] = setup.cuda_home
        if setup.include_dirs:
            # searched after the -I paths, so the toolkit's own headers win where both have one
            var = "INCLUDE" if setup.os == "windows" else "CPATH"
            env[var] = setup.path_sep.join(
                [*setup.include_dirs, *([setup.include_var_value] if setup.include_var_value else [])]
            )
    if setup.os == "windows":
        # torch refuses an active VC environment without it, and it makes setuptools use the PATH's cl
        env["DISTUTILS_USE_SDK"] = "1"
    elif not setup.debug_symbols:
        # Python's own CFLAGS carry -g; $CFLAGS replaces them (setuptools 84) or is appended (older ones),
        # so the same flags plus a final -g0 turn debug info off for ops that set no -g themselves
        # (deepspeed_shm_comm, pin_memory); the patched '-g0' covers the rest
        env["CFLAGS"] = " ".join(part for part in (setup.cflags_value, "-g0") if part)
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


def dist_extra_config(parallel: int) -> str:
    """setuptools reads ``DIST_EXTRA_CONFIG`` like a setup.cfg: build several extensions at once."""
    return f"[build_ext]\nparallel = {parallel}\n"


# --- source patches ------------------------------------------------------------------------------

_CPU_ARCH_RE = re.compile(r"^(    )def cpu_arch\(self\):\n", re.MULTILINE)
_SIMD_RE = re.compile(r"^(    )def simd_width\(self\):\n", re.MULTILINE)


def _insert_return(text: str, pattern: re.Pattern[str], value: str, *, what: str, filename: str) -> str:
    matches = pattern.findall(text)
    if len(matches) != 1:
        raise PatchError(
            f"{filename}: expected exactly one `def {what}(self):` in class OpBuilder, found {len(matches)}",
        )
    line = f"        return {value!r}  {_MARK} portable CPU baseline instead of the build host's CPU\n"
    return pattern.sub(lambda m: m.group(0) + line, text, count=1)


def patch_portable_cpu(text: str, *, arch_flag: str, simd_flag: str, filename: str = "builder.py") -> str:
    """Make ``OpBuilder.cpu_arch()``/``simd_width()`` return the baseline instead of probing the host.

    DeepSpeed returns ``-march=native`` and a SIMD define read from the build host's CPU, so a
    wheel built on an AVX-512 runner dies with SIGILL on older CPUs. An early ``return`` after
    each ``def`` line (the same in every version 0.14-0.19) turns the old body into dead code.

    >>> src = "class OpBuilder:\\n    def cpu_arch(self):\\n        return '-march=native'\\n" \\
    ...       "    def simd_width(self):\\n        return '-D__AVX512__'\\n"
    >>> out = patch_portable_cpu(src, arch_flag="-march=x86-64-v2", simd_flag="-D__SCALAR__")
    >>> "return '-march=x86-64-v2'" in out and "return '-D__SCALAR__'" in out
    True
    """
    if _MARK in text:
        raise PatchError(f"{filename}: already patched (a reused source tree?)")
    text = _insert_return(text, _CPU_ARCH_RE, arch_flag, what="cpu_arch", filename=filename)
    return _insert_return(text, _SIMD_RE, simd_flag, what="simd_width", filename=filename)


# op_builder/cpu/builder.py, CPUOpBuilder.cxx_args in 0.14.3-0.19.8 (0.14.0-0.14.2 returned the list directly)
CPU_BUILDER_FILES = ("op_builder/cpu/builder.py", "deepspeed/ops/op_builder/cpu/builder.py")
_CPU_CXX_RE = re.compile(
    r"^    def cxx_args\(self\):\n        args = \['-O3', '-g0?', '-Wno-reorder'\]\n", re.MULTILINE
)
_IMPORT_OS_RE = re.compile(r"^import os\n", re.MULTILINE)
_CPU_WIN32_BRANCH = f"""\
        if sys.platform == "win32":  {_MARK} cl stops at -Wno-reorder (D8021); CUDAOpBuilder's win32 flags
            return ['-O2', self.cpu_arch(), self.simd_width()]
"""


def patch_cpu_builder_win32(text: str, *, filename: str = "op_builder/cpu/builder.py") -> str:
    """Give ``CPUOpBuilder.cxx_args()`` the win32 branch the other builders have.

    The CPU builder returns GCC's ``-O3 -g -Wno-reorder <arch> -fopenmp <simd>`` on every
    platform; ``cl`` reads ``-Wno-reorder`` as ``/W`` with a non-numeric level and stops
    (D8021). DeepSpeed 0.19.8's CUDA accelerator builds CPUAdam/CPUAdagrad/CPULion with it;
    0.19.7 used ``TorchCPUOpBuilder``, whose flags start from ``CUDAOpBuilder.cxx_args()``
    (``['-O2']`` on win32) and add ``cpu_arch()`` and ``simd_width()``, with GCC options cl
    ignores (``-g``, ``-fopenmp``: D9002, so those Windows builds had no OpenMP either). The
    branch gives cl exactly what it used from 0.19.7: ``-O2``, the CPU baseline, the SIMD define.

    >>> src = "import os\\n\\nclass CPUOpBuilder(OpBuilder):\\n\\n    def cxx_args(self):\\n" \\
    ...       "        args = ['-O3', '-g', '-Wno-reorder']\\n        return args\\n"
    >>> out = patch_cpu_builder_win32(src)
    >>> "import sys" in out and "return ['-O2', self.cpu_arch(), self.simd_width()]" in out
    True
    >>> try:
    ...     patch_cpu_builder_win32("import os\\n    def cxx_args(self):\\n        return ['-O3']\\n")
    ... except PatchError as exc:
    ...     print(exc)
    op_builder/cpu/builder.py: expected one `def cxx_args(self):` starting with `args = ['-O3', '-g', \
'-Wno-reorder']` (DeepSpeed 0.14.3-0.19.8), found 0; and one `import os`, found 1
    """
    if _MARK in text:
        raise PatchError(f"{filename}: already patched (a reused source tree?)")
    found, imports = len(_CPU_CXX_RE.findall(text)), len(_IMPORT_OS_RE.findall(text))
    if found != 1 or imports != 1:
        raise PatchError(
            f"{filename}: expected one `def cxx_args(self):` starting with `args = ['-O3', '-g', '-Wno-reorder']` "
            f"(DeepSpeed 0.14.3-0.19.8), found {found}; and one `import os`, found {imports}",
        )
    text = _IMPORT_OS_RE.sub("import os\nimport sys\n", text, count=1)
    return _CPU_CXX_RE.sub(lambda m: m.group(0).replace("        args", _CPU_WIN32_BRANCH + "        args", 1), text)


# DeepSpeed >= 0.19.0, OpBuilder.compute_capability_args(): after filter_ccs() it writes the op's
# own (possibly narrowed) arch list back into the process environment, which the next op reads.
_ARCH_ENV_RE = re.compile(
    r'^(?P<indent>[ ]+)os\.environ\["TORCH_CUDA_ARCH_LIST"\] = (?P<value>arch_list|";"\.join\(arch_tokens\))\n',
    re.MULTILINE,
)


def patch_arch_list_leak(text: str, *, filename: str = "op_builder/builder.py") -> tuple[str, int]:
    r"""Keep one op's filtered arch list from narrowing every op built after it; (text, patches made).

    From 0.19.0 ``compute_capability_args()`` sets ``TORCH_CUDA_ARCH_LIST`` to the archs that
    survived the op's ``filter_ccs()`` (transformer_inference drops those below 6.0), "so PyTorch
    does not re-add archs". That matters only for JIT builds, where torch derives the -gencode
    flags from the variable; ahead of time the builder passes its own -gencode flags and torch
    adds none (cpp_extension ``_get_cuda_arch_flags`` returns [] when a flag names an arch). But
    setup.py builds the ops one after another in one process, so every op after the first
    filtering one loses the filtered archs: a cu126 wheel (arch list from 5.0) would carry no
    sm_50 code in ops that support it. The assignment is kept for JIT builds only.

    >>> src = "        ccs = self.filter_ccs(ccs)\n        arch_list = 'x'\n" \
    ...       "        os.environ[\"TORCH_CUDA_ARCH_LIST\"] = arch_list\n"
    >>> out, count = patch_arch_list_leak(src)
    >>> count, "        if self.jit_mode:  # dswheels:" in out
    (1, True)
    >>> patch_arch_list_leak("nothing to see\n")
    ('nothing to see\n', 0)
    """
    found = _ARCH_ENV_RE.findall(text)
    if not found:
        return text, 0  # DeepSpeed < 0.19.0 leaves the environment alone
    if len(found) != 1:
        raise PatchError(
            f"{filename}: expected one write of TORCH_CUDA_ARCH_LIST after filter_ccs(), found {len(found)}"
        )

    def guarded(match: re.Match[str]) -> str:
        indent, value = match["indent"], match["value"]
        return (
            f"{indent}if self.jit_mode:  {_MARK} ahead-of-time builds pass -gencode; later ops keep every arch\n"
            f'{indent}    os.environ["TORCH_CUDA_ARCH_LIST"] = {value}\n'
        )

    return _ARCH_ENV_RE.sub(guarded, text, count=1), 1


_DEBUG_FLAG_RE = re.compile(r"""(['"])-g\1""")


def patch_debug_flags(text: str) -> tuple[str, int]:
    """Turn DeepSpeed's hard-coded ``'-g'`` into ``'-g0'``; returns the text and how many were changed.

    ``-g0`` rather than removal: Python's own CFLAGS carry ``-g`` and DeepSpeed's flags come
    last on the command line, so the last one wins. Debug info costs about 40% of the compile
    time and 98% of the size of a CPU op.

    >>> patch_debug_flags("return ['-O3', '-g', '-Wno-reorder']")
    ("return ['-O3', '-g0', '-Wno-reorder']", 1)
    """
    return _DEBUG_FLAG_RE.subn(lambda m: f"{m.group(1)}-g0{m.group(1)}", text)


_REQ_LINE_RE = re.compile(r"^\s*torch\s*(?:[<>=!~;\[]|$)", re.IGNORECASE)


def patch_torch_requirement(text: str, pin: str) -> tuple[str, int]:
    r"""Pin torch in DeepSpeed's ``requirements/requirements.txt`` (what ``install_requires`` reads).

    The build frontend (``python -m build``) then writes the pin into the
    wheel's METADATA itself; the post-processing pins it again, so both paths agree.

    >>> patch_torch_requirement("hjson\ntorch>=2.0.0\ntorchvision\n", "torch==2.14.*")
    ('hjson\ntorch==2.14.*\ntorchvision\n', 1)
    """
    lines = text.splitlines(keepends=True)
    count = 0
    for i, line in enumerate(lines):
        if _REQ_LINE_RE.match(line):
            lines[i] = pin + ("\n" if line.endswith("\n") else "")
            count += 1
    return "".join(lines), count


_CMDCLASS_RE = re.compile(r"^(?P<indent>[ \t]*)cmdclass\['build_ext'\] = .*$", re.MULTILINE)
_PER_EXTENSION = """\
{i}# dswheels: one build directory per extension, so that extensions build in parallel
{i}# (torch writes each extension's build.ninja into the build directory it is given)
{i}def _dswheels_per_extension(base):
{i}    import copy as _copy
{i}    class _PerExtensionBuildDir(base):
{i}        def build_extension(self, ext):
{i}            clone = _copy.copy(self)
{i}            clone.build_temp = os.path.join(self.build_temp, ext.name)
{i}            return base.build_extension(clone, ext)
{i}    return _PerExtensionBuildDir
{i}cmdclass['build_ext'] = _dswheels_per_extension(cmdclass['build_ext'])
"""


def patch_parallel_extensions(text: str) -> str:
    r"""Give every extension its own build directory in DeepSpeed's ``setup.py``.

    setuptools builds extensions in parallel with ``[build_ext] parallel = N``
    (``DIST_EXTRA_CONFIG``), but torch's ninja builds of two extensions would share one
    ``build/temp*/build.ninja`` and race on it. The same ``cmdclass['build_ext'] = ...`` line
    is in every DeepSpeed 0.14-0.19 setup.py; the wrapper goes right after it.

    >>> out = patch_parallel_extensions("if x:\n    cmdclass['build_ext'] = B.with_options(use_ninja=1)\n")
    >>> "    cmdclass['build_ext'] = _dswheels_per_extension(cmdclass['build_ext'])" in out
    True
    """
    matches = list(_CMDCLASS_RE.finditer(text))
    if len(matches) != 1:
        raise PatchError(f"setup.py: expected one `cmdclass['build_ext'] = ...` line, found {len(matches)}")
    match = matches[0]
    end = text.index("\n", match.end()) + 1 if "\n" in text[match.end() :] else len(text)
    return text[:end] + _PER_EXTENSION.format(i=match["indent"]) + text[end:]


def split_jobs(jobs: int, ops: int, parallel: int = 0) -> tuple[int, int]:
    """(extensions built at once, compile jobs for each): at most ``jobs`` compiles in all.

    >>> split_jobs(2, 6), split_jobs(16, 3), split_jobs(4, 6, parallel=1), split_jobs(4, 3)
    ((2, 1), (3, 5), (1, 4), (3, 1))
    """
    at_once = max(1, min(ops, parallel or jobs))
    return at_once, max(1, jobs // at_once)


# What one concurrent compile may take: nvcc's cicc/ptxas for one arch of a DeepSpeed kernel
# stays under ~2 GiB, a C++ translation unit against torch's headers under ~1 GiB; the system
# keeps 1 GiB. A hosted Windows runner (4 cores, 16 GB) then runs 4 compiles at a time, as
# peers found safe for lighter kernels (mjun0812 runs 2 for flash-attention's).
GIB = 1 << 30
_PER_COMPILE = {True: 2 * GIB, False: 1 * GIB}


def fit_jobs(cpus: int, available_memory: int | None, *, cuda: bool) -> tuple[int, str]:
    """Concurrent compiles for this machine: its cores, fewer when memory would not hold them.

    >>> fit_jobs(4, 14 * GIB, cuda=True)[0], fit_jobs(4, 5 * GIB, cuda=True)[0], fit_jobs(16, None, cuda=True)[0]
    (4, 2, 16)
    """
    cpus = max(1, cpus)
    if available_memory is None:
        return cpus, f"{cpus} core(s); available memory unknown"
    per = _PER_COMPILE[cuda]
    by_memory = max(1, (available_memory - GIB) // per)
    jobs = min(cpus, by_memory)
    why = f"{cpus} core(s), {available_memory / GIB:.1f} GiB available, ~{per // GIB} GiB per compile"
    return jobs, why


@dataclass(frozen=True, slots=True)
class Parallelism:
    """How ``jobs`` concurrent compiles are spent: extensions at once x ninja jobs x nvcc arch threads."""

    at_once: int  # extensions setuptools builds at the same time (build_ext --parallel)
    ninja_jobs: int  # MAX_JOBS: translation units ninja compiles at once within one extension
    nvcc_threads: int  # DS_NVCC_THREADS: archs one nvcc compiles at once (DeepSpeed's default: min(cores, 8))

    def describe(self) -> str:
        threads = f", {self.nvcc_threads} nvcc thread(s) each" if self.nvcc_threads > 1 else ""
        return f"{self.at_once} at a time with {self.ninja_jobs} compile job(s){threads}"


def split_parallelism(jobs: int, *, ops: int, archs: int, parallel: int = 0) -> Parallelism:
    """Spend about ``jobs`` concurrent compiles, never many more: nvcc's ``--threads`` multiplies ninja's jobs.

    DeepSpeed gives nvcc ``--threads=min(cores, 8)`` unless ``DS_NVCC_THREADS`` is set, so with
    ninja's jobs on top a 4-core runner would run 4 x 4 arch compiles at once. An extension's
    share goes to arch threads first (one ``.cu`` file per op is common and compiles every arch),
    the rest to ninja jobs.

    >>> split_parallelism(4, ops=1, archs=8)
    Parallelism(at_once=1, ninja_jobs=1, nvcc_threads=4)
    >>> split_parallelism(4, ops=16, archs=8), split_parallelism(4, ops=3, archs=0)
    (Parallelism(at_once=4, ninja_jobs=1, nvcc_threads=1), Parallelism(at_once=3, ninja_jobs=1, nvcc_threads=1))
    >>> split_parallelism(16, ops=2, archs=2)
    Parallelism(at_once=2, ninja_jobs=4, nvcc_threads=2)
    """
    at_once, per_op = split_jobs(jobs, ops, parallel)
    threads = max(1, min(per_op, archs)) if archs else 1
    return Parallelism(at_once=at_once, ninja_jobs=max(1, per_op // threads), nvcc_threads=threads)
