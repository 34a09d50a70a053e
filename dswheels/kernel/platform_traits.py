"""What differs between the platforms dswheels builds for, as data: one row per wheel
:class:`~dswheels.kernel.model.Platform`.

Two rows share an OS (``linux_x86_64`` and ``linux_aarch64``): what follows from the OS (suffixes,
paths, the compiler family) is the same in both, what follows from the CPU (the runner, the CUDA
archives' platform, the toolkit's ``targets/`` folder, how machine code is read) differs. Asked by OS
(:func:`traits` of an OS, :func:`conventions`), the OS's first row answers: only OS facts are asked so.

Pure (no IO): the core reads it as much as the effects do. The behaviour that differs (finding the
toolchain, checking a built wheel's runtime) is in :mod:`dswheels.platforms`, behind
:class:`dswheels.platforms.PlatformModule`.
"""

from __future__ import annotations

import ntpath
import posixpath
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import Enum
from types import MappingProxyType

from dswheels.kernel.model import OS, Platform

__all__ = [
    "ALL_TRAITS",
    "CUDA_LIBRARY_HEADERS",
    "PlatformTraits",
    "QemuCompilers",
    "WineCudaSource",
    "conventions",
    "first_on_path",
    "known_os",
    "machine_platform",
    "msvc_bin_dir",
    "traits",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class PlatformTraits:
    """One platform's names, suffixes and layouts."""

    os: OS
    platform: Platform  # the wheel platform tag dswheels builds for it
    machine: str  # the CPU architecture (``platform.machine()`` normalized): "x86_64" | "aarch64"
    # how compat.yml keys what torch publishes for it (torch.<M.m>.python/variants, arch list rows): the OS's
    # name for its first platform, the platform's tag for the others
    compat_key: str
    cuda_redist: str  # the platform key of NVIDIA's redistrib JSON ("linux-sbsa": arm64 servers, not Jetson)
    label: str  # how the index page names its wheels, short ("linux", "aarch64", "windows")
    sys_platform: str  # ``sys.platform`` there: what DeepSpeed's builders and setup.py test
    runner_image: str  # the GitHub-hosted image wheels.yml builds it on (the one place that names it)
    compiler: str  # the host compiler family: "msvc" | "gcc" (the CPU baseline's flag is named by it)
    exe_suffix: str
    extension_suffix: str  # of a compiled extension module
    venv_python: str  # a venv's interpreter, relative to the venv
    python_command: str  # how a person starts Python 3 there
    path_syntax: str  # "nt" | "posix": how its paths are spelled and compared (os.path's flavour there)
    max_path: int | None  # the longest path a program opens without opting in (Windows' MAX_PATH); None: no limit
    include_var: str  # the compiler's extra header search path variable
    cuda_root_var: str | None  # the variable torch's cpp_extension reads the CUDA root from, set by the build
    toolkit_include_dirs: tuple[str, ...]  # a CUDA root's header directories
    toolkit_lib_paths: tuple[str, ...]  # a CUDA root's import/shared library of ``{lib}``, in search order
    cuda_root_links: tuple[tuple[str, str], ...]  # links a root merged from NVIDIA's archives needs (link, target)
    runtime_floor: bool  # its wheels promise a glibc/libstdc++ floor (manylinux-style symbol versions)

    def exe(self, name: str) -> str:
        """``name`` as an executable's file name there (``nvcc`` -> ``nvcc.exe`` on Windows)."""
        return name + self.exe_suffix

    def lib_paths(self, lib: str) -> tuple[str, ...]:
        """Where a CUDA root keeps the library ``lib`` (``curand`` -> ``lib/x64/curand.lib``)."""
        return tuple(p.format(lib=lib) for p in self.toolkit_lib_paths)

    @property
    def venv_scripts(self) -> str:
        """A venv's folder of scripts (``Scripts`` on Windows, ``bin`` elsewhere)."""
        return self.venv_python.split("/")[0]

    def norm_path(self, path: str) -> str:
        """``path`` as the OS compares it (Windows: case-insensitive, either slash).

        >>> traits("windows").norm_path("C:/CUDA/v12.8/") == traits("windows").norm_path(r"c:\\cuda\\V12.8")
        True
        """
        if self.path_syntax == "nt":
            return ntpath.normpath(path).lower()
        return posixpath.normpath(path)

    def dirname(self, path: str) -> str:
        """The folder of ``path``, spelled as the OS spells paths."""
        return ntpath.dirname(path) if self.path_syntax == "nt" else posixpath.dirname(path)

    def join(self, *parts: str) -> str:
        """``parts`` joined as the OS joins paths (``C:\\venv\\Scripts``, ``/venv/bin``)."""
        return ntpath.join(*parts) if self.path_syntax == "nt" else posixpath.join(*parts)


_LINUX_X86_64 = PlatformTraits(
    os=OS.LINUX,
    platform=Platform.LINUX_X86_64,
    machine="x86_64",
    compat_key="linux",
    cuda_redist="linux-x86_64",
    label="linux",
    sys_platform="linux",
    runner_image="manylinux_2_28",  # a container on ubuntu-24.04 (compat.yml runner_images)
    compiler="gcc",
    exe_suffix="",
    extension_suffix=".so",
    venv_python="bin/python",
    python_command="python3",
    path_syntax="posix",
    max_path=None,
    include_var="CPATH",
    cuda_root_var=None,
    toolkit_include_dirs=("include", "targets/x86_64-linux/include"),
    toolkit_lib_paths=("lib64/lib{lib}.so", "lib/lib{lib}.so", "targets/x86_64-linux/lib/lib{lib}.so"),
    # nvcc.profile looks in $(TOP)/targets/x86_64-linux/ (the installer's layout, not the archives'), and
    # DeepSpeed's op builders link with -L$CUDA_HOME/lib64 where the archives have lib/
    cuda_root_links=(
        ("lib64", "lib"),
        ("targets/x86_64-linux/include", "../../include"),
        ("targets/x86_64-linux/lib", "../../lib"),
    ),
    runtime_floor=True,
)

ALL_TRAITS: Mapping[Platform, PlatformTraits] = MappingProxyType(
    {
        Platform.LINUX_X86_64: _LINUX_X86_64,
        # the same OS on Arm's 64-bit servers (NVIDIA's "sbsa": Grace, Graviton, Ampere, Cobalt): what follows
        # from the CPU differs; GitHub's arm64 runners are their own images (updates-2026-11-28, runner images)
        Platform.LINUX_AARCH64: replace(
            _LINUX_X86_64,
            platform=Platform.LINUX_AARCH64,
            machine="aarch64",
            compat_key="linux_aarch64",
            cuda_redist="linux-sbsa",
            label="aarch64",
            runner_image="manylinux_2_28_aarch64",  # a container on ubuntu-24.04-arm
            # nvcc.profile's $(_TARGET_DIR_) on an arm64 server is targets/sbsa-linux (targets/aarch64-linux is Jetson)
            toolkit_include_dirs=("include", "targets/sbsa-linux/include"),
            toolkit_lib_paths=("lib64/lib{lib}.so", "lib/lib{lib}.so", "targets/sbsa-linux/lib/lib{lib}.so"),
            cuda_root_links=(
                ("lib64", "lib"),
                ("targets/sbsa-linux/include", "../../include"),
                ("targets/sbsa-linux/lib", "../../lib"),
            ),
        ),
        Platform.WIN_AMD64: PlatformTraits(
            os=OS.WINDOWS,
            platform=Platform.WIN_AMD64,
            machine="x86_64",
            compat_key="windows",
            cuda_redist="windows-x86_64",
            label="windows",
            sys_platform="win32",
            runner_image="windows-2022",
            compiler="msvc",
            exe_suffix=".exe",
            extension_suffix=".pyd",
            venv_python="Scripts/python.exe",
            python_command="python",
            path_syntax="nt",
            max_path=260,
            include_var="INCLUDE",
            cuda_root_var="CUDA_PATH",
            toolkit_include_dirs=("include",),
            toolkit_lib_paths=("lib/x64/{lib}.lib",),
            cuda_root_links=(),  # the archives have the layout nvcc.profile and torch use (lib/x64)
            runtime_floor=False,
        ),
    }
)

# the row an OS answers for when asked by OS: only what follows from the OS is asked so
_OS_ROW = MappingProxyType({OS.LINUX: Platform.LINUX_X86_64, OS.WINDOWS: Platform.WIN_AMD64})


def traits(of: OS | Platform | str) -> PlatformTraits:
    """The row of a wheel platform, of an OS, or of an OS's name (``"windows"``, as compat.yml spells it).

    >>> traits(Platform.WIN_AMD64).extension_suffix, traits("linux").include_var
    ('.pyd', 'CPATH')
    >>> traits(Platform.LINUX_AARCH64).cuda_redist, traits("linux").cuda_redist
    ('linux-sbsa', 'linux-x86_64')
    """
    if isinstance(of, Platform):
        return ALL_TRAITS[of]
    return ALL_TRAITS[_OS_ROW[OS(of)]]


_MACHINES = MappingProxyType({"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"})


def machine_platform(os_name: str, machine: str) -> Platform | None:
    """The wheel platform of a machine running ``os_name`` on ``machine`` (``platform.machine()``: ``AMD64`` on
    Windows, ``arm64`` on some systems); None where dswheels builds none.

    >>> machine_platform("linux", "aarch64"), machine_platform("windows", "AMD64"), machine_platform("windows", "ARM64")
    (<Platform.LINUX_AARCH64: 'linux_aarch64'>, <Platform.WIN_AMD64: 'win_amd64'>, None)
    """
    arch = _MACHINES.get(machine.lower())
    return next((row.platform for row in ALL_TRAITS.values() if row.os == os_name and row.machine == arch), None)


def conventions(os_name: str) -> PlatformTraits:
    """The row whose file layout a machine of ``os_name`` (``platform.system()``, lower case) follows: Windows'
    for Windows, Linux's (POSIX) for every other, as doctor reads any machine.

    >>> conventions("darwin").exe("nvcc"), conventions("windows").exe("nvcc")
    ('nvcc', 'nvcc.exe')
    """
    return traits(OS.WINDOWS if os_name == OS.WINDOWS else OS.LINUX)


def known_os(os_name: str) -> PlatformTraits | None:
    """The row of ``os_name`` (``platform.system()``, lower case) when dswheels builds for that OS, else None: what
    only such a machine has (its compiler, its runtime floor, its path limit) is judged there alone.

    >>> known_os("windows").compiler, known_os("darwin")
    ('msvc', None)
    """
    return traits(os_name) if os_name in _OS_ROW else None


CUDA_LIBRARY_HEADERS = ("cublas_v2.h", "cublasLt.h", "cusparse.h", "cusolverDn.h", "curand.h")


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


class WineCudaSource(str, Enum):
    """Where the Wine host takes the CUDA components from (``--wine-cuda``)."""

    AUTO = "auto"  # PyPI's wheels from CUDA 13 (they carry nvcc.exe), NVIDIA's archives before
    PYPI = "pypi"  # NVIDIA's wheels on PyPI
    NVIDIA = "nvidia"  # NVIDIA's redistributable archives (compat.yml pins the release's JSON)

    def __str__(self) -> str:
        return self.value


class QemuCompilers(str, Enum):
    """Which GCC compiles a build in the arm64 root under qemu (``--qemu-compilers``)."""

    AUTO = "auto"  # this machine's aarch64 cross GCC where it is the root's GCC release, else the root's own
    HOST = "host"  # this machine's aarch64 cross GCC, or an error saying what is missing
    EMULATED = "emulated"  # the root's own arm64 GCC, emulated (about an hour per op on 2 cores)

    def __str__(self) -> str:
        return self.value
