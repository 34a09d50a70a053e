"""The HTTP side of :class:`tests.support.github_fake.FakeGitHub`: each REST endpoint releases use.

Authentication (a bad token is 401, a missing one hides drafts), injected faults, and the
answers GitHub documents for each endpoint (see :mod:`tests.support.github_fake` for the
shapes and where they come from). The routing, ``Link`` pagination and request log are
:mod:`tests.support.github_http`'s, shared with the follow workflow's fake.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import parse_qs, unquote, urlsplit

from tests.support.github_http import GitHubHandler, Route

if TYPE_CHECKING:
    from http.server import BaseHTTPRequestHandler

    from tests.support.github_fake import FakeGitHub, FakeRelease, Fault

__all__ = ["DOCS", "handler_for"]

DOCS = "https://docs.github.com/rest/releases"


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


def _routes(repo_name: str) -> list[Route]:
    """(method, path pattern, handler method) of every endpoint the fake answers."""
    repo = re.escape(repo_name)
    return [
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


class _Handler(GitHubHandler):
    """GitHub's answers; :func:`handler_for` binds a subclass to one :class:`FakeGitHub` (``gh``) and its routes."""

    gh: ClassVar[FakeGitHub]
    query: dict[str, str]

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _authed(self) -> bool:
        value = self.headers.get("Authorization")
        if value is None:
            return False
        with self.gh._lock:
            self.gh.seen_authorization.append(value)
        return value in (f"Bearer {self.gh.token}", f"token {self.gh.token}")

    def _dispatch(self) -> None:
        path = urlsplit(self.path).path
        found = self.route(path)
        if found is None:
            self._body()
            self._send(404, _error("Not Found"))
            return
        if self._fault(path):
            return
        if self.headers.get("Authorization") is not None and not self._authed():
            self._body()
            self._send(401, {"message": "Bad credentials", "documentation_url": DOCS, "status": "401"})
            return
        self.query = self.query_params()
        name, groups = found
        getattr(self, name)(**{k: unquote(v) for k, v in groups.items()})

    def _fault(self, path: str) -> bool:
        with self.gh._lock:
            fault = _take(self.gh, self.command, path, after_upload=False)
            if fault is None:
                return False
        body = self._body()
        if fault.leave_starter:
            match = re.search(r"/releases/(\d+)/assets", path)
            name = parse_qs(urlsplit(self.path).query).get("name", [""])[-1]
            if match:
                release = self.gh.releases[int(match.group(1))]
                self.gh.add_asset(release, name, b"", state="starter")
        del body
        self._send(fault.status, fault.body, fault.headers)
        return True

    do_GET = do_POST = do_PATCH = do_DELETE = _dispatch  # noqa: N815 - http.server's method names

    # --- routes ----------------------------------------------------------------------------

    def _release(self, release_id: str) -> FakeRelease | None:
        release = self.gh.releases.get(int(release_id))
        if release is None or (release.draft and not self._authed()):
            self._body()
            self._send(404, _error("Not Found"))
            return None
        return release

    def list_releases(self) -> None:
        authed = self._authed()
        with self.gh._lock:
            visible = [r for r in self.gh.releases.values() if authed or not r.draft]
            items = [self.gh.release_json(r) for r in sorted(visible, key=lambda r: -r.id)]
        self.paginate(items, base_url=self.gh.api_url, page_size=self.gh.page_size)

    def create_release(self) -> None:
        payload = json.loads(self._body() or b"{}")
        if not self._authed():
            self._send(404, _error("Not Found"))
            return
        tag = payload.get("tag_name")
        with self.gh._lock:
            if any(r.tag_name == tag for r in self.gh.releases.values()):
                self._send(
                    422,
                    _error(
                        "Validation Failed",
                        errors=[{"resource": "Release", "code": "already_exists", "field": "tag_name"}],
                    ),
                )
                return
            release = self.gh.add_release(tag, draft=bool(payload.get("draft")))
            release.name = payload.get("name") or tag
            release.body = payload.get("body") or ""
            release.target_commitish = payload.get("target_commitish") or "main"
            self._send(201, self.gh.release_json(release), {"Location": self.gh.release_json(release)["url"]})

    def release_by_tag(self, *, tag: str) -> None:
        found = [r for r in self.gh.releases.values() if r.tag_name == tag and not r.draft]
        if not found:
            self._send(404, _error("Not Found"))
            return
        self._send(200, self.gh.release_json(found[0]))

    def get_release(self, *, id: str) -> None:  # noqa: A002
        release = self._release(id)
        if release is not None:
            self._send(200, self.gh.release_json(release))

    def update_release(self, *, id: str) -> None:  # noqa: A002
        payload = json.loads(self._body() or b"{}")
        if not self._authed():
            self._send(404, _error("Not Found"))
            return
        release = self.gh.releases.get(int(id))
        if release is None:
            self._send(404, _error("Not Found"))
            return
        with self.gh._lock:
            if release.draft and payload.get("draft") is False:
                release.draft = False
                release.immutable = self.gh.immutable
            for key in ("name", "body"):
                if key in payload:
                    setattr(release, key, payload[key])
            self._send(200, self.gh.release_json(release))

    def list_assets(self, *, id: str) -> None:  # noqa: A002
        release = self._release(id)
        if release is None:
            return
        with self.gh._lock:
            items = [self.gh.asset_json(release, a) for a in sorted(release.assets, key=lambda a: -a.id)]
        self.paginate(items, base_url=self.gh.api_url, page_size=self.gh.page_size)

    def upload(self, *, id: str) -> None:  # noqa: A002
        data = self._body()
        if not self._authed():
            self._send(404, _error("Not Found"))
            return
        release = self.gh.releases.get(int(id))
        name = self.query.get("name", "")
        if release is None:
            self._send(404, _error("Not Found"))
            return
        if self.headers.get("Content-Type") is None:
            self._send(400, _error("Content-Type header is required"))
            return
        with self.gh._lock:
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
            asset = self.gh.add_asset(release, name, data, content_type=self.headers["Content-Type"])
            lost = _take(self.gh, "POST", urlsplit(self.path).path, after_upload=True)
        if lost is not None:  # the asset landed, but the answer is an error: the client must look
            self._send(lost.status, lost.body, lost.headers)
            return
        self._send(201, self.gh.asset_json(release, asset))

    def get_asset(self, *, id: str) -> None:  # noqa: A002
        for release in self.gh.releases.values():
            for asset in release.assets:
                if asset.id == int(id):
                    if self.headers.get("Accept") == "application/octet-stream":
                        self._send(302, None, {"Location": self.gh._download_url(release, asset.name)})
                    else:
                        self._send(200, self.gh.asset_json(release, asset))
                    return
        self._send(404, _error("Not Found"))

    def delete_asset(self, *, id: str) -> None:  # noqa: A002
        if not self._authed():
            self._send(404, _error("Not Found"))
            return
        with self.gh._lock:
            for release in self.gh.releases.values():
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
        for release in self.gh.releases.values():
            current = f"untagged-{release.id:08x}" if release.draft else release.tag_name
            if current != tag or (release.draft and not self._authed()):
                continue
            for asset in release.assets:
                if asset.name == name and asset.state == "uploaded":
                    self._send(200, asset.data)
                    return
        self._send(404, b"Not Found")


def handler_for(github: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    """The request handler class of one fake GitHub."""

    class Handler(_Handler):
        gh = github
        routes = _routes(github.repo)
        answers = github.log
        answers_lock = github._lock

    return Handler
