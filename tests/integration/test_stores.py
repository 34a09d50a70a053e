"""Every store of the table (:data:`dswheels.stores.STORES`) against a real destination: it puts wheels
(published files never change), names and lists them with their sha256, and fetches each back whole.

The destinations: a directory, the loopback GitHub (tests/support/github_fake.py), a real pypiserver
(with and without hashes on its links), and the site `dswheels index` writes, read from disk and
served over HTTP (a served index is read-only: ``put`` refuses).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from dswheels.cli import main
from dswheels.host.log import reset_reporter, set_reporter
from dswheels.kernel.errors import ConfigError, PublishError, SourceError
from dswheels.publish.step import collect_wheels
from dswheels.stores import (
    STORES,
    Store,
    ToDirectory,
    ToGitHubRelease,
    ToServedIndex,
    ToUploadServer,
    store_for,
)
from dswheels.stores.served_index import ServedIndexStore
from dswheels.stores.wheel_ref import LocalWheel
from tests.integration.conftest import Handler
from tests.support.github_fake import FakeGitHub
from tests.support.recording import RecordingReporter
from tests.support.servers import StaticServer
from tests.support.wheels import write_deepspeed_wheel

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _reporter() -> Iterator[RecordingReporter]:
    recording = RecordingReporter()
    token = set_reporter(recording)
    yield recording
    reset_reporter(token)


def _wheels(directory: Path, *, payload: int = 2048) -> list[LocalWheel]:
    write_deepspeed_wheel(directory, variant="cu128", torch="2.9", payload=payload)
    write_deepspeed_wheel(directory, variant="cpu", torch="2.9", payload=payload)
    return collect_wheels([directory])


def _check_store(store: Store, tmp_path: Path, *, hashes: bool = True) -> None:
    """put, names, list, fetch, put again (nothing new), put other bytes under the same names (refused)."""
    wheels = _wheels(tmp_path / "dist")
    names = sorted(w.wheel.filename for w in wheels)
    first = store.put(wheels)
    assert set(names) <= set(first.uploaded)
    assert sorted(store.names()) == names
    listed = {f.filename: f for f in store.list()}
    assert sorted(listed) == names
    for wheel in wheels:
        file = listed[wheel.wheel.filename]
        assert file.sha256 == (wheel.sha256 if hashes else "")
        if hashes:
            fetched = store.fetch(file, tmp_path / "fetched")
            assert fetched.read_bytes() == wheel.path.read_bytes()
        else:  # what cannot be checked is not fetched
            with pytest.raises(SourceError, match="gives no sha256"):
                store.fetch(file, tmp_path / "fetched")
    again = store.put(wheels)
    assert again.uploaded == []
    assert set(names) <= set(again.present)
    respun = _wheels(tmp_path / "respun", payload=100)  # the same names, other bytes
    with pytest.raises(PublishError, match="already published"):
        store.put(respun)
    assert {f.filename: f.sha256 for f in store.list()} == {n: f.sha256 for n, f in listed.items()}


def test_the_directory_store(tmp_path: Path) -> None:
    store = STORES["directory"](ToDirectory(path=tmp_path / "published"))
    _check_store(store, tmp_path)
    assert store_for(str(tmp_path / "published")).names() == store.names()


def test_the_github_release_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeGitHub() as fake:
        monkeypatch.setenv("GITHUB_TOKEN", fake.token)
        monkeypatch.setenv("GITHUB_API_URL", fake.api_url)
        _check_store(STORES["github-release"](ToGitHubRelease(repository=fake.repo, tag="v1")), tmp_path)
        # reading needs no tag: every published release is listed
        assert (
            store_for(ToGitHubRelease(repository=fake.repo)).names()
            == STORES["github-release"](ToGitHubRelease(repository=fake.repo, tag="v1")).names()
        )
        with pytest.raises(ConfigError, match="needs the release's tag"):
            store_for(ToGitHubRelease(repository=fake.repo)).put([])


def test_the_upload_server_store(pypiserver: tuple[str, Path], tmp_path: Path, request: pytest.FixtureRequest) -> None:
    url, _packages = pypiserver
    hashes = request.node.callspec.params["pypiserver"] == "sha256"
    _check_store(STORES["upload-server"](ToUploadServer(url=url)), tmp_path, hashes=hashes)


def test_the_served_index_store_reads_a_site_and_refuses_to_be_published_to(tmp_path: Path) -> None:
    published = tmp_path / "published"
    wheels = _wheels(tmp_path / "dist")
    store_for(ToDirectory(path=published)).put(wheels)
    site = tmp_path / "site"
    assert main(["index", "--from", str(published), "--out", str(site)]) == 0
    on_disk = store_for(str(site))
    assert isinstance(on_disk, ServedIndexStore)
    with StaticServer(site) as server:
        for store in (on_disk, STORES["served-index"](ToServedIndex(url=server.url))):
            assert sorted(store.names()) == sorted(w.wheel.filename for w in wheels)
            listed = {f.filename: f for f in store.list()}
            for wheel in wheels:
                fetched = store.fetch(listed[wheel.wheel.filename], tmp_path / "fetched" / store.where[:4])
                assert fetched.read_bytes() == wheel.path.read_bytes()
            with pytest.raises(PublishError, match="is a served index"):
                store.put(wheels)


def test_the_upload_server_store_reads_its_page_with_the_credentials_on_the_upload_origin_only(
    http_server: Callable[[Handler], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A private server lists only to the uploader; a simple index elsewhere never sees the password."""
    name = "deepspeed-0.19.8+cu128torch2.9-cp311-cp311-linux_x86_64.whl"
    seen: list[tuple[str, str]] = []

    def handle(request: BaseHTTPRequestHandler) -> None:
        authorization = request.headers.get("Authorization", "")
        seen.append((request.path, authorization))
        if not authorization:
            request.send_response(401)
            request.end_headers()
            return
        body = f'<a href="/packages/{name}#sha256={"a" * 64}">{name}</a>'.encode()
        request.send_response(200)
        request.send_header("Content-Type", "text/html")
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        request.wfile.write(body)

    monkeypatch.setenv("DSWHEELS_UPLOAD_USERNAME", "alice")
    monkeypatch.setenv("DSWHEELS_UPLOAD_PASSWORD", "s3cret")
    private = http_server(handle)
    assert store_for(ToUploadServer(url=private + "/")).names() == [name]
    assert seen == [("/simple/deepspeed/", "Basic " + base64.b64encode(b"alice:s3cret").decode())]
    elsewhere = http_server(handle)  # the simple index on another origin: no credentials, refused
    with pytest.raises(PublishError, match="HTTP 401"):
        store_for(ToUploadServer(url=private + "/", simple_url=elsewhere + "/simple/")).list()
    assert seen[-1] == ("/simple/deepspeed/", "")
