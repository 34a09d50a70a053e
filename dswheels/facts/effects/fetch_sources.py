"""Fetch what compat.yml's sources say today (``dswheels facts check``); the core compares it.

Sources, each with a name ``--skip`` takes:

- ``pypi-deepspeed``: ``<pypi>/deepspeed/json`` (releases, sdists);
- ``pypi-torch``: ``<pypi>/torch/json`` (releases, wheels per platform, Requires-Python; the
  newest release's requirements) and, for the other minors' newest patch, METADATA read from
  the Linux wheel with range requests (the CUDA toolkit it pins);
- ``pypi-cuda-toolkit``: ``<pypi>/cuda-toolkit/json``, NVIDIA's meta-package: one version per
  CUDA toolkit release, pre-releases included (the newest patch of each minor);
- ``torch-index``: PyTorch's per-variant pages ``<torch_index>`` for every variant a torch
  minor in scope lists and every ``cuXY`` of compat.yml's CUDA toolkits;
- ``cuda-action``: the version tables of the CUDA-install action at the commit the wheels
  workflow pins (a workflow without the action installs any release NVIDIA published);
- ``deepspeed-sdists``: the sdists of the newest known releases, of every new release and of
  the releases on each side of a checkable rule's boundary (verified by PyPI's sha256).

Each source is read on its own: one that cannot be read is named in ``Upstream.unreachable``
(its facts reported unchecked) and the others are still read, so one run names every source
that failed. A refused connection is tried again twice, not for half a minute
(:data:`CONNECT_RETRIES`); every request has a connect and a read timeout.
"""

from __future__ import annotations

import tarfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar
from urllib.parse import unquote, urlsplit

import requests

from dswheels.facts.compare_deepspeed import boundary_versions, rule_checks
from dswheels.facts.cuda_action import ACTION, cuda_action_seen, find_action_pin, uses_action
from dswheels.facts.deepspeed_source import read_deepspeed_source, wanted_member
from dswheels.facts.pypi_json import (
    cuda_toolkit_releases,
    deepspeed_releases,
    linux_wheel,
    parse_cuda_pin,
    torch_minors,
)
from dswheels.facts.runner_images import ImageAnnouncement, announcements
from dswheels.facts.seen import (
    CudaActionSeen,
    CudaToolkitSeen,
    DeepSpeedRelease,
    DeepSpeedSourceSeen,
    TorchIndexSeen,
    TorchMinorSeen,
    Upstream,
)
from dswheels.facts.torch_index import torch_index_seen
from dswheels.host.downloads import Downloader
from dswheels.host.files import read_bounded
from dswheels.host.http import MAX_PAGE_BYTES, TIMEOUTS, check_redirects, read_limited
from dswheels.host.log import get_reporter
from dswheels.host.tar_bounds import open_tar
from dswheels.host.unpack import MAX_MEMBERS, MAX_UNPACKED_BYTES
from dswheels.host.wheel_metadata import read_wheel_metadata
from dswheels.kernel.archive import ArchiveMemberError
from dswheels.kernel.compat import Compat
from dswheels.kernel.errors import SourceError
from dswheels.kernel.model import Variant
from dswheels.kernel.pypi_project import PypiProject
from dswheels.kernel.versions import VersionTuple, format_version
from dswheels.kernel.wheel_contents import parse_metadata

__all__ = ["CONNECT_RETRIES", "SOURCES", "WORKFLOW", "UpstreamOptions", "read_upstream"]

SOURCES = (
    "pypi-deepspeed",
    "pypi-torch",
    "pypi-cuda-toolkit",
    "torch-index",
    "cuda-action",
    "deepspeed-sdists",
    "runner-images",
)
WORKFLOW = Path(".github") / "workflows" / "wheels.yml"  # the workflow that installs CUDA, in the repository
CONNECT_RETRIES = 2  # a host that refuses (or does not resolve) is given up after ~2 s, not ~30 s
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class UpstreamOptions:
    pypi: str = "https://pypi.org/pypi/{project}/json"
    torch_index: str = "https://download.pytorch.org/whl/{variant}/torch/"
    action_links: str = "https://raw.githubusercontent.com/{action}/{commit}/src/links/{os}-links.ts"
    # GitHub's announcements of runner images' retirement (the Announcement label of actions/runner-images)
    runner_images: str = (
        "https://api.github.com/repos/actions/runner-images/issues?labels=Announcement&state=all&per_page=100"
    )
    workflow: Path | None = None  # the workflow that installs CUDA (None: none was found)
    torch_minors: int | None = 3  # compat.yml's newest N torch minors (and newer ones); None: all
    sdists: int | None = 2  # the newest N known DeepSpeed releases (plus new and boundary ones); None: all
    skip: frozenset[str] = field(default_factory=frozenset)


def _get_text(session: requests.Session, url: str, *, missing_ok: bool = False) -> str | None:
    """The text at ``url`` (http(s) or file://), read with a bound; None for a 404 when ``missing_ok``."""
    parts = urlsplit(url)
    if parts.scheme == "file":
        path = Path(unquote(parts.path))
        if not path.exists() and missing_ok:
            return None
        try:
            return read_bounded(path, limit=MAX_PAGE_BYTES).decode("utf-8")
        except OSError as exc:
            raise SourceError(f"cannot read {path}: {exc.strerror}") from None
        except ValueError as exc:  # not UTF-8, too large, or not a regular file (a FIFO, a device)
            raise SourceError(f"cannot read {path}: {exc}") from None
    try:
        response = session.get(url, timeout=TIMEOUTS.for_request, stream=True)
    except requests.RequestException as exc:
        raise SourceError(f"cannot reach {url}: {type(exc).__name__}") from None
    with response:
        if response.status_code == 404 and missing_ok:
            return None
        if response.status_code != 200:
            raise SourceError(f"{url} answered HTTP {response.status_code}")
        check_redirects(url, response, error=SourceError)
        body = read_limited(response, limit=MAX_PAGE_BYTES, what=url, error=SourceError)
    return body.decode(response.encoding or "utf-8", "replace")


def _torch_scope(compat: Compat, seen: Mapping[VersionTuple, TorchMinorSeen], newest: int | None) -> list[VersionTuple]:
    known = sorted(compat.torch)
    scope = known if newest is None else known[-newest:]
    return sorted({*scope, *(m for m in seen if m > known[-1])})


def _pins(
    downloader: Downloader, project: PypiProject, seen: dict[VersionTuple, TorchMinorSeen]
) -> dict[VersionTuple, TorchMinorSeen]:
    """Fill in the CUDA pin of every minor's newest patch (the newest release has it from the JSON)."""
    for minor, item in list(seen.items()):
        if item.cuda_pin:
            continue
        wheel = linux_wheel(project, item.latest)
        if wheel is None:
            continue
        text = read_wheel_metadata(downloader.session, wheel[1])
        try:
            requires = parse_metadata(text).requires_dist
        except ValueError as exc:
            raise SourceError(f"the METADATA of {wheel[1]}: {exc}") from None
        pin = parse_cuda_pin(requires)
        if pin is not None:
            seen[minor] = replace(item, cuda_pin=pin[0], cuda_pin_exact=pin[1], pin_from=f"METADATA of {wheel[0]}")
    return seen


def _variants_to_read(compat: Compat, minors: list[VersionTuple]) -> list[str]:
    names = {v.name for m in minors if m in compat.torch for vs in compat.torch[m].variants.values() for v in vs}
    floor = min((Variant.parse(n).cuda or (0,) for n in names), default=(0,))
    names |= {f"cu{c[0]}{c[1]}" for c in compat.cuda if c >= floor}
    return sorted(names, key=lambda n: Variant.parse(n).cuda or (0,))


def _sdist_versions(
    compat: Compat, raw: Mapping[str, object], releases: tuple[DeepSpeedRelease, ...], newest: int | None
) -> list[DeepSpeedRelease]:
    known = sorted(compat.deepspeed_releases)
    wanted = set(known if newest is None else known[-newest:])
    wanted |= {r.version for r in releases if r.version > known[-1]}
    wanted |= boundary_versions(known, rule_checks(compat, raw))
    return [r for r in releases if r.version in wanted and r.sdist_url]


_MAX_SOURCE_FILE = 4 * 1024**2  # setup.py, op builders, version files: tens of KB


def _source_text(name: str, data: bytes) -> str:
    if len(data) > _MAX_SOURCE_FILE:
        msg = f"{name!r} is larger than {_MAX_SOURCE_FILE >> 20} MiB"
        raise ArchiveMemberError(msg)
    return data.decode("utf-8", "replace")


def _read_sdist(downloader: Downloader, release: DeepSpeedRelease, compat: Compat) -> DeepSpeedSourceSeen:
    path, _sha = downloader.fetch(release.sdist_url, sha256=release.sdist_sha256, size=release.sdist_size)
    files: dict[str, str] = {}
    try:
        # the unpacker's bounds: every member header judged before tarfile reads it
        with open_tar(path, max_bytes=MAX_UNPACKED_BYTES, max_members=2 * MAX_MEMBERS) as tar:
            for member in tar:
                relative = member.name.split("/", 1)[1] if "/" in member.name else ""
                if member.isfile() and wanted_member(relative) and (fh := tar.extractfile(member)) is not None:
                    with fh:
                        files[relative] = _source_text(member.name, fh.read(_MAX_SOURCE_FILE + 1))
    except (tarfile.TarError, OSError, EOFError, ArchiveMemberError) as exc:
        raise SourceError(f"cannot read {path.name}: {exc}") from None
    return read_deepspeed_source(
        release.version, files, cuda_versions=sorted(compat.cuda), torch_versions=sorted(compat.torch)
    )


class _Reading:
    """Which sources were read (and what of them), left out, or could not be read: each on its own, so
    one run names every source it could not reach and still checks the rest."""

    def __init__(self, skip: frozenset[str]) -> None:
        self.skip = skip
        self.read: dict[str, str] = {}
        self.skipped = {name: "left out (--skip)" for name in SOURCES if name in skip}
        self.unreachable: dict[str, str] = {}

    def wanted(self, name: str) -> bool:
        return name not in self.skip

    def attempt(self, name: str, read: Callable[[], tuple[T, str]]) -> T | None:
        """``read()``'s value, its description noted under ``name``; None when it raised ``SourceError``."""
        try:
            value, what = read()
        except SourceError as exc:
            self.failed(name, exc.message)
            return None
        self.read[name] = what
        return value

    def wanted_attempt(self, name: str, read: Callable[[], tuple[T, str]]) -> T | None:
        """:meth:`attempt`, for a source not left out (None otherwise)."""
        return self.attempt(name, read) if self.wanted(name) else None

    def failed(self, name: str, why: str) -> None:
        self.unreachable[name] = why
        get_reporter().warning(f"{name}: {why} (its facts stay unchecked; the other sources are read)")


def read_upstream(
    compat: Compat, raw: Mapping[str, object], options: UpstreamOptions, downloader: Downloader
) -> Upstream:
    """Read every source not in ``options.skip``; one that cannot be read is named in ``unreachable``."""
    reading = _Reading(options.skip)
    releases = None
    if reading.wanted("pypi-deepspeed"):
        releases = reading.attempt("pypi-deepspeed", lambda: _read_releases(downloader, options))
    torch: dict[VersionTuple, TorchMinorSeen] | None = None
    scope = sorted(compat.torch)[-(options.torch_minors or len(compat.torch)) :]
    if reading.wanted("pypi-torch"):
        read_torch = reading.attempt("pypi-torch", lambda: _read_torch(compat, options, downloader))
        if read_torch is not None:
            torch, scope = read_torch
    toolkit = reading.wanted_attempt("pypi-cuda-toolkit", lambda: _read_cuda_toolkit(downloader, options))
    index = None
    if reading.wanted("torch-index"):
        index = reading.attempt("torch-index", lambda: _read_index(compat, scope, options, downloader))
    action, without_action = None, False
    if reading.wanted("cuda-action"):
        installer = reading.attempt("cuda-action", lambda: _read_action(downloader, options))
        if installer is not None:
            action, without_action = installer, installer is _NO_ACTION
    sources: tuple[DeepSpeedSourceSeen, ...] = ()
    if reading.wanted("deepspeed-sdists"):
        if releases is None and "pypi-deepspeed" in reading.unreachable:
            reading.failed("deepspeed-sdists", "pypi-deepspeed lists the sdists to read, and it could not be read")
        else:
            listed = releases
            sources = (
                reading.attempt("deepspeed-sdists", lambda: _read_sdists(compat, raw, listed, options, downloader))
                or ()
            )
    images = reading.wanted_attempt("runner-images", lambda: _read_runner_images(downloader, options))
    return Upstream(
        runner_images=images,
        deepspeed_releases=releases,
        torch=torch,
        torch_index=index,
        cuda_action=None if without_action else action,
        cuda_without_action=without_action,
        cuda_toolkit=toolkit,
        sources=sources,
        read=reading.read,
        skipped=reading.skipped,
        unreachable=reading.unreachable,
    )


def _read_runner_images(downloader: Downloader, options: UpstreamOptions) -> tuple[tuple[ImageAnnouncement, ...], str]:
    url = options.runner_images
    get_reporter().info(f"reading {url}")
    seen = announcements(downloader.get_github_issues(url))
    return seen, f"{url} ({len(seen)} retirement announcements)"


def _read_releases(downloader: Downloader, options: UpstreamOptions) -> tuple[tuple[DeepSpeedRelease, ...], str]:
    url = options.pypi.format(project="deepspeed")
    get_reporter().info(f"reading {url}")
    return deepspeed_releases(downloader.get_pypi_project(url)), url


def _read_torch(
    compat: Compat, options: UpstreamOptions, downloader: Downloader
) -> tuple[tuple[dict[VersionTuple, TorchMinorSeen], list[VersionTuple]], str]:
    url = options.pypi.format(project="torch")
    get_reporter().info(f"reading {url}")
    project = downloader.get_pypi_project(url)
    every = torch_minors(project)
    scope = _torch_scope(compat, every, options.torch_minors)
    torch = _pins(downloader, project, {m: every[m] for m in scope if m in every})
    return (torch, scope), f"{url} (torch {', '.join(format_version(m) for m in scope)}; pins from METADATA)"


def _read_cuda_toolkit(downloader: Downloader, options: UpstreamOptions) -> tuple[CudaToolkitSeen, str]:
    url = options.pypi.format(project="cuda-toolkit")
    get_reporter().info(f"reading {url}")
    seen = cuda_toolkit_releases(downloader.get_pypi_project(url))
    versions = [format_version(v) for v in seen.releases]
    span = f"CUDA {versions[0]} to {versions[-1]}" if versions else "no release"
    return seen, f"{url} ({span}, {sum(map(len, seen.prereleases.values()))} pre-releases)"


def _read_index(
    compat: Compat, scope: list[VersionTuple], options: UpstreamOptions, downloader: Downloader
) -> tuple[TorchIndexSeen, str]:
    pages: dict[str, tuple[str, str] | None] = {}
    for variant in _variants_to_read(compat, scope):
        url = options.torch_index.format(variant=variant)
        get_reporter().info(f"reading {url}")
        text = _get_text(downloader.session, url, missing_ok=True)
        pages[variant] = (text, url) if text is not None else None
    return torch_index_seen(options.torch_index, pages), f"{options.torch_index} for {', '.join(pages)}"


def _read_sdists(
    compat: Compat,
    raw: Mapping[str, object],
    releases: tuple[DeepSpeedRelease, ...] | None,
    options: UpstreamOptions,
    downloader: Downloader,
) -> tuple[tuple[DeepSpeedSourceSeen, ...], str]:
    if releases is None:  # pypi-deepspeed left out: its list still says which sdists to read
        releases, _url = _read_releases(downloader, options)
    chosen = _sdist_versions(compat, raw, releases, options.sdists)
    sources = []
    for release in chosen:
        get_reporter().info(f"reading the sdist of DeepSpeed {format_version(release.version)}")
        sources.append(_read_sdist(downloader, release, compat))
    return tuple(sources), ", ".join(format_version(r.version) for r in chosen)


# what _read_action gives for a workflow that installs CUDA without the action
_NO_ACTION = CudaActionSeen(action="", commit="", version="", method="", installable={"linux": (), "windows": ()})


def _read_action(downloader: Downloader, options: UpstreamOptions) -> tuple[CudaActionSeen, str]:
    workflow = options.workflow
    if workflow is None:
        raise SourceError(
            "no .github/workflows/wheels.yml in the repository of the facts file or of the working directory",
            hint="pass --workflow PATH (the workflow that installs CUDA)",
        )
    try:
        text = read_bounded(workflow).decode("utf-8")
    except (OSError, ValueError) as exc:  # ValueError: not UTF-8, too large, not a regular file
        why = exc.strerror if isinstance(exc, OSError) else exc
        raise SourceError(f"cannot read {workflow}: {why}", hint="pass --workflow PATH") from None
    if not uses_action(text):
        return _NO_ACTION, f"{workflow} installs CUDA without {ACTION}: every release NVIDIA published installs"
    pin = find_action_pin(text)
    if pin is None:
        raise SourceError(f"{workflow} uses {ACTION} without pinning a commit (@<40 hex>)")
    texts = {}
    for os in ("linux", "windows"):
        url = options.action_links.format(action=ACTION, commit=pin.commit, os=os)
        get_reporter().info(f"reading {url}")
        texts[os] = _get_text(downloader.session, url) or ""
    try:
        seen = cuda_action_seen(pin, linux=texts["linux"], windows=texts["windows"])
    except ValueError as exc:
        raise SourceError(str(exc)) from None
    return seen, f"{seen.action}@{seen.commit} ({seen.version}) src/links/*-links.ts"
