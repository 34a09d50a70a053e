"""A CUDA toolkit from NVIDIA's redistributable archives: which archives, and the root they make.

NVIDIA publishes, per toolkit release, ``redistrib_X.Y.Z.json`` under
developer.download.nvidia.com/compute/cuda/redist/: every component (``cuda_nvcc``,
``cuda_cudart``, ``libcublas``, ...) with its version and, per platform (``linux-x86_64``,
``windows-x86_64``, ...), the archive's ``relative_path``, ``sha256``, ``md5`` and ``size``
(a string of digits). Each archive holds one top folder,
``<component>-<platform>-<version>-archive/``, and below it the component's part of a toolkit
root (``bin/``, ``include/``, ``lib/`` or ``lib/x64/``, ``nvvm/``) and its ``LICENSE``.

This module reads that JSON (:func:`parse_redist`), picks the archives of compat.yml's one
list of components for a platform (:func:`archives_for`: a component the JSON lacks is an
error that names it) and says what the merged root needs besides the archives
(:func:`root_links`). Downloading, checking and unpacking are
:mod:`dswheels.cuda.effects.install_toolkit`'s.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dswheels.kernel.archive import ArchiveMemberError, member_parts
from dswheels.kernel.compat import Compat
from dswheels.kernel.compat.entries import CudaComponent, CudaToolkit
from dswheels.kernel.digests import is_sha256
from dswheels.kernel.jsondoc import parse_json
from dswheels.kernel.model import Platform
from dswheels.kernel.numbers import is_ascii_digits
from dswheels.kernel.platform_traits import traits
from dswheels.kernel.remote_json import RemoteJson, shown

__all__ = [
    "REDIST_URL",
    "MissingComponentsError",
    "RedistArchive",
    "RedistRelease",
    "archives_for",
    "install_key",
    "missing_components",
    "parse_redist",
    "recorded_release",
    "redist_json_name",
    "redist_platform",
    "root_links",
]

REDIST_URL = "https://developer.download.nvidia.com/compute/cuda/redist/"


def redist_platform(platform: Platform | str) -> str:
    """NVIDIA's name of a wheel platform (or of an OS's first: ``linux``) in the JSON: ``linux-sbsa`` for aarch64.

    >>> redist_platform(Platform.LINUX_AARCH64), redist_platform("windows")
    ('linux-sbsa', 'windows-x86_64')
    """
    return traits(platform).cuda_redist


_RELEASE = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+")
_COMPONENT_VERSION = re.compile(r"[0-9]+(?:\.[0-9]+){0,5}")  # 13.0.88, 13.1.1.3
_HEADER_KEYS = ("release_date", "release_label", "release_product")
_ARCHIVE_SUFFIXES = (".tar.xz", ".zip")
MAX_ARCHIVE_BYTES = 8 * 1024**3  # cuBLAS for Linux is ~0.85 GB; an archive stated larger is not NVIDIA's


@dataclass(frozen=True, slots=True)
class RedistArchive:
    """One component's archive for one platform, as the JSON lists it."""

    component: str  # the JSON's key: cuda_nvcc, libcublas, ...
    version: str
    platform: str
    relative_path: str  # below the redist base URL
    sha256: str
    size: int

    @property
    def filename(self) -> str:
        return self.relative_path.rsplit("/", 1)[-1]


@dataclass(frozen=True, slots=True)
class RedistRelease:
    """``redistrib_X.Y.Z.json``: the release, and per component its version and platform entries.

    Every entry is read by :func:`parse_redist` into an archive or the reason it is none, and that
    reason is raised when the entry is used (:func:`archives_for`): a component dswheels does not
    install cannot stop an install with an entry of a shape it does not expect (13.2.2's
    ``libcusparse_lt`` nests its entries per CUDA variant).
    """

    label: str  # "13.0.3"
    versions: Mapping[str, str]  # component -> its version (its shape judged with each entry)
    entries: Mapping[str, Mapping[str, RedistArchive | str]]  # component -> platform -> archive, or what is wrong

    def archive(self, component: str, platform: str) -> RedistArchive:
        """The archive of ``component`` for ``platform`` (``ValueError`` saying what is wrong with its entry)."""
        entry = self.entries[component][platform]
        if isinstance(entry, str):  # what is wrong with the entry, said when it is used
            raise ValueError(entry)  # noqa: TRY004 - a bad value of the document, not a caller's wrong type
        return entry


class MissingComponentsError(ValueError):
    """Components of compat.yml's list that a release's JSON does not have (for a platform)."""

    def __init__(self, release: str, platform: str, missing: Sequence[str]) -> None:
        self.release = release
        self.platform = platform
        self.missing = tuple(missing)
        super().__init__(
            f"redistrib_{release}.json has no {platform} archive of {', '.join(self.missing)}",
        )


class _Redist(RemoteJson):
    """A value of the JSON; its keys are NVIDIA's text too, named in errors only when plain (RemoteJson)."""

    __slots__ = ()

    def __init__(self, data: object, path: str = "", *, document: str = "redistrib JSON") -> None:
        super().__init__(data, path, document=document)


def redist_json_name(release: str) -> str:
    """``redistrib_13.0.3.json`` (``ValueError`` unless ``release`` is X.Y.Z)."""
    if not _RELEASE.fullmatch(release):
        msg = f"not a CUDA toolkit release: {release!r} (expected X.Y.Z, e.g. 13.0.3)"
        raise ValueError(msg)
    return f"redistrib_{release}.json"


def _archive(component: str, version: _Redist, platform: str, entry: _Redist) -> RedistArchive:
    if not _COMPONENT_VERSION.fullmatch(version.text()):
        raise version.fail("a version of ASCII digits and dots (13.0.88)")
    path = entry.at("relative_path").text()
    try:
        parts = member_parts(path)
    except ArchiveMemberError as exc:
        why = str(exc)[:200] if shown(path) == repr(path) else f"got {shown(path)}"  # the path if it is plain text
        raise entry.fail(f"a relative path below the redist folder ({why})") from None
    if "/".join(parts) != path or not path.endswith(_ARCHIVE_SUFFIXES) or parts[0] != component:
        folder = component if shown(component) == repr(component) else "<component>"  # a key is NVIDIA's text
        raise entry.fail(f"an archive path {folder}/<platform>/<name>{'|'.join(_ARCHIVE_SUFFIXES)}, got {shown(path)}")
    sha256 = entry.at("sha256").text()
    if not is_sha256(sha256):
        raise entry.at("sha256").fail("a sha256 (64 lowercase hex digits)")
    size_node = entry.at("size")
    size_text = str(size_node.data) if isinstance(size_node.data, int) else size_node.text()
    digits = is_ascii_digits(size_text)  # not "²", which isdigit() accepts and int() refuses
    if isinstance(size_node.data, bool) or not digits or not 0 < int(size_text) <= MAX_ARCHIVE_BYTES:
        raise size_node.fail(f"a size in bytes (digits, at most {MAX_ARCHIVE_BYTES})")
    return RedistArchive(
        component=component,
        version=version.text(),
        platform=platform,
        relative_path=path,
        sha256=sha256,
        size=int(size_text),
    )


def _entry(component: str, version: _Redist, platform: str, entry: _Redist) -> RedistArchive | str:
    try:
        return _archive(component, version, platform, entry)
    except ValueError as exc:
        return str(exc)


def parse_redist(data: object) -> RedistRelease:
    """The release a parsed ``redistrib_X.Y.Z.json`` describes; ``ValueError`` for any other shape.

    Per component its ``version`` and its platform entries; an entry's ``relative_path`` (one
    relative path below the component's own folder), ``sha256`` and ``size`` are judged when
    it is used (:meth:`RedistRelease.archive`). Other keys (``name``, ``license``, ``md5``)
    are not read.
    """
    root = _Redist(data)
    label = root.at("release_label").text()
    if not _RELEASE.fullmatch(label):
        raise root.at("release_label").fail("a release X.Y.Z")
    versions: dict[str, str] = {}
    entries: dict[str, dict[str, RedistArchive | str]] = {}
    for key, node in root.items():
        if key in _HEADER_KEYS or not isinstance(node.data, dict):
            continue
        version = node.at("version")
        versions[key] = version.text()
        entries[key] = {
            platform: _entry(key, version, platform, entry)
            for platform, entry in node.items()
            if isinstance(entry.data, dict)
        }
    return RedistRelease(label=label, versions=versions, entries=entries)


def missing_components(
    release: RedistRelease, components: Sequence[CudaComponent], platform: Platform | str
) -> list[str]:
    """The components (``name (redist key)``) the release has no archive of for ``platform``."""
    name = redist_platform(platform)
    return [f"{c.name} ({c.redist})" for c in components if name not in release.entries.get(c.redist, {})]


def archives_for(
    release: RedistRelease, components: Sequence[CudaComponent], platform: Platform | str
) -> tuple[RedistArchive, ...]:
    """The archive of each component for ``platform``, in the list's order.

    :class:`MissingComponentsError` names every component without one; ``ValueError`` for an
    entry of the wrong shape.
    """
    missing = missing_components(release, components, platform)
    if missing:
        raise MissingComponentsError(release.label, redist_platform(platform), missing)
    return tuple(release.archive(c.redist, redist_platform(platform)) for c in components)


def root_links(platform: Platform | str) -> tuple[tuple[str, str], ...]:
    """Links the merged root needs that no archive carries: (link, target relative to the link's folder).

    On Linux, nvcc.profile looks for headers and libraries in ``$(TOP)/targets/x86_64-linux/``
    (``targets/sbsa-linux/`` on an arm64 server; the full installer's layout: NVIDIA's component
    archives have no ``targets/``), and
    DeepSpeed's op builders link with ``-L$CUDA_HOME/lib64`` where the archives have ``lib/``.
    Windows archives already have the layout nvcc.profile and torch use (``lib/x64``). The table says which.
    """
    return traits(platform).cuda_root_links


def install_key(json_sha256: str, archives: Sequence[RedistArchive]) -> str:
    """What an assembled root is cached under: the JSON's digest and the archives taken from it."""
    text = "\n".join([json_sha256, *(f"{a.component} {a.platform} {a.sha256}" for a in archives)])
    return hashlib.sha256(text.encode()).hexdigest()


def recorded_release(compat: Compat, toolkit: CudaToolkit) -> RedistRelease | None:
    """The pinned ``redistrib_<install>.json`` of ``toolkit`` as dswheels recorded it; None where
    compat.yml pins none or no copy is recorded. ``ValueError`` when the copy is not the pinned one."""
    if not toolkit.redist_sha256:
        return None
    data = compat.redist_records(toolkit.install)
    if data is None:
        return None
    name = redist_json_name(toolkit.install)
    actual = hashlib.sha256(data).hexdigest()
    if actual != toolkit.redist_sha256:
        msg = f"the recorded {name} has sha256 {actual}; compat.yml pins {toolkit.redist_sha256}"
        raise ValueError(msg)
    release = parse_redist(parse_json(data, what=name))
    if release.label != toolkit.install:
        msg = f"the recorded {name} is the JSON of release {release.label}"
        raise ValueError(msg)
    return release
