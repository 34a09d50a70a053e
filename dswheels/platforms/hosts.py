"""The hosts a platform's cells are built on from this machine, behind the Protocols the build uses.

A platform's module chooses its host for the machine at hand
(:meth:`dswheels.platforms.PlatformModule.host`): :class:`Native` when the machine runs the
platform's OS, Wine for a Windows cell on Linux (:mod:`dswheels.platforms.wine.platform_host`), and
:class:`Elsewhere` when there is none here (the cell's source is only prepared). The stages see a
:class:`PlatformHost` and nothing behind it: no stage imports a platform's module or its hosts'.

What the command line chose for the hosts (:class:`HostChoice`: ``--msvc-root`` and the Wine flags)
is made once by the command and handed to the platform unread.

A host answers a build in two steps: :meth:`PlatformHost.check` before anything is downloaded (its
:class:`CheckedTools`), then :meth:`CheckedTools.assemble` once the build interpreter is ready: a
:class:`CrossToolchain` from a host that runs another OS's tools on this machine (Wine), None from
a native one, whose tools are already on the machine.

A host of another CPU (qemu for ``linux_aarch64`` on x86_64, :mod:`dswheels.platforms.qemu`) cannot lend
single tools: every program of the build (the interpreter, uv, g++, ninja) is the other CPU's. It answers
:meth:`PlatformHost.machine` instead: an :class:`EmulatedMachine` that the whole build of a cell runs in,
the same ``dswheels build`` as on a runner of that CPU.

A host that runs another OS's interpreter here (Wine) also gives verify a fresh venv of it with a wheel
installed by that interpreter's own installer (:meth:`PlatformHost.wheel_venv`, a :class:`WheelVenv`); a
native host gives none (verify makes its venvs with uv), nor does a machine with no host for the platform.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Protocol, TypeAlias

from dswheels.cuda.redist import REDIST_URL
from dswheels.host.cache import CacheLayout
from dswheels.host.log import get_reporter
from dswheels.host.venvs import Interpreter
from dswheels.kernel.compat import Compat
from dswheels.kernel.errors import EnvironmentMismatchError
from dswheels.kernel.model import OS, PlannedCell, Python
from dswheels.kernel.naming import cell_id
from dswheels.kernel.platform_traits import QemuCompilers, WineCudaSource, traits
from dswheels.kernel.sources import TorchSource
from dswheels.kernel.versions import VersionTuple, format_version
from dswheels.platforms.find_tools import CudaInstall, MsvcEnv, check_msvc, find_cuda

__all__ = [
    "BuildTools",
    "CheckedTools",
    "CrossToolchain",
    "CudaRoots",
    "Elsewhere",
    "EmulatedMachine",
    "HostChoice",
    "HostKind",
    "LendsNoVenv",
    "Native",
    "PlatformHost",
    "QemuSettings",
    "WheelVenv",
    "WineSettings",
    "planned_cuda",
    "prepared_only",
]


class HostKind(str, Enum):
    """How a platform's cells are hosted on this machine."""

    NATIVE = "native"  # the machine runs the platform's OS: its own compilers
    WINE = "wine"  # Windows' compilers and interpreter on Linux, under Wine
    QEMU = "qemu"  # another CPU's Linux (an arm64 Debian root) on this Linux machine, under qemu-user
    NONE = "none"  # no host here: a cell's source is only prepared (--prepare-only)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, kw_only=True, slots=True)
class WineSettings:
    """The Wine host's configuration: ``--msvc-root``, ``--wine-cuda`` and ``--cuda-redist-url``."""

    msvc_root: Path  # MSVC and the Windows SDK (msvc-wine's vsdownload.py, or a copied install)
    cuda_source: WineCudaSource = WineCudaSource.AUTO  # where the CUDA components come from
    cuda_redist_url: str = REDIST_URL  # NVIDIA's redist folder or a mirror (cuda_source nvidia)


@dataclass(frozen=True, kw_only=True, slots=True)
class QemuSettings:
    """The qemu host's configuration (``--qemu``, ``--qemu-root``, ``--qemu-compilers``): where the arm64 Linux
    root is, and which GCC compiles in it."""

    root: Path | None = None  # an arm64 Debian/Ubuntu root; None: dswheels makes one under the cache (debootstrap)
    compilers: QemuCompilers = QemuCompilers.AUTO


@dataclass(frozen=True, kw_only=True, slots=True)
class HostChoice:
    """What the command line chose for this machine's hosts; the stages hand it to the platforms unread."""

    wine: WineSettings | None = None  # Windows cells on Linux: built under Wine (None: only prepared)
    qemu: QemuSettings | None = None  # linux_aarch64 cells on x86_64 Linux: built under qemu (None: only prepared)


class EmulatedMachine(Protocol):
    """A machine of another CPU on this one (an arm64 root under qemu-user): a cell's whole build runs in it,
    ``dswheels build`` itself, natively there, with this machine's paths it is given visible at the same paths."""

    def describe(self) -> str:
        """What it is, for the log and the manifest (``Debian bookworm arm64 under qemu-aarch64 7.2``)."""
        ...

    def run_dswheels(
        self, argv: Sequence[str], *, visible: Sequence[Path], cache: CacheLayout, log: Path, timeout: float | None
    ) -> None:
        """``dswheels *argv`` in the machine (dswheels installed there first, from this one's code); raises a
        :class:`~dswheels.kernel.errors.BuildError` when it fails."""
        ...

    def venv(
        self,
        python: Python,
        *,
        where: Path,
        requirements: Sequence[str],
        index_args: Sequence[str],
        cpu: str | None,
        log: Path | None,
    ) -> Path:
        """A new venv of the machine's ``python`` at ``where`` (this machine's folder) with ``requirements``
        installed (the machine's platform's wheels, fetched here); returns a program of this machine that runs
        the venv's interpreter under emulation, with this machine's paths as they are, as the CPU model ``cpu``
        (the emulator's name; None: its default, every feature it implements)."""
        ...


class CrossToolchain(Protocol):
    """Another OS's toolchain run on this machine for one cell (Wine's), put together once the build interpreter
    is ready: its tools through scripts first on PATH, the build's scripts through an interpreter answering as
    that OS."""

    @property
    def bin_dir(self) -> Path:
        """The tool scripts: first on PATH, before the interpreter's own scripts (its link.exe must win)."""
        ...

    @property
    def python(self) -> Path:
        """What runs the build's scripts (setup.py, the op probes): the build interpreter, answering as the OS."""
        ...

    @property
    def cuda_home(self) -> Path | None:
        """The CUDA root whose bin/nvcc runs the OS's nvcc (None: a CPU cell)."""
        ...

    @property
    def msvc(self) -> MsvcEnv:
        """The MSVC whose link.exe the build must find first on PATH."""
        ...

    @property
    def setuptools_compiler(self) -> str:
        """The compiler setuptools is told to use (``DIST_EXTRA_CONFIG``)."""
        ...

    @property
    def library_dirs(self) -> tuple[str, ...]:
        """Where the extensions' link finds the interpreter's import library."""
        ...

    @property
    def no_compiler_cache(self) -> str:
        """Why no compiler cache runs under it (said when one was asked for)."""
        ...

    def env(self, *, ext_suffix: str) -> dict[str, str]:
        """What the build's environment gets from the host, on top of the platform's own."""
        ...

    def tool_versions(self) -> dict[str, str]:
        """The manifest's toolchain entries the host's tools give (tool -> version line)."""
        ...

    def describe(self) -> dict[str, object]:
        """The manifest's record of the host (``windows_host``, docs/manifest.md)."""
        ...


class CheckedTools(Protocol):
    """A host's tools for one cell, checked before anything is downloaded, installed or compiled."""

    @property
    def foreign(self) -> bool:
        """The cell is for another OS and there is no host for it here: only its source is prepared."""
        ...

    @property
    def foreign_interpreter(self) -> bool:
        """The build interpreter runs on another OS than the cell's: its platform is not the cell's."""
        ...

    @property
    def cuda(self) -> CudaInstall | None:
        """The plan's toolkit on this machine (CUDA cells built natively)."""
        ...

    @property
    def msvc(self) -> MsvcEnv | None:
        """The active MSVC (Windows cells built natively)."""
        ...

    def assemble(
        self,
        planned: PlannedCell,
        *,
        compat: Compat,
        work: Path,
        cache: CacheLayout,
        interp: Interpreter,
        index_args: Sequence[str],
        log: Path,
    ) -> CrossToolchain | None:
        """What the host puts together once ``interp`` (the build interpreter) is ready; None: nothing (native)."""
        ...


class WheelVenv(Protocol):
    """A fresh venv of the platform's interpreter on this machine with a wheel and its torch installed by that
    interpreter's own installer; verify's probes run in it."""

    @property
    def python(self) -> Path:
        """What runs a probe in the venv, with this machine's paths as arguments (under Wine: a launcher)."""
        ...

    @property
    def interpreter(self) -> str:
        """What the interpreter is, said in a check (``CPython 3.11.2 built under wine-8.0``)."""
        ...


class PlatformHost(Protocol):
    """Where a platform's cells are built from this machine: natively, under Wine, or nowhere (only prepared)."""

    @property
    def kind(self) -> HostKind: ...

    @property
    def strips_symbols(self) -> bool:
        """Whether post-processing strips the cell's extensions here (binutils' strip, ELF only)."""
        ...

    def machine(self, *, cache: CacheLayout, log: Path | None) -> EmulatedMachine | None:
        """The machine of another CPU a cell's whole build runs in (qemu), made ready (``cache`` keeps it); None:
        the build runs here."""
        ...

    def check(
        self, planned: PlannedCell, inherited: Mapping[str, str], *, prepare_only: bool, cache: CacheLayout
    ) -> CheckedTools:
        """The cell's compilers on this host, checked (``prepare_only``: the cell is only prepared)."""
        ...

    def finish(self, *, cache: CacheLayout, env: Mapping[str, str]) -> None:
        """What is left to do once a build on the host ended, passed or not (Wine's server to stop)."""
        ...

    def wheel_venv(
        self,
        wheel: Path,
        requirements: Sequence[str],
        *,
        python: VersionTuple,
        torch_source: TorchSource,
        plan_index: str,
        wheel_deps: bool,
        cache: CacheLayout,
        log: Path | None,
    ) -> AbstractContextManager[WheelVenv] | None:
        """A fresh venv of the platform's interpreter for Python ``python`` with ``requirements`` and ``wheel`` (with
        its dependencies unless not ``wheel_deps``), removed on the way out; None where this host has no such
        interpreter of its own to offer (natively: verify's uv venvs; no host: nothing runs)."""
        ...


@dataclass(frozen=True, kw_only=True, slots=True)
class BuildTools:
    """:class:`CheckedTools` of a native host, or of none (``foreign``): nothing to assemble."""

    foreign: bool  # the cell is for another OS: only its source is prepared here
    cuda: CudaInstall | None  # the plan's toolkit (CUDA variants built here)
    msvc: MsvcEnv | None  # the active MSVC (Windows)

    @property
    def foreign_interpreter(self) -> bool:
        return self.foreign

    def assemble(
        self,
        planned: PlannedCell,  # noqa: ARG002 - a native host's tools are all found already
        *,
        compat: Compat,  # noqa: ARG002
        work: Path,  # noqa: ARG002
        cache: CacheLayout,  # noqa: ARG002
        interp: Interpreter,  # noqa: ARG002
        index_args: Sequence[str],  # noqa: ARG002
        log: Path,  # noqa: ARG002
    ) -> None:
        return None


# where an OS keeps CUDA toolkits (``want``'s, or any): dswheels.platforms.PlatformModule.cuda_roots
CudaRoots: TypeAlias = Callable[[Mapping[str, str], VersionTuple | None], list[Path]]


def planned_cuda(planned: PlannedCell, inherited: Mapping[str, str], roots: CudaRoots) -> CudaInstall | None:
    """The plan's toolkit on this machine, for a CUDA cell built natively (EnvironmentMismatchError if absent)."""
    if not planned.cell.variant.is_cuda:
        return None
    tc = planned.toolchain
    assert tc.nvcc is not None  # noqa: S101 - the plan gives CUDA variants an nvcc
    cuda = find_cuda(tc.nvcc, inherited, roots(inherited, tc.nvcc))
    get_reporter().info(f"nvcc {format_version(cuda.version)} at {cuda.home} (the plan's {format_version(tc.nvcc)})")
    return cuda


class LendsNoVenv:
    """A host that lends verify no venv (:meth:`PlatformHost.wheel_venv` answers None): on its own OS verify makes
    the venv with uv; under qemu it runs the wheel in the emulated machine; elsewhere no interpreter of the
    platform runs here."""

    __slots__ = ()

    def wheel_venv(
        self,
        wheel: Path,  # noqa: ARG002
        requirements: Sequence[str],  # noqa: ARG002
        *,
        python: VersionTuple,  # noqa: ARG002
        torch_source: TorchSource,  # noqa: ARG002
        plan_index: str,  # noqa: ARG002
        wheel_deps: bool,  # noqa: ARG002
        cache: CacheLayout,  # noqa: ARG002
        log: Path | None,  # noqa: ARG002
    ) -> None:
        return None


@dataclass(frozen=True, slots=True)
class Native(LendsNoVenv):
    """The machine runs the platform's OS: the plan's nvcc where the OS keeps toolkits, and the active MSVC when
    the plan compiles with MSVC."""

    cuda_roots: CudaRoots
    strips_symbols: bool

    @property
    def kind(self) -> HostKind:
        return HostKind.NATIVE

    def machine(self, *, cache: CacheLayout, log: Path | None) -> EmulatedMachine | None:  # noqa: ARG002
        return None

    def check(
        self,
        planned: PlannedCell,
        inherited: Mapping[str, str],
        *,
        prepare_only: bool,  # noqa: ARG002 - a native host checks its tools either way
        cache: CacheLayout,  # noqa: ARG002
    ) -> BuildTools:
        cuda = planned_cuda(planned, inherited, self.cuda_roots)
        return BuildTools(foreign=False, cuda=cuda, msvc=check_msvc(planned, inherited))

    def finish(self, *, cache: CacheLayout, env: Mapping[str, str]) -> None:
        """Nothing outlives a native build."""


@dataclass(frozen=True, slots=True)
class Elsewhere(LendsNoVenv):
    """No host for the platform on a machine that runs ``here``: its cells are built on a runner of their OS;
    here their source is only prepared. ``also``: another way to build them here, for the error's hint."""

    here: OS
    also: str = ""
    cpu: str = ""  # this machine's CPU, when it is what differs (a linux_aarch64 cell on x86_64 Linux)

    @property
    def kind(self) -> HostKind:
        return HostKind.NONE

    @property
    def strips_symbols(self) -> bool:
        return False

    def machine(self, *, cache: CacheLayout, log: Path | None) -> EmulatedMachine | None:  # noqa: ARG002
        return None

    def check(
        self,
        planned: PlannedCell,
        inherited: Mapping[str, str],  # noqa: ARG002 - no tools are looked for
        *,
        prepare_only: bool,
        cache: CacheLayout,  # noqa: ARG002
    ) -> BuildTools:
        return prepared_only(planned, here=self.here, prepare_only=prepare_only, also=self.also, machine=self.cpu)

    def finish(self, *, cache: CacheLayout, env: Mapping[str, str]) -> None:
        """Nothing ran."""


def prepared_only(
    planned: PlannedCell, *, here: OS, prepare_only: bool, also: str = "", machine: str = ""
) -> BuildTools:
    """A cell of another OS than ``here``'s (or of another CPU than ``machine``): only prepared
    (EnvironmentMismatchError unless ``prepare_only``)."""
    os_name = planned.cell.platform.os
    if not prepare_only:
        wanted, this = os_name.capitalize(), here.capitalize()
        if machine:
            wanted, this = f"{wanted} on {traits(planned.cell.platform).machine}", f"{this} on {machine}"
        raise EnvironmentMismatchError(
            f"{cell_id(planned.cell)} is built on {wanted}, and this machine runs {this}",
            hint="build it on such a machine (wheels.yml does, on GitHub's runners)"
            + (f"; or {also}" if also else "")
            + "; --prepare-only fetches, checks and patches its source here without compiling",
        )
    get_reporter().info(f"preparing a {planned.cell.platform.value} cell here: its toolchain is not checked")
    return BuildTools(foreign=True, cuda=None, msvc=None)
