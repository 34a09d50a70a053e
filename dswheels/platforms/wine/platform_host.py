"""Wine as the Windows platform's host on Linux: the :class:`~dswheels.platforms.hosts.PlatformHost` the build sees.

Chosen by :mod:`dswheels.platforms.windows` when the command line gave an MSVC root
(:class:`~dswheels.platforms.hosts.WineSettings`). Its check is :func:`~.assembly.check_wine`, its
toolchain :func:`~.assembly.prepare_wine` (a :class:`~.assembly.WineBuild`, the build's
:class:`~dswheels.platforms.hosts.CrossToolchain`); when a build ends it waits for the prefix's wineserver.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dswheels.host.cache import CacheLayout
from dswheels.host.venvs import Interpreter, find_uv
from dswheels.kernel.compat import Compat
from dswheels.kernel.model import OS, PlannedCell
from dswheels.platforms.find_tools import CudaInstall, MsvcEnv
from dswheels.platforms.hosts import CheckedTools, EmulatedMachine, HostKind, WineSettings, prepared_only
from dswheels.platforms.wine.host import wait_for_wineserver

if TYPE_CHECKING:
    # the Windows toolchain's assembly (and the downloads it needs) is loaded when a cell is built under Wine,
    # not by everything that reads the platform table (`dswheels --help`, doctor)
    from dswheels.platforms.wine.assembly import WineBuild, WineTools

__all__ = ["UnderWine", "WineChecked"]


@dataclass(frozen=True, slots=True)
class WineChecked:
    """Wine and the MSVC root, checked: the Windows toolchain is put together once the interpreter is ready."""

    tools: WineTools

    @property
    def foreign(self) -> bool:
        return False

    @property
    def foreign_interpreter(self) -> bool:
        """The build interpreter is Linux CPython answering as Windows: its platform differs from the cell's."""
        return True

    @property
    def cuda(self) -> CudaInstall | None:
        return None  # the Windows toolkit is assembled (assemble), not found on this machine

    @property
    def msvc(self) -> MsvcEnv | None:
        return None  # MSVC runs from the root under Wine, not from an active developer environment

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
    ) -> WineBuild:
        """CPython's Windows headers and import library, torch's win_amd64 wheel, the CUDA root and the tool
        scripts (:func:`~dswheels.platforms.wine.assembly.prepare_wine`)."""
        from dswheels.platforms.wine.assembly import prepare_wine  # noqa: PLC0415 - see the imports above

        return prepare_wine(
            planned,
            self.tools,
            compat=compat,
            work=work,
            cache=cache,
            build_python=interp.python,
            linux_torch=Path(interp.info.torch_parent) / "torch" if interp.info.torch_parent else None,
            uv=find_uv(),
            index_args=index_args,
            log=log,
        )


@dataclass(frozen=True, slots=True)
class UnderWine:
    """Windows cells built on this Linux machine with the real MSVC and the real Windows nvcc, under Wine."""

    settings: WineSettings

    @property
    def kind(self) -> HostKind:
        return HostKind.WINE

    @property
    def strips_symbols(self) -> bool:
        return False  # Windows extensions are not stripped: dswheels strips ELF only

    def machine(self, *, cache: CacheLayout, log: Path | None) -> EmulatedMachine | None:  # noqa: ARG002
        return None  # Wine lends this machine's CPU Windows' tools: the build runs here

    def check(
        self, planned: PlannedCell, inherited: Mapping[str, str], *, prepare_only: bool, cache: CacheLayout
    ) -> CheckedTools:
        """Wine and the plan's MSVC toolset in the root (nothing is downloaded yet); with ``prepare_only`` nothing."""
        if prepare_only:
            return prepared_only(planned, here=OS.LINUX, prepare_only=True)
        from dswheels.platforms.wine.assembly import check_wine  # noqa: PLC0415 - see the imports above

        return WineChecked(
            check_wine(
                planned,
                msvc_root=self.settings.msvc_root,
                env=inherited,
                cache=cache,
                cuda_source=self.settings.cuda_source,
                cuda_redist_url=self.settings.cuda_redist_url,
            )
        )

    def finish(self, *, cache: CacheLayout, env: Mapping[str, str]) -> None:
        """Wait for the prefix's wineserver, so the build leaves no process behind."""
        wait_for_wineserver(cache.wine_prefix, env)
