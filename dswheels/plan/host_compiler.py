"""The host compiler of a cell: the MSVC toolset or GCC that nvcc, torch's headers and the image allow.

Each picker returns the compiler with why it was chosen, or a sentence saying why none of the
image's compilers works (the resolver tries the next runner image, or drops the cell).
"""

from __future__ import annotations

from collections.abc import Sequence

from dswheels.kernel.binaries.linux_runtime import RuntimeFloor
from dswheels.kernel.compat import Compat
from dswheels.kernel.compat.entries import CudaToolkit, RunnerImage, TorchRelease
from dswheels.kernel.model import Cell, HostCompiler
from dswheels.kernel.platform_traits import traits
from dswheels.kernel.versions import format_version, parse_version

__all__ = ["image_above", "pick_compiler", "pick_gcc", "pick_msvc"]

_MSVC_FLAG_FREE_LIMIT = (14, 50)  # nvcc < 13.2 crashes on VS 2026 headers even with escape flags


def pick_compiler(
    cell: Cell, nvcc: CudaToolkit | None, image: RunnerImage, release: TorchRelease, compat: Compat
) -> tuple[HostCompiler, tuple[str, ...]] | str:
    """The compiler of ``image`` for the cell's OS, with the nvcc flags it needs; or why none works."""
    if traits(cell.platform).compiler == "msvc":
        return pick_msvc(cell, nvcc, image, release, compat)
    gcc = pick_gcc(cell, nvcc, image.gcc, image.name, compat)
    return gcc if isinstance(gcc, str) else (gcc, ())


def _msc_ver(toolset: str) -> int:
    """MSVC toolset 14.44 is ``_MSC_VER`` 1944 (holds from 14.20 on)."""
    major, minor = parse_version(toolset)[:2]
    return 100 * (major + 5) + minor


def pick_msvc(
    cell: Cell,
    nvcc: CudaToolkit | None,
    image: RunnerImage,
    release: TorchRelease,
    compat: Compat,
) -> tuple[HostCompiler, tuple[str, ...]] | str:
    """The toolset to activate (and escape flags it needs), or why none of the image's works."""
    default = image.msvc[0]
    if nvcc is None:
        return HostCompiler(kind="msvc", version=default, why=f"{image.name} default"), ()
    usable: list[str] = []
    rejected: list[str] = []
    for toolset in image.msvc:
        msc = _msc_ver(toolset)
        if release.cxx_std >= 20 and parse_version(toolset) < (14, 30):
            rejected.append(f"{toolset} (v142: C++20 torch {format_version(cell.torch)} headers untested)")
            continue
        if not nvcc.msvc[0] <= msc < nvcc.msvc[1]:
            rejected.append(
                f"{toolset} (_MSC_VER {msc} outside nvcc {format_version(nvcc.minor)}'s "
                f"{nvcc.msvc[0]}-{nvcc.msvc[1] - 1})"
            )
            continue
        floor = compat.stl_floor(parse_version(toolset))
        if floor and nvcc.minor < floor[0]:
            rejected.append(f"{toolset} (its STL wants CUDA >= {format_version(floor[0])})")
            continue
        usable.append(toolset)
    if usable:
        chosen = default if default in usable else max(usable, key=parse_version)
        why = (
            f"{image.name} default"
            if chosen == default
            else f"{image.name} side-by-side toolset; rejected " + "; ".join(rejected)
        )
        return HostCompiler(kind="msvc", version=chosen, why=why), ()
    # No clean toolset: DeepSpeed already passes -allow-unsupported-compiler on win32, the STL
    # gate needs its own escape. Not for VS 2026 toolsets, where old nvcc front ends crash.
    fallback = [t for t in image.msvc if parse_version(t) < _MSVC_FLAG_FREE_LIMIT]
    if fallback:
        chosen = max(fallback, key=parse_version)
        return (
            HostCompiler(
                kind="msvc",
                version=chosen,
                why=f"no toolset of {image.name} passes nvcc {format_version(nvcc.minor)}'s checks; escape flags added",
            ),
            ("-D_ALLOW_COMPILER_AND_STL_VERSION_MISMATCH",),
        )
    return f"no MSVC toolset of {image.name} works with nvcc {format_version(nvcc.minor)}: " + "; ".join(rejected)


def pick_gcc(
    cell: Cell, nvcc: CudaToolkit | None, gccs: Sequence[str], image: str, compat: Compat
) -> HostCompiler | str:
    """The GCC to build with, or why none of ``gccs`` works.

    The newest: what nvcc's host_config.h and torch's own check accept; the oldest: what torch's
    headers accept (compat.yml torch_gcc_min). The image's default wins when it is in between.
    """
    if not gccs:
        return f"{image} lists no GCC"
    limit = 99
    why_limit = ""
    if nvcc is not None:
        limit, why_limit = nvcc.gcc_max, f"nvcc {format_version(nvcc.minor)} accepts GCC <= {nvcc.gcc_max}"
        for torch_range, cuda_range, gcc_max, _source in compat.torch_gcc_limits:
            if cell.torch in torch_range and nvcc.minor in cuda_range and gcc_max < limit:
                limit = gcc_max
                why_limit = (
                    f"torch {format_version(cell.torch)} rejects GCC > {gcc_max} with CUDA {format_version(nvcc.minor)}"
                )
    low, why_low = compat.gcc_min(cell.torch)
    ok = [g for g in gccs if low <= int(g) <= limit]
    if not ok:
        bounds = "; ".join(w for w in (why_limit, f"GCC >= {low}: {why_low}" if low else "") if w)
        return f"no GCC {f'>= {low} and ' if low else ''}<= {limit} on {image} (it has {', '.join(gccs)}): {bounds}"
    default = gccs[0]
    if default in ok:
        return HostCompiler(kind="gcc", version=default, why=f"{image} default")
    chosen = max(ok, key=int)
    why = why_limit if int(default) > limit else f"GCC >= {low}: {why_low}"
    return HostCompiler(kind="gcc", version=chosen, why=f"{why}; {image} default is GCC {default}")


def image_above(image: RunnerImage, runtime: RuntimeFloor) -> str:
    """What of an image's glibc and system libstdc++ is newer than the promise ("" if nothing).

    An extension binds each symbol to the version the *linked* library gives it (Debian and Ubuntu
    link every gcc-N against the system libstdc++.so.6, the newest GCC's), so the image, not the
    GCC picked, bounds what a wheel built there can need.
    """
    parts = []
    if image.glibc and runtime.glibc and image.glibc > runtime.glibc:
        parts.append(f"glibc {format_version(image.glibc)}")
    if image.glibcxx and runtime.glibcxx and image.glibcxx > runtime.glibcxx:
        parts.append(f"libstdc++ with GLIBCXX {format_version(image.glibcxx)}")
    return " and ".join(parts)
