"""qemu as the ``linux_aarch64`` platform's host on x86_64 Linux: the :class:`~dswheels.platforms.hosts.PlatformHost`.

Chosen by :mod:`dswheels.platforms.linux_aarch64` when the command line asked for it (``--qemu``,
:class:`~dswheels.platforms.hosts.QemuSettings`). It lends no single tool: :meth:`UnderQemu.machine` is the
arm64 root the cell's whole build runs in (:class:`~.machine.QemuMachine`); a cell only prepared
(``--prepare-only``) is prepared here, as for any platform without a host.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dswheels.host.cache import CacheLayout
from dswheels.host.log import get_reporter
from dswheels.kernel.errors import EnvironmentMismatchError
from dswheels.kernel.model import OS, PlannedCell
from dswheels.kernel.platform_traits import QemuCompilers
from dswheels.platforms.hosts import BuildTools, HostKind, LendsNoVenv, QemuSettings, prepared_only
from dswheels.platforms.qemu.host_gcc import HostGcc, find_host_gcc, root_gcc_major

if TYPE_CHECKING:
    # the emulated machine (and what it imports) is loaded when a cell is built under qemu, not by everything
    # that reads the platform table (`dswheels --help`, doctor)
    from dswheels.platforms.qemu.machine import QemuMachine

__all__ = ["UnderQemu", "choose_compilers"]


def choose_compilers(root: Path, asked: QemuCompilers, *, here: Path = Path("/")) -> HostGcc | None:
    """This machine's cross GCC for a build in ``root`` (:mod:`.host_gcc`), or None: the root's own, emulated.
    ``host`` without one is an error saying what is missing; ``auto`` without one says it and goes on."""
    if asked is QemuCompilers.EMULATED:
        return None
    found = find_host_gcc(root, here=here)
    if isinstance(found, HostGcc):
        if found.differences():
            get_reporter().warning(found.differences())
        return found
    major = root_gcc_major(root)
    # the versioned package: Ubuntu 24.04's unversioned g++-aarch64-linux-gnu is GCC 13, Debian 12's root GCC 12
    package = f"g++-{major}-aarch64-linux-gnu" if major else "g++-aarch64-linux-gnu"
    hint = f"apt-get install {package} (Debian/Ubuntu: the cross GCC of the root's GCC major)"
    if asked is QemuCompilers.HOST:
        raise EnvironmentMismatchError(f"--qemu-compilers host: {found}", hint=hint)
    get_reporter().warning(
        f"{found}: compiling with the root's own GCC under qemu (about an hour an op on 2 cores); {hint}"
    )
    return None


@dataclass(frozen=True, slots=True)
class UnderQemu(LendsNoVenv):
    """linux_aarch64 cells built on this x86_64 Linux machine in an arm64 root under qemu-user."""

    settings: QemuSettings

    @property
    def kind(self) -> HostKind:
        return HostKind.QEMU

    @property
    def strips_symbols(self) -> bool:
        return True  # by the build in the root, with the root's binutils

    def machine(self, *, cache: CacheLayout, log: Path | None) -> QemuMachine:
        """The arm64 root, made under the cache when none was given (debootstrap, as root), qemu to run it, and the
        GCC that compiles there (:func:`choose_compilers`)."""
        from dswheels.platforms.qemu.emulator import find_emulator, need_qemu  # noqa: PLC0415 - see the imports
        from dswheels.platforms.qemu.machine import QemuMachine  # noqa: PLC0415
        from dswheels.platforms.qemu.root import RootSpec, ensure_root  # noqa: PLC0415

        emulator = find_emulator()
        need_qemu(emulator)
        root = ensure_root(self.settings.root, cache=cache, emulator=emulator, spec=RootSpec(), log=log)
        return QemuMachine(root=root, emulator=emulator, compilers=choose_compilers(root, self.settings.compilers))

    def check(
        self,
        planned: PlannedCell,
        inherited: Mapping[str, str],  # noqa: ARG002 - no tool of this machine is looked for
        *,
        prepare_only: bool,
        cache: CacheLayout,  # noqa: ARG002
    ) -> BuildTools:
        """Only a cell that is prepared is checked here: a built one is built in the root, by dswheels there."""
        return prepared_only(planned, here=OS.LINUX, prepare_only=prepare_only, machine="x86_64")

    def finish(self, *, cache: CacheLayout, env: Mapping[str, str]) -> None:
        """Nothing outlives a command in the root (its mount namespace ends with it)."""
