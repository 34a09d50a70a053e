"""The facts check step (``dswheels facts check``): compat.yml against the sources it was written
from, with the edit that would make it agree (:mod:`dswheels.facts`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path

import yaml

from dswheels.facts.compare import check_facts
from dswheels.facts.effects.fetch_sources import CONNECT_RETRIES, WORKFLOW, UpstreamOptions, read_upstream
from dswheels.facts.findings import Report, render_diff
from dswheels.host.cache import CacheLayout
from dswheels.host.clock import today
from dswheels.host.downloads import Downloader
from dswheels.host.files import read_bounded
from dswheels.host.repository import repository_file
from dswheels.kernel.compat import CompatDataError, parse_compat
from dswheels.kernel.errors import ConfigError

__all__ = ["FactsCheckOptions", "FactsChecked", "check_compat"]


@dataclass(frozen=True, kw_only=True, slots=True)
class FactsCheckOptions:
    compat: Path | None = None  # the facts file (None: the package's)
    # where each source is, and how much of it to read; without a workflow, the repository's is found
    upstream: UpstreamOptions = field(default_factory=UpstreamOptions)


@dataclass(frozen=True, kw_only=True, slots=True)
class FactsChecked:
    path: Path  # the facts file checked
    report: Report  # its findings; report.after is the file with them applied
    diff: str  # the edit --write would make ("" when none)


def _default_compat() -> Path:
    return Path(str(resources.files("dswheels").joinpath("compat.yml")))


def _shown(path: Path) -> str:
    """The path relative to the working directory when it is below it (diffs read as in a checkout)."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(path)


def check_compat(options: FactsCheckOptions, cache: CacheLayout) -> FactsChecked:
    """The facts file against its sources, downloaded into the cache's sources."""
    path = options.compat or _default_compat()
    try:
        text = read_bounded(path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"the facts file {path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"cannot read the facts file {path}: {exc.strerror}") from None
    except ValueError as exc:  # larger than any facts file, or not a regular file (a FIFO, a device)
        raise ConfigError(str(exc), hint="pass a facts file (compat.yml) with --compat") from None
    try:
        raw = yaml.safe_load(text)
        compat = parse_compat(raw)
    except (yaml.YAMLError, CompatDataError) as exc:
        raise ConfigError(f"{path} is not a valid facts file: {exc}") from None
    sources = options.upstream
    if sources.workflow is None:  # the repository's: the facts file's, else the working directory's
        sources = replace(sources, workflow=repository_file(WORKFLOW, near=(path.parent, Path.cwd())))
    with Downloader(cache.sources, connect_retries=CONNECT_RETRIES) as downloader:
        upstream = read_upstream(compat, raw, sources, downloader)
    name = _shown(path)
    report = check_facts(text, upstream, today=today(), name=name)
    return FactsChecked(path=path, report=report, diff=render_diff(report, name=name))
