"""Linux (``linux_x86_64``): GCC and nvcc found on this machine, ELF extensions stripped.

Its one host today is the machine itself (:class:`~dswheels.platforms.hosts.Native`, an x86_64 Linux);
elsewhere its cells are only prepared. A manylinux container is the next host of this module
(docs/architecture.md). Linux on aarch64 is its own platform (:mod:`dswheels.platforms.linux_aarch64`),
which shares what follows from the OS.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from dswheels.kernel.compat import Compat
from dswheels.kernel.model import OS, Platform
from dswheels.kernel.platform_traits import ALL_TRAITS, machine_platform
from dswheels.kernel.versions import VersionTuple, format_version
from dswheels.platforms.find_tools import gcc_major
from dswheels.platforms.hosts import Elsewhere, HostChoice, Native, PlatformHost

__all__ = ["PLATFORM", "Linux"]


class Linux:
    """:class:`dswheels.platforms.PlatformModule` for Linux."""

    traits = ALL_TRAITS[Platform.LINUX_X86_64]

    def cuda_roots(self, env: Mapping[str, str], want: VersionTuple | None) -> list[Path]:  # noqa: ARG002
        """/usr/local/cuda-X.Y for the plan's toolkit, then the usual places."""
        versioned = [Path(f"/usr/local/cuda-{format_version(want)}")] if want is not None else []
        return [*versioned, Path("/usr/local/cuda"), *sorted(Path("/usr/local").glob("cuda-*")), Path("/opt/cuda")]

    def host_compilers(self, env: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
        """The GCC behind ``c++``."""
        return gcc_major("c++", env), ()

    def toolkit_places(self, env: Mapping[str, str]) -> list[tuple[str, str]]:
        """$CONDA_PREFIX, /usr/local/cuda, /usr/local/cuda-*, /opt/cuda, and /usr with a distribution's nvcc."""
        found = [(conda, "CONDA_PREFIX")] if (conda := env.get("CONDA_PREFIX")) else []
        candidates = ["/usr/local/cuda", *sorted(str(p) for p in Path("/usr/local").glob("cuda-*")), "/opt/cuda"]
        found.extend((p, "standard location") for p in candidates)
        if Path("/usr/bin/nvcc").exists():
            found.append(("/usr", "standard location"))
        return found

    def add_source_files(self, src: Path, compat: Compat) -> list[str]:  # noqa: ARG002
        """Nothing: the sdist builds as it is on Linux."""
        return []

    def host(self, choice: HostChoice, *, here: OS, machine: str = "x86_64") -> PlatformHost:  # noqa: ARG002
        """This machine on Linux of the platform's CPU (binutils strip the ELF extensions); elsewhere the cell is
        only prepared."""
        if machine_platform(here, machine) is self.traits.platform:
            return Native(self.cuda_roots, strips_symbols=True)
        return Elsewhere(here, cpu=machine if here is self.traits.os else "")


PLATFORM = Linux()
