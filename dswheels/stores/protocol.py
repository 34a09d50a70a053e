"""What a store is: a place wheels are published (a destination) and what every one answers.

The destinations are plain values (``To*``); :mod:`dswheels.stores` maps each kind to the store
that reads and writes it. Kept apart from the table so that the store modules can name these
types without importing each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol

from dswheels.kernel.index_files import IndexFile
from dswheels.kernel.locations import PUBLISHED
from dswheels.stores.outgoing import PublishResult
from dswheels.stores.wheel_ref import LocalWheel

__all__ = [
    "Destination",
    "Store",
    "ToDirectory",
    "ToGitHubRelease",
    "ToServedIndex",
    "ToUploadServer",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class ToDirectory:
    """A local directory of wheels (what `dswheels publish --dir` writes and `dswheels index --from` reads)."""

    kind: ClassVar[str] = "directory"
    path: Path = PUBLISHED


@dataclass(frozen=True, kw_only=True, slots=True)
class ToGitHubRelease:
    """A repository's GitHub Releases: ``tag`` is the one published to (reading lists every release)."""

    kind: ClassVar[str] = "github-release"
    repository: str  # OWNER/REPO
    tag: str = ""  # needed to publish; reading back lists every published release
    title: str | None = None  # of a new release (default: the tag)
    target: str | None = None  # the commit a new tag points at (default branch)


@dataclass(frozen=True, kw_only=True, slots=True)
class ToUploadServer:
    """A server with the PyPI upload API (pypiserver, devpi, Artifactory, ...)."""

    kind: ClassVar[str] = "upload-server"
    url: str  # the upload URL
    simple_url: str | None = None  # its simple index (default: <URL>/simple/)


@dataclass(frozen=True, kw_only=True, slots=True)
class ToServedIndex:
    """A PEP 503 index as served: an http(s) or file:// URL, or a site's directory (`dswheels index`'s output)."""

    kind: ClassVar[str] = "served-index"
    url: str


Destination = ToDirectory | ToGitHubRelease | ToUploadServer | ToServedIndex


class Store(Protocol):
    """Where wheels are published: what is there, one file of it, and publishing more.

    ``put`` keeps the rule of :mod:`~dswheels.stores.outgoing`: a name already there with the
    same bytes is skipped, with other bytes it is a ``PublishError`` before anything is written.
    """

    @property
    def where(self) -> str:
        """The destination in words (a path, a URL, OWNER/REPO)."""
        ...

    def names(self) -> Sequence[str]:
        """The wheel filenames there, without reading the wheels (`plan --skip-published`)."""
        ...

    def list(self) -> Sequence[IndexFile]:
        """The wheels there, each with its URL, sha256 and (where the store knows it) size."""
        ...

    def fetch(self, file: IndexFile, dest: Path) -> Path:
        """``file`` (one of :meth:`list`'s) into ``dest``: bounded, its sha256 checked; the local path."""
        ...

    def put(self, wheels: Sequence[LocalWheel]) -> PublishResult:
        """Publish ``wheels`` (each with its .metadata and build manifest); published files never change."""
        ...
