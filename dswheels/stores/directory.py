"""A directory of wheels (the local "release"): what `dswheels publish --dir` writes and
`dswheels index --from` reads.

Publishing: runs on one directory take turns (a lock file in it); each file is placed under its name only
if the name is free, so even a writer that ignores the lock cannot be replaced, and what an
earlier run killed mid-copy left behind is removed first.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

from dswheels.host.files import (
    NotRegularFileError,
    copy_bounded,
    exclusive,
    failing_as,
    open_regular,
    place_new,
    sha256_file,
    sweep,
    temp_file,
)
from dswheels.host.log import get_reporter
from dswheels.kernel.errors import ConfigError, PublishError
from dswheels.kernel.index_files import IndexFile
from dswheels.kernel.locations import PUBLISHED
from dswheels.stores.ledger import from_ledger, is_regular, load_ledger, update_ledger
from dswheels.stores.outgoing import (
    Outgoing,
    PublishResult,
    conflict_error,
    conflict_line,
    outgoing_files,
    sort_out,
)
from dswheels.stores.protocol import ToDirectory
from dswheels.stores.served_index import download_wheel
from dswheels.stores.wheel_ref import LocalWheel, local_wheel

__all__ = ["DirectoryStore", "directory_names", "publish_dir", "scan_directory"]


def _copy_new(source: Outgoing, target: Path) -> bool:
    """Write the whole file under a temporary name, then give it its name only if that name is
    free (:func:`~dswheels.host.files.place_new`): a reader never sees half a file, and two
    writers of one name cannot replace each other. False when the name was taken meanwhile."""
    with temp_file(target.parent, target.name) as tmp:
        if source.path is not None:
            try:  # only the regular file, and no more than the bytes that were hashed
                with open_regular(source.path) as src, tmp.open("wb") as out:
                    copy_bounded(src, out, limit=source.size, what=str(source.path))
            except ValueError as exc:  # replaced by a FIFO or a device, or larger than it was
                raise _changed(source, str(exc)) from None
        else:
            tmp.write_bytes(source.data or b"")
        digest = sha256_file(tmp)
        if digest != source.sha256:
            raise _changed(source, f"sha256 {digest[:16]}..., expected {source.sha256[:16]}...")
        return place_new(tmp, target)


def _changed(source: Outgoing, why: str) -> PublishError:
    return PublishError(
        f"{source.name} changed while it was being published ({why})",
        hint="do not rewrite wheels while publishing them; run again",
    )


def _published(dest: Path, name: str) -> str | None:
    """The sha256 of the file ``dest`` holds under ``name`` (None: none); a link, a FIFO or any other
    file that is not regular under that name is not read (nor followed), and is an error."""
    target = dest / name
    try:
        return sha256_file(target, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except NotRegularFileError as exc:
        raise PublishError(
            f"cannot publish {name}: {exc}",
            hint=f"dswheels publishes only regular files it wrote itself: remove {target} (it is not a "
            "published file), then run again",
        ) from None


def publish_dir(wheels: Sequence[LocalWheel], dest: Path) -> PublishResult:
    """Copy into ``dest`` (see the module docstring)."""
    result = PublishResult(where=str(dest))
    if dest.exists() and not dest.is_dir():
        raise ConfigError(f"{dest} exists and is not a directory")
    outgoing = [item for wheel in wheels for item in outgoing_files(wheel)]  # every manifest checked first
    with failing_as(
        PublishError, what=f"publishing into {dest}", where=dest, kept="and what was published before is whole"
    ):
        _publish_into(dest, outgoing, wheels, result)
    return result


def _publish_into(
    dest: Path, outgoing: Sequence[Outgoing], wheels: Sequence[LocalWheel], result: PublishResult
) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    with exclusive(dest, what=f"publishing into {dest}", error=PublishError):
        for leftover in sweep(dest):
            get_reporter().info(f"removed {leftover}: left by an interrupted publish")
        todo = sort_out(
            outgoing,
            key=lambda item: (item.name, item.sha256),
            published=lambda name: _published(dest, name),
            result=result,
            where=str(dest),
        )
        # the wheel before its .metadata and manifest: a sidecar is never published without its wheel
        for item in todo:
            if _copy_new(item, dest / item.name):
                result.uploaded.append(item.name)
                continue
            published = _published(dest, item.name)  # another writer took the name meanwhile
            if published != item.sha256:
                raise conflict_error([conflict_line(item.name, published or "", item.sha256)], str(dest))
            result.present.append(item.name)  # it published the same bytes
        update_ledger(dest, wheels)


# --- reading: what `dswheels index` and `plan --skip-published` see -----------------------------------


def scan_directory(directory: Path) -> list[LocalWheel]:
    """Every ``*.whl`` directly in ``directory`` (other files are ignored), with its published METADATA.

    Wheels the ledger of `dswheels publish` describes, unchanged since (size, mtime), are
    taken from it; any other wheel is read and hashed. Only regular files are read: a link,
    a FIFO or a device named ``*.whl`` is left out with a warning (publish never makes one).
    """
    _require_directory(directory)
    ledger = load_ledger(directory)
    with os.scandir(directory) as listing:
        entries = sorted((e for e in listing if e.name.endswith(".whl")), key=lambda e: e.name)
    wheels = []
    for entry in entries:
        path = directory / entry.name
        info = entry.stat(follow_symlinks=False)
        if not stat.S_ISREG(info.st_mode):
            if not stat.S_ISDIR(info.st_mode):
                get_reporter().warning(f"{path} is not a regular file (a link?): left out; it was not published here")
            continue
        known = from_ledger(path, info.st_size, info.st_mtime_ns, ledger.get(entry.name))
        wheels.append(known or local_wheel(path, follow_symlinks=False))
    return wheels


def _require_directory(directory: Path) -> None:
    if not directory.is_dir():
        raise ConfigError(
            f"no directory {directory}",
            hint=f"publish first (`dswheels publish` copies what `dswheels build` wrote to {PUBLISHED}/), "
            "or give the directory it copied the wheels to (--from DIR)",
        )


def directory_names(directory: Path) -> list[str]:
    """The wheels published in ``directory``, by name: regular files only (a link is not followed:
    it is not what was published), without reading them."""
    _require_directory(directory)
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".whl") and is_regular(p))


class DirectoryStore:
    """The store of a :class:`~dswheels.stores.protocol.ToDirectory`."""

    def __init__(self, target: ToDirectory) -> None:
        self.path = target.path

    @property
    def where(self) -> str:
        return str(self.path)

    def names(self) -> list[str]:
        return directory_names(self.path)

    def wheels(self) -> list[LocalWheel]:
        """The wheels with their METADATA, as a self-contained site carries them (:func:`scan_directory`)."""
        return scan_directory(self.path)

    def list(self) -> list[IndexFile]:
        return [
            IndexFile.of_wheel(
                w.wheel,
                url=w.path.absolute().as_uri(),
                sha256=w.sha256,
                size=w.size,
                requires_python=w.requires_python,
                metadata_sha256=w.metadata_sha256,
            )
            for w in scan_directory(self.path)
        ]

    def fetch(self, file: IndexFile, dest: Path) -> Path:
        return download_wheel(file, dest)

    def put(self, wheels: Sequence[LocalWheel]) -> PublishResult:
        return publish_dir(wheels, self.path)
