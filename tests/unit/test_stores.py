"""The stores (:mod:`dswheels.stores`): publish and index meet only there, and the table holds every kind.

The import graph is read from the source (AST), every ``import`` anywhere in a module (a function's
too): a publish module that imports an index module, or the reverse, or a store that imports either
side, fails here. What each store does against a real destination: tests/integration/test_stores.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import dswheels
from dswheels.errors import ConfigError
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

ROOT = Path(dswheels.__file__).parent

# the two sides of issue 24 point 5 (and their commands): each may use the stores, never the other side
PUBLISH = ("dswheels.effects.publish", "dswheels.effects.steps.publish", "dswheels.commands.publish")
INDEX = (
    "dswheels.effects.index",
    "dswheels.effects.steps.site",
    "dswheels.effects.steps.published",
    "dswheels.commands.index",
)
STORE = ("dswheels.stores",)


def _module(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, module: str) -> set[str]:
    """Every module ``path`` imports (``from X import Y`` counts as X and X.Y: Y may be a module)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against the importing package
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _as_module(name: str, root: Path) -> str:
    """``name`` cut to the module it is in (``pkg.mod.Name`` -> ``pkg.mod``) when that module is under ``root``."""
    parts = name.split(".")
    for end in range(len(parts), 1, -1):
        path = root.parent.joinpath(*parts[:end])
        if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
            return ".".join(parts[:end])
    return name


def _within(name: str, side: tuple[str, ...]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in side)


def crossings(root: Path) -> list[str]:
    """``importer -> imported`` for every import from one side into the other, or from a store into either."""
    forbidden = ((PUBLISH, INDEX), (INDEX, PUBLISH), (STORE, PUBLISH + INDEX))
    found = []
    for path in sorted(root.rglob("*.py")):
        module = _module(path, root)
        imports = sorted({_as_module(name, root) for name in _imports(path, module)})
        for importer, imported in forbidden:
            if _within(module, importer):
                found += [f"{module} -> {name}" for name in imports if _within(name, imported)]
    return found


def test_publish_and_index_do_not_import_each_other() -> None:
    assert crossings(ROOT) == []


def test_the_import_check_sees_a_crossing(tmp_path: Path) -> None:
    """The check is not vacuous: the layout before the stores (publish importing LocalWheel from the
    index, the site step importing the GitHub publisher), in a function or relative, is caught."""
    root = tmp_path / "dswheels"
    files = {
        "effects/publish/directory.py": "from dswheels.effects.index import LocalWheel\n",
        "effects/steps/site.py": "def f() -> None:\n    from dswheels.effects import publish\n",
        "effects/steps/published.py": "from ..publish import collect_wheels\n",
        "effects/publish/__init__.py": "",
        "effects/index.py": "",
        "stores/directory.py": "import dswheels.effects.index\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    assert crossings(root) == [
        "dswheels.effects.publish.directory -> dswheels.effects.index",
        "dswheels.effects.steps.published -> dswheels.effects.publish",
        "dswheels.effects.steps.site -> dswheels.effects.publish",
        "dswheels.stores.directory -> dswheels.effects.index",
    ]


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
