"""A served index (the store of a :class:`~dswheels.stores.protocol.ToServedIndex`): read the
``deepspeed`` project page of a published index (HTTP(S), file:// or a directory), and download
a wheel from it with its sha256 checked. It is written by `dswheels index`, never published to."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO
from urllib.parse import quote, unquote, urlsplit

import requests

from dswheels.host.files import copy_bounded, open_regular, read_bounded
from dswheels.host.http import MAX_PAGE_BYTES, TIMEOUTS, check_redirects, iter_body, read_limited, session
from dswheels.kernel.binaries.linux_runtime import PublishedRuntime
from dswheels.kernel.errors import ProvenanceError, PublishError, SourceError
from dswheels.kernel.index_files import IndexFile, parse_project_page, project_page_url
from dswheels.kernel.manifest import ManifestError, manifest_name, parse_manifest
from dswheels.kernel.naming import PROJECT
from dswheels.kernel.provenance import MAX_PROVENANCE_BYTES
from dswheels.stores.outgoing import PublishResult
from dswheels.stores.protocol import ToServedIndex
from dswheels.stores.wheel_ref import MAX_MANIFEST_BYTES, MAX_WHEEL_BYTES, LocalWheel

__all__ = [
    "ServedIndexStore",
    "check_followable",
    "download_wheel",
    "published_names",
    "read_index",
    "read_manifest",
    "read_provenance",
]

_NO_MANIFEST = "the index has no build manifest beside the wheel"


def _local_page(url: str) -> Path | None:
    parts = urlsplit(url)
    if parts.scheme == "file":
        return Path(unquote(parts.path))
    if not parts.scheme or len(parts.scheme) == 1:  # a path (a one-letter scheme is a drive: C:\...)
        return Path(url)
    return None


def _decode(body: bytes, where: str) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(f"the index page {where} is not UTF-8 ({exc.reason} at byte {exc.start})") from None


def read_index(index: str) -> tuple[str, tuple[IndexFile, ...]]:
    """The project page URL and its files; ``SourceError`` says what went wrong."""
    page = project_page_url(index)
    local = _local_page(page)
    if local is not None:
        path = local / "index.html" if local.suffix != ".html" else local
        try:
            html = _decode(read_bounded(path, limit=MAX_PAGE_BYTES), str(path))
        except OSError as exc:
            raise SourceError(
                f"cannot read the index page {path}: {exc.strerror}",
                hint="pass the index's base directory (it has simple/deepspeed/index.html) or its URL",
            ) from None
        except ValueError as exc:
            raise SourceError(str(exc)) from None
        return page, _parse(html, path.resolve().as_uri())
    try:
        response = session().get(page, timeout=TIMEOUTS.for_request, headers={"Accept": "text/html"}, stream=True)
    except requests.RequestException as exc:
        raise SourceError(f"cannot reach the index {page}: {exc}", hint="check the URL and your network") from None
    with response:
        if response.status_code == 404:
            raise SourceError(
                f"the index has no deepspeed project page at {page} (HTTP 404)",
                hint="pass the index's base URL, the one whose simple/deepspeed/ lists the wheels",
            )
        if not response.ok:
            raise SourceError(f"the index answered HTTP {response.status_code} for {page}")
        check_redirects(page, response, error=SourceError)
        body = read_limited(response, limit=MAX_PAGE_BYTES, what=f"the index page {page}", error=SourceError)
    return page, _parse(_decode(body, page), response.url or page)


def _parse(html: str, url: str) -> tuple[IndexFile, ...]:
    try:
        return parse_project_page(html, url)
    except ValueError as exc:
        raise SourceError(str(exc), hint="check that the URL is the index's (a PEP 503 page)") from None


def _copy_http(url: str, out: BinaryIO, digest: hashlib._Hash) -> None:
    with session().get(url, stream=True, timeout=TIMEOUTS.for_request) as response:
        if not response.ok:
            raise SourceError(f"downloading {url} failed: HTTP {response.status_code}")
        check_redirects(url, response, error=SourceError)
        written = 0
        for chunk in iter_body(response):
            written += len(chunk)
            if written > MAX_WHEEL_BYTES:
                raise SourceError(f"{url} sent more than {MAX_WHEEL_BYTES >> 30} GiB: no wheel is that large")
            digest.update(chunk)
            out.write(chunk)


def _copy_local(path: Path, out: BinaryIO, digest: hashlib._Hash, *, limit: int) -> None:
    """A file a local index links, bounded as a download is: a regular file, never a link (an index
    written by `dswheels index` links none), a FIFO or a device (``/dev/zero`` would never end),
    of at most ``limit`` bytes (checked before a byte is copied, and while copying)."""
    with open_regular(path, follow_symlinks=False) as src:
        if (size := os.fstat(src.fileno()).st_size) > limit:
            msg = f"{path} is {size} bytes: more than {limit} (no wheel is that large)"
            raise ValueError(msg)
        copy_bounded(src, out, limit=limit, what=str(path), digest=digest)


def check_followable(file: IndexFile) -> None:
    """Refuse a link that may not be followed, or that gives no sha256 to check the download against."""
    if file.problem:
        raise SourceError(
            f"refusing the index's link for {file.filename or file.url[:200]}: {file.problem}",
            hint="the index page is broken or hostile: report it to the index's maintainers; nothing was downloaded",
        )
    if not file.sha256:
        raise SourceError(
            f"the index gives no sha256 for {file.filename}: its bytes could not be checked, so it is not installed",
            hint="indexes written by `dswheels index` link every wheel with #sha256=...; use one of those",
        )


def download_wheel(file: IndexFile, dest: Path) -> Path:
    """Fetch ``file`` into ``dest`` under its own name; SourceError (and no file) on a sha256 mismatch.

    Only links that :func:`check_followable` accepts are followed: the sha256 is required.
    """
    check_followable(file)
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / file.filename
    if target.parent != dest or target.name != file.filename:  # parse_project_page names files; be sure
        raise SourceError(f"refusing the index's file name {file.filename!r}")
    partial = dest / f".{file.filename}.part"
    digest = hashlib.sha256()
    local = _local_page(file.url)
    try:
        with partial.open("wb") as out:
            if local is not None:
                _copy_local(local, out, digest, limit=file.size if file.size is not None else MAX_WHEEL_BYTES)
            else:
                _copy_http(file.url, out, digest)
    except (OSError, ValueError, requests.RequestException) as exc:  # ValueError: not a regular file, too large
        partial.unlink(missing_ok=True)
        raise SourceError(f"cannot download {file.url}: {exc}") from None
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    actual = digest.hexdigest()
    if actual != file.sha256:
        partial.unlink(missing_ok=True)
        raise SourceError(
            f"sha256 mismatch for {file.filename}",
            details=f"the index says {file.sha256}\nthe download is {actual}",
            hint="the file on the server is not the one the index lists: report it to the index's maintainers",
        )
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
    if file.problem:
        return PublishedRuntime(file.filename, url, None, f"not read: {file.problem}")
    text, why_not = _manifest_text(url)
    if text is None:
        return PublishedRuntime(file.filename, url, None, why_not)
    try:
        manifest = parse_manifest(text)
    except ManifestError as exc:
        return PublishedRuntime(file.filename, url, None, f"{url}: {exc}")
    if file.sha256 and manifest.wheel.sha256 != file.sha256:
        return PublishedRuntime(file.filename, url, None, f"{url} describes other bytes than the wheel (sha256)")
    if manifest.runtime is None:
        return PublishedRuntime(file.filename, url, None, "its build manifest predates `runtime` (or is for Windows)")
    return PublishedRuntime(file.filename, url, manifest.runtime)


def _manifest_text(url: str) -> tuple[str | None, str]:
    """The text at ``url`` (a file or HTTP(S)), or None and why it could not be read."""
    local = _local_page(url)
    try:
        if local is not None:  # beside a local wheel: as the wheel, never through a link
            return read_bounded(local, limit=MAX_MANIFEST_BYTES, follow_symlinks=False).decode("utf-8"), ""
        with session().get(url, timeout=TIMEOUTS.for_request, stream=True) as response:
            if response.status_code == 404:
                return None, _NO_MANIFEST
            if not response.ok:
                return None, f"HTTP {response.status_code} for {url}"
            check_redirects(url, response, error=SourceError)
            body = read_limited(response, limit=MAX_MANIFEST_BYTES, what=url, error=SourceError)
        return body.decode("utf-8"), ""
    except FileNotFoundError:
        return None, _NO_MANIFEST
    except (OSError, ValueError, requests.RequestException, SourceError) as exc:
        return None, f"cannot read {url}: {exc}"


def read_provenance(file: IndexFile) -> tuple[str, bytes]:
    """The URL and bytes of the PEP 740 provenance object the index names for ``file`` (``data-provenance``).

    ``ProvenanceError`` (exit 11) when the index names none, names one that may not be followed, or
    serves none there (404); ``SourceError`` (exit 4) when it cannot be fetched. At most
    ``MAX_PROVENANCE_BYTES``; a local one is read as a local wheel is, never through a link.
    """
    if file.provenance_problem:
        raise ProvenanceError(f"refusing the index's data-provenance for {file.filename}: {file.provenance_problem}")
    url = file.provenance_url
    if not url:
        raise ProvenanceError(
            f"the index serves no provenance for {file.filename} (its link has no data-provenance)",
            hint="only wheels the release workflow attested have one; without --require-provenance the wheel "
            "installs on the index's sha256 alone. Nothing was installed",
        )
    local = _local_page(url)
    try:
        if local is not None:
            return url, read_bounded(local, limit=MAX_PROVENANCE_BYTES, follow_symlinks=False)
        with session().get(url, timeout=TIMEOUTS.for_request, stream=True) as response:
            if response.status_code == 404:
                raise ProvenanceError(f"the index names a provenance for {file.filename} that it does not serve: {url}")
            if not response.ok:
                raise SourceError(f"the index answered HTTP {response.status_code} for {url}")
            check_redirects(url, response, error=SourceError)
            return url, read_limited(response, limit=MAX_PROVENANCE_BYTES, what=url, error=ProvenanceError)
    except FileNotFoundError:
        raise ProvenanceError(f"the index names a provenance for {file.filename} that does not exist: {url}") from None
    except ValueError as exc:  # not a regular file, or larger than the bound
        raise ProvenanceError(f"{url}: {exc}") from None
    except (OSError, requests.RequestException) as exc:
        raise SourceError(f"cannot read the provenance {url}: {exc}", hint="check the index and your network") from None


# --- what `plan --skip-published` sees -------------------------------------------------------------


def published_names(location: str) -> list[str]:
    """The wheel filenames a served index lists: a site root, a PEP 503 index (``.../simple/``) or a
    project page over http(s), where a 404 means nothing is published yet; or a site's directory,
    whose ``simple/deepspeed/index.html`` is read (never through a link)."""
    local = _local_page(location)
    if local is not None:
        project_page = local / "simple" / PROJECT / "index.html"
        base = project_page.resolve().as_uri()
        try:
            page = read_bounded(project_page, limit=MAX_PAGE_BYTES, follow_symlinks=False)
            files = parse_project_page(page.decode("utf-8", "replace"), base)
        except (OSError, ValueError) as exc:
            raise SourceError(f"cannot read the published index {project_page}: {exc}") from None
        return [f.filename for f in files]
    url = project_page_url(location)
    try:
        response = session().get(url, timeout=TIMEOUTS.for_request, headers={"Accept": "text/html"}, stream=True)
    except requests.RequestException as exc:
        raise SourceError(f"cannot read the published index at {url}: {exc}") from None
    with response:
        if response.status_code == 404:
            return []
        if response.status_code != 200:
            raise SourceError(f"cannot read the published index at {url}: HTTP {response.status_code}")
        body = read_limited(response, limit=MAX_PAGE_BYTES, what=url, error=SourceError)
    try:
        return [f.filename for f in parse_project_page(body.decode("utf-8", "replace"), response.url)]
    except ValueError as exc:
        raise SourceError(str(exc)) from None


class ServedIndexStore:
    """The store of a :class:`~dswheels.stores.protocol.ToServedIndex`: read-only."""

    def __init__(self, target: ToServedIndex) -> None:
        self.url = target.url

    @property
    def where(self) -> str:
        return self.url

    def names(self) -> list[str]:
        return published_names(self.url)

    def list(self) -> tuple[IndexFile, ...]:
        return read_index(self.url)[1]

    def fetch(self, file: IndexFile, dest: Path) -> Path:
        return download_wheel(file, dest)

    def put(self, wheels: Sequence[LocalWheel]) -> PublishResult:  # noqa: ARG002 - the protocol's
        raise PublishError(
            f"{self.url} is a served index: `dswheels index` writes it from where the wheels are published",
            hint="publish to that directory, GitHub Release or upload server, then run `dswheels index` again",
        )
