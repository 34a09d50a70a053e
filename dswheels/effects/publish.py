"""Publishing wheels: to a directory, to a GitHub Release, or to a PEP 503 upload server.

All three keep one rule: a published file is immutable. Publishing a name that is already
there with the same bytes does nothing (so a re-run of a tag is a no-op); the same name
with other bytes is an error, reported for every such file before anything is written.

What goes out per wheel: the wheel, its METADATA as ``<wheel>.metadata`` (PEP 658: the
index links it so installers resolve without downloading wheels) and, when ``dswheels
build`` left one beside the wheel, its build manifest (``<wheel>.manifest.json``).
"""

from __future__ import annotations

import contextvars
import hashlib
import io
import os
import shutil
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO
from urllib.parse import urljoin

import requests

from dswheels.core.index.files import IndexFile, parse_project_page
from dswheels.core.index.links import metadata_name
from dswheels.core.index.site import GITHUB_ASSET_LIMIT, GITHUB_ASSET_MAX_BYTES
from dswheels.core.naming import PROJECT, parse_wheel
from dswheels.core.wheel.contents import parse_metadata
from dswheels.core.wheel.manifest import ManifestError, manifest_name, parse_manifest
from dswheels.effects.files import exclusive, place_new, read_bounded, sha256_file, sweep, temp_file
from dswheels.effects.github import JSON, GitHub, GitHubAPIError
from dswheels.effects.http import MAX_PAGE_BYTES, read_limited
from dswheels.effects.index import LocalWheel, local_wheel, update_ledger
from dswheels.effects.wheelhouse import find_wheels, is_wheel_file
from dswheels.errors import ConfigError, PublishError
from dswheels.log import get_reporter

__all__ = [
    "Outgoing",
    "PublishResult",
    "check_github_limits",
    "collect_wheels",
    "github_index_files",
    "outgoing_files",
    "publish_dir",
    "publish_github",
    "publish_upload",
    "upload_credentials",
]


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One file to publish: a wheel on disk, or bytes (its .metadata)."""

    name: str
    size: int
    sha256: str
    path: Path | None = None
    data: bytes | None = None

    def source(self) -> Path | bytes:
        if self.path is not None:
            return self.path
        assert self.data is not None  # noqa: S101 - one of the two is always set
        return self.data

    def open(self) -> IO[bytes]:
        return self.path.open("rb") if self.path is not None else io.BytesIO(self.data or b"")


@dataclass
class PublishResult:
    where: str
    uploaded: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)  # already published with the same bytes


def collect_wheels(paths: Sequence[Path]) -> list[LocalWheel]:
    """Wheels named directly, or every ``*.whl`` in the directories given (and one level down, as
    `dswheels build` writes them); no paths: what `dswheels build` wrote (``wheelhouse/``)."""
    found = find_wheels(paths)
    for path in found:
        if not is_wheel_file(path):
            raise ConfigError(f"{path}: no such wheel or directory")
    names: dict[str, Path] = {}
    for path in found:
        try:
            parse_wheel(path.name)
        except ValueError as exc:
            raise ConfigError(
                f"not a dswheels wheel: {exc}",
                hint="only wheels built by `dswheels build` can be published (their names carry the torch build)",
            ) from None
        if path.name in names and names[path.name].resolve() != path.resolve():
            raise ConfigError(f"{path.name} is given twice: {names[path.name]} and {path}")
        names[path.name] = path
    return [local_wheel(p) for p in names.values()]


def outgoing_files(wheel: LocalWheel) -> list[Outgoing]:
    """The wheel, its .metadata, and its build manifest when there is one (checked against the wheel)."""
    files = [
        Outgoing(name=wheel.wheel.filename, size=wheel.size, sha256=wheel.sha256, path=wheel.path),
        Outgoing(
            name=metadata_name(wheel.wheel.filename),
            size=len(wheel.metadata),
            sha256=wheel.metadata_sha256,
            data=wheel.metadata,
        ),
    ]
    manifest = wheel.path.with_name(manifest_name(wheel.wheel.filename))
    if manifest.is_file():
        try:
            recorded = parse_manifest(read_bounded(manifest).decode("utf-8")).wheel
        except (ManifestError, OSError, ValueError) as exc:
            raise PublishError(f"{manifest}: {exc}", hint="rebuild the wheel, or remove the stray manifest") from None
        if (recorded.filename, recorded.sha256) != (wheel.wheel.filename, wheel.sha256):
            raise PublishError(
                f"{manifest.name} describes other bytes than {wheel.wheel.filename} "
                f"(manifest sha256 {recorded.sha256[:12]}..., wheel {wheel.sha256[:12]}...)",
                hint="the wheel changed after it was built: rebuild it, never edit a built wheel",
            )
        files.append(
            Outgoing(name=manifest.name, size=manifest.stat().st_size, sha256=sha256_file(manifest), path=manifest)
        )
    return files


def _conflict_error(conflicts: Sequence[str], where: str) -> PublishError:
    return PublishError(
        f"{len(conflicts)} file(s) are already published at {where} with other bytes; nothing was changed",
        details="\n".join(conflicts),
        hint="published files are immutable: give the re-spun wheel a build tag "
        "(deepspeed-X+label-1-cpXY-...) or a new version instead of replacing it",
    )


# --- directory --------------------------------------------------------------------------------------


def _copy_new(source: Outgoing, target: Path) -> bool:
    """Write the whole file under a temporary name, then give it its name only if that name is
    free (:func:`~dswheels.effects.files.place_new`): a reader never sees half a file, and two
    writers of one name cannot replace each other. False when the name was taken meanwhile."""
    with temp_file(target.parent, target.name) as tmp:
        if source.path is not None:
            shutil.copyfile(source.path, tmp)
        else:
            tmp.write_bytes(source.data or b"")
        digest = sha256_file(tmp)
        if digest != source.sha256:
            raise PublishError(
                f"{source.name} changed while it was being published (sha256 {digest[:16]}..., "
                f"expected {source.sha256[:16]}...)",
                hint="do not rewrite wheels while publishing them; run again",
            )
        return place_new(tmp, target)


def _conflict(item: Outgoing, target: Path) -> str | None:
    """None when ``target`` holds ``item``'s bytes, else the line that says how it differs."""
    published = sha256_file(target)
    if published == item.sha256:
        return None
    return f"{item.name}: published {published[:16]}..., new {item.sha256[:16]}..."


def publish_dir(wheels: Sequence[LocalWheel], dest: Path) -> PublishResult:
    """Copy into ``dest`` (the local "release"): what `dswheels index --from` reads.

    Runs on one directory take turns (a lock file in it); each file is placed under its
    name only if the name is free, so even a writer that ignores the lock cannot be
    replaced, and what an earlier run killed mid-copy left behind is removed first.
    """
    result = PublishResult(where=str(dest))
    if dest.exists() and not dest.is_dir():
        raise ConfigError(f"{dest} exists and is not a directory")
    outgoing = [item for wheel in wheels for item in outgoing_files(wheel)]  # every manifest checked first
    dest.mkdir(parents=True, exist_ok=True)
    with exclusive(dest, what=f"publishing into {dest}", error=PublishError):
        for leftover in sweep(dest):
            get_reporter().info(f"removed {leftover}: left by an interrupted publish")
        todo: list[Outgoing] = []
        conflicts: list[str] = []
        for item in outgoing:
            target = dest / item.name
            if not target.exists():
                todo.append(item)
            elif (conflict := _conflict(item, target)) is None:
                result.present.append(item.name)
            else:
                conflicts.append(conflict)
        if conflicts:
            raise _conflict_error(conflicts, str(dest))
        # the wheel before its .metadata and manifest: a sidecar is never published without its wheel
        for item in todo:
            target = dest / item.name
            if _copy_new(item, target):
                result.uploaded.append(item.name)
            elif (conflict := _conflict(item, target)) is None:
                result.present.append(item.name)  # another writer published the same bytes meanwhile
            else:
                raise _conflict_error([conflict], str(dest))
        update_ledger(dest, wheels)
    return result


# --- GitHub Releases --------------------------------------------------------------------------------


def check_github_limits(files: Sequence[Outgoing], *, existing: int, new: int, tag: str) -> None:
    """GitHub's limits: every asset under 2 GiB, at most 1000 assets per release."""
    too_big = [f"{f.name}: {f.size / 2**30:.2f} GiB" for f in files if f.size > GITHUB_ASSET_MAX_BYTES]
    if too_big:
        raise PublishError(
            "GitHub release assets must be under 2 GiB",
            details="\n".join(too_big),
            hint="build fewer CUDA architectures into the wheel (TORCH_CUDA_ARCH_LIST) or strip debug info",
        )
    if existing + new > GITHUB_ASSET_LIMIT:
        raise PublishError(
            f"release {tag} would hold {existing + new} assets; GitHub allows {GITHUB_ASSET_LIMIT} per release",
            details=f"{existing} already there, {new} to add (each wheel also brings its .metadata and manifest)",
            hint="publish to more than one tag (e.g. one release per DeepSpeed version or per platform); "
            "`dswheels index --github` reads every release",
        )


def _by_name(assets: Sequence[JSON]) -> dict[str, JSON]:
    return {str(a["name"]): a for a in assets}


def _upload_one(gh: GitHub, release: JSON, item: Outgoing) -> None:
    """Upload, and after any failure look at what GitHub kept before trying again."""
    reporter = get_reporter()
    attempts = gh.retry.attempts
    for attempt in range(attempts):
        try:
            gh.upload_asset(release, item.name, item.source(), size=item.size)
        except GitHubAPIError as exc:
            if "immutable" in exc.github_message.lower():
                raise PublishError(
                    f"release {release.get('tag_name')} is published and immutable: {item.name} cannot be added",
                    hint="publish the missing wheels under a new tag; `dswheels index --github` reads every release",
                ) from None
            retryable = exc.status >= 500 or exc.has_error_code("already_exists")
            if not retryable or attempt == attempts - 1:
                raise
            reporter.warning(f"upload of {item.name} failed ({exc.status}); checking what GitHub kept")
        except PublishError:  # the connection broke: the asset may or may not be there
            if attempt == attempts - 1:
                raise
            reporter.warning(f"upload of {item.name} was interrupted; checking what GitHub kept")
        else:
            return
        asset = _by_name(gh.assets(release)).get(item.name)
        if asset is not None and asset.get("state") == "uploaded":
            if gh.asset_sha256(asset) == item.sha256:
                return  # it did arrive
            raise PublishError(f"{item.name}: GitHub holds other bytes under this name after a failed upload")
        if asset is not None:  # a "starter" left by the failed upload: GitHub says it can be deleted
            gh.delete_asset(asset)
        gh.retry.wait(gh.retry.backoff(attempt))


def publish_github(
    wheels: Sequence[LocalWheel], gh: GitHub, tag: str, *, title: str | None = None, target: str | None = None
) -> PublishResult:
    """Draft (or find) the release for ``tag``, upload what is missing, verify, publish.

    Safe to re-run: a draft left by an interrupted run is reused, assets already there
    with the same bytes are skipped, half-uploaded ones (state ``starter``) are replaced.
    """
    reporter = get_reporter()
    files = [item for wheel in wheels for item in outgoing_files(wheel)]
    check_github_limits(files, existing=0, new=0, tag=tag)  # sizes first: fail before any API call
    release = gh.release_by_tag(tag)
    if release is None:
        reporter.info(f"creating draft release {tag} in {gh.repo}")
        release = gh.create_release(
            tag,
            name=title or tag,
            body="DeepSpeed wheels built by dswheels. Install lines: see the index page.",
            target=target,
        )
    assets = gh.assets(release)
    for stale in [a for a in assets if a.get("state") != "uploaded"]:
        reporter.warning(f"removing {stale['name']}: left half-uploaded (state {stale.get('state')}) by an earlier run")
        gh.delete_asset(stale)
    existing = _by_name([a for a in assets if a.get("state") == "uploaded"])
    result = PublishResult(where=str(release.get("html_url") or f"{gh.repo}@{tag}"))
    todo: list[Outgoing] = []
    conflicts: list[str] = []
    for item in files:
        asset = existing.get(item.name)
        if asset is None:
            todo.append(item)
            continue
        published = gh.asset_sha256(asset)
        if published == item.sha256:
            result.present.append(item.name)
        else:
            conflicts.append(f"{item.name}: published {published[:16]}..., new {item.sha256[:16]}...")
    if conflicts:
        raise _conflict_error(conflicts, f"{gh.repo} release {tag}")
    check_github_limits(files, existing=len(existing), new=len(todo), tag=tag)
    for number, item in enumerate(todo, start=1):
        reporter.info(f"[{number}/{len(todo)}] uploading {item.name} ({item.size / 1e6:.1f} MB)")
        _upload_one(gh, release, item)
        result.uploaded.append(item.name)
    final = _by_name(gh.assets(release))
    missing = [
        item.name
        for item in files
        if item.name not in final
        or final[item.name].get("state") != "uploaded"
        or gh.asset_sha256(final[item.name]) != item.sha256
    ]
    if missing:
        raise PublishError(
            f"after uploading, release {tag} lacks or misreports {len(missing)} file(s); it was left unpublished",
            details="\n".join(missing),
            hint="run the same command again: it resumes",
        )
    if release.get("draft"):
        reporter.info(f"publishing release {tag}")
        gh.publish_release(release)
    return result


def github_index_files(gh: GitHub) -> tuple[list[IndexFile], list[str]]:
    """Every dswheels wheel in the repository's published releases, with hashes and metadata.

    The wheel's sha256 is GitHub's own digest of the asset; its ``.metadata`` asset is
    downloaded (a few KB, several at a time) for Requires-Python and its hash. Drafts are
    left out: their assets are not public. Returns the files and warnings.
    """
    warnings: list[str] = []
    found: list[tuple[str, JSON, JSON | None]] = []  # tag, wheel asset, metadata asset
    releases = sorted((r for r in gh.releases() if not r.get("draft")), key=lambda r: int(r["id"]))
    for release in releases:
        tag = str(release.get("tag_name"))
        assets = _by_name([a for a in gh.assets(release) if a.get("state") == "uploaded"])
        for name, asset in sorted(assets.items()):
            if name.endswith(".whl"):
                found.append((tag, asset, assets.get(metadata_name(name))))

    def facts(item: tuple[str, JSON, JSON | None]) -> IndexFile | str:
        tag, asset, meta_asset = item
        name = str(asset["name"])
        try:
            wheel = parse_wheel(name)
        except ValueError as exc:
            return f"release {tag}: skipped {exc}"
        requires_python = metadata_sha256 = None
        if meta_asset is not None:
            data = gh.download_asset(meta_asset, limit=1024 * 1024)
            metadata_sha256 = hashlib.sha256(data).hexdigest()
            requires_python = parse_metadata(data).requires_python
        return IndexFile.of_wheel(
            wheel,
            url=str(asset["browser_download_url"]),
            sha256=gh.asset_sha256(asset),
            size=int(asset.get("size", 0)),
            requires_python=requires_python,
            metadata_sha256=metadata_sha256,
        )

    parent = contextvars.copy_context()  # the workers report (retries) through the caller's reporter
    with ThreadPoolExecutor(max_workers=8) as pool:  # network-bound: a few requests in flight
        results = list(pool.map(lambda item: parent.copy().run(facts, item), found))
    chosen: dict[str, tuple[IndexFile, str]] = {}
    for (tag, _asset, meta_asset), result in zip(found, results, strict=True):
        if isinstance(result, str):
            warnings.append(result)
            continue
        if meta_asset is None:
            warnings.append(f"release {tag}: {result.filename} has no .metadata asset; installers will download it")
        if result.filename in chosen:
            first, first_tag = chosen[result.filename]
            if first.sha256 != result.sha256:
                raise PublishError(
                    f"{result.filename} is published with different bytes in releases {first_tag} and {tag}",
                    hint="installers would get either; delete the wrong asset, and re-spin with a build tag",
                )
            continue  # the same file twice: the oldest release's copy is the one linked
        chosen[result.filename] = (result, tag)
    return [item for item, _tag in chosen.values()], warnings


# --- PEP 503 upload servers (pypiserver, devpi, Artifactory, ...) ---------------------------------------


class _MultipartBody(io.RawIOBase):
    """multipart/form-data streamed from disk: the legacy upload API without reading the wheel into memory."""

    def __init__(self, parts: Sequence[IO[bytes]], size: int) -> None:
        super().__init__()
        self._parts = list(parts)
        self._size = size
        self._position = 0

    # __len__ and tell() let requests send a Content-Length instead of a chunked body,
    # which some upload servers cannot parse
    def __len__(self) -> int:
        return self._size

    def tell(self) -> int:
        return self._position

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while self._parts:
            data = self._parts[0].read(len(buffer))
            if data:
                buffer[: len(data)] = data
                self._position += len(data)
                return len(data)
            self._parts.pop(0).close()
        return 0


def _form_fields(wheel: LocalWheel) -> list[tuple[str, str]]:
    """The fields twine sends for a wheel (the "legacy" upload API that PyPI and every PEP 503 server speak)."""
    meta = parse_metadata(wheel.metadata)
    fields = [
        (":action", "file_upload"),
        ("protocol_version", "1"),
        ("metadata_version", meta.metadata_version),
        ("name", meta.name),
        ("version", meta.version),
        ("filetype", "bdist_wheel"),
        ("pyversion", wheel.wheel.cell.python.interpreter_tag),
        ("summary", meta.summary),
        ("sha256_digest", wheel.sha256),
        ("blake2_256_digest", _blake2(wheel.path)),
    ]
    if meta.requires_python:
        fields.append(("requires_python", meta.requires_python))
    fields.extend(("requires_dist", req) for req in meta.requires_dist)
    return fields


def _blake2(path: Path) -> str:
    digest = hashlib.blake2b(digest_size=32)
    with path.open("rb") as fh:
        while chunk := fh.read(1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest()


def _quoted(value: str) -> str:
    """A quoted-string parameter of a multipart header, escaped as browsers do (RFC 7578 4.2:
    ``"``, CR and LF percent-encoded), so no value can end the header or start another.

    >>> _quoted('a"b\\r\\nc')
    'a%22b%0D%0Ac'
    """
    return value.replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")


def _multipart(wheel: LocalWheel) -> tuple[_MultipartBody, str, int]:
    boundary = uuid.uuid4().hex
    head = io.BytesIO()
    for name, value in _form_fields(wheel):
        head.write(f'--{boundary}\r\nContent-Disposition: form-data; name="{_quoted(name)}"\r\n\r\n'.encode())
        head.write(value.encode("utf-8") + b"\r\n")
    head.write(
        f'--{boundary}\r\nContent-Disposition: form-data; name="content"; '
        f'filename="{_quoted(wheel.wheel.filename)}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n".encode()
    )
    tail = f"\r\n--{boundary}--\r\n".encode()
    size = head.tell() + wheel.size + len(tail)
    head.seek(0)
    body = _MultipartBody([head, wheel.path.open("rb"), io.BytesIO(tail)], size)
    return body, f"multipart/form-data; boundary={boundary}", size


def upload_credentials(env: Mapping[str, str] | None = None) -> tuple[str | None, str | None]:
    """``DSWHEELS_UPLOAD_USERNAME``/``_PASSWORD``, else twine's ``TWINE_USERNAME``/``_PASSWORD``."""
    env = os.environ if env is None else env
    username = env.get("DSWHEELS_UPLOAD_USERNAME") or env.get("TWINE_USERNAME")
    password = env.get("DSWHEELS_UPLOAD_PASSWORD") or env.get("TWINE_PASSWORD")
    return username, password


def _server_files(session: requests.Session, simple_url: str, timeout: float) -> dict[str, tuple[str, str]]:
    """filename -> (url, sha256 from the link's fragment or "") of what the server already has."""
    url = urljoin(simple_url if simple_url.endswith("/") else simple_url + "/", f"{PROJECT}/")
    try:
        response = session.get(url, timeout=timeout, allow_redirects=False, stream=True)
    except requests.RequestException as exc:
        raise PublishError(f"cannot read {url}: {exc}") from None
    with response:
        # 404, or pypiserver's redirect to its PyPI fallback: the project is not there yet
        if response.status_code == 404 or 300 <= response.status_code < 400:
            return {}
        if response.status_code != 200:
            raise PublishError(f"cannot read {url}: HTTP {response.status_code}", hint="check --simple-url")
        body = read_limited(response, limit=MAX_PAGE_BYTES, what=url, error=PublishError)
    try:
        files = parse_project_page(body.decode("utf-8", "replace"), url)
    except ValueError as exc:
        raise PublishError(str(exc), hint="check --simple-url") from None
    return {f.filename: (f.url, f.sha256) for f in files if not f.problem}


def _stream_sha256(session: requests.Session, url: str, timeout: float) -> str:
    digest = hashlib.sha256()
    with session.get(url, timeout=timeout, stream=True) as response:
        response.raise_for_status()
        for chunk in response.iter_content(1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest()


def publish_upload(
    wheels: Sequence[LocalWheel],
    repository_url: str,
    *,
    simple_url: str | None = None,
    username: str | None = None,
    password: str | None = None,
    session: requests.Session | None = None,
    timeout: float = 600,
) -> PublishResult:
    """Upload to a PEP 503 server through the upload API (what ``twine upload`` does).

    ``simple_url`` (default ``<repository_url>/simple/``, pypiserver's layout) is read first
    so that files already there are skipped or, with other bytes, refused.
    """
    http = session or requests.Session()
    if username is not None or password is not None:
        http.auth = (username or "", password or "")
    simple = simple_url or urljoin(repository_url if repository_url.endswith("/") else repository_url + "/", "simple/")
    result = PublishResult(where=repository_url)
    existing = _server_files(http, simple, timeout)
    todo: list[LocalWheel] = []
    conflicts: list[str] = []
    for wheel in wheels:
        name = wheel.wheel.filename
        if name not in existing:
            todo.append(wheel)
            continue
        url, published = existing[name]
        published = published or _stream_sha256(http, url, timeout)  # a server that gives no hash
        if published == wheel.sha256:
            result.present.append(name)
        else:
            conflicts.append(f"{name}: published {published[:16]}..., new {wheel.sha256[:16]}...")
    if conflicts:
        raise _conflict_error(conflicts, repository_url)
    reporter = get_reporter()
    raced: list[str] = []
    for number, wheel in enumerate(todo, start=1):
        name = wheel.wheel.filename
        reporter.info(f"[{number}/{len(todo)}] uploading {name} ({wheel.size / 1e6:.1f} MB) to {repository_url}")
        body, content_type, _size = _multipart(wheel)
        try:
            response = http.post(
                repository_url,
                data=body,
                headers={"Content-Type": content_type},
                timeout=timeout,
                allow_redirects=False,
            )
        except requests.RequestException as exc:
            raise PublishError(f"uploading {name} to {repository_url} failed: {exc}") from None
        finally:
            body.close()
        if response.status_code == 409:  # it arrived meanwhile (another run): the check below judges the bytes
            raced.append(name)
            continue
        if response.status_code not in (200, 201):
            hint = (
                "check the credentials (DSWHEELS_UPLOAD_USERNAME/PASSWORD)"
                if response.status_code in (401, 403)
                else None
            )
            raise PublishError(
                f"{repository_url} refused {name}: HTTP {response.status_code} {response.reason}",
                details=response.text[:500],
                hint=hint,
            )
        result.uploaded.append(name)
    after = _server_files(http, simple, timeout)
    wrong: list[str] = []
    for wheel in todo:
        name = wheel.wheel.filename
        if name not in after:
            wrong.append(f"{name}: missing")
            continue
        url, published = after[name]
        if name in raced and not published:  # another run's upload won: only its bytes can tell
            published = _stream_sha256(http, url, timeout)
        if published and published != wheel.sha256:
            wrong.append(f"{name}: published {published[:16]}..., ours {wheel.sha256[:16]}...")
        elif name in raced:
            result.present.append(name)
    if wrong:
        raise PublishError(
            f"after uploading, {simple} lacks or holds other bytes for {len(wrong)} file(s)",
            details="\n".join(wrong),
            hint=f"another run may have published the same name with other bytes (published files are immutable: "
            f"re-spin with a build tag); else check that --simple-url is where {repository_url} serves its index",
        )
    return result
