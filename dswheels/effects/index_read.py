"""Read the ``deepspeed`` project page of a published index (HTTP(S), file:// or a directory)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

import requests

from dswheels.core.pick import IndexFile, parse_project_page, project_page_url
from dswheels.errors import SourceError

__all__ = ["read_index"]

_TIMEOUT = 30.0


def _local_page(url: str) -> Path | None:
    parts = urlsplit(url)
    if parts.scheme == "file":
        return Path(unquote(parts.path))
    if not parts.scheme or len(parts.scheme) == 1:  # a path (a one-letter scheme is a drive: C:\...)
        return Path(url)
    return None


def read_index(index: str) -> tuple[str, tuple[IndexFile, ...]]:
    """The project page URL and its files; ``SourceError`` says what went wrong."""
    page = project_page_url(index)
    local = _local_page(page)
    if local is not None:
        path = local / "index.html" if local.suffix != ".html" else local
        try:
            html = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise SourceError(
                f"cannot read the index page {path}: {exc.strerror}",
                hint="pass the index's base directory (it has simple/deepspeed/index.html) or its URL",
            ) from None
        return page, parse_project_page(html, path.resolve().as_uri())
    try:
        response = requests.get(page, timeout=_TIMEOUT, headers={"Accept": "text/html"})
    except requests.RequestException as exc:
        raise SourceError(f"cannot reach the index {page}: {exc}", hint="check the URL and your network") from None
    if response.status_code == 404:
        raise SourceError(
            f"the index has no deepspeed project page at {page} (HTTP 404)",
            hint="pass the index's base URL, the one whose simple/deepspeed/ lists the wheels",
        )
    if not response.ok:
        raise SourceError(f"the index answered HTTP {response.status_code} for {page}")
    return page, parse_project_page(response.text, response.url or page)
