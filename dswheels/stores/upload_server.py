"""Publishing to a PEP 503 upload server (pypiserver, devpi, Artifactory, ...): what ``twine upload`` does.

The "legacy" upload API that PyPI and every PEP 503 server speak: one multipart/form-data POST
per wheel, streamed from disk, with the fields twine sends. The server's simple page is read
before (files already there are skipped or, with other bytes, refused) and after (every
upload must be listed with our bytes; a 409 means another run uploaded the name meanwhile).
"""

from __future__ import annotations

import hashlib
import io
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO
from urllib.parse import urljoin

import requests

from dswheels.host.environ import read_variable
from dswheels.host.http import MAX_PAGE_BYTES, TIMEOUTS, OriginAuth, iter_body, read_limited
from dswheels.host.http import session as http_session
from dswheels.host.log import get_reporter
from dswheels.kernel.envvars import credential, username
from dswheels.kernel.errors import PublishError
from dswheels.kernel.index_files import IndexFile, parse_project_page
from dswheels.kernel.naming import PROJECT
from dswheels.kernel.wheel_contents import parse_metadata
from dswheels.stores.outgoing import PublishResult, sort_out
from dswheels.stores.protocol import ToUploadServer
from dswheels.stores.served_index import download_wheel
from dswheels.stores.wheel_ref import LocalWheel

__all__ = ["UploadServerStore", "publish_upload", "upload_credentials"]


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
    user = read_variable("DSWHEELS_UPLOAD_USERNAME", username, env=env) or read_variable(
        "TWINE_USERNAME", username, env=env
    )
    password = read_variable("DSWHEELS_UPLOAD_PASSWORD", credential, env=env) or read_variable(
        "TWINE_PASSWORD", credential, env=env
    )
    return user, password


def _server_page(session: requests.Session, simple_url: str) -> tuple[IndexFile, ...]:
    """The files the server's project page lists (none when the project is not there yet)."""
    url = urljoin(simple_url if simple_url.endswith("/") else simple_url + "/", f"{PROJECT}/")
    try:
        response = session.get(url, timeout=TIMEOUTS.for_request, allow_redirects=False, stream=True)
    except requests.RequestException as exc:
        raise PublishError(f"cannot read {url}: {exc}") from None
    with response:
        # 404, or pypiserver's redirect to its PyPI fallback: the project is not there yet
        if response.status_code == 404 or 300 <= response.status_code < 400:
            return ()
        if response.status_code != 200:
            raise PublishError(f"cannot read {url}: HTTP {response.status_code}", hint="check --simple-url")
        body = read_limited(response, limit=MAX_PAGE_BYTES, what=url, error=PublishError)
    try:
        return tuple(f for f in parse_project_page(body.decode("utf-8", "replace"), url) if not f.problem)
    except ValueError as exc:
        raise PublishError(str(exc), hint="check --simple-url") from None


def _server_files(session: requests.Session, simple_url: str) -> dict[str, tuple[str, str]]:
    """filename -> (url, sha256 from the link's fragment or "") of what the server already has."""
    return {f.filename: (f.url, f.sha256) for f in _server_page(session, simple_url)}


def _stream_sha256(session: requests.Session, url: str, *, limit: int) -> str:
    """The sha256 of the file at ``url`` (a server that lists no hash); "" when it is larger than ``limit``
    (then it is not our file). Any failure is a PublishError."""
    digest = hashlib.sha256()
    read = 0
    try:
        with session.get(url, timeout=TIMEOUTS.for_request, stream=True) as response:
            if response.status_code != 200:
                raise PublishError(
                    f"cannot download {url} to compare it with ours: HTTP {response.status_code} {response.reason}",
                    hint="the server lists the file but does not serve it: check the server, then run again",
                )
            for chunk in iter_body(response):
                read += len(chunk)
                if read > limit:
                    return ""
                digest.update(chunk)
    except requests.RequestException as exc:
        raise PublishError(f"cannot download {url} to compare it with ours: {exc}") from None
    return digest.hexdigest()


def _authorized(
    repository_url: str, username: str | None, password: str | None, *, session: requests.Session | None = None
) -> requests.Session:
    """A session that sends the credentials to ``repository_url``'s origin (scheme, host, port) only."""
    http = session or http_session()
    if username is not None or password is not None:
        http.auth = OriginAuth(repository_url, username or "", password or "")
    return http


def _default_simple(repository_url: str) -> str:
    """pypiserver's layout: the simple index at ``<upload URL>/simple/``."""
    return urljoin(repository_url if repository_url.endswith("/") else repository_url + "/", "simple/")


def publish_upload(
    wheels: Sequence[LocalWheel],
    repository_url: str,
    *,
    simple_url: str | None = None,
    username: str | None = None,
    password: str | None = None,
    session: requests.Session | None = None,
) -> PublishResult:
    """Upload to a PEP 503 server through the upload API (what ``twine upload`` does).

    ``simple_url`` (default ``<repository_url>/simple/``, pypiserver's layout) is read first
    so that files already there are skipped or, with other bytes, refused. The credentials go
    only to ``repository_url``'s origin (scheme, host, port): a simple page or a file elsewhere
    is read without them.
    """
    http = _authorized(repository_url, username, password, session=session)
    simple = simple_url or _default_simple(repository_url)
    result = PublishResult(where=repository_url)
    existing = _server_files(http, simple)
    sizes = {wheel.wheel.filename: wheel.size for wheel in wheels}

    def published(name: str) -> str | None:
        if name not in existing:
            return None
        url, sha256 = existing[name]
        # a server that gives no hash: download it (no larger than ours, or it is not ours)
        return sha256 or _stream_sha256(http, url, limit=sizes[name]) or "larger than ours"

    todo = sort_out(
        wheels,
        key=lambda wheel: (wheel.wheel.filename, wheel.sha256),
        published=published,
        result=result,
        where=repository_url,
    )
    reporter = get_reporter()
    raced: list[str] = []
    for number, wheel in enumerate(todo, start=1):
        name = wheel.wheel.filename
        reporter.info(f"[{number}/{len(todo)}] uploading {name} ({wheel.size / 1e6:.1f} MB) to {repository_url}")
        if _post(http, repository_url, wheel):
            result.uploaded.append(name)
        else:  # it arrived meanwhile (another run): the check below judges the bytes
            raced.append(name)
    _check_listed(http, simple, todo, raced=raced, result=result, repository_url=repository_url)
    return result


def _post(http: requests.Session, repository_url: str, wheel: LocalWheel) -> bool:
    """Upload one wheel; False when the server already has its name (HTTP 409), PublishError on a refusal."""
    name = wheel.wheel.filename
    body, content_type, _size = _multipart(wheel)
    try:
        response = http.post(
            repository_url,
            data=body,
            headers={"Content-Type": content_type},
            timeout=TIMEOUTS.for_upload,
            allow_redirects=False,
        )
    except requests.RequestException as exc:
        raise PublishError(f"uploading {name} to {repository_url} failed: {exc}") from None
    finally:
        body.close()
    if response.status_code == 409:
        return False
    if response.status_code not in (200, 201):
        hint = (
            "check the credentials (DSWHEELS_UPLOAD_USERNAME/PASSWORD)" if response.status_code in (401, 403) else None
        )
        raise PublishError(
            f"{repository_url} refused {name}: HTTP {response.status_code} {response.reason}",
            details=response.text[:500],
            hint=hint,
        )
    return True


def _check_listed(
    http: requests.Session,
    simple: str,
    todo: Sequence[LocalWheel],
    *,
    raced: Sequence[str],
    result: PublishResult,
    repository_url: str,
) -> None:
    """After uploading: the simple page lists every wheel of ``todo`` with our bytes (``raced``: answered 409)."""
    after = _server_files(http, simple)
    wrong: list[str] = []
    for wheel in todo:
        name = wheel.wheel.filename
        if name not in after:
            wrong.append(f"{name}: missing")
            continue
        url, published = after[name]
        if name in raced and not published:  # another run's upload won: only its bytes can tell
            published = _stream_sha256(http, url, limit=wheel.size) or "larger than ours"
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


class UploadServerStore:
    """The store of a :class:`~dswheels.stores.protocol.ToUploadServer`: read through its simple index,
    published to through its upload API with the credentials of :func:`upload_credentials`."""

    def __init__(self, target: ToUploadServer) -> None:
        self.target = target

    @property
    def where(self) -> str:
        return self.target.url

    def _simple(self) -> str:
        return self.target.simple_url or _default_simple(self.target.url)

    def names(self) -> list[str]:
        return [f.filename for f in self.list()]

    def list(self) -> tuple[IndexFile, ...]:
        """Its simple page, read with the upload credentials where it is on the upload URL's origin."""
        http = _authorized(self.target.url, *upload_credentials())
        return _server_page(http, self._simple())

    def fetch(self, file: IndexFile, dest: Path) -> Path:
        return download_wheel(file, dest)

    def put(self, wheels: Sequence[LocalWheel]) -> PublishResult:
        username, password = upload_credentials()
        return publish_upload(
            wheels, self.target.url, simple_url=self.target.simple_url, username=username, password=password
        )
