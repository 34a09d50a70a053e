"""The platform seam: what differs between the platforms, behind one Protocol and one table.

:data:`ALL_PLATFORMS` maps every :class:`~dswheels.kernel.model.Platform` to its module
(:mod:`dswheels.platforms.linux`, :mod:`dswheels.platforms.linux_aarch64`,
:mod:`dswheels.platforms.windows`); code that needs a per-OS
decision asks :func:`platform_module` (or, for pure data, :func:`dswheels.kernel.platform_traits.traits`)
instead of comparing OS names. Each module chooses the host its cells are built on from this machine
(:mod:`dswheels.platforms.hosts`): the Windows module between a Windows machine (MSVC, natively) and
Linux under Wine (:mod:`dswheels.platforms.wine`), the aarch64 module between an arm64 Linux and an arm64
root under qemu on x86_64 Linux (:mod:`dswheels.platforms.qemu`); no stage sees either.

Every arrow points down: this table imports the platform modules, they import their hosts and the
tool finders (:mod:`dswheels.platforms.find_tools`), and none of those imports this package's
``__init__`` or anything above the seam (the build, verify).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Protocol, runtime_checkable

from dswheels.host.machine import host_os
from dswheels.kernel.compat import Compat
from dswheels.kernel.model import OS, Platform
from dswheels.kernel.platform_traits import PlatformTraits, traits
from dswheels.kernel.versions import VersionTuple
from dswheels.platforms import linux, linux_aarch64, windows
from dswheels.platforms.find_tools import HostTools, find_nvcc_version
from dswheels.platforms.hosts import HostChoice, PlatformHost

__all__ = [
    "ALL_PLATFORMS",
    "OS",
    "HostChoice",
    "PlatformHost",
    "PlatformModule",
    "PlatformTraits",
    "detect_host",
    "platform_module",
    "traits",
]


@runtime_checkable
class PlatformModule(Protocol):
    """One OS's behaviour in a build (the data is its :attr:`traits`)."""

    @property
    def traits(self) -> PlatformTraits: ...

    def cuda_roots(self, env: Mapping[str, str], want: VersionTuple | None) -> list[Path]:
        """On this OS as the host: where a CUDA toolkit (``want``, or any) may be, after CUDA_HOME/CUDA_PATH."""
        ...

    def host_compilers(self, env: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
        """On this OS as the host: (the default GCC's major or '', the active MSVC toolsets)."""
        ...

    def toolkit_places(self, env: Mapping[str, str]) -> list[tuple[str, str]]:
        """On this OS as the host: every place conda or an installer may have put a toolkit, as spelled, and how
        it was found (doctor looks at them after CUDA_HOME, CUDA_PATH* and nvcc on PATH)."""
        ...

    def add_source_files(self, src: Path, compat: Compat) -> list[str]:
        """Write what DeepSpeed's setup.py needs on this OS and its sdist leaves out; notes for the log."""
        ...

    def host(self, choice: HostChoice, *, here: OS, machine: str = "x86_64") -> PlatformHost:
        """The host this platform's cells are built on from a machine that runs ``here`` on ``machine`` (its CPU,
        ``platform.machine()``), as ``choice`` (the command line's) allows."""
        ...


ALL_PLATFORMS: Mapping[Platform, PlatformModule] = MappingProxyType(
    {
        Platform.LINUX_X86_64: linux.PLATFORM,
        Platform.LINUX_AARCH64: linux_aarch64.PLATFORM,
        Platform.WIN_AMD64: windows.PLATFORM,
    }
)


def platform_module(of: Platform | OS) -> PlatformModule:
    """The module of a wheel platform or of an OS."""
    return ALL_PLATFORMS[of if isinstance(of, Platform) else traits(of).platform]


def detect_host(env: Mapping[str, str] | None = None) -> HostTools:
    """This machine's compilers and nvcc (CUDA_HOME/CUDA_PATH first, then where its OS keeps toolkits)."""
    env = dict(os.environ) if env is None else env
    os_name = host_os()
    module = platform_module(os_name)
    gcc, msvc = module.host_compilers(env)
    return HostTools(os=os_name, gcc=gcc, msvc=msvc, nvcc=find_nvcc_version(env, module.cuda_roots(env, None)))
