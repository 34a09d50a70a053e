"""Fetch DeepSpeed sources: verified, cached by content, resumable, retried with backoff.

Every build uses the PyPI sdist, checked against the sha256 PyPI's JSON API gives (a Windows
build then adds the few files the sdist leaves out: ``patch_tree`` in building/effects/source_tree.py). A
matrix ``source`` override names another archive and must pin its sha256. Downloads land in
``<cache>/sources/sha256/<hex>`` so the same bytes are fetched once.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse
from urllib.request import url2pathname

import requests
from urllib3.util.retry import Retry

from dswheels.host.files import exclusive, sha256_file, temp_file
from dswheels.host.http import (
    READ_CHUNK,
    TIMEOUTS,
    TooSlow,
    attempt_limit,
    check_redirects,
    iter_body,
    read_limited,
    session,
)
from dswheels.host.log import get_reporter
from dswheels.host.unpack import extract_archive
from dswheels.kernel.errors import SourceError
from dswheels.kernel.github_api import Issue, read_issues
from dswheels.kernel.jsondoc import parse_json
from dswheels.kernel.model import PlannedCell, SourceKind
from dswheels.kernel.numbers import is_ascii_digits
from dswheels.kernel.pypi_project import PypiProject, read_pypi_project
from dswheels.kernel.remote_json import RemoteJson
from dswheels.kernel.versions import format_version

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "Downloader",
    "FetchedSource",
    "extract_archive",
    "fetch_source",
]

MAX_DOWNLOAD_BYTES = 4 * 1024**3  # a source archive is ~10 MB: an endless response stops here
MAX_JSON_BYTES = 64 * 1024**2  # PyPI's JSON for deepspeed is a few MB
STREAM_CHUNK = READ_CHUNK  # one read: what arrived before a connection breaks is kept for resuming


@dataclass(frozen=True, slots=True)
class FetchedSource:
    path: Path  # the verified archive in the cache
    kind: SourceKind
    url: str
    sha256: str
    verified_by: str  # what the sha256 was checked against


def _session(retries: int, connect_retries: int) -> requests.Session:
    retry = Retry(
        total=retries,
        connect=connect_retries,
        read=retries,
        status=retries,
        backoff_factor=1.0,
        status_forcelist=(429, 500, 502, 503, 504),
        allowed_methods=frozenset({"GET", "HEAD"}),
        respect_retry_after_header=True,
        raise_on_status=False,
    )
    return session(retries=retry)


class Downloader:
    """Content-addressed download cache with resumable transfers (HTTP Range) and retries.

    ``timeout``: (connect, read) seconds of one request; ``attempt_seconds``: the most one
    attempt at a file may take (past it the attempt is abandoned and the next one resumes where it
    stopped); ``connect_retries``: how often a connection that could not be made (refused, no such
    host, connect timeout) is tried again, with backoff (default ``retries``: ~30 s before giving up).
    """

    def __init__(
        self,
        cache_dir: Path,
        *,
        retries: int = 5,
        connect_retries: int | None = None,
        timeout: tuple[float, float] = TIMEOUTS.for_request,
        attempt_seconds: float | None = None,
    ) -> None:
        self.cache_dir = cache_dir
        self.retries = retries
        self.connect_retries = retries if connect_retries is None else connect_retries
        self.timeout = timeout
        self.attempt_seconds = attempt_seconds
        self._session: requests.Session | None = None

    @property
    def session(self) -> requests.Session:
        if self._session is None:
            self._session = _session(self.retries, self.connect_retries)
        return self._session

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def cached(self, sha256: str) -> Path | None:
        path = self.cache_dir / "sha256" / sha256
        if path.is_file() and sha256_file(path) == sha256:
            return path
        return None

    def get_json(self, url: str) -> object:
        try:
            response = self.session.get(url, timeout=self.timeout, stream=True)
        except requests.RequestException as exc:
            raise SourceError(f"cannot reach {url}: {exc}", hint="check the network or the --pypi mirror") from None
        with response:
            if response.status_code != 200:
                raise SourceError(f"{url} answered HTTP {response.status_code}")
            body = read_limited(response, limit=MAX_JSON_BYTES, what=f"{url}", error=SourceError)
        try:
            return parse_json(body, what=url)
        except ValueError as exc:
            raise SourceError(str(exc)) from None

    def get_pypi_project(self, url: str) -> PypiProject:
        """PyPI's JSON API document at ``url``, read by its one reader; SourceError (exit 4) for any other."""
        try:
            return read_pypi_project(self.get_json(url), json_url=url)
        except ValueError as exc:
            raise SourceError(
                str(exc),
                hint="that is not what PyPI's JSON API sends, and nothing of it was used: check the --pypi URL "
                "(or the mirror it names), then run again",
            ) from None

    def get_github_issues(self, url: str) -> tuple[Issue, ...]:
        """One page of GitHub's issue list at ``url`` (no token: a public repository's), read by GitHub's one
        reader of issues; SourceError (exit 4) for an answer GitHub's API would not send."""
        try:
            return read_issues(RemoteJson(self.get_json(url), "issues", document=f"GitHub's answer to GET {url}"))
        except ValueError as exc:
            raise SourceError(
                str(exc),
                hint="that is not what GitHub's issue list sends, and nothing of it was used: check the "
                "--runner-images URL, then run again",
            ) from None

    def fetch(self, url: str, *, sha256: str | None, size: int | None = None) -> tuple[Path, str]:
        """The file at ``url`` in the cache; with ``sha256`` given it must match. Returns (path, sha256).

        Without a ``sha256`` (a source being recorded) the file is downloaded whole in one
        response, never resumed: what gets recorded is exactly what one server response
        said it was. A resumed download that does not match its pin is fetched once more
        from the first byte before it is called a mismatch.
        """
        if sha256 is not None and (hit := self.cached(sha256)) is not None:
            return hit, sha256
        parsed = urlparse(url)
        if parsed.scheme == "file":
            return self._store(Path(url2pathname(parsed.path)), url=url, sha256=sha256, size=size, copy=True)
        if parsed.scheme not in ("http", "https"):
            raise SourceError(f"cannot download {url}: only http(s) and file URLs are sources")
        partial_dir = self.cache_dir / "partial"
        partial_dir.mkdir(parents=True, exist_ok=True)
        partial = partial_dir / (hashlib.sha256(url.encode()).hexdigest()[:32] + ".part")
        with exclusive(partial_dir, what=f"downloading {url}", error=SourceError):
            resumable = sha256 is not None
            if not resumable:
                partial.unlink(missing_ok=True)
            resumed = self._download(url, partial, size=size, resumable=resumable)
            if resumed and sha256 is not None and sha256_file(partial) != sha256:
                # its parts may come from two versions of the file: once more from the first byte
                get_reporter().warning(f"the resumed download of {url} does not match its pin: downloading it again")
                partial.unlink()
                self._download(url, partial, size=size, resumable=True)
            return self._store(partial, url=url, sha256=sha256, size=size, copy=False)

    def _download(self, url: str, partial: Path, *, size: int | None, resumable: bool) -> bool:
        """Fill ``partial`` with the file at ``url``; True when part of it came from an earlier attempt."""
        reporter = get_reporter()
        resumed = False
        for attempt in range(1, self.retries + 2):
            have = partial.stat().st_size if partial.exists() else 0
            if size is not None and have == size:
                return resumed
            if have and not resumable:
                partial.unlink()
                have = 0
            headers = {"Range": f"bytes={have}-"} if have else {}
            try:
                with (
                    attempt_limit(self.attempt_seconds),
                    self.session.get(url, headers=headers, stream=True, timeout=self.timeout) as response,
                ):
                    start = _resume_point(url, response, partial, have=have)
                    if start is None:
                        continue
                    if start:
                        reporter.info(f"resuming {url} at {have} bytes")
                        resumed = True
                    _write_body(url, response, partial, start=start, size=size)
                    return resumed
            except TooSlow as exc:  # not retried: each try would take as long again
                raise SourceError(
                    f"downloading {url} stopped: {exc}", hint="run again later: the download resumes where it stopped"
                ) from None
            except requests.RequestException as exc:
                if attempt > self.retries:
                    raise SourceError(
                        f"downloading {url} failed after {attempt} attempts: {exc}",
                        hint="run again: the download resumes where it stopped",
                    ) from None
                reporter.warning(f"download of {url} interrupted ({exc}); retrying ({attempt}/{self.retries})")
        raise SourceError(f"downloading {url} failed: no complete response")

    def _store(self, path: Path, *, url: str, sha256: str | None, size: int | None, copy: bool) -> tuple[Path, str]:
        if not path.is_file():
            raise SourceError(f"{url}: no such file")
        actual = sha256_file(path)
        if sha256 is not None and actual != sha256:
            if not copy:
                path.unlink()  # a corrupt or substituted download must not be resumed
            raise SourceError(
                f"sha256 mismatch for {url}",
                details=f"expected {sha256}\nactual   {actual}",
                hint="the file is not the one that was published/pinned: do not build from it. If the pin is "
                "outdated, update it in the matrix after checking the new file",
            )
        if size is not None and path.stat().st_size != size:
            if not copy:
                path.unlink()
            raise SourceError(f"{url} is {path.stat().st_size} bytes; its index said {size}")
        target = self.cache_dir / "sha256" / actual
        target.parent.mkdir(parents=True, exist_ok=True)
        if copy:
            with temp_file(target.parent, actual) as tmp:
                shutil.copyfile(path, tmp)
                tmp.replace(target)
        else:
            path.replace(target)
        return target, actual


def _resume_point(url: str, response: requests.Response, partial: Path, *, have: int) -> int | None:
    """Where the answer's body goes in ``partial`` (0: from the start); None: ``partial`` is removed, ask again."""
    check_redirects(url, response, error=SourceError)
    if response.status_code == 416 and have:  # already complete (or stale): restart
        partial.unlink()
        return None
    if response.status_code not in (200, 206):
        raise SourceError(
            f"downloading {url} failed: HTTP {response.status_code}",
            hint="check the URL; for a GitHub archive, that the tag exists",
        )
    start = _range_start(response) if response.status_code == 206 else 0
    if start not in (0, have):  # not the part that was asked for: start over
        partial.unlink(missing_ok=True)
        return None
    return start


def _write_body(url: str, response: requests.Response, partial: Path, *, start: int, size: int | None) -> None:
    """Append the answer's body to ``partial`` at ``start``, bounded; ConnectionError when it ends early
    or is cut at the attempt limit (what arrived is kept: the next attempt resumes)."""
    expected = _expected_total(response, start)
    if size is not None and expected is not None and expected != size:
        raise SourceError(
            f"{url} is {expected} bytes; its index said {size}",
            hint="the server serves another file than the one listed: do not build from it",
        )
    with partial.open("ab" if start else "wb") as fh:
        written = start
        for chunk in iter_body(response):
            written += len(chunk)
            if written > MAX_DOWNLOAD_BYTES or (size is not None and written > size):
                partial.unlink()
                raise SourceError(
                    f"{url} sent more than {size or MAX_DOWNLOAD_BYTES} bytes",
                    hint="the server serves another file than the one listed: do not build from it",
                )
            fh.write(chunk)
    if expected is not None and written != expected:
        raise requests.ConnectionError(f"the response ended after {written} of {expected} bytes")


def _range_start(response: requests.Response) -> int | None:
    """The first byte of a 206 answer (``Content-Range: bytes START-END/TOTAL``); None if unreadable."""
    value = response.headers.get("Content-Range", "")
    unit, _sep, spec = value.partition(" ")
    first = spec.split("-", 1)[0]
    return int(first) if unit == "bytes" and is_ascii_digits(first) and len(first) <= 15 else None


def _expected_total(response: requests.Response, start: int) -> int | None:
    """The file's whole size as the response states it (Content-Range total, else start + Content-Length)."""
    if response.status_code == 206:
        total = response.headers.get("Content-Range", "").rpartition("/")[2]
        if is_ascii_digits(total) and len(total) <= 15:
            return int(total)
    length = response.headers.get("Content-Length", "")
    if is_ascii_digits(length) and len(length) <= 15 and "Content-Encoding" not in response.headers:
        return start + int(length)
    return None


def fetch_source(planned: PlannedCell, *, downloader: Downloader, pypi_json: str) -> FetchedSource:
    """Download and verify the source of a planned cell (see the module docstring)."""
    source = planned.source
    version = format_version(planned.cell.deepspeed)
    reporter = get_reporter()
    if source.kind is SourceKind.SDIST:
        try:
            info = downloader.get_pypi_project(pypi_json).sdist(version)
        except LookupError as exc:
            raise SourceError(str(exc), hint="check the DeepSpeed version") from None
        if source.sha256 and source.sha256 != info.sha256:
            raise SourceError(
                f"the matrix pins DeepSpeed {version}'s sdist to a sha256 PyPI does not list",
                details=f"matrix {source.sha256}\nPyPI   {info.sha256}",
                hint="check which is right and fix the pin",
            )
        reporter.info(f"source: {info.filename} (sha256 {info.sha256[:12]}... from PyPI's JSON API)")
        path, sha = downloader.fetch(info.url, sha256=info.sha256, size=info.size)
        return FetchedSource(
            path=path, kind=SourceKind.SDIST, url=info.url, sha256=sha, verified_by="PyPI JSON API digest"
        )
    if not source.sha256:  # the matrix parser requires the pin; a hand-made plan might not have it
        raise SourceError(
            f"no sha256 pinned for {source.url}",
            hint=f"pin it in the matrix (deepspeed: - version: {version}, source: {{url: ..., sha256: ...}})",
        )
    reporter.info(f"source: {source.url} (sha256 {source.sha256[:12]}... pinned in the matrix)")
    path, sha = downloader.fetch(source.url, sha256=source.sha256)
    return FetchedSource(
        path=path, kind=source.kind, url=source.url, sha256=sha, verified_by="sha256 pinned in the matrix"
    )
