"""The index step (``dswheels index``): the static site of every published wheel, from a directory
or a GitHub repository's releases (each read through its store, :mod:`dswheels.stores`), written
whole or not at all (:mod:`dswheels.index.effects.site_files`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dswheels.host.clock import monotonic
from dswheels.host.files import read_bounded
from dswheels.host.log import get_reporter
from dswheels.index.effects.site_files import Provenances, check_target, local_index_files, site_provenance, write_site
from dswheels.index.pages import render_site
from dswheels.index.yank import apply_yanked, parse_yanked
from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import ConfigError, PublishError
from dswheels.kernel.index_files import IndexFile
from dswheels.kernel.locations import LOCAL_SITE_URL, PUBLISHED, SITE
from dswheels.kernel.sources import torch_index_problem
from dswheels.kernel.urls import page_url_problem
from dswheels.plan.event import default_index_url
from dswheels.plan.rules import Judge
from dswheels.stores import ToGitHubRelease, store_for
from dswheels.stores.directory import DirectoryStore
from dswheels.stores.protocol import ToDirectory
from dswheels.stores.wheel_ref import LocalWheel

__all__ = ["IndexOptions", "SiteWritten", "site_url_for", "write_index"]


@dataclass(frozen=True, kw_only=True, slots=True)
class IndexOptions:
    source: Path = PUBLISHED  # the directory of published wheels (unless github)
    github: str | None = None  # OWNER/REPO: index the published releases of this repository instead
    out: Path = SITE
    site_url: str | None = None  # where the site is served (None: see site_url_for)
    torch_index: str | None = None  # PyTorch's index per variant, with {variant} (None: compat.yml's)
    yanked: Path | None = None  # '<filename or glob> <reason>' per line
    title: str = "DeepSpeed wheels"


@dataclass(frozen=True, kw_only=True, slots=True)
class SiteWritten:
    out: Path
    site_url: str
    torch_index: str
    files: tuple[IndexFile, ...]
    seconds: float

    @property
    def partitions(self) -> list[str]:
        return sorted({f.published.partition for f in self.files})


def site_url_for(options: IndexOptions) -> str:
    """Where the site is served: the URL given, else GitHub Pages' for --github, else this machine's."""
    if options.site_url:
        return options.site_url
    if options.github:
        return default_index_url(options.github)  # OWNER/REPO: checked when its releases were read
    return LOCAL_SITE_URL


def _yank(files: list[IndexFile], path: Path | None) -> list[IndexFile]:
    if path is None:
        return files
    try:
        rules = parse_yanked(read_bounded(path).decode("utf-8"), str(path))
    except OSError as exc:
        raise ConfigError(f"cannot read the yanked file {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    marked, unused = apply_yanked(files, rules)
    for rule in unused:
        get_reporter().warning(f"{path}:{rule.line}: {rule.pattern!r} matches no published wheel")
    return marked


def _published(options: IndexOptions) -> tuple[list[IndexFile], Sequence[LocalWheel], Provenances]:
    """The published wheels as index entries, the local wheels the site carries (none for GitHub), and
    the provenance it carries beside them."""
    reporter = get_reporter()
    with reporter.group("read the published wheels"):
        provenance: Provenances = {}
        if options.github:
            releases = store_for(ToGitHubRelease(repository=options.github))
            files = list(releases.list())  # the store reports what it skipped
            wheels: Sequence[LocalWheel] = []
            where = releases.where
        else:  # the site carries the wheels themselves: read with their METADATA
            directory = DirectoryStore(ToDirectory(path=options.source))
            wheels = directory.wheels()
            provenance = site_provenance(wheels)
            files = local_index_files(wheels, provenance)
            where = directory.where
        attested = sum(1 for f in files if f.provenance_url)
        reporter.info(f"{len(files)} wheels in {where}, {attested} with provenance (PEP 740)")
    return files, wheels, provenance


def write_index(options: IndexOptions) -> SiteWritten:
    start = monotonic()
    check_target(options.out)  # before any network or hashing: fail fast on a wrong --out
    compat = load_compat()
    torch_index = options.torch_index or compat.torch_index
    # both go into the install lines of a public page, which users paste into a shell
    if problem := torch_index_problem(torch_index) or page_url_problem(torch_index.replace("{variant}", "cpu")):
        raise ConfigError(f"--torch-index {torch_index!r}: {problem}")
    if options.site_url is not None and (problem := page_url_problem(options.site_url)):
        raise ConfigError(
            f"--site-url {options.site_url!r}: {problem}",
            hint="give the http(s) URL the site is served at, e.g. https://wheels.example.org/dswheels/",
        )
    files, wheels, provenance = _published(options)
    files = _yank(files, options.yanked)
    site_url = site_url_for(options)
    try:
        pages = render_site(
            files, site_url=site_url, torch_index=torch_index, title=options.title, judge=Judge(compat).check
        )
    except ValueError as exc:
        raise PublishError(str(exc)) from None
    with get_reporter().group(f"write {options.out}"):
        write_site(options.out, pages, wheels=wheels, provenance=provenance)
    return SiteWritten(
        out=options.out, site_url=site_url, torch_index=torch_index, files=tuple(files), seconds=monotonic() - start
    )
