"""The platform seam: what differs between Linux and Windows, behind one Protocol and one table.

:data:`ALL_PLATFORMS` maps every :class:`~dswheels.kernel.model.Platform` to its module
(:mod:`dswheels.platforms.linux`, :mod:`dswheels.platforms.windows`); code that needs a per-OS
decision asks :func:`platform_module` (or, for pure data, :func:`dswheels.kernel.platform_traits.traits`)
instead of comparing OS names. The Windows module is the one place that chooses between its two
hosts: a Windows machine (MSVC, natively) and Linux under Wine (:mod:`dswheels.platforms.wine`).

The modules themselves are imported on first use: they reach into the effects, which import the
core, and the core imports this package's pure table.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast, runtime_checkable

from dswheels.host.cache import CacheLayout
from dswheels.kernel.model import OS, Platform
from dswheels.kernel.platform_traits import PlatformTraits, traits

if TYPE_CHECKING:
    from dswheels.building.effects.compile_tools import BuildTools
    from dswheels.kernel.binaries.linux_runtime import RuntimeFloor
    from dswheels.kernel.compat import Compat
    from dswheels.kernel.model import PlannedCell
    from dswheels.kernel.platform_traits import WineCudaSource
    from dswheels.kernel.versions import VersionTuple

__all__ = ["ALL_PLATFORMS", "OS", "PlatformModule", "PlatformTraits", "platform_module", "traits"]


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
        """The cell's compilers on this ``host`` (which may be another OS: then only prepared, or Wine)."""
        ...

    def add_source_files(self, src: Path, compat: Compat) -> list[str]:
        """Write what DeepSpeed's setup.py needs on this OS and its sdist leaves out; notes for the log."""
        ...

    def finish_build(self, *, msvc_root: Path | None, cache: CacheLayout, env: Mapping[str, str]) -> None:
        """What is left to do once a build of the cell ended, passed or not (Wine's server to stop)."""
        ...

    def strips_symbols(self, host: OS) -> bool:
        """Whether post-processing strips the cell's extensions on ``host`` (binutils' strip)."""
        ...

    def check_runtime(
        self, planned: PlannedCell, needs: Mapping[str, Mapping[str, tuple[str, ...]]], compat: Compat
    ) -> RuntimeFloor | None:
        """What a built wheel needs of the OS's runtime, said out loud; None where nothing is promised."""
        ...


_MODULES = {Platform.LINUX_X86_64: "dswheels.platforms.linux", Platform.WIN_AMD64: "dswheels.platforms.windows"}


class _Table(Mapping[Platform, PlatformModule]):
    """Every platform's module, imported when first looked up (see the module's docstring)."""

    def __getitem__(self, platform: Platform) -> PlatformModule:
        return cast("PlatformModule", importlib.import_module(_MODULES[platform]).PLATFORM)

    def __iter__(self) -> Iterator[Platform]:
        return iter(_MODULES)

    def __len__(self) -> int:
        return len(_MODULES)


ALL_PLATFORMS: Mapping[Platform, PlatformModule] = _Table()


def platform_module(of: Platform | OS) -> PlatformModule:
    """The module of a wheel platform or of an OS."""
    return ALL_PLATFORMS[of if isinstance(of, Platform) else traits(of).platform]
