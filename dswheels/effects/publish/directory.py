"""Publishing into a directory (the local "release"): what `dswheels index --from` reads.

Runs on one directory take turns (a lock file in it); each file is placed under its name only
if the name is free, so even a writer that ignores the lock cannot be replaced, and what an
earlier run killed mid-copy left behind is removed first.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from dswheels.effects.files import exclusive, place_new, sha256_file, sweep, temp_file
from dswheels.effects.index import LocalWheel, update_ledger
from dswheels.effects.publish.outgoing import (
    Outgoing,
    PublishResult,
    conflict_error,
    conflict_line,
    outgoing_files,
    sort_out,
)
from dswheels.errors import ConfigError, PublishError
from dswheels.log import get_reporter

__all__ = ["publish_dir"]


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


def _published(dest: Path, name: str) -> str | None:
    """The sha256 of the file ``dest`` holds under ``name`` (None: none)."""
    target = dest / name
    return sha256_file(target) if target.exists() else None


def publish_dir(wheels: Sequence[LocalWheel], dest: Path) -> PublishResult:
    """Copy into ``dest`` (see the module docstring)."""
    result = PublishResult(where=str(dest))
    if dest.exists() and not dest.is_dir():
        raise ConfigError(f"{dest} exists and is not a directory")
    outgoing = [item for wheel in wheels for item in outgoing_files(wheel)]  # every manifest checked first
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
    return result
