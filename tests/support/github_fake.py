"""A loopback stand-in for the parts of GitHub's REST API that releases use.

GitHub cannot be reached from the test machine, so this server answers in the shapes
GitHub documents and is recorded answering (docs.github.com/rest/releases, API version
2022-11-28; the examples there for "List releases", "Create a release", "Upload a release
asset", "List release assets"; the ``digest`` field GitHub added to assets in June 2025;
``immutable`` on releases):

- releases and assets are listed newest first, ``per_page`` at most 100 (or ``page_size``),
  with ``Link: <...?page=N>; rel="next", <...>; rel="last"`` headers;
- drafts are listed only to an authenticated caller, and ``/releases/tags/{tag}`` does not
  find them;
- uploads go to the release's ``upload_url`` (an RFC 6570 template ``...assets{?name,label}``)
  with the raw bytes; a second asset of one name is ``422 Validation Failed``
  ``{"resource":"ReleaseAsset","code":"already_exists","field":"name"}``; a published
  immutable release refuses uploads with ``422 Cannot upload assets to an immutable release``;
  a 1001st asset is refused (``file_count limited to 1000 assets per release``);
- a failed upload may leave an asset in state ``starter`` ("When an upstream failure
  occurs, you will receive a 502 Bad Gateway status. This may leave an empty asset with a
  state of starter. It can be safely deleted.");
- ``GET /releases/assets/{id}`` with ``Accept: application/octet-stream`` redirects (302)
  to the ``browser_download_url``, which serves the bytes;
- a bad token is ``401 {"message": "Bad credentials", ...}``.

Faults are injected with :meth:`FakeGitHub.fail` (5xx, rate limits, dropped uploads).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from tests.support.servers import LoopbackServer

__all__ = ["FakeAsset", "FakeGitHub", "FakeRelease", "Fault"]

DOCS = "https://docs.github.com/rest/releases"
_TIME = "2026-11-23T00:00:00Z"


@dataclass
class FakeAsset:
    id: int
    name: str
    data: bytes
    state: str = "uploaded"
    content_type: str = "application/octet-stream"
    with_digest: bool = True


@dataclass
class FakeRelease:
    id: int
    tag_name: str
    name: str
    body: str
    draft: bool
    prerelease: bool = False
    target_commitish: str = "main"
    immutable: bool = False
    assets: list[FakeAsset] = field(default_factory=list)


@dataclass
class Fault:
    method: str
    pattern: str  # regex searched in the request path
    status: int
    times: int = 1
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=lambda: {"message": "Server Error"})
    leave_starter: bool = False  # an upload that fails after GitHub created the asset record
    after_upload: bool = False  # the upload lands, then the answer is lost


class FakeGitHub(LoopbackServer):
    """``with FakeGitHub() as gh: gh.api_url`` -> ``http://127.0.0.1:PORT`` (API, uploads and downloads)."""

    def __init__(
        self,
        repo: str = "octo/dswheels",
        *,
        token: str = "ghs_fake_token_1234",  # noqa: S107 - a fake token for a fake server
        page_size: int = 100,
    ) -> None:
        self.repo = repo
        self.token = token
        self.page_size = page_size
        self.immutable = True  # the repository setting "make new releases immutable"
        self.releases: dict[int, FakeRelease] = {}
        self.faults: list[Fault] = []
        self.log: list[tuple[str, str, int]] = []  # method, path (with query), status
        self.seen_authorization: list[str] = []
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        super().__init__(ThreadingHTTPServer(("127.0.0.1", 0), _handler(self)))

    # --- set-up ------------------------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        return self.base_url

    def fail(self, method: str, pattern: str, status: int, **kwargs: Any) -> Fault:
        fault = Fault(method=method, pattern=pattern, status=status, **kwargs)
        with self._lock:
            self.faults.append(fault)
        return fault

    def add_release(self, tag: str, *, draft: bool = False, immutable: bool | None = None) -> FakeRelease:
        with self._lock:
            release = FakeRelease(
                id=next(self._ids),
                tag_name=tag,
                name=tag,
                body="",
                draft=draft,
                immutable=(self.immutable if immutable is None else immutable) and not draft,
            )
            self.releases[release.id] = release
            return release

    def add_asset(self, release: FakeRelease, name: str, data: bytes, **kwargs: Any) -> FakeAsset:
        with self._lock:
            asset = FakeAsset(id=next(self._ids), name=name, data=data, **kwargs)
            release.assets.append(asset)
            return asset

    def release(self, tag: str) -> FakeRelease:
        (found,) = [r for r in self.releases.values() if r.tag_name == tag]
        return found

    def requests(self, method: str | None = None, pattern: str = "") -> list[tuple[str, str, int]]:
        return [e for e in self.log if (method is None or e[0] == method) and re.search(pattern, e[1])]

    # --- JSON shapes (docs.github.com examples, API version 2022-11-28) --------------------------------

    def _owner(self) -> dict[str, Any]:
        owner = self.repo.split("/")[0]
        return {"login": owner, "id": 1, "type": "User", "url": f"{self.api_url}/users/{owner}", "site_admin": False}

    def _download_url(self, release: FakeRelease, name: str) -> str:
        tag = f"untagged-{release.id:08x}" if release.draft else release.tag_name
        return f"{self.api_url}/{self.repo}/releases/download/{quote(tag)}/{quote(name)}"

    def asset_json(self, release: FakeRelease, asset: FakeAsset) -> dict[str, Any]:
        digest = None
        if asset.state == "uploaded" and asset.with_digest:
            digest = "sha256:" + hashlib.sha256(asset.data).hexdigest()
        return {
            "url": f"{self.api_url}/repos/{self.repo}/releases/assets/{asset.id}",
            "browser_download_url": self._download_url(release, asset.name),
            "id": asset.id,
            "node_id": f"RA_{asset.id}",
            "name": asset.name,
            "label": "",
            "state": asset.state,
            "content_type": asset.content_type,
            "size": len(asset.data),
            "digest": digest,
            "download_count": 0,
            "created_at": _TIME,
            "updated_at": _TIME,
            "uploader": self._owner(),
        }

    def release_json(self, release: FakeRelease) -> dict[str, Any]:
        base = f"{self.api_url}/repos/{self.repo}"
        return {
            "url": f"{base}/releases/{release.id}",
            "html_url": f"{self.api_url}/{self.repo}/releases/tag/{quote(release.tag_name)}",
            "assets_url": f"{base}/releases/{release.id}/assets",
            "upload_url": f"{self.api_url}/uploads/repos/{self.repo}/releases/{release.id}/assets{{?name,label}}",
            "tarball_url": f"{base}/tarball/{quote(release.tag_name)}",
            "zipball_url": f"{base}/zipball/{quote(release.tag_name)}",
            "id": release.id,
            "node_id": f"RE_{release.id}",
            "tag_name": release.tag_name,
            "target_commitish": release.target_commitish,
            "name": release.name,
            "body": release.body,
            "draft": release.draft,
            "prerelease": release.prerelease,
            "immutable": release.immutable,
            "created_at": _TIME,
            "published_at": None if release.draft else _TIME,
            "author": self._owner(),
            "assets": [self.asset_json(release, a) for a in release.assets],
        }


def _error(message: str, *, errors: list[dict[str, str]] | None = None, doc: str = DOCS) -> dict[str, Any]:
    body: dict[str, Any] = {"message": message, "documentation_url": doc}
    if errors is not None:
        body["errors"] = errors
    return body


def _take(gh: FakeGitHub, method: str, path: str, *, after_upload: bool) -> Fault | None:
    """The first armed fault for this request (one use of it); the caller holds the lock."""
    for fault in gh.faults:
        armed = fault.times > 0 and fault.after_upload == after_upload and fault.method == method
        if armed and re.search(fault.pattern, path):
            fault.times -= 1
            return fault
    return None


def _handler(gh: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    repo = re.escape(gh.repo)
    routes: list[tuple[str, re.Pattern[str], str]] = [
        ("GET", re.compile(rf"^/repos/{repo}/releases$"), "list_releases"),
        ("POST", re.compile(rf"^/repos/{repo}/releases$"), "create_release"),
        ("GET", re.compile(rf"^/repos/{repo}/releases/tags/(?P<tag>[^/]+)$"), "release_by_tag"),
        ("GET", re.compile(rf"^/repos/{repo}/releases/(?P<id>\d+)$"), "get_release"),
        ("PATCH", re.compile(rf"^/repos/{repo}/releases/(?P<id>\d+)$"), "update_release"),
        ("GET", re.compile(rf"^/repos/{repo}/releases/(?P<id>\d+)/assets$"), "list_assets"),
        ("POST", re.compile(rf"^/uploads/repos/{repo}/releases/(?P<id>\d+)/assets$"), "upload"),
        ("GET", re.compile(rf"^/repos/{repo}/releases/assets/(?P<id>\d+)$"), "get_asset"),
        ("DELETE", re.compile(rf"^/repos/{repo}/releases/assets/(?P<id>\d+)$"), "delete_asset"),
        ("GET", re.compile(rf"^/{repo}/releases/download/(?P<tag>[^/]+)/(?P<name>[^/]+)$"), "download"),
    ]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        query: dict[str, str]

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

        # --- plumbing ----------------------------------------------------------------------------

        def _send(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
            data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
            self.send_response(status)
            content_type = "application/octet-stream" if isinstance(body, bytes) else "application/json; charset=utf-8"
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-GitHub-Api-Version-Selected", "2022-11-28")
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            with gh._lock:
                gh.log.append((self.command, self.path, status))

        def _body(self) -> bytes:
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _authed(self) -> bool:
            value = self.headers.get("Authorization")
            if value is None:
                return False
            with gh._lock:
                gh.seen_authorization.append(value)
            return value in (f"Bearer {gh.token}", f"token {gh.token}")

        def _dispatch(self) -> None:
            parts = urlsplit(self.path)
            path = parts.path
            query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
            for method, pattern, name in routes:
                match = pattern.match(path)
                if method == self.command and match:
                    if self._fault(path):
                        return
                    if self.headers.get("Authorization") is not None and not self._authed():
                        self._body()
                        self._send(401, {"message": "Bad credentials", "documentation_url": DOCS, "status": "401"})
                        return
                    self.query = query
                    getattr(self, name)(**{k: unquote(v) for k, v in match.groupdict().items()})
                    return
            self._body()
            self._send(404, _error("Not Found"))

        def _fault(self, path: str) -> bool:
            with gh._lock:
                fault = _take(gh, self.command, path, after_upload=False)
                if fault is None:
                    return False
            body = self._body()
            if fault.leave_starter:
                match = re.search(r"/releases/(\d+)/assets", path)
                name = parse_qs(urlsplit(self.path).query).get("name", [""])[-1]
                if match:
                    release = gh.releases[int(match.group(1))]
                    gh.add_asset(release, name, b"", state="starter")
            del body
            self._send(fault.status, fault.body, fault.headers)
            return True

        def do_GET(self) -> None:
            self._dispatch()

        def do_POST(self) -> None:
            self._dispatch()

        def do_PATCH(self) -> None:
            self._dispatch()

        def do_DELETE(self) -> None:
            self._dispatch()

        # --- routes ----------------------------------------------------------------------------

        def _paginate(self, items: list[dict[str, Any]], query: dict[str, str]) -> None:
            per_page = min(int(query.get("per_page", 30)), 100, gh.page_size)
            page = int(query.get("page", 1))
            last = max(1, -(-len(items) // per_page))
            chunk = items[(page - 1) * per_page : page * per_page]
            path = urlsplit(self.path).path
            links = []
            if page < last:
                links.append(f'<{gh.api_url}{path}?per_page={per_page}&page={page + 1}>; rel="next"')
                links.append(f'<{gh.api_url}{path}?per_page={per_page}&page={last}>; rel="last"')
            if page > 1:
                links.append(f'<{gh.api_url}{path}?per_page={per_page}&page=1>; rel="first"')
            self._send(200, chunk, {"Link": ", ".join(links)} if links else None)

        def _release(self, release_id: str) -> FakeRelease | None:
            release = gh.releases.get(int(release_id))
            if release is None or (release.draft and not self._authed()):
                self._body()
                self._send(404, _error("Not Found"))
                return None
            return release

        def list_releases(self) -> None:
            authed = self._authed()
            with gh._lock:
                visible = [r for r in gh.releases.values() if authed or not r.draft]
                items = [gh.release_json(r) for r in sorted(visible, key=lambda r: -r.id)]
            self._paginate(items, self.query)

        def create_release(self) -> None:
            payload = json.loads(self._body() or b"{}")
            if not self._authed():
                self._send(404, _error("Not Found"))
                return
            tag = payload.get("tag_name")
            with gh._lock:
                if any(r.tag_name == tag for r in gh.releases.values()):
                    self._send(
                        422,
                        _error(
                            "Validation Failed",
                            errors=[{"resource": "Release", "code": "already_exists", "field": "tag_name"}],
                        ),
                    )
                    return
                release = gh.add_release(tag, draft=bool(payload.get("draft")))
                release.name = payload.get("name") or tag
                release.body = payload.get("body") or ""
                release.target_commitish = payload.get("target_commitish") or "main"
                self._send(201, gh.release_json(release), {"Location": gh.release_json(release)["url"]})

        def release_by_tag(self, *, tag: str) -> None:
            found = [r for r in gh.releases.values() if r.tag_name == tag and not r.draft]
            if not found:
                self._send(404, _error("Not Found"))
                return
            self._send(200, gh.release_json(found[0]))

        def get_release(self, *, id: str) -> None:  # noqa: A002
            release = self._release(id)
            if release is not None:
                self._send(200, gh.release_json(release))

        def update_release(self, *, id: str) -> None:  # noqa: A002
            payload = json.loads(self._body() or b"{}")
            if not self._authed():
                self._send(404, _error("Not Found"))
                return
            release = gh.releases.get(int(id))
            if release is None:
                self._send(404, _error("Not Found"))
                return
            with gh._lock:
                if release.draft and payload.get("draft") is False:
                    release.draft = False
                    release.immutable = gh.immutable
                for key in ("name", "body"):
                    if key in payload:
                        setattr(release, key, payload[key])
                self._send(200, gh.release_json(release))

        def list_assets(self, *, id: str) -> None:  # noqa: A002
            release = self._release(id)
            if release is None:
                return
            with gh._lock:
                items = [gh.asset_json(release, a) for a in sorted(release.assets, key=lambda a: -a.id)]
            self._paginate(items, self.query)

        def upload(self, *, id: str) -> None:  # noqa: A002
            data = self._body()
            if not self._authed():
                self._send(404, _error("Not Found"))
                return
            release = gh.releases.get(int(id))
            name = self.query.get("name", "")
            if release is None:
                self._send(404, _error("Not Found"))
                return
            if self.headers.get("Content-Type") is None:
                self._send(400, _error("Content-Type header is required"))
                return
            with gh._lock:
                if release.immutable and not release.draft:
                    self._send(422, _error("Cannot upload assets to an immutable release"))
                    return
                if any(a.name == name for a in release.assets):
                    self._send(
                        422,
                        _error(
                            "Validation Failed",
                            errors=[{"resource": "ReleaseAsset", "code": "already_exists", "field": "name"}],
                        ),
                    )
                    return
                if len(release.assets) >= 1000:
                    self._send(
                        422,
                        _error(
                            "Validation Failed",
                            errors=[
                                {
                                    "resource": "ReleaseAsset",
                                    "code": "custom",
                                    "field": "file_count",
                                    "message": "file_count limited to 1000 assets per release",
                                }
                            ],
                        ),
                    )
                    return
                asset = gh.add_asset(release, name, data, content_type=self.headers["Content-Type"])
                lost = _take(gh, "POST", urlsplit(self.path).path, after_upload=True)
            if lost is not None:  # the asset landed, but the answer is an error: the client must look
                self._send(lost.status, lost.body, lost.headers)
                return
            self._send(201, gh.asset_json(release, asset))

        def get_asset(self, *, id: str) -> None:  # noqa: A002
            for release in gh.releases.values():
                for asset in release.assets:
                    if asset.id == int(id):
                        if self.headers.get("Accept") == "application/octet-stream":
                            self._send(302, None, {"Location": gh._download_url(release, asset.name)})
                        else:
                            self._send(200, gh.asset_json(release, asset))
                        return
            self._send(404, _error("Not Found"))

        def delete_asset(self, *, id: str) -> None:  # noqa: A002
            if not self._authed():
                self._send(404, _error("Not Found"))
                return
            with gh._lock:
                for release in gh.releases.values():
                    for asset in list(release.assets):
                        if asset.id == int(id):
                            if release.immutable and not release.draft:
                                self._send(422, _error("Cannot delete asset from an immutable release"))
                                return
                            release.assets.remove(asset)
                            self._send(204)
                            return
            self._send(404, _error("Not Found"))

        def download(self, *, tag: str, name: str) -> None:
            for release in gh.releases.values():
                current = f"untagged-{release.id:08x}" if release.draft else release.tag_name
                if current != tag or (release.draft and not self._authed()):
                    continue
                for asset in release.assets:
                    if asset.name == name and asset.state == "uploaded":
                        self._send(200, asset.data)
                        return
            self._send(404, b"Not Found")

    return Handler
