"""Publishing into a directory (the local "release"): what `dswheels index --from` reads.

Runs on one directory take turns (a lock file in it); each file is placed under its name only
if the name is free, so even a writer that ignores the lock cannot be replaced, and what an
earlier run killed mid-copy left behind is removed first.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dswheels.effects.files import (
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
