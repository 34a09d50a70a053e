"""What a matrix file asks for, typed: the axes, include/exclude, and how cells are built.

:func:`dswheels.plan.matrix.parse.parse_matrix` makes a :class:`MatrixSpec`; the planner
expands it (:meth:`MatrixSpec.axis_cells`) and resolves every cell.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass

from dswheels.kernel.binaries.linux_runtime import RuntimeFloor
from dswheels.kernel.compat import Compat
from dswheels.kernel.model import Cell, Platform, Python, Variant
from dswheels.kernel.versions import TorchMinor, VersionTuple, format_version

__all__ = [
    "BuildRunner",
    "CellPattern",
    "MatrixSpec",
    "PlatformRunners",
    "SourceOverride",
    "cell_values",
]


@dataclass(frozen=True, slots=True)
class SourceOverride:
    """A pinned source for one DeepSpeed version on one OS: URL (or the default) and sha256."""

    url: str  # "" = the default for that OS (PyPI sdist / GitHub tag archive)
    sha256: str


@dataclass(frozen=True, slots=True)
class CellPattern:
    """An ``exclude`` entry: every given key must match (fnmatch globs, or lists of them)."""

    fields: tuple[tuple[str, tuple[str, ...]], ...]
    line: int

    def matches(self, cell: Cell) -> bool:
        values = cell_values(cell)
        return all(any(fnmatch.fnmatchcase(values[key], pat) for pat in pats) for key, pats in self.fields)

    def describe(self) -> str:
        return ", ".join(f"{key}={'|'.join(pats)}" for key, pats in self.fields)


@dataclass(frozen=True, slots=True)
class BuildRunner:
    """Where a build job runs: ``labels`` for ``runs-on`` and the image whose toolchain it has."""

    labels: tuple[str, ...]
    image: str


@dataclass(frozen=True, slots=True)
class PlatformRunners:
    build: tuple[BuildRunner, ...]  # candidates, first that can build a cell wins
    smoke: tuple[str, ...]  # labels of the (self-hosted) GPU runner


@dataclass(frozen=True, slots=True)
class MatrixSpec:
    filename: str
    deepspeed: tuple[VersionTuple, ...]
    torch: tuple[tuple[TorchMinor, tuple[Variant, ...]], ...]
    python: tuple[Python, ...]
    platforms: tuple[Platform, ...]
    include: tuple[Cell, ...]
    exclude: tuple[CellPattern, ...]
    ops: tuple[str, ...] | None  # None = all shippable ops
    cpu_baselines: tuple[str, ...]  # compat.yml cpu_baselines the matrix names, at most one per CPU architecture
    cuda_check: str
    toolkits: Mapping[str, VersionTuple]  # variant name -> nvcc MAJOR.MINOR override
    arch_lists: Mapping[str, tuple[str, ...]]  # variant name -> TORCH_CUDA_ARCH_LIST override
    torch_index: str
    runners: Mapping[Platform, PlatformRunners]
    sources: Mapping[tuple[VersionTuple, str], SourceOverride]  # (deepspeed, os) -> override
    linux_runtime: RuntimeFloor | None = None  # None: compat.yml's linux_runtime_floor
    resolved: tuple[str, ...] = ()  # what each `newest:`/`variants: all` selector resolved to, and why

    def cpu_baseline_for(self, arch: str, compat: Compat) -> str:
        """The CPU baseline of a platform whose CPU is ``arch``: the matrix's for it, else compat.yml's default."""
        named = next((n for n in self.cpu_baselines if compat.cpu_baselines[n].arch == arch), None)
        return named or compat.cpu_baseline_default[arch]

    def product_cells(self) -> list[Cell]:
        """The product of the axes, nothing added or taken away."""
        return [
            Cell(deepspeed=ds, torch=torch, variant=variant, python=py, platform=platform)
            for ds in self.deepspeed
            for torch, variants in self.torch
            for variant in variants
            for py in self.python
            for platform in self.platforms
        ]

    def axis_cells(self) -> list[Cell]:
        """THE expansion (every plan goes through it, the whole matrix or a few axes of it): the
        product of the axes minus ``exclude``, then ``include`` (GitHub's order: an included
        cell is built even where an exclude pattern matches it). Rules not yet applied."""
        cells = self.product_cells()
        if self.exclude:
            cells = [c for c in cells if not any(p.matches(c) for p in self.exclude)]
        seen = set(cells)
        cells.extend(c for c in self.include if c not in seen)
        return cells


def cell_values(cell: Cell) -> dict[str, str]:
    """The text of each axis of a cell, as users write it in patterns and flags."""
    return {
        "deepspeed": format_version(cell.deepspeed),
        "torch": format_version(cell.torch),
        "variant": cell.variant.name,
        "python": str(cell.python),
        "platform": cell.platform.value,
    }
