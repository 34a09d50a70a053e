"""Fetch DeepSpeed sources: verified, cached by content, resumable, retried with backoff.

Every build uses the PyPI sdist, checked against the sha256 PyPI's JSON API gives (a Windows
build then adds the few files the sdist leaves out: ``patch_tree`` in effects/build.py). A
matrix ``source`` override names another archive and must pin its sha256. Downloads land in
``<cache>/sources/sha256/<hex>`` so the same bytes are fetched once.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING
from urllib.parse import urlparse

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from dswheels import __version__
from dswheels.core.model import PlannedCell, SourceKind
from dswheels.core.sources import SdistInfo, sdist_from_pypi_json
from dswheels.core.versions import format_version
from dswheels.errors import SourceError
from dswheels.log import get_reporter

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "Downloader",
    "FetchedSource",
    "extract_archive",
    "fetch_source",
]

CHUNK = 1 << 20
STREAM_CHUNK = 1 << 16  # small: what arrived before a connection breaks is kept for resuming
TIMEOUT = (15, 120)  # connect, read


@dataclass(frozen=True, slots=True)
class FetchedSource:
    path: Path  # the verified archive in the cache
    kind: SourceKind
    url: str
    sha256: str
    verified_by: str  # what the sha256 was checked against


def _session(retries: int) -> requests.Session:
    session = requests.Session()
    retry = Retry(
        total=retries,
        connect=retries,
        read=retries,
        status=retries,
        backoff_factor=1.0,
        status_forcelist=(429, 500, 502, 503, 504),
        allowed_methods=frozenset({"GET", "HEAD"}),
        respect_retry_after_header=True,
        raise_on_status=False,
    )
    adapter = HTTPAdapter(max_retries=retry)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    session.headers["User-Agent"] = f"dswheels/{__version__}"
    return session


class Downloader:
    """Content-addressed download cache with resumable transfers (HTTP Range) and retries."""

    def __init__(self, cache_dir: Path, *, retries: int = 5) -> None:
        self.cache_dir = cache_dir
        self.retries = retries
        self._session: requests.Session | None = None

    @property
    def session(self) -> requests.Session:
        if self._session is None:
            self._session = _session(self.retries)
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
        if path.is_file() and _sha256_file(path) == sha256:
            return path
        return None

    def get_json(self, url: str) -> object:
        try:
            response = self.session.get(url, timeout=TIMEOUT)
        except requests.RequestException as exc:
            raise SourceError(f"cannot reach {url}: {exc}", hint="check the network or the --pypi mirror") from None
        if response.status_code != 200:
            raise SourceError(f"{url} answered HTTP {response.status_code}")
        try:
            return response.json()
        except ValueError:
            raise SourceError(f"{url} did not return JSON") from None

    def fetch(self, url: str, *, sha256: str | None, size: int | None = None) -> tuple[Path, str]:
        """The file at ``url`` in the cache; with ``sha256`` given it must match. Returns (path, sha256)."""
        if sha256 is not None and (hit := self.cached(sha256)) is not None:
            return hit, sha256
        parsed = urlparse(url)
        if parsed.scheme == "file":
            return self._store(Path(parsed.path), url=url, sha256=sha256, copy=True)
        partial_dir = self.cache_dir / "partial"
        partial_dir.mkdir(parents=True, exist_ok=True)
        partial = partial_dir / (hashlib.sha256(url.encode()).hexdigest()[:32] + ".part")
        self._download(url, partial, size=size)
        return self._store(partial, url=url, sha256=sha256, copy=False)

    def _download(self, url: str, partial: Path, *, size: int | None) -> None:
        reporter = get_reporter()
        for attempt in range(1, self.retries + 2):
            have = partial.stat().st_size if partial.exists() else 0
            if size is not None and have == size:
                return
            headers = {"Range": f"bytes={have}-"} if have else {}
            try:
                with self.session.get(url, headers=headers, stream=True, timeout=TIMEOUT) as response:
                    if response.status_code == 416 and have:  # already complete (or stale): restart
                        partial.unlink()
                        continue
                    if response.status_code not in (200, 206):
                        raise SourceError(
                            f"downloading {url} failed: HTTP {response.status_code}",
                            hint="check the URL; for a GitHub archive, that the tag exists",
                        )
                    mode = "ab" if response.status_code == 206 and have else "wb"
                    if mode == "ab":
                        reporter.info(f"resuming {url} at {have} bytes")
                    with partial.open(mode) as fh:
                        for chunk in response.iter_content(STREAM_CHUNK):
                            fh.write(chunk)
                    return
            except requests.RequestException as exc:
                if attempt > self.retries:
                    raise SourceError(
                        f"downloading {url} failed after {attempt} attempts: {exc}",
                        hint="run again: the download resumes where it stopped",
                    ) from None
                reporter.warning(f"download of {url} interrupted ({exc}); retrying ({attempt}/{self.retries})")
        raise SourceError(f"downloading {url} failed: no complete response")

    def _store(self, path: Path, *, url: str, sha256: str | None, copy: bool) -> tuple[Path, str]:
        if not path.is_file():
            raise SourceError(f"{url}: no such file")
        actual = _sha256_file(path)
        if sha256 is not None and actual != sha256:
            if not copy:
                path.unlink()  # a corrupt or substituted download must not be resumed
            raise SourceError(
                f"sha256 mismatch for {url}",
                details=f"expected {sha256}\nactual   {actual}",
                hint="the file is not the one that was published/pinned: do not build from it. If the pin is "
                "outdated, update it in the matrix after checking the new file",
            )
        target = self.cache_dir / "sha256" / actual
        target.parent.mkdir(parents=True, exist_ok=True)
        if copy:
            tmp = target.with_suffix(".tmp")
            shutil.copyfile(path, tmp)
            tmp.replace(target)
        else:
            path.replace(target)
        return target, actual


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_source(planned: PlannedCell, *, downloader: Downloader, pypi_json: str) -> FetchedSource:
    """Download and verify the source of a planned cell (see the module docstring)."""
    source = planned.source
    version = format_version(planned.cell.deepspeed)
    reporter = get_reporter()
    if source.kind is SourceKind.SDIST:
        json_url = pypi_json
        info: SdistInfo
        try:
            info = sdist_from_pypi_json(downloader.get_json(json_url), version=version, json_url=json_url)
        except LookupError as exc:
            raise SourceError(str(exc), hint="check the DeepSpeed version") from None
        except (ValueError, TypeError) as exc:
            raise SourceError(f"{json_url}: {exc}") from None
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


# --- unpacking ---------------------------------------------------------------------------------


def _safe_member(name: str) -> PurePosixPath | None:
    """The member path without its top directory; None for the top itself. Rejects escapes."""
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts:
        raise SourceError(f"refusing archive member outside the tree: {name}")
    parts = path.parts[1:]
    return PurePosixPath(*parts) if parts else None


def extract_archive(archive: Path, dest: Path) -> None:
    """Unpack a ``.tar.gz``/``.zip`` source into ``dest``, dropping the top directory."""
    dest.mkdir(parents=True, exist_ok=True)
    try:
        if zipfile.is_zipfile(archive):
            _extract_zip(archive, dest)
        else:
            _extract_tar(archive, dest)
    except (tarfile.TarError, zipfile.BadZipFile, OSError, EOFError) as exc:
        raise SourceError(f"cannot unpack {archive.name}: {exc}", hint="delete it from the cache and retry") from None


def _extract_tar(archive: Path, dest: Path) -> None:
    links: list[tuple[Path, str]] = []
    with tarfile.open(archive, "r:*") as tar:
        for member in tar:
            rel = _safe_member(member.name)
            if rel is None:
                continue
            target = dest / rel
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
            elif member.issym():
                link = PurePosixPath(member.linkname)
                if link.is_absolute() or not _inside(rel.parent / link):
                    raise SourceError(f"refusing symlink out of the tree: {member.name} -> {member.linkname}")
                links.append((target, member.linkname))
            elif member.isfile():
                target.parent.mkdir(parents=True, exist_ok=True)
                fh = tar.extractfile(member)
                if fh is None:
                    continue
                with fh, target.open("wb") as out:
                    shutil.copyfileobj(fh, out)
                if member.mode & 0o111:
                    target.chmod(0o755)
    # git archives keep DeepSpeed's directory symlinks (deepspeed/ops/op_builder -> ../../op_builder)
    for target, linkname in links:
        target.parent.mkdir(parents=True, exist_ok=True)
        source = (target.parent / linkname).resolve()
        try:
            target.symlink_to(linkname, target_is_directory=source.is_dir())
        except OSError:
            # Windows without symlink rights: a copy (setup.py replaces these trees on win32 anyway)
            if source.is_dir():
                shutil.copytree(source, target, dirs_exist_ok=True)
            elif source.is_file():
                shutil.copyfile(source, target)


def _inside(path: PurePosixPath) -> bool:
    depth = 0
    for part in path.parts:
        depth += -1 if part == ".." else (0 if part == "." else 1)
        if depth < 0:
            return False
    return True


def _extract_zip(archive: Path, dest: Path) -> None:
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            rel = _safe_member(info.filename)
            if rel is None:
                continue
            target = dest / rel
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as fh, target.open("wb") as out:
                shutil.copyfileobj(fh, out)


def env_cache_dir() -> Path:
    """``DSWHEELS_CACHE``, else the platform's user cache directory + ``dswheels``."""
    if value := os.environ.get("DSWHEELS_CACHE"):
        return Path(value)
    if os.name == "nt":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "dswheels"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dswheels"
