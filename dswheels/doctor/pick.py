"""Pick the published wheel for an environment, or say which published cells are nearest.

Pure: the caller fetches and parses the index page (:mod:`dswheels.stores.served_index`,
:func:`dswheels.kernel.index_files.parse_project_page`); every file carries the cell its name
says (:func:`dswheels.kernel.naming.parse_wheel`), and this module decides.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dswheels.kernel.index_files import IndexFile
from dswheels.kernel.manylinux import manylinux_glibc
from dswheels.kernel.model import Cell, Platform, Python, Variant
from dswheels.kernel.versions import TorchMinor, VersionTuple, format_version

__all__ = ["Wanted", "nearest", "pick_wheel"]


@dataclass(frozen=True, slots=True)
class Wanted:
    """What the environment needs: every axis of a cell, the DeepSpeed version optional."""

    torch: TorchMinor
    variant: Variant
    python: Python
    platform: Platform
    deepspeed: VersionTuple | None = None
    glibc: VersionTuple | None = None  # this system's (Linux; None: unknown): a wheel's manylinux tag must allow it

    def installable(self, file: IndexFile) -> bool:
        """The file's platform tag allows this system's glibc (pip and uv refuse it otherwise)."""
        return not self.needs_newer_glibc(file)

    def needs_newer_glibc(self, file: IndexFile) -> VersionTuple | None:
        """The glibc the file's manylinux tag asks for when this system's is older (None: it fits, or unknown)."""
        if file.wheel is None or self.glibc is None:
            return None
        need = manylinux_glibc(file.wheel.platform_tag)
        return need if need is not None and need > self.glibc else None

    def matches(self, cell: Cell, *, any_deepspeed: bool = False) -> bool:
        return (
            cell.torch == self.torch
            and cell.variant == self.variant
            and cell.python == self.python
            and cell.platform == self.platform
            and (any_deepspeed or self.deepspeed is None or cell.deepspeed == self.deepspeed)
        )

    def describe(self) -> str:
        ds = f"DeepSpeed {format_version(self.deepspeed)}, " if self.deepspeed else ""
        return (
            f"{ds}torch {format_version(self.torch)} {self.variant.name}, Python {self.python}, {self.platform.value}"
        )


def pick_wheel(wanted: Wanted, files: Iterable[IndexFile]) -> IndexFile | None:
    """The wheel for exactly this environment: the newest DeepSpeed unless one is wanted."""
    fits = [
        f for f in files if f.cell is not None and not f.is_yanked and wanted.matches(f.cell) and wanted.installable(f)
    ]
    if not fits:
        return None
    return max(fits, key=lambda f: f.cell.deepspeed if f.cell else ())


def _join(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _versions(values: Iterable[VersionTuple]) -> str:
    return _join([format_version(v) for v in sorted(set(values))])


def _yanked(wanted: Wanted, files: Sequence[IndexFile]) -> tuple[str, ...]:
    """A sentence per yanked wheel built for exactly this environment (the newest DeepSpeed first), with its reason."""
    found = sorted(
        (f for f in files if f.cell is not None and f.is_yanked and wanted.matches(f.cell)),
        key=lambda f: f.cell.deepspeed if f.cell else (),
        reverse=True,
    )
    return tuple(f"{f.filename}, the wheel for this environment, is yanked: {_reason(f.yanked)}" for f in found)


def _above_glibc(wanted: Wanted, files: Sequence[IndexFile]) -> tuple[str, ...]:
    """A sentence per wheel built for exactly this environment whose manylinux tag asks for a newer glibc."""
    lines = []
    for f in files:
        need = wanted.needs_newer_glibc(f)
        if f.cell is not None and not f.is_yanked and wanted.matches(f.cell) and need is not None and wanted.glibc:
            lines.append(
                f"{f.filename}, the wheel for this environment, needs glibc >= {format_version(need)} (its tag); "
                f"this system has glibc {format_version(wanted.glibc)}: pip and uv refuse it (no matching distribution)"
            )
    return tuple(lines)


def _reason(text: str | None) -> str:
    """A yanked file's reason as the page gave it, printable and short (a page may send anything).

    >>> _reason("broken\\x1b[2J build\\n")
    'broken?[2J build?'
    """
    if not text:
        return "no reason given"
    shown = "".join(c if c.isprintable() else "?" for c in text[:200])
    return shown + ("..." if len(text) > 200 else "")


def nearest(wanted: Wanted, files: Iterable[IndexFile]) -> tuple[str, ...]:
    """Sentences naming the published cells closest to ``wanted`` (one axis differs).

    Each says what is installed and what exists, e.g. ``torch 2.6 is installed; wheels exist
    for torch 2.5 and 2.7 with cu124 (Python 3.12, win_amd64)``. A yanked wheel built for exactly
    this environment comes first, with the reason it was yanked.
    """
    files = list(files)
    yanked = _yanked(wanted, files) + _above_glibc(wanted, files)
    cells = [f.cell for f in files if f.cell is not None and not f.is_yanked]
    torch, variant, python, platform = wanted.torch, wanted.variant, wanted.python, wanted.platform
    same_platform = [c for c in cells if c.platform == platform]
    if not same_platform:
        return yanked or (f"the index has no {platform.value} wheels at all",)
    lines: list[str] = list(yanked)
    env = [c for c in same_platform if wanted.matches(c, any_deepspeed=True)]
    if env and wanted.deepspeed is not None:
        # the environment is published, only not this DeepSpeed version: nothing else is nearer
        only = (
            f"DeepSpeed {format_version(wanted.deepspeed)} has no wheel for this environment; "
            f"wheels exist for DeepSpeed {_versions(c.deepspeed for c in env)}"
        )
        return (*yanked, only)
    other_torch = [c for c in same_platform if c.variant == variant and c.python == python and c.torch != torch]
    if other_torch:
        lines.append(
            f"torch {format_version(torch)} is installed; wheels exist for torch "
            f"{_versions(c.torch for c in other_torch)} with {variant.name} (Python {python}, {platform.value})",
        )
    other_variant = [c for c in same_platform if c.torch == torch and c.python == python and c.variant != variant]
    if other_variant:
        names = _join(sorted({c.variant.name for c in other_variant}))
        lines.append(
            f"torch {format_version(torch)} {variant.name} is installed; for torch {format_version(torch)} "
            f"wheels exist with {names} (Python {python}, {platform.value})",
        )
    other_python = [c for c in same_platform if c.torch == torch and c.variant == variant and c.python != python]
    if other_python:
        pythons = _join([str(p) for p in sorted({c.python for c in other_python})])
        lines.append(
            f"Python {python} is in use; torch {format_version(torch)} {variant.name} wheels exist for "
            f"Python {pythons} ({platform.value})",
        )
    if not lines:
        combos = sorted({(c.torch, c.variant.name) for c in same_platform if c.python == python})
        if combos:
            shown = ", ".join(f"torch {format_version(t)} {v}" for t, v in combos[-6:])
            lines.append(f"for Python {python} on {platform.value} the index has {shown}")
        else:
            pythons = _join([str(p) for p in sorted({c.python for c in same_platform})])
            lines.append(f"the index has no Python {python} wheels for {platform.value} (it has Python {pythons})")
    return tuple(lines)
