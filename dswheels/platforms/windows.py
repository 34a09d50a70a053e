"""Windows (``win_amd64``): MSVC and nvcc, on two hosts: a Windows machine, or Linux under Wine.

This module is the one place that chooses the host: a Windows cell on Windows is built with the
active MSVC (:func:`dswheels.platforms.find_tools.check_msvc`); on Linux with ``--msvc-root`` under Wine
(:mod:`dswheels.platforms.wine`, which stays the implementation); on Linux otherwise it is only prepared.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from dswheels.building.effects.compile_tools import BuildTools, foreign_tools, planned_cuda
from dswheels.building.effects.source_tree import add_windows_files
from dswheels.host.cache import CacheLayout
from dswheels.kernel.binaries.linux_runtime import RuntimeFloor
from dswheels.kernel.compat import Compat
from dswheels.kernel.model import OS, PlannedCell
from dswheels.kernel.platform_traits import ALL_TRAITS, WineCudaSource
from dswheels.kernel.versions import VersionTuple, format_version
from dswheels.platforms.find_tools import check_msvc
from dswheels.platforms.wine.assembly import check_wine
from dswheels.platforms.wine.host import wait_for_wineserver

__all__ = ["PLATFORM", "Windows"]


class Windows:
    """:class:`dswheels.platforms.PlatformModule` for Windows."""

    traits = ALL_TRAITS[OS.WINDOWS]

    def cuda_roots(self, env: Mapping[str, str], want: VersionTuple | None) -> list[Path]:
        """The installer's CUDA_PATH_Vx_y and its folder under Program Files, for the plan's toolkit."""
        if want is None:
            return []
        found = [Path(value)] if (value := env.get(f"CUDA_PATH_V{want[0]}_{want[1]}")) else []
        program_files = Path(env.get("ProgramFiles", r"C:\Program Files"))
        return [*found, program_files / "NVIDIA GPU Computing Toolkit" / "CUDA" / f"v{format_version(want)}"]

    def host_compilers(self, env: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
        """The toolset of the active VS developer environment (``VCToolsVersion``)."""
        tools = env.get("VCToolsVersion")
        return "", ((".".join(tools.split(".")[:2]),) if tools else ())

    def check_build_tools(
        self,
        planned: PlannedCell,
        inherited: Mapping[str, str],
        *,
        host: OS,
        prepare_only: bool,
        msvc_root: Path | None,
        cache: CacheLayout | None,
        wine_cuda: tuple[WineCudaSource, str],
    ) -> BuildTools:
        """The plan's nvcc and the active MSVC natively; Wine and the root's MSVC toolset under Wine."""
        if host is OS.WINDOWS:
            cuda = planned_cuda(planned, inherited)
            return BuildTools(foreign=False, cuda=cuda, msvc=check_msvc(planned, inherited))
        if msvc_root is not None and not prepare_only:
            assert cache is not None  # noqa: S101 - the build passes its cache
            wine = check_wine(
                planned,
                msvc_root=msvc_root,
                env=inherited,
                cache=cache,
                cuda_source=wine_cuda[0],
                cuda_redist_url=wine_cuda[1],
            )
            return BuildTools(foreign=False, cuda=None, msvc=None, wine=wine)
        return foreign_tools(planned, host=host, prepare_only=prepare_only, wine_host=True)

    def add_source_files(self, src: Path, compat: Compat) -> list[str]:
        """compat.yml's ``windows_files`` (in DeepSpeed's git, not in its sdist)."""
        return add_windows_files(src, compat.windows_files)

    def finish_build(self, *, msvc_root: Path | None, cache: CacheLayout, env: Mapping[str, str]) -> None:
        """Under Wine: wait for the prefix's wineserver, so the build leaves no process behind."""
        if msvc_root is not None:
            wait_for_wineserver(cache.wine_prefix, env)

    def strips_symbols(self, host: OS) -> bool:  # noqa: ARG002
        """Windows extensions are not stripped: dswheels strips ELF only, with binutils."""
        return False

    def check_runtime(
        self,
        planned: PlannedCell,  # noqa: ARG002
        needs: Mapping[str, Mapping[str, tuple[str, ...]]],  # noqa: ARG002
        compat: Compat,  # noqa: ARG002
    ) -> RuntimeFloor | None:
        """Nothing: a Windows wheel promises no runtime floor (its DLLs come with torch and the CUDA wheels)."""
        return None


PLATFORM = Windows()
