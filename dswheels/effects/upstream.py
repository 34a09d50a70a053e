"""Fetch what compat.yml's sources say today (``dswheels facts check``); the core compares it.

Sources, each with a name ``--skip`` takes:

- ``pypi-deepspeed``: ``<pypi>/deepspeed/json`` (releases, sdists);
- ``pypi-torch``: ``<pypi>/torch/json`` (releases, wheels per platform, Requires-Python; the
  newest release's requirements) and, for the other minors' newest patch, METADATA read from
  the Linux wheel with range requests (the CUDA toolkit it pins);
- ``torch-index``: PyTorch's per-variant pages ``<torch_index>`` for every variant a torch
  minor in scope lists and every ``cuXY`` of compat.yml's CUDA toolkits;
- ``cuda-action``: the version tables of the CUDA-install action at the commit the wheels
  workflow pins, while it uses one (it no longer does: its build jobs install CUDA from
  NVIDIA's redistributable archives with ``dswheels cuda install``; then the source is
  reported as not used);
- ``deepspeed-sdists``: the sdists of the newest known releases, of every new release and of
  the releases on each side of a checkable rule's boundary (verified by PyPI's sha256).

A source that cannot be reached stops the check (``SourceError``, nothing written) unless it
is skipped, in which case its facts are reported unchecked.
"""

from __future__ import annotations

import re
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import unquote, urlsplit

import requests

from dswheels.core.compat import Compat
from dswheels.core.model import Variant
from dswheels.core.upstream.compare_deepspeed import boundary_versions, rule_checks
from dswheels.core.upstream.cuda_action import ACTION, cuda_action_seen, find_action_pin
from dswheels.core.upstream.deepspeed_source import read_deepspeed_source, wanted_member
from dswheels.core.upstream.pypi import deepspeed_releases, linux_wheel, parse_cuda_pin, torch_minors
from dswheels.core.upstream.seen import CudaActionSeen, DeepSpeedRelease, DeepSpeedSourceSeen, TorchMinorSeen, Upstream
from dswheels.core.upstream.torch_index import torch_index_seen
from dswheels.core.versions import VersionTuple, format_version
from dswheels.core.wheel.contents import parse_metadata
from dswheels.effects.sources import Downloader
from dswheels.effects.wheel_metadata import read_wheel_metadata
from dswheels.errors import SourceError
from dswheels.log import get_reporter

__all__ = ["SOURCES", "UpstreamOptions", "read_upstream"]

SOURCES = ("pypi-deepspeed", "pypi-torch", "torch-index", "cuda-action", "deepspeed-sdists")
_TIMEOUT = (15, 120)


@dataclass(frozen=True, kw_only=True)
class UpstreamOptions:
    pypi: str = "https://pypi.org/pypi/{project}/json"
    torch_index: str = "https://download.pytorch.org/whl/{variant}/torch/"
    action_links: str = "https://raw.githubusercontent.com/{action}/{commit}/src/links/{os}-links.ts"
    workflow: Path = Path(".github/workflows/wheels.yml")
    torch_minors: int | None = 3  # compat.yml's newest N torch minors (and newer ones); None: all
    sdists: int | None = 2  # the newest N known DeepSpeed releases (plus new and boundary ones); None: all
    skip: frozenset[str] = field(default_factory=frozenset)


def _hint(source: str) -> str:
    return f"check the network or the URL; `--skip {source}` checks without it (its facts are reported unchecked)"


def _get_text(session: requests.Session, url: str, *, source: str, missing_ok: bool = False) -> str | None:
    """The text at ``url`` (http(s) or file://); None for a 404 when ``missing_ok``."""
    parts = urlsplit(url)
    if parts.scheme == "file":
        path = Path(unquote(parts.path))
        if not path.exists() and missing_ok:
            return None
        try:
            return path.read_text(encoding="utf-8")
        except OSError as exc:
            raise SourceError(f"{source}: cannot read {path}: {exc.strerror}", hint=_hint(source)) from None
    try:
        response = session.get(url, timeout=_TIMEOUT)
    except requests.RequestException as exc:
        raise SourceError(f"{source}: cannot reach {url}: {type(exc).__name__}", hint=_hint(source)) from None
    if response.status_code == 404 and missing_ok:
        return None
    if response.status_code != 200:
        raise SourceError(f"{source}: {url} answered HTTP {response.status_code}", hint=_hint(source))
    return response.text


def _get_json(downloader: Downloader, url: str, source: str) -> object:
    try:
        return downloader.get_json(url)
    except SourceError as exc:
        raise SourceError(f"{source}: {exc.message}", hint=_hint(source)) from None


def _torch_scope(compat: Compat, seen: Mapping[VersionTuple, TorchMinorSeen], newest: int | None) -> list[VersionTuple]:
    known = sorted(compat.torch)
    scope = known if newest is None else known[-newest:]
    return sorted({*scope, *(m for m in seen if m > known[-1])})


def _pins(
    downloader: Downloader, data: object, url: str, seen: dict[VersionTuple, TorchMinorSeen]
) -> dict[VersionTuple, TorchMinorSeen]:
    """Fill in the CUDA pin of every minor's newest patch (the newest release has it from the JSON)."""
    for minor, item in list(seen.items()):
        if item.cuda_pin:
            continue
        wheel = linux_wheel(data, item.latest, json_url=url)
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


def _read_sdist(downloader: Downloader, release: DeepSpeedRelease, compat: Compat) -> DeepSpeedSourceSeen:
    path, _sha = downloader.fetch(release.sdist_url, sha256=release.sdist_sha256, size=release.sdist_size)
    files: dict[str, str] = {}
    try:
        with tarfile.open(path, "r:*") as tar:
            for member in tar:
                relative = member.name.split("/", 1)[1] if "/" in member.name else ""
                if member.isfile() and wanted_member(relative) and (fh := tar.extractfile(member)) is not None:
                    with fh:
                        files[relative] = fh.read().decode("utf-8", "replace")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise SourceError(f"deepspeed-sdists: cannot read {path.name}: {exc}") from None
    return read_deepspeed_source(
        release.version, files, cuda_versions=sorted(compat.cuda), torch_versions=sorted(compat.torch)
    )


def read_upstream(
    compat: Compat, raw: Mapping[str, object], options: UpstreamOptions, downloader: Downloader
) -> Upstream:
    """Read every source not in ``options.skip``; raises ``SourceError`` for one that cannot be read."""
    reporter = get_reporter()
    read: dict[str, str] = {}
    skipped = {name: "left out (--skip)" for name in SOURCES if name in options.skip}
    releases = None
    if "pypi-deepspeed" not in options.skip or "deepspeed-sdists" not in options.skip:
        url = options.pypi.format(project="deepspeed")
        reporter.info(f"reading {url}")
        releases = deepspeed_releases(_get_json(downloader, url, "pypi-deepspeed"), json_url=url)
        read["pypi-deepspeed"] = url
    torch: dict[VersionTuple, TorchMinorSeen] | None = None
    scope = sorted(compat.torch)[-(options.torch_minors or len(compat.torch)) :]
    if "pypi-torch" not in options.skip:
        url = options.pypi.format(project="torch")
        reporter.info(f"reading {url}")
        data = _get_json(downloader, url, "pypi-torch")
        every = torch_minors(data)
        scope = _torch_scope(compat, every, options.torch_minors)
        torch = _pins(downloader, data, url, {m: every[m] for m in scope if m in every})
        read["pypi-torch"] = f"{url} (torch {', '.join(format_version(m) for m in scope)}; pins from METADATA)"
    index = None
    if "torch-index" not in options.skip:
        pages: dict[str, tuple[str, str] | None] = {}
        for variant in _variants_to_read(compat, scope):
            url = options.torch_index.format(variant=variant)
            reporter.info(f"reading {url}")
            text = _get_text(downloader.session, url, source="torch-index", missing_ok=True)
            pages[variant] = (text, url) if text is not None else None
        index = torch_index_seen(options.torch_index, pages)
        read["torch-index"] = f"{options.torch_index} for {', '.join(pages)}"
    action = None
    if "cuda-action" not in options.skip:
        action = _read_action(downloader, options)
        if action is None:
            skipped["cuda-action"] = (
                f"{options.workflow} uses no {ACTION}: its build jobs install CUDA from NVIDIA's redistributable "
                "archives (`dswheels cuda install`)"
            )
        else:
            read["cuda-action"] = f"{action.action}@{action.commit} ({action.version}) src/links/*-links.ts"
    sources: list[DeepSpeedSourceSeen] = []
    if "deepspeed-sdists" not in options.skip and releases is not None:
        chosen = _sdist_versions(compat, raw, releases, options.sdists)
        for release in chosen:
            reporter.info(f"reading the sdist of DeepSpeed {format_version(release.version)}")
            sources.append(_read_sdist(downloader, release, compat))
        read["deepspeed-sdists"] = ", ".join(format_version(r.version) for r in chosen)
    return Upstream(
        deepspeed_releases=releases if "pypi-deepspeed" not in options.skip else None,
        torch=torch,
        torch_index=index,
        cuda_action=action,
        sources=tuple(sources),
        read=read,
        skipped=skipped,
    )


def _read_action(downloader: Downloader, options: UpstreamOptions) -> CudaActionSeen | None:
    """The action's tables at the commit the workflow pins; None when the workflow uses no such action."""
    try:
        workflow = options.workflow.read_text(encoding="utf-8")
    except OSError as exc:
        raise SourceError(
            f"cuda-action: cannot read {options.workflow}: {exc.strerror}",
            hint="run from the repository root or pass --workflow PATH; " + _hint("cuda-action"),
        ) from None
    pin = find_action_pin(workflow)
    if pin is None:
        if re.search(r"uses:\s*" + re.escape(ACTION), workflow, re.IGNORECASE):  # used, but not pinned to a commit
            raise SourceError(
                f"cuda-action: {options.workflow} uses {ACTION} without a commit sha", hint=_hint("cuda-action")
            )
        return None
    texts = {}
    for os in ("linux", "windows"):
        url = options.action_links.format(action=ACTION, commit=pin.commit, os=os)
        get_reporter().info(f"reading {url}")
        texts[os] = _get_text(downloader.session, url, source="cuda-action") or ""
    try:
        return cuda_action_seen(pin, linux=texts["linux"], windows=texts["windows"])
    except ValueError as exc:
        raise SourceError(f"cuda-action: {exc}", hint=_hint("cuda-action")) from None
