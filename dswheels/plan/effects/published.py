"""Where the wheels are published, what is there, and leaving the cells published already out of a plan."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from dswheels.kernel.errors import ConfigError
from dswheels.kernel.index_links import published_cell_ids
from dswheels.kernel.model import Plan
from dswheels.kernel.naming import cell_id
from dswheels.plan.event import EventError, default_index_url, skip_published_source
from dswheels.stores import list_published

__all__ = ["PublishedAt", "Skipped", "published_wheels", "skip_published"]


@dataclass(frozen=True, kw_only=True, slots=True)
class PublishedAt:
    """Where the wheels are published (the workflows' repository variables): a directory, else an index
    (``index_url``, else GitHub Pages' URL of ``repository``)."""

    publish_dir: str = ""
    index_url: str = ""
    repository: str = ""  # OWNER/NAME

    def site_url(self) -> str:
        """The index URL, else GitHub Pages' URL of the repository; "" when neither is known."""
        if self.index_url:
            return self.index_url
        try:
            return default_index_url(self.repository) if self.repository else ""
        except EventError as exc:
            raise ConfigError(f"--repository: {exc}") from None

    def source(self) -> str:
        """Where the published wheels are listed: the directory when set, else the index."""
        source = skip_published_source(publish_dir=self.publish_dir, index_url=self.site_url())
        if not source:
            raise ConfigError(
                "nothing says where the wheels are published",
                hint="set DSWHEELS_PUBLISH_DIR or DSWHEELS_INDEX_URL (or pass --publish-dir/--index-url); in GitHub "
                "Actions, GITHUB_REPOSITORY gives the default https://OWNER.github.io/NAME/",
            )
        return source


def published_wheels(location: str, *, missing_dir_ok: bool = False) -> list[str]:
    """The wheel filenames published at ``location``; with ``missing_dir_ok`` a directory that does not
    exist yet (a publish directory before the first publish) lists none."""
    if missing_dir_ok and "://" not in location and not Path(location).exists():
        return []
    return list_published(location)


@dataclass(frozen=True, kw_only=True, slots=True)
class Skipped:
    """A plan without the cells whose wheels ``location`` lists."""

    plan: Plan
    skipped: int
    total: int
    location: str

    @property
    def line(self) -> str:
        return f"skipped {self.skipped} of {self.total} cells: their wheels are published at {self.location}"


def skip_published(result: Plan, location: str, *, missing_dir_ok: bool = False) -> Skipped:
    """Drop the cells whose wheel ``location`` already lists."""
    published = published_cell_ids(published_wheels(location, missing_dir_ok=missing_dir_ok))
    left = tuple(item for item in result.planned if cell_id(item.cell) not in published)
    return Skipped(
        plan=replace(result, planned=left),
        skipped=len(result.planned) - len(left),
        total=len(result.planned),
        location=location,
    )
