"""What each source was seen to say: plain values the comparison reads.

One type per source. A source left out (``--skip``) or not asked is ``None`` in
:class:`Upstream`, and the comparison says which facts went unchecked because of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from dswheels.facts.runner_images import ImageAnnouncement
from dswheels.kernel.model import Python
from dswheels.kernel.versions import VersionTuple

__all__ = [
    "CudaActionSeen",
    "CudaToolkitSeen",
    "DeepSpeedRelease",
    "DeepSpeedSourceSeen",
    "TorchIndexSeen",
    "TorchMinorSeen",
    "Upstream",
]

OSES = ("linux", "windows")


@dataclass(frozen=True, slots=True, kw_only=True)
class DeepSpeedRelease:
    """A DeepSpeed release on PyPI."""

    version: VersionTuple
    sdist_url: str  # "" when the release has no (unyanked) sdist
    sdist_sha256: str
    sdist_size: int | None
    uploaded: str  # YYYY-MM-DD of its first file


@dataclass(frozen=True, slots=True, kw_only=True)
class TorchMinorSeen:
    """A torch MAJOR.MINOR as PyPI shows it: its newest patch and that patch's wheels."""

    minor: VersionTuple
    latest: str  # the newest final patch release, e.g. "2.14.1"
    released: str  # YYYY-MM-DD of the first upload of MAJOR.MINOR.0 (or of the oldest patch)
    requires_python: str  # of ``latest``
    python: Mapping[str, tuple[Python, ...]]  # per OS: CPython tags of latest's wheels (x86_64 / win_amd64)
    cuda_pin: str = (
        ""  # what latest's Linux wheel requires: "13.2.2" (cuda-toolkit==) or "12.8" (nvidia-*-cu12 runtime)
    )
    cuda_pin_exact: bool = False  # True: a cuda-toolkit==X.Y.Z pin (a toolkit release), not only a runtime minor
    pin_from: str = ""  # where the pin was read ("PyPI JSON info", "METADATA of <wheel>")


@dataclass(frozen=True, slots=True, kw_only=True)
class TorchIndexSeen:
    """PyTorch's per-variant indexes (``download.pytorch.org/whl/<variant>/torch/``).

    ``wheels[variant][(minor, os)]`` is the set of Pythons with a wheel of that minor's newest
    patch on that index; ``absent`` lists the variants whose page does not exist (404).
    """

    base: str  # the URL template, with {variant}
    wheels: Mapping[str, Mapping[tuple[VersionTuple, str], tuple[Python, ...]]]
    patches: Mapping[str, Mapping[VersionTuple, str]]  # variant -> minor -> newest patch listed
    absent: tuple[str, ...] = ()

    def variants(self, minor: VersionTuple, os: str) -> tuple[str, ...]:
        """The CUDA variants with any wheel of ``minor`` for ``os`` (cpu left out: it always exists)."""
        return tuple(sorted(v for v, table in self.wheels.items() if v != "cpu" and table.get((minor, os))))


@dataclass(frozen=True, slots=True, kw_only=True)
class CudaActionSeen:
    """The CUDA versions the pinned CUDA-install action can install, per OS."""

    action: str  # "Jimver/cuda-toolkit"
    commit: str  # the commit the workflow pins
    version: str  # the version comment beside the pin ("v0.2.35")
    method: str  # "network" | "local": which of its tables applies
    installable: Mapping[str, tuple[VersionTuple, ...]]  # os -> full toolkit versions


@dataclass(frozen=True, slots=True, kw_only=True)
class CudaToolkitSeen:
    """The CUDA toolkit releases NVIDIA published: PyPI's ``cuda-toolkit`` has one version per release."""

    url: str  # where it was read
    releases: Mapping[VersionTuple, str]  # every final X.Y.Z -> YYYY-MM-DD of its first upload
    prereleases: Mapping[VersionTuple, tuple[str, ...]]  # X.Y.Z -> its pre-releases ("13.4.0rc1")

    def newest(self, minor: VersionTuple) -> VersionTuple | None:
        """The newest final release of CUDA ``minor`` (X.Y); None when NVIDIA published none."""
        return max((v for v in self.releases if v[:2] == minor), default=None)

    def first(self, minor: VersionTuple) -> VersionTuple | None:
        """The first final release of CUDA ``minor`` (X.Y.0, or its first patch when X.Y.0 was none)."""
        return min((v for v in self.releases if v[:2] == minor), default=None)

    def prereleases_of(self, minor: VersionTuple) -> tuple[str, ...]:
        return tuple(name for base, names in self.prereleases.items() if base[:2] == minor for name in names)

    def knows(self, minor: VersionTuple) -> bool:
        """Whether any release of ``minor``, final or pre-release, is listed (PyPI starts at 11.8)."""
        return any(v[:2] == minor for v in (*self.releases, *self.prereleases))


@dataclass(frozen=True, slots=True, kw_only=True)
class DeepSpeedSourceSeen:
    """What one release's sdist says, read statically from its op builders."""

    version: VersionTuple
    ops: Mapping[str, Mapping[str, str]]  # accelerator ("cuda"|"cpu") -> op name -> DS_BUILD_ variable suffix
    not_win32: frozenset[str]  # ops whose is_compatible() returns False under sys.platform == "win32"
    mismatch_ok: Mapping[int, tuple[VersionTuple, ...]] | None  # cuda_minor_mismatch_ok; None: not found
    nvcc_std: Mapping[VersionTuple, int]  # CUDA X.Y -> the C++ standard passed to nvcc (Linux)
    host_std: Mapping[VersionTuple, int]  # torch M.m -> the C++ standard passed to the host compiler (Linux)
    notes: tuple[str, ...] = ()  # what could not be read


@dataclass(frozen=True, slots=True, kw_only=True)
class Upstream:
    """Everything the sources said in one check; ``None`` = that source was not read."""

    deepspeed_releases: tuple[DeepSpeedRelease, ...] | None = None
    torch: Mapping[VersionTuple, TorchMinorSeen] | None = None
    torch_index: TorchIndexSeen | None = None
    cuda_action: CudaActionSeen | None = None
    cuda_without_action: bool = False  # the workflow was read and installs CUDA without the action
    cuda_toolkit: CudaToolkitSeen | None = None
    sources: tuple[DeepSpeedSourceSeen, ...] = ()
    runner_images: tuple[ImageAnnouncement, ...] | None = None  # GitHub's retirement announcements
    read: Mapping[str, str] = field(default_factory=dict)  # source name -> what was read (URLs, files)
    skipped: Mapping[str, str] = field(default_factory=dict)  # source name -> why it was not read (--skip)
    unreachable: Mapping[str, str] = field(default_factory=dict)  # source name -> why it could not be read
