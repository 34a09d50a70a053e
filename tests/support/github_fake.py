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

Faults are injected with :meth:`FakeGitHub.fail` (5xx, rate limits, dropped uploads). This module
holds what the fake GitHub knows and its JSON shapes; :mod:`tests.support.github_fake_routes`
answers the HTTP requests.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import quote

from tests.support.github_fake_routes import handler_for
from tests.support.servers import LoopbackServer

__all__ = ["FakeAsset", "FakeGitHub", "FakeRelease", "Fault"]

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
        # "release" / "asset": changes each JSON object of that kind as it is served (a hostile server)
        self.tamper: dict[str, Callable[[dict[str, Any]], None]] = {}
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        super().__init__(ThreadingHTTPServer(("127.0.0.1", 0), handler_for(self)))

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
        data = {
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
        return self._tampered("asset", data)

    def _tampered(self, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        if (change := self.tamper.get(kind)) is not None:
            change(data)
        return data

    def release_json(self, release: FakeRelease) -> dict[str, Any]:
        base = f"{self.api_url}/repos/{self.repo}"
        data = {
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
        return self._tampered("release", data)
