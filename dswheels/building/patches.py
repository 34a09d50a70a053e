"""The patches dswheels makes to a DeepSpeed source tree before building it, as text in, text out.

Each patch says why DeepSpeed's own code would make a wrong or slow wheel (``-march=native``,
GCC flags on Windows, one op's arch list leaking into the next, debug info, one build
directory for all extensions) and fails with :class:`PatchError` when the source does not
look the way the patch expects (a new DeepSpeed layout), instead of building unpatched.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from dswheels.kernel.wheel_contents import PATCH_MARK, PORTABLE_MARK
from dswheels.probes.isa_variants import fill_constant

__all__ = [
    "BUILDER_FILES",
    "CPU_BUILDER_FILES",
    "DEBUG_FLAG_FILES",
    "PatchError",
    "patch_arch_list_leak",
    "patch_cpu_builder_win32",
    "patch_debug_flags",
    "patch_env_report_variants",
    "patch_isa_levels",
    "patch_parallel_extensions",
    "patch_portable_cpu",
    "patch_setup_variants",
    "patch_torch_requirement",
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

# What the portable-CPU patch writes, and what verify looks for in a wheel's op builder


class PatchError(ValueError):
    """The DeepSpeed source does not look the way the patch expects (a new DeepSpeed layout)."""


_CPU_ARCH_RE = re.compile(r"^(    )def cpu_arch\(self\):\n", re.MULTILINE)
_SIMD_RE = re.compile(r"^(    )def simd_width\(self\):\n", re.MULTILINE)


def _insert_return(text: str, pattern: re.Pattern[str], value: str, *, what: str, filename: str) -> str:
    matches = pattern.findall(text)
    if len(matches) != 1:
        raise PatchError(
            f"{filename}: expected exactly one `def {what}(self):` in class OpBuilder, found {len(matches)}",
        )
    line = (
        f"        return getattr(self, 'dswheels_{what}', {value!r})  {PORTABLE_MARK} instead of the build host's "
        "CPU (a level's when dswheels builds the op at each level)\n"
    )
    return pattern.sub(lambda m: m.group(0) + line, text, count=1)


def patch_portable_cpu(text: str, *, arch_flag: str, simd_flag: str, filename: str = "builder.py") -> str:
    """Make ``OpBuilder.cpu_arch()``/``simd_width()`` return the baseline instead of probing the host.

    DeepSpeed returns ``-march=native`` and a SIMD define read from the build host's CPU, so a
    wheel built on an AVX-512 runner dies with SIGILL on older CPUs. An early ``return`` after
    each ``def`` line (the same in every version 0.14-0.19) turns the old body into dead code. A
    builder given ``dswheels_cpu_arch``/``dswheels_simd_width`` returns those instead: how the
    build compiles an op once per ISA level (dswheels.probes.isa_variants).

    >>> src = "class OpBuilder:\\n    def cpu_arch(self):\\n        return '-march=native'\\n" \\
    ...       "    def simd_width(self):\\n        return '-D__AVX512__'\\n"
    >>> out = patch_portable_cpu(src, arch_flag="-march=x86-64-v2", simd_flag="-D__SCALAR__")
    >>> "return getattr(self, 'dswheels_cpu_arch', '-march=x86-64-v2')" in out
    True
    >>> "return getattr(self, 'dswheels_simd_width', '-D__SCALAR__')" in out
    True
    """
    if PATCH_MARK in text:
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
        if sys.platform == "win32":  {PATCH_MARK} cl stops at -Wno-reorder (D8021); CUDAOpBuilder's win32 flags
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
    if PATCH_MARK in text:
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
            f"{indent}if self.jit_mode:  {PATCH_MARK} ahead-of-time builds pass -gencode; later ops keep every arch\n"
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
{i}# (torch writes each extension's build.ninja into the build directory it is given); the longest
{i}# first (DSWHEELS_EXT_ORDER), each thread holding a slot of the build's jobserver while its extension
{i}# builds (DSWHEELS_JOBSERVER: ninja takes one more for every further unit it runs at once)
{i}def _dswheels_per_extension(base):
{i}    import copy as _copy
{i}    class _Slot:
{i}        def __init__(self, auth):
{i}            self.auth = auth
{i}        def __enter__(self):
{i}            if self.auth.startswith('fifo:'):
{i}                self.fd = os.open(self.auth[5:], os.O_RDWR)
{i}                self.token = os.read(self.fd, 1)
{i}            elif self.auth:
{i}                import ctypes
{i}                from ctypes import wintypes
{i}                self.k32 = ctypes.WinDLL('kernel32')
{i}                self.k32.OpenSemaphoreW.restype = wintypes.HANDLE
{i}                self.k32.OpenSemaphoreW.argtypes = (wintypes.DWORD, wintypes.BOOL, wintypes.LPCWSTR)
{i}                self.k32.WaitForSingleObject.argtypes = (wintypes.HANDLE, wintypes.DWORD)
{i}                self.k32.ReleaseSemaphore.argtypes = (wintypes.HANDLE, wintypes.LONG, wintypes.LPVOID)
{i}                self.k32.CloseHandle.argtypes = (wintypes.HANDLE,)
{i}                self.handle = self.k32.OpenSemaphoreW(0x00100000 | 0x0002, False, self.auth)
{i}                self.k32.WaitForSingleObject(self.handle, 0xFFFFFFFF)
{i}            return self
{i}        def __exit__(self, *exc):
{i}            if self.auth.startswith('fifo:'):
{i}                os.write(self.fd, self.token)
{i}                os.close(self.fd)
{i}            elif self.auth:
{i}                self.k32.ReleaseSemaphore(self.handle, 1, None)
{i}                self.k32.CloseHandle(self.handle)
{i}    class _PerExtensionBuildDir(base):
{i}        def build_extensions(self):
{i}            order = [m for m in os.environ.get('DSWHEELS_EXT_ORDER', '').split(',') if m]
{i}            self.extensions.sort(key=lambda e: order.index(e.name) if e.name in order else len(order))
{i}            # setuptools' threads start in this order but race for the pool's slots: each takes its slot only
{i}            # after the extension before it has taken one, so the longest really starts first
{i}            import threading as _threading
{i}            self._dswheels_turns = {{id(e): n for n, e in enumerate(self.extensions)}}
{i}            self._dswheels_next = [0]
{i}            self._dswheels_turn = _threading.Condition()
{i}            # MSVC's compiler set up once, before setuptools' threads: torch initializes it lazily
{i}            # in whichever thread compiles first, and a second initialize() asserts
{i}            if getattr(self.compiler, 'compiler_type', '') == 'msvc' and not self.compiler.initialized:
{i}                self.compiler.initialize()
{i}            return base.build_extensions(self)
{i}        def build_extension(self, ext):
{i}            # the .cu units first (each compiles every arch): ninja starts its edges in this order
{i}            if os.environ.get('DSWHEELS_EXT_ORDER'):
{i}                ext.sources.sort(key=lambda s: not str(s).endswith('.cu'))
{i}            clone = _copy.copy(self)
{i}            clone.build_temp = os.path.join(self.build_temp, ext.name)
{i}            turn = getattr(self, '_dswheels_turns', {{}}).get(id(ext))
{i}            if turn is not None:
{i}                with self._dswheels_turn:
{i}                    self._dswheels_turn.wait_for(lambda: self._dswheels_next[0] >= turn)
{i}            slot = _Slot(os.environ.get('DSWHEELS_JOBSERVER', ''))
{i}            try:
{i}                slot.__enter__()
{i}            finally:  # the next extension's turn, even if this one could not take a slot
{i}                if turn is not None:
{i}                    with self._dswheels_turn:
{i}                        self._dswheels_next[0] = max(self._dswheels_next[0], turn + 1)
{i}                        self._dswheels_turn.notify_all()
{i}            try:
{i}                return base.build_extension(clone, ext)
{i}            finally:
{i}                slot.__exit__(None, None, None)
{i}    return _PerExtensionBuildDir
{i}cmdclass['build_ext'] = _dswheels_per_extension(cmdclass['build_ext'])
"""


def patch_parallel_extensions(text: str) -> str:
    r"""Give every extension its own build directory in DeepSpeed's ``setup.py``, start the longest first
    and let each hold a slot of the build's jobserver (dswheels.building.effects.jobserver) while it builds.

    setuptools builds extensions in parallel with ``[build_ext] parallel = N``
    (``DIST_EXTRA_CONFIG``), but torch's ninja builds of two extensions would share one
    ``build/temp*/build.ninja`` and race on it (measured under Wine: 3 of 5 builds of four
    extensions failed with LNK1181 on an object another extension's ninja file left out). With
    MSVC the compiler is also set up before the threads start: torch's ``win_wrap_ninja_compile``
    calls ``initialize()`` in whichever thread compiles first, and setuptools asserts it runs once
    (not seen in 10 builds of four extensions, but nothing but timing kept it from happening).
    The same ``cmdclass['build_ext'] = ...`` line
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


# setup.py, right after the loop that fills ext_modules (and the pin_memory dependents, 0.19.5+): 0.14-0.19.8
_INSTALL_OPS_RE = re.compile(r"^print\(f'Install Ops=\{install_ops\}'\)$", re.MULTILINE)
_SETUP_VARIANTS = f"""\
{PATCH_MARK} one extension per CPU ISA level of each op whose builder passes cpu_arch()/simd_width() on,
# and the module that loads the one the CPU runs (dswheels_isa_variants.py, deepspeed/dswheels_isa.py)
import dswheels_isa_variants

ext_modules = dswheels_isa_variants.add_variants(ext_modules, ALL_OPS, install_ops)
"""


def patch_setup_variants(text: str) -> str:
    r"""Make DeepSpeed's ``setup.py`` build each op with SIMD paths once per ISA level.

    The ops are in ``ext_modules`` and ``install_ops`` by the ``print(f'Install Ops=...')`` line in
    every 0.14-0.19 setup.py; the variants replace them there (dswheels.probes.isa_variants).

    >>> out = patch_setup_variants("ext_modules = []\nprint(f'Install Ops={install_ops}')\n")
    >>> print(out.splitlines()[-2])
    ext_modules = dswheels_isa_variants.add_variants(ext_modules, ALL_OPS, install_ops)
    """
    found = _INSTALL_OPS_RE.findall(text)
    if len(found) != 1:
        raise PatchError(f"setup.py: expected one `print(f'Install Ops={{install_ops}}')` line, found {len(found)}")
    return _INSTALL_OPS_RE.sub(lambda m: _SETUP_VARIANTS + m.group(0), text, count=1)


# deepspeed/env_report.py, debug_report(): the last line of the environment block in 0.14-0.19.8
_SHM_REPORT_RE = re.compile(
    r'^(?P<i>[ ]+)report\.append\(\("shared memory \(/dev/shm\) size", get_shm_size\(\)\)\)$', re.MULTILINE
)


def patch_env_report_variants(text: str) -> str:
    r"""Make ``ds_report`` say which ISA variant of the CPU ops loads here, of which, and why.

    >>> src = '    report.append(("shared memory (/dev/shm) size", get_shm_size()))\n'
    >>> 'report.append(("cpu op isa variants", _dswheels_isa()))' in patch_env_report_variants(src)
    True
    """
    found = _SHM_REPORT_RE.findall(text)
    if len(found) != 1:
        raise PatchError(f"deepspeed/env_report.py: expected one shared memory report line, found {len(found)}")

    def line(match: re.Match[str]) -> str:
        i = match["i"]
        return (
            f"{i}from deepspeed.dswheels_isa import describe as _dswheels_isa  {PATCH_MARK} the CPU ops' ISA variant\n"
            f'{i}report.append(("cpu op isa variants", _dswheels_isa()))\n' + match.group(0)
        )

    return _SHM_REPORT_RE.sub(line, text, count=1)


def patch_isa_levels(text: str, rows: Sequence[tuple[object, ...]]) -> str:
    r"""The helper or dispatch module's text (dswheels.probes.isa_variants, isa_dispatch) with its ``LEVELS`` set.

    >>> patch_isa_levels("LEVELS: tuple[tuple[str, str], ...] = ()\n", [("default", "x86-64-v2")])
    "LEVELS: tuple[tuple[str, str], ...] = (('default', 'x86-64-v2'),)\n"
    """
    try:
        return fill_constant(text, "LEVELS", tuple(tuple(row) for row in rows))
    except ValueError as exc:
        raise PatchError(str(exc)) from None
