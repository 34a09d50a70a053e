"""Linux (``linux_x86_64``): GCC and nvcc found on this machine, ELF extensions stripped, a glibc/libstdc++ floor."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from dswheels.building.effects.compile_tools import BuildTools, foreign_tools, planned_cuda
from dswheels.building.effects.wheel_checks import report_runtime
from dswheels.host.cache import CacheLayout
from dswheels.kernel.binaries.linux_runtime import RuntimeFloor
from dswheels.kernel.compat import Compat
from dswheels.kernel.model import OS, PlannedCell
from dswheels.kernel.platform_traits import ALL_TRAITS, WineCudaSource
from dswheels.kernel.versions import VersionTuple, format_version
from dswheels.platforms.find_tools import gcc_major

__all__ = ["PLATFORM", "Linux"]


class Linux:
    """:class:`dswheels.platforms.PlatformModule` for Linux."""

    traits = ALL_TRAITS[OS.LINUX]

    def cuda_roots(self, env: Mapping[str, str], want: VersionTuple | None) -> list[Path]:  # noqa: ARG002
        """/usr/local/cuda-X.Y for the plan's toolkit, then the usual places."""
        versioned = [Path(f"/usr/local/cuda-{format_version(want)}")] if want is not None else []
        return [*versioned, Path("/usr/local/cuda"), *sorted(Path("/usr/local").glob("cuda-*")), Path("/opt/cuda")]

    def host_compilers(self, env: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
        """The GCC behind ``c++``."""
        return gcc_major("c++", env), ()

    def check_build_tools(
        self,
        planned: PlannedCell,
        inherited: Mapping[str, str],
        *,
        host: OS,
        prepare_only: bool,
        msvc_root: Path | None,  # noqa: ARG002 - Windows' (Wine's) only
        cache: CacheLayout | None,  # noqa: ARG002
        wine_cuda: tuple[WineCudaSource, str],  # noqa: ARG002
    ) -> BuildTools:
        """The plan's nvcc here; on another OS the cell is only prepared."""
        if host is not OS.LINUX:
            return foreign_tools(planned, host=host, prepare_only=prepare_only, wine_host=False)
        return BuildTools(foreign=False, cuda=planned_cuda(planned, inherited), msvc=None)

    def add_source_files(self, src: Path, compat: Compat) -> list[str]:  # noqa: ARG002
        """Nothing: the sdist builds as it is on Linux."""
        return []

    def finish_build(self, *, msvc_root: Path | None, cache: CacheLayout, env: Mapping[str, str]) -> None:
        """Nothing outlives a Linux build."""

    def strips_symbols(self, host: OS) -> bool:
        """binutils strip ELF extensions (not run on a Windows host)."""
        return host is OS.LINUX

    def check_runtime(
        self, planned: PlannedCell, needs: Mapping[str, Mapping[str, tuple[str, ...]]], compat: Compat
    ) -> RuntimeFloor | None:
        """The glibc/libstdc++ symbol versions the extensions need, against the plan's promise."""
        return report_runtime(planned, needs, compat)


PLATFORM = Linux()
