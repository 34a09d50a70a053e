"""Where wheels are published: one store per kind of destination, in one table.

A store (:class:`~dswheels.stores.protocol.Store`) lists the wheels at its destination (with
URL, sha256 and size), fetches one (bounded, its sha256 checked) and publishes more (``put``:
a published file never changes, :mod:`~dswheels.stores.outgoing`). `dswheels publish` puts
into one; `dswheels index`, `plan --skip-published` and `follow` read one. Neither side imports
the other: both go through :func:`store_for`.

======================  ===========================================  =================================
kind                    destination                                  module
======================  ===========================================  =================================
``directory``           a local directory of wheels                  :mod:`~dswheels.stores.directory`
``github-release``      a repository's GitHub Releases               :mod:`~dswheels.stores.github_release`
``upload-server``       a server with the PyPI upload API            :mod:`~dswheels.stores.upload_server`
``served-index``        a PEP 503 index as served (read-only)        :mod:`~dswheels.stores.served_index`
======================  ===========================================  =================================
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit
from urllib.request import url2pathname

from dswheels.kernel.errors import ConfigError
from dswheels.kernel.naming import PROJECT
from dswheels.stores.directory import DirectoryStore
from dswheels.stores.github_release import GitHubReleaseStore
from dswheels.stores.protocol import (
    Destination,
    Store,
    ToDirectory,
    ToGitHubRelease,
    ToServedIndex,
    ToUploadServer,
)
from dswheels.stores.served_index import ServedIndexStore
from dswheels.stores.upload_server import UploadServerStore

__all__ = [
    "STORES",
    "Destination",
    "Store",
    "ToDirectory",
    "ToGitHubRelease",
    "ToServedIndex",
    "ToUploadServer",
    "destination_of",
    "list_published",
    "store_for",
]

# kind -> the store of a destination of that kind (each takes its own To* type)
STORES: Mapping[str, Callable[[Any], Store]] = MappingProxyType(
    {
        ToDirectory.kind: DirectoryStore,
        ToGitHubRelease.kind: GitHubReleaseStore,
        ToUploadServer.kind: UploadServerStore,
        ToServedIndex.kind: ServedIndexStore,
    }
)


def destination_of(location: str, *, what: str = "the destination") -> Destination:
    """The destination a location names: an http(s) URL is a served index; a path (or file:// URL)
    is a site written by `dswheels index` when it holds ``simple/deepspeed/index.html``, else a
    directory of wheels. Anything else is a ``ConfigError`` naming ``what`` it was given as."""
    scheme = urlsplit(location).scheme
    if scheme in ("http", "https"):
        return ToServedIndex(url=location)
    path = None
    if scheme == "file":
        path = Path(url2pathname(urlsplit(location).path))
    elif scheme == "" or len(scheme) == 1:  # a path (C:\\... on Windows parses as scheme "c")
        path = Path(location)
    if path is None:
        raise ConfigError(
            f"{what} {location!r} is neither a directory nor an http(s) URL",
            hint="give the site URL (https://OWNER.github.io/REPO/), its simple/ index, or a local directory",
        )
    if (path / "simple" / PROJECT / "index.html").is_file():
        return ToServedIndex(url=str(path))
    return ToDirectory(path=path)


def store_for(target: Destination | str) -> Store:
    """The store of ``target``: a destination, or a location string (:func:`destination_of`)."""
    destination = destination_of(target) if isinstance(target, str) else target
    return STORES[destination.kind](destination)


def list_published(location: str) -> list[str]:
    """The wheel filenames published at a directory or an index URL (through its store).

    A directory is a generated site (its ``simple/deepspeed/index.html`` is read) or a
    directory of wheels. A URL is a site root, a PEP 503 index (``.../simple/``) or a
    project page; a 404 there means nothing is published yet.
    """
    destination = destination_of(location, what="--skip-published")
    if isinstance(destination, ToDirectory) and not destination.path.is_dir():
        raise ConfigError(
            f"--skip-published {location!r} is neither a directory nor an http(s) URL",
            hint="give the site URL (https://OWNER.github.io/REPO/), its simple/ index, or a local directory",
        )
    return sorted(store_for(destination).names())
