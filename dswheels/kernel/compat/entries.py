"""compat.yml typed: one type per kind of entry (a torch release, a CUDA toolkit, a rule, ...) and
:class:`Compat`, all of them, with the lookups the planner makes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from dswheels.kernel.binaries.linux_runtime import LibstdcxxRelease, RuntimeFloor
from dswheels.kernel.model import Accelerator, Cell, Python, Variant
from dswheels.kernel.platform_traits import traits
from dswheels.kernel.versions import Range, TorchMinor, TorchVersion, VersionTuple, format_version

__all__ = [
    "AARCH64_KEY",
    "OSES",
    "ArchListRow",
    "Compat",
    "Condition",
    "CpuBaseline",
    "CpythonSource",
    "CudaComponent",
    "CudaToolkit",
    "ImageEnds",
    "MismatchRow",
    "OpInfo",
    "Rule",
    "RunnerImage",
    "TorchRelease",
    "Workaround",
    "describe_versions",
]

OSES = ("linux", "windows")
AARCH64_KEY = "linux_aarch64"  # compat.yml's key of Linux on aarch64 where its facts differ from x86_64's


@dataclass(frozen=True, slots=True)
class TorchRelease:
    """One torch minor. ``python`` and ``variants`` are keyed as compat.yml keys a platform
    (:attr:`~dswheels.kernel.platform_traits.PlatformTraits.compat_key`: ``linux``, ``windows``,
    ``linux_aarch64``); a platform without a key has no wheels compat.yml records."""

    minor: VersionTuple
    latest: TorchVersion
    released: str
    python: Mapping[str, tuple[Python, ...]]
    variants: Mapping[str, tuple[Variant, ...]]  # CUDA variants; "cpu" is always available
    cxx_std: int
    inferred: bool
    source: str
    # a platform recorded in its own section (torch_linux_aarch64): its confidence and source
    inferred_on: frozenset[str] = frozenset()
    sources_on: Mapping[str, str] = field(default_factory=dict)
    pypi_on: Mapping[str, str] = field(default_factory=dict)  # what PyPI's own wheel of the platform is

    def variants_for(self, os: str) -> tuple[Variant, ...]:
        return (*self.variants[os], Variant(name="cpu", cuda=None))

    def source_on(self, key: str) -> str:
        return self.sources_on.get(key, self.source)

    def inferred_for(self, key: str) -> bool:
        return key in self.inferred_on if key in self.sources_on else self.inferred


@dataclass(frozen=True, slots=True)
class ArchListRow:
    torch: Range
    variant: str
    lists: Mapping[str, tuple[str, ...]]  # by compat key; a row may hold some platforms only
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
    redist_sha256: str = ""  # sha256 of NVIDIA's redistrib_<install>.json; "" where none is pinned


@dataclass(frozen=True, slots=True)
class CudaComponent:
    """One part of a CUDA toolkit an op build needs, named as each way of getting it names it."""

    name: str
    cuda: Range  # the toolkits that have it as a component of its own
    redist: str  # its key in NVIDIA's redistrib_X.Y.Z.json
    pypi: str  # the extra of NVIDIA's `cuda-toolkit` wheel that carries it
    installer: str  # the Windows network installer's sub-package
    provides: str  # a path of the assembled root only it carries (``bin/nvcc``: ``nvcc.exe`` on Windows)
    source: str

    def provided_path(self, os: str) -> str:
        """:attr:`provides` as the toolkit of ``os`` spells it (tools get ``.exe`` on Windows).

        >>> CudaComponent("nvcc", None, "", "", "", "bin/nvcc", "").provided_path("windows")  # type: ignore[arg-type]
        'bin/nvcc.exe'
        """
        tool = "/bin/" in f"/{self.provides}" and "." not in self.provides.rsplit("/", 1)[-1]
        return traits(os).exe(self.provides) if tool else self.provides


@dataclass(frozen=True, slots=True)
class CpythonSource:
    """A CPython source release: the Wine host's Windows headers and exported names for one minor."""

    version: str
    sha256: str
    urls: tuple[str, ...]
    source: str


@dataclass(frozen=True, slots=True)
class ImageEnds:
    """GitHub's retirement of a runner image: the days its jobs fail on purpose, and when it is gone."""

    deprecated: dt.date
    brownouts: tuple[dt.date, ...]
    unsupported: dt.date
    announcement: str  # where GitHub said so (``actions/runner-images#14254``)

    def upcoming(self, today: dt.date) -> tuple[tuple[dt.date, str], ...]:
        """The brownouts and the end still ahead of ``today`` (or on it), soonest first."""
        days = [(d, "brownout (its jobs fail on purpose)") for d in self.brownouts]
        days.append((self.unsupported, "unsupported (its jobs no longer run)"))
        return tuple(sorted((d, what) for d, what in days if d >= today))


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
    arch: str = "x86_64"  # the CPU it runs on ("aarch64": GitHub's arm64 runners)
    runs_on: str = ""  # the runner label a container image runs on ("": the image is the label)
    container: str = ""  # the container the job's steps run in ("": none)
    gcc_toolset: bool = False  # its GCC N is gcc-toolset-N (RHEL's), installed and activated by the job
    ends: ImageEnds | None = None  # GitHub's announced retirement

    @property
    def label(self) -> str:
        """The ``runs-on`` label of the machine the image's jobs get."""
        return self.runs_on or self.name


@dataclass(frozen=True, slots=True)
class CpuBaseline:
    name: str
    gcc: str
    msvc: str
    simd: str
    forbidden_registers: tuple[str, ...]  # x86: registers above the baseline (dswheels.kernel.binaries.isa)
    note: str
    # what torch.backends.cpu.get_cpu_capability() answers on a CPU of this level ("": no torch level)
    torch_capability: str = ""
    # GCC flags of one op's ISA variant at this level, besides its -march=: (op, flags) pairs
    gcc_variant_flags: tuple[tuple[str, tuple[str, ...]], ...] = ()
    arch: str = "x86_64"  # the CPU architecture it is a level of
    forbidden_features: tuple[str, ...] = ()  # AArch64: features above it (dswheels.kernel.binaries.a64)
    qemu_cpu: str | None = None  # the qemu-user CPU model its oldest core is (verify runs the wheel as that CPU)


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


@dataclass(frozen=True)
class Compat:
    """All of compat.yml, typed. Lookups used per cell are cached by the planner."""

    collected: str
    sources: Mapping[str, str]
    torch: Mapping[VersionTuple, TorchRelease]
    torch_pypi_linux_variant: Mapping[VersionTuple, str]
    # a platform whose torch wheels compat.yml records for some minors only: why none before, and the source
    platform_scope: Mapping[str, tuple[str, str]]
    torch_index: str
    arch_tokens_rows: tuple[tuple[Range, tuple[str, ...]], ...]
    arch_lists: tuple[ArchListRow, ...]
    cuda: Mapping[VersionTuple, CudaToolkit]
    cuda_components: tuple[CudaComponent, ...]
    cpython_sources: Mapping[VersionTuple, CpythonSource]  # Python minor -> its pinned source release
    torch_gcc_limits: tuple[tuple[Range, Range, int, str], ...]
    torch_gcc_min: tuple[tuple[Range, int, str, str], ...]  # torch range, oldest GCC major, why, source
    libstdcxx: tuple[LibstdcxxRelease, ...]
    linux_runtime_floor: RuntimeFloor  # what Linux wheels promise to need at most
    linux_runtime_tag: str  # that promise as a platform tag (manylinux_2_28_x86_64)
    torch_provided_libraries: tuple[str, ...]  # sonames (globs) torch provides: left out of a wheel's floor
    linux_runtime_systems: str  # the systems that promise means, in words
    linux_runtime_source: str
    stl_floors: tuple[tuple[VersionTuple, VersionTuple, str], ...]
    runner_images: Mapping[str, RunnerImage]
    cpu_baselines: Mapping[str, CpuBaseline]
    cpu_baseline_default: Mapping[str, str]  # CPU architecture -> the baseline its platforms get by default
    deepspeed_releases: tuple[VersionTuple, ...]
    sdist_json: str
    windows_files: Mapping[str, str]  # path in the source tree -> text (what the sdist leaves out)
    mismatch_rows: tuple[MismatchRow, ...]
    rules: tuple[Rule, ...]
    workarounds: tuple[Workaround, ...]
    ops: tuple[OpInfo, ...]
    # the recorded copy of NVIDIA's redistrib_<release>.json (package data), None where there is none
    redist_records: Callable[[str], bytes | None] = field(default=lambda _release: None, compare=False, repr=False)

    @cached_property
    def torch_minors(self) -> tuple[TorchMinor, ...]:
        return tuple(TorchMinor(minor) for minor in sorted(self.torch))

    def arch_tokens(self, torch: VersionTuple) -> frozenset[str]:
        tokens: set[str] = set()
        for rng, add in self.arch_tokens_rows:
            if torch in rng:
                tokens.update(add)
        return frozenset(tokens)

    def torch_arch_list(self, torch: VersionTuple, variant: str, key: str = "linux") -> ArchListRow | None:
        """The first row of ``variant`` for ``torch`` that has a list for the platform ``key``."""
        for row in self.arch_lists:
            if row.variant == variant and torch in row.torch and key in row.lists:
                return row
        return None

    def pypi_variant(self, minor: VersionTuple, key: str) -> str | None:
        """The build PyPI's own torch wheel of ``minor`` is for the platform ``key`` (what ``pip install torch``
        gets there): ``cu130``, ``cpu``; None where PyPI's wheels are not the ones compat.yml records (Windows)."""
        release = self.torch.get(minor)
        return release.pypi_on.get(key) if release is not None else None

    def baseline_for(self, arch: str) -> CpuBaseline:
        """The default CPU baseline of a CPU architecture (``x86_64``, ``aarch64``)."""
        return self.cpu_baselines[self.cpu_baseline_default[arch]]

    def mismatch_ok(self, deepspeed: VersionTuple, major: int) -> frozenset[VersionTuple]:
        for row in self.mismatch_rows:
            if deepspeed in row.deepspeed:
                return row.lists.get(major, frozenset())
        return frozenset()

    def components_for(self, cuda: VersionTuple) -> tuple[CudaComponent, ...]:
        """The components a toolkit of ``cuda`` (MAJOR.MINOR) is assembled from, in compat.yml's order."""
        return tuple(c for c in self.cuda_components if cuda in c.cuda)

    def subpackages_for(self, cuda: VersionTuple) -> tuple[str, ...]:
        """The Windows network installer's sub-packages for those components."""
        return tuple(c.installer for c in self.components_for(cuda))

    def stl_floor(self, toolset: VersionTuple) -> tuple[VersionTuple, str] | None:
        """The lowest CUDA the STL of ``toolset`` accepts, if it has such a gate."""
        floor: tuple[VersionTuple, str] | None = None
        for from_toolset, min_cuda, source in self.stl_floors:
            if toolset >= from_toolset:
                floor = (min_cuda, source)
        return floor

    def runtime_floor(self, *, glibc: VersionTuple, glibcxx: VersionTuple) -> RuntimeFloor:
        """A promised floor; CXXABI is that of the libstdc++ defining ``glibcxx`` (``ValueError``: unknown)."""
        release = next((r for r in self.libstdcxx if r.glibcxx == glibcxx), None)
        if release is None:
            known = ", ".join(format_version(r.glibcxx) for r in self.libstdcxx)
            msg = f"GLIBCXX {format_version(glibcxx)} is no GCC release's newest version (known: {known})"
            raise ValueError(msg)
        return RuntimeFloor(glibc=glibc, glibcxx=glibcxx, cxxabi=release.cxxabi)

    def gcc_min(self, torch: VersionTuple) -> tuple[int, str]:
        """The oldest GCC major torch's headers accept, and why (0, "" when unconstrained)."""
        best = (0, "")
        for rng, gcc_min, why, _source in self.torch_gcc_min:
            if torch in rng and gcc_min > best[0]:
                best = (gcc_min, why)
        return best

    def ops_for(self, deepspeed: VersionTuple, accelerator: Accelerator) -> tuple[OpInfo, ...]:
        return tuple(op for op in self.ops if op.accelerator == accelerator and deepspeed in op.versions)

    @cached_property
    def op_names(self) -> frozenset[str]:
        return frozenset(op.name for op in self.ops)


def describe_versions(versions: Sequence[VersionTuple]) -> str:
    """``2.9, 2.10, 2.11`` for messages."""
    return ", ".join(format_version(v) for v in versions)
