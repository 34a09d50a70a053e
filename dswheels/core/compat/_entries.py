"""One type per kind of compat.yml entry: a torch release, a CUDA toolkit, a runner image, a rule, ..."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dswheels.core.model import Accelerator, Cell, Python, Variant
from dswheels.core.versions import Range, VersionTuple

__all__ = [
    "OSES",
    "ArchListRow",
    "Condition",
    "CpuBaseline",
    "CudaToolkit",
    "MismatchRow",
    "OpInfo",
    "Rule",
    "RunnerImage",
    "TorchRelease",
    "Workaround",
]

OSES = ("linux", "windows")


@dataclass(frozen=True, slots=True)
class TorchRelease:
    minor: VersionTuple
    latest: str
    released: str
    python: Mapping[str, tuple[Python, ...]]
    variants: Mapping[str, tuple[Variant, ...]]  # CUDA variants; "cpu" is always available
    cxx_std: int
    inferred: bool
    source: str

    def variants_for(self, os: str) -> tuple[Variant, ...]:
        return (*self.variants[os], Variant(name="cpu", cuda=None))


@dataclass(frozen=True, slots=True)
class ArchListRow:
    torch: Range
    variant: str
    lists: Mapping[str, tuple[str, ...]]
    inferred: bool
    source: str


@dataclass(frozen=True, slots=True)
class CudaToolkit:
    minor: VersionTuple
    install: str
    sm: frozenset[str]
    msvc: tuple[int, int]
    gcc_max: int
    inferred: bool
    source: str


@dataclass(frozen=True, slots=True)
class RunnerImage:
    name: str
    os: str
    msvc: tuple[str, ...]  # toolsets, default first (Windows)
    gcc: tuple[str, ...]  # GCC majors, default first (Linux)
    inferred: bool
    source: str
    glibc: VersionTuple | None = None  # the image's glibc (Linux)
    glibcxx: VersionTuple | None = None  # the newest GLIBCXX of its system libstdc++.so.6 (Linux)


@dataclass(frozen=True, slots=True)
class CpuBaseline:
    name: str
    gcc: str
    msvc: str
    simd: str
    forbidden_registers: tuple[str, ...]
    note: str


@dataclass(frozen=True, slots=True)
class Condition:
    """A conjunction over a cell; ``None`` fields are unconstrained."""

    deepspeed: Range | None = None
    torch: Range | None = None
    cuda: Range | None = None
    python: Range | None = None
    os: str | None = None
    variant: str | None = None  # "cpu" | "cuda"

    def matches(self, cell: Cell) -> bool:
        if self.os is not None and cell.platform.os != self.os:
            return False
        if self.variant is not None and ("cuda" if cell.variant.is_cuda else "cpu") != self.variant:
            return False
        if self.deepspeed is not None and cell.deepspeed not in self.deepspeed:
            return False
        if self.torch is not None and cell.torch not in self.torch:
            return False
        if self.python is not None and cell.python.version not in self.python:
            return False
        if self.cuda is not None:
            cuda = cell.variant.cuda
            if cuda is None or cuda not in self.cuda:
                return False
        return True

    def describe(self) -> str:
        parts = []
        for key in ("deepspeed", "torch", "cuda", "python"):
            value = getattr(self, key)
            if value is not None:
                parts.append(f"{key} {value}")
        if self.os:
            parts.append(f"os {self.os}")
        if self.variant:
            parts.append(f"{self.variant} variant")
        return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    when: Condition
    require: Condition
    why: str
    fix: str
    inferred: bool
    source: str


@dataclass(frozen=True, slots=True)
class Workaround:
    id: str
    when: Condition
    nvcc_flags: tuple[str, ...]
    note: str
    why: str
    source: str


@dataclass(frozen=True, slots=True)
class OpInfo:
    name: str
    var: str
    accelerator: Accelerator
    versions: Range
    platforms: frozenset[str]  # where it can be compiled at all
    ship: frozenset[str]  # where "ops: all" builds it
    left_out: Mapping[str, str]
    min_arch: VersionTuple | None
    source: str
    ship_versions: Range | None = None  # "ops: all" builds it only for these DeepSpeed versions
    not_portable: str = ""  # why not for the others


@dataclass(frozen=True, slots=True)
class MismatchRow:
    deepspeed: Range
    lists: Mapping[int, frozenset[VersionTuple]]
