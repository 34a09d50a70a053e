"""The values every step passes around: a cell, its resolved toolchain and op set.

A *cell* is one wheel: DeepSpeed version x torch MAJOR.MINOR x variant (``cu128``/``cpu``)
x Python x platform. All types are frozen; collections are tuples.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

from dswheels.kernel.binaries.linux_runtime import RuntimeFloor
from dswheels.kernel.manylinux import linux_arch
from dswheels.kernel.numbers import SPACE
from dswheels.kernel.versions import TorchMinor, TorchVersion, VersionTuple, format_version, parse_version

__all__ = [
    "OS",
    "Accelerator",
    "Cell",
    "DroppedCell",
    "HostCompiler",
    "OpPlan",
    "Plan",
    "PlannedCell",
    "Platform",
    "Python",
    "Reason",
    "Source",
    "SourceKind",
    "Toolchain",
    "Variant",
    "parse_platform",
    "suggest",
]


class OS(str, Enum):
    """The operating system a wheel is for: a ``str`` enum, so compat.yml's ``windows``/``linux`` keys compare equal.

    What differs per OS is asked of :mod:`dswheels.platforms` (its table), not decided by comparing names.
    """

    _value_: str
    WINDOWS = "windows"
    LINUX = "linux"

    def __str__(self) -> str:
        return self.value


_PLATFORM_OS = {"win_amd64": OS.WINDOWS, "linux_x86_64": OS.LINUX, "linux_aarch64": OS.LINUX}
_SYSCONFIG_PLATFORM = {"win-amd64": "win_amd64", "linux-x86_64": "linux_x86_64", "linux-aarch64": "linux_aarch64"}


class Platform(str, Enum):
    """Wheel platform tags we build for."""

    _value_: str
    WIN_AMD64 = "win_amd64"
    LINUX_X86_64 = "linux_x86_64"
    LINUX_AARCH64 = "linux_aarch64"  # Grace (GH200, GB200, GB300) and every arm64 server: torch's sbsa builds

    os: OS  # the key used throughout compat.yml (``windows``/``linux``)

    def __init__(self, value: str) -> None:
        # a plain attribute, not a property: the planner asks this ~10^5 times per plan
        self.os = _PLATFORM_OS[value]

    def __str__(self) -> str:
        return self._value_

    @classmethod
    def from_tag(cls, tag: str) -> Platform:
        """The platform of a wheel's platform tag: a Linux wheel's carries its floor (``manylinux_2_28_x86_64``,
        :mod:`dswheels.kernel.manylinux`), or none (``linux_x86_64``); ValueError for one we build no wheels for.

        >>> Platform.from_tag("manylinux_2_28_x86_64"), Platform.from_tag("win_amd64")
        (<Platform.LINUX_X86_64: 'linux_x86_64'>, <Platform.WIN_AMD64: 'win_amd64'>)
        >>> Platform.from_tag("manylinux_2_28_aarch64")
        <Platform.LINUX_AARCH64: 'linux_aarch64'>
        """
        if (arch := linux_arch(tag)) is not None:
            return cls(f"linux_{arch}")
        return cls(tag)

    @classmethod
    def from_sysconfig(cls, name: str) -> Platform | None:
        """The platform of an interpreter's ``sysconfig.get_platform()``; None for one we build no wheels for.

        >>> Platform.from_sysconfig("win-amd64"), Platform.from_sysconfig("win32")
        (<Platform.WIN_AMD64: 'win_amd64'>, None)
        """
        tag = _SYSCONFIG_PLATFORM.get(name)
        return cls(tag) if tag else None


class Accelerator(str, Enum):
    """DeepSpeed's accelerator (``DS_ACCELERATOR``): a wheel's prebuilt ops load only under the one it was built for."""

    CUDA = "cuda"
    CPU = "cpu"

    def __str__(self) -> str:
        return self.value


_VARIANT_RE = re.compile(r"^cu([0-9]{2,3})$")


@dataclass(frozen=True, slots=True, order=True)
class Variant:
    """A torch build flavour: ``cpu`` or ``cuXYZ`` (CUDA X.Y... as PyTorch names its indexes)."""

    name: str
    cuda: VersionTuple | None

    @classmethod
    def parse(cls, text: str) -> Variant:
        """Accept ``cu128``, ``12.8`` or ``cpu``.

        >>> Variant.parse("12.8").name
        'cu128'
        >>> Variant.parse("cu130").cuda
        (13, 0)
        """
        text = text.strip(SPACE).lower()
        if text == "cpu":
            return cls(name="cpu", cuda=None)
        match = _VARIANT_RE.match(text)
        if match:
            digits = match.group(1)
            return cls(name=text, cuda=(int(digits[:-1]), int(digits[-1])))
        if re.match(r"^[0-9]+\.[0-9]$", text):
            major, minor = parse_version(text)
            return cls(name=f"cu{major}{minor}", cuda=(major, minor))
        msg = f"not a torch variant: {text!r} (expected 'cpu', 'cuXYZ' like 'cu128', or a CUDA version like '12.8')"
        raise ValueError(msg)

    @property
    def is_cuda(self) -> bool:
        return self.cuda is not None

    @property
    def cuda_text(self) -> str:
        return format_version(self.cuda) if self.cuda else ""

    @property
    def accelerator(self) -> Accelerator:
        """What the variant's wheels are built for: ``cuda``, or ``cpu`` (never left to DeepSpeed's auto-detection)."""
        return Accelerator.CUDA if self.is_cuda else Accelerator.CPU

    def __str__(self) -> str:
        return self.name


_PY_RE = re.compile(r"^(?:cp)?([0-9])\.?([0-9]+)(t?)$")


@dataclass(frozen=True, slots=True, order=True)
class Python:
    """A CPython version, optionally free-threaded (``3.13t`` / tag ``cp313t``)."""

    version: VersionTuple
    free_threaded: bool = False

    @classmethod
    def parse(cls, text: str) -> Python:
        """Accept ``3.12``, ``cp312``, ``3.13t`` or ``cp313t``.

        >>> Python.parse("cp313t").tag
        'cp313t'
        """
        match = _PY_RE.fullmatch(text.strip(SPACE).lower())
        if not match:
            msg = f"not a Python version: {text!r} (expected e.g. '3.12', '3.13t' or 'cp312')"
            raise ValueError(msg)
        major, minor, t = match.groups()
        return cls(version=(int(major), int(minor)), free_threaded=bool(t))

    @property
    def tag(self) -> str:
        """The interpreter tag of the wheel (``cp312``; free-threaded ``cp313t`` is the ABI tag)."""
        return f"cp{self.version[0]}{self.version[1]}" + ("t" if self.free_threaded else "")

    @property
    def interpreter_tag(self) -> str:
        return f"cp{self.version[0]}{self.version[1]}"

    def __str__(self) -> str:
        return format_version(self.version) + ("t" if self.free_threaded else "")


@dataclass(frozen=True, slots=True, order=True)
class Cell:
    """One wheel to build. Its id (see :mod:`dswheels.kernel.naming`) is stable and selectable."""

    deepspeed: VersionTuple
    torch: TorchMinor
    variant: Variant
    python: Python
    platform: Platform


@dataclass(frozen=True, slots=True)
class Reason:
    """Why a rule forbids a cell: the rule's id, the sentence, and what would work instead."""

    rule: str
    message: str
    fix: str = ""
    source: str = ""


@dataclass(frozen=True, slots=True)
class DroppedCell:
    cell: Cell
    reasons: tuple[Reason, ...]


@dataclass(frozen=True, slots=True)
class HostCompiler:
    """The C++ compiler nvcc and setuptools use: MSVC toolset on Windows, GCC on Linux."""

    kind: str  # "msvc" | "gcc"
    version: str  # "14.44" | "13"
    why: str


@dataclass(frozen=True, slots=True)
class Toolchain:
    """Everything a build machine needs besides the source: resolved per cell by the plan."""

    runner_image: str
    runs_on: tuple[str, ...]
    host_compiler: HostCompiler
    nvcc: VersionTuple | None
    cuda_toolkit: str  # full toolkit version to install ("12.8.1"), "" for cpu
    arch_list: tuple[str, ...]  # TORCH_CUDA_ARCH_LIST tokens, "+PTX" on the last where kept
    skip_cuda_check: bool
    cuda_check: str  # the reason for the DS_SKIP_CUDA_CHECK decision, always spelled out
    nvcc_flags: tuple[str, ...]  # NVCC_APPEND_FLAGS workarounds
    cpu_baseline: str
    cuda_components: tuple[str, ...]  # the redistrib JSON keys of the components cuda_toolkit is assembled from
    notes: tuple[str, ...]
    linux_runtime: RuntimeFloor | None = None  # the most a Linux wheel may need of glibc/libstdc++
    container: str = ""  # the container the build runs in on runs_on ("": the runner itself)
    gcc_toolset: bool = False  # the host GCC is gcc-toolset-<version> (RHEL's), which the job installs

    @property
    def arch_list_text(self) -> str:
        return ";".join(self.arch_list)


@dataclass(frozen=True, slots=True)
class OpPlan:
    """Ops to compile (name -> DS_BUILD_* suffix) and ops left out with the reason."""

    build: tuple[tuple[str, str], ...]
    left_out: tuple[tuple[str, str], ...]

    @property
    def build_names(self) -> tuple[str, ...]:
        return tuple(name for name, _var in self.build)


class SourceKind(str, Enum):
    """Where a DeepSpeed source comes from."""

    SDIST = "sdist"  # PyPI's sdist, its sha256 from PyPI's JSON API (every platform)
    ARCHIVE = "archive"  # a matrix override: any URL, its sha256 pinned in the matrix

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class Source:
    """Where the DeepSpeed source for a cell comes from."""

    kind: SourceKind
    url: str  # "" for sdist: the URL and sha256 come from PyPI's JSON API at fetch time
    sha256: str  # "" when not pinned (sdist: checked against PyPI's digest; an archive always has one)


@dataclass(frozen=True, slots=True)
class PlannedCell:
    cell: Cell
    torch_version: TorchVersion  # the torch release to install, e.g. "2.9.1"
    torch_index: str  # pip index URL that has it
    toolchain: Toolchain
    ops: OpPlan
    source: Source
    smoke_runs_on: tuple[str, ...]


@dataclass(frozen=True)
class Plan:
    planned: tuple[PlannedCell, ...]
    dropped: tuple[DroppedCell, ...]
    matrix: str
    mode: str  # "matrix" | "combo" | "canary"
    notes: tuple[str, ...] = field(default=())


def suggest(word: str, choices: Sequence[str]) -> str:
    """A ' (did you mean ...?)' suffix, or '' when nothing is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def parse_platform(text: str) -> Platform:
    """A wheel platform as users write it (``linux_x86_64``); ValueError with a suggestion otherwise."""
    try:
        return Platform(text)
    except ValueError:
        names = [p.value for p in Platform]
        msg = f"unknown platform {text!r}{suggest(text, names)}; known: {', '.join(names)}"
        raise ValueError(msg) from None
