"""Read the ``deepspeed`` project page of a published index (HTTP(S), file:// or a directory),
and download a wheel from it with its sha256 checked."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import BinaryIO
from urllib.parse import quote, unquote, urlsplit

import requests

from dswheels.core.doctor import PublishedRuntime
from dswheels.core.manifest import ManifestError, manifest_name, parse_manifest
from dswheels.core.pick import IndexFile, parse_project_page, project_page_url
from dswheels.errors import SourceError
from dswheels.log import get_reporter

__all__ = ["download_wheel", "read_index", "read_manifest"]

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


def _copy_http(url: str, out: BinaryIO, digest: hashlib._Hash) -> None:
    with requests.get(url, stream=True, timeout=_TIMEOUT) as response:
        if not response.ok:
            raise SourceError(f"downloading {url} failed: HTTP {response.status_code}")
        for chunk in response.iter_content(chunk_size=1 << 20):
            digest.update(chunk)
            out.write(chunk)


def download_wheel(file: IndexFile, dest: Path) -> Path:
    """Fetch ``file`` into ``dest`` under its own name; SourceError (and no file) on a sha256 mismatch."""
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / file.filename
    partial = dest / f".{file.filename}.part"
    digest = hashlib.sha256()
    local = _local_page(file.url)
    try:
        with partial.open("wb") as out:
            if local is not None:
                with local.open("rb") as src:
                    for chunk in iter(lambda: src.read(1 << 20), b""):
                        digest.update(chunk)
                        out.write(chunk)
            else:
                _copy_http(file.url, out, digest)
    except (OSError, requests.RequestException) as exc:
        partial.unlink(missing_ok=True)
        raise SourceError(f"cannot download {file.url}: {exc}") from None
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    actual = digest.hexdigest()
    if file.sha256 and actual != file.sha256:
        partial.unlink(missing_ok=True)
        raise SourceError(
            f"sha256 mismatch for {file.filename}",
            details=f"the index says {file.sha256}\nthe download is {actual}",
            hint="the file on the server is not the one the index lists: report it to the index's maintainers",
        )
    if not file.sha256:
        get_reporter().warning(f"the index gives no sha256 for {file.filename}: its content is not verified")
    shutil.move(partial, target)
    return target


def _manifest_url(file: IndexFile) -> str:
    """``<wheel url>.manifest.json``: beside the wheel (docs/index-layout.md)."""
    return file.url.rsplit("/", 1)[0] + "/" + quote(manifest_name(file.filename)) if "/" in file.url else file.url


def read_manifest(file: IndexFile) -> PublishedRuntime:
    """The build manifest published beside ``file`` (``<wheel>.manifest.json``), as far as ``runtime`` goes.

    Never raises: an absent, unreachable or unreadable manifest is a :class:`PublishedRuntime`
    without ``runtime`` and a note saying why; one that describes other bytes than the wheel
    (by sha256) is not believed.
    """
    url = _manifest_url(file)
    local = _local_page(url)
    try:
        if local is not None:
            text = local.read_text(encoding="utf-8")
        else:
            response = requests.get(url, timeout=_TIMEOUT)
            if response.status_code == 404:
                return PublishedRuntime(file.filename, url, None, "the index has no build manifest beside the wheel")
            if not response.ok:
                return PublishedRuntime(file.filename, url, None, f"HTTP {response.status_code} for {url}")
            text = response.text
    except FileNotFoundError:
        return PublishedRuntime(file.filename, url, None, "the index has no build manifest beside the wheel")
    except (OSError, requests.RequestException) as exc:
        return PublishedRuntime(file.filename, url, None, f"cannot read {url}: {exc}")
    try:
        manifest = parse_manifest(text)
    except ManifestError as exc:
        return PublishedRuntime(file.filename, url, None, f"{url}: {exc}")
    if file.sha256 and manifest.wheel.sha256 != file.sha256:
        return PublishedRuntime(file.filename, url, None, f"{url} describes other bytes than the wheel (sha256)")
    if manifest.runtime is None:
        return PublishedRuntime(file.filename, url, None, "its build manifest predates `runtime` (or is for Windows)")
    return PublishedRuntime(file.filename, url, manifest.runtime)
