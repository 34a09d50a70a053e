"""The stores (:mod:`dswheels.stores`): publish and index meet only there, and the table holds every kind.

That publish and index do not import each other, and the stores neither, is pyproject's layers contract
(tests/unit/test_import_contracts.py breaks it on purpose). What each store does against a real
destination: tests/integration/test_stores.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dswheels.kernel.errors import ConfigError
from dswheels.stores import (
    STORES,
    Destination,
    Store,
    ToDirectory,
    ToGitHubRelease,
    ToServedIndex,
    ToUploadServer,
    destination_of,
    store_for,
)
from dswheels.stores.directory import DirectoryStore
from dswheels.stores.github_release import GitHubReleaseStore
from dswheels.stores.served_index import ServedIndexStore
from dswheels.stores.upload_server import UploadServerStore


def test_every_kind_is_registered_once_with_its_store() -> None:
    assert dict(STORES) == {
        "directory": DirectoryStore,
        "github-release": GitHubReleaseStore,
        "upload-server": UploadServerStore,
        "served-index": ServedIndexStore,
    }
    destinations: list[Destination] = [
        ToDirectory(path=Path("published")),
        ToGitHubRelease(repository="owner/repo", tag="v1"),
        ToUploadServer(url="http://127.0.0.1:1/"),
        ToServedIndex(url="https://owner.github.io/repo/"),
    ]
    assert sorted(d.kind for d in destinations) == sorted(STORES)
    for destination in destinations:
        store: Store = store_for(destination)  # made without touching the destination
        assert type(store) is STORES[destination.kind]
        for method in ("names", "list", "fetch", "put"):
            assert callable(getattr(store, method))
        assert store.where


def test_a_location_string_names_its_destination(tmp_path: Path) -> None:
    """What `plan --skip-published` and `follow` are given: a URL is a served index, a site's
    directory too (it has simple/deepspeed/index.html), any other path a directory of wheels."""
    assert destination_of("https://owner.github.io/repo/") == ToServedIndex(url="https://owner.github.io/repo/")
    assert destination_of(str(tmp_path)) == ToDirectory(path=tmp_path)
    assert destination_of(tmp_path.as_uri()) == ToDirectory(path=tmp_path)
    page = tmp_path / "site" / "simple" / "deepspeed" / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text("<html></html>")
    assert destination_of(str(tmp_path / "site")) == ToServedIndex(url=str(tmp_path / "site"))
    assert isinstance(store_for(str(tmp_path / "site")), ServedIndexStore)
    assert isinstance(store_for(str(tmp_path)), DirectoryStore)
    with pytest.raises(ConfigError, match=r"--flag 'ftp://x/' is neither a directory nor an http\(s\) URL"):
        destination_of("ftp://x/", what="--flag")


def test_a_directory_that_is_not_there_is_said_so_by_names_and_list(tmp_path: Path) -> None:
    store = store_for(ToDirectory(path=tmp_path / "nowhere"))
    for read in (store.names, store.list):
        with pytest.raises(ConfigError, match=r"no directory .*nowhere"):
            read()
