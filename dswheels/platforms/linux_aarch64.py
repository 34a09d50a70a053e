"""Linux on aarch64 (``linux_aarch64``): arm64 servers, NVIDIA's Grace among them; two hosts.

What follows from the OS is Linux's (:class:`dswheels.platforms.linux.Linux`: GCC, toolkit places, nothing
added to the source); what follows from the CPU is its own row of the traits (the arm64 runners, NVIDIA's
``linux-sbsa`` archives, ``targets/sbsa-linux``). This module chooses the host: the machine itself on an arm64
Linux (a GitHub arm64 runner, a Grace node), an arm64 root under qemu on an x86_64 Linux when the command
line asks for it (``--qemu``, :mod:`dswheels.platforms.qemu`), else none (the cell is only prepared).
"""

from __future__ import annotations

from dswheels.kernel.model import OS, Platform
from dswheels.kernel.platform_traits import ALL_TRAITS, machine_platform
from dswheels.platforms.hosts import Elsewhere, HostChoice, Native, PlatformHost
from dswheels.platforms.linux import Linux
from dswheels.platforms.qemu.platform_host import UnderQemu

__all__ = ["PLATFORM", "LinuxAarch64"]

_UNDER_QEMU = "on x86_64 Linux in an arm64 root under qemu with --qemu (docs/build.md#linux-aarch64-under-qemu)"


class LinuxAarch64(Linux):
    """:class:`dswheels.platforms.PlatformModule` for Linux on aarch64."""

    traits = ALL_TRAITS[Platform.LINUX_AARCH64]

    def host(self, choice: HostChoice, *, here: OS, machine: str = "x86_64") -> PlatformHost:
        """This machine on arm64 Linux; qemu on x86_64 Linux with ``--qemu``; else the cell is only prepared."""
        platform = machine_platform(here, machine)
        if platform is self.traits.platform:
            return Native(self.cuda_roots, strips_symbols=True)
        if choice.qemu is not None and platform is Platform.LINUX_X86_64:
            return UnderQemu(choice.qemu)
        also = _UNDER_QEMU if platform is Platform.LINUX_X86_64 else ""
        return Elsewhere(here, also=also, cpu=machine if here is self.traits.os else "")


PLATFORM = LinuxAarch64()
