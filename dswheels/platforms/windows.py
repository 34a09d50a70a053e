"""Windows (``win_amd64``): MSVC and nvcc, on two hosts: a Windows machine, or Linux under Wine.

This module is the one place that chooses the host: a Windows cell on Windows is built with the
active MSVC (:func:`dswheels.platforms.find_tools.check_msvc`); on Linux with ``--msvc-root`` under Wine
(:mod:`dswheels.platforms.wine.platform_host`); on Linux otherwise it is only prepared.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from dswheels.kernel.compat import Compat
from dswheels.kernel.model import OS, Platform
from dswheels.kernel.platform_traits import ALL_TRAITS, machine_platform
from dswheels.kernel.versions import VersionTuple, format_version
from dswheels.platforms.hosts import Elsewhere, HostChoice, Native, PlatformHost
from dswheels.platforms.wine.platform_host import UnderWine

__all__ = ["PLATFORM", "Windows", "add_windows_files"]

_UNDER_WINE = "here under Wine with --msvc-root DIR (docs/build.md#windows-under-wine)"


class Windows:
    """:class:`dswheels.platforms.PlatformModule` for Windows."""

    traits = ALL_TRAITS[Platform.WIN_AMD64]

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

    def toolkit_places(self, env: Mapping[str, str]) -> list[tuple[str, str]]:
        """A conda env's Library folder, and every toolkit the installer put under Program Files."""
        found = [(str(Path(conda) / "Library"), "CONDA_PREFIX")] if (conda := env.get("CONDA_PREFIX")) else []
        parent = Path(env.get("ProgramFiles", r"C:\Program Files")) / "NVIDIA GPU Computing Toolkit" / "CUDA"
        found.extend((str(p), "standard location") for p in sorted(parent.glob("v*.*")))
        return found

    def add_source_files(self, src: Path, compat: Compat) -> list[str]:
        """compat.yml's ``windows_files`` (in DeepSpeed's git, not in its sdist)."""
        return add_windows_files(src, compat.windows_files)

    def host(self, choice: HostChoice, *, here: OS, machine: str = "x86_64") -> PlatformHost:
        """The active MSVC on Windows; Wine on Linux when the command line gave it an MSVC root; else none."""
        if machine_platform(here, machine) is self.traits.platform:
            # Windows extensions are not stripped: dswheels strips ELF only, with binutils
            return Native(self.cuda_roots, strips_symbols=False)
        if choice.wine is not None and machine_platform(here, machine) is Platform.LINUX_X86_64:
            return UnderWine(choice.wine)
        return Elsewhere(here, also=_UNDER_WINE)


def add_windows_files(src: Path, files: Mapping[str, str]) -> list[str]:
    """Write what DeepSpeed's setup.py needs on win32 and its sdist leaves out (compat.yml ``windows_files``).

    Byte for byte as in DeepSpeed's git; a file the source already has (a git archive) is kept.
    """
    notes: list[str] = []
    for rel, text in files.items():
        path = src / rel
        if path.exists():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
        notes.append(f"added {rel} ({len(text.encode())} bytes): in DeepSpeed's git, not in its sdist; win32 needs it")
    return notes


PLATFORM = Windows()
