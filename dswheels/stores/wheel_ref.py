"""The wheel every store and both of its users (publish, index) speak of: a dswheels wheel on disk
with the facts a destination needs (its sha256, size and METADATA), and the bounds on the small
files published beside it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from dswheels.host.wheel_file import read_admitted
from dswheels.kernel.errors import PublishError
from dswheels.kernel.naming import PublishedWheel, WheelNameError, parse_wheel

__all__ = ["MAX_MANIFEST_BYTES", "MAX_WHEEL_BYTES", "LocalWheel", "local_wheel"]

MAX_WHEEL_BYTES = 8 * 1024**3  # GitHub's asset limit is 2 GiB
MAX_MANIFEST_BYTES = 4 * 1024**2


@dataclass(frozen=True, slots=True)
class LocalWheel:
    """A wheel on disk with the facts the index and the publishers need."""

    path: Path
    wheel: PublishedWheel
    sha256: str
    size: int
    metadata: bytes  # the wheel's .dist-info/METADATA, byte for byte (served as <wheel>.metadata)
    metadata_sha256: str
    requires_python: str | None
    metadata_path: Path | None = None  # the published <wheel>.metadata it was read from, if any


def local_wheel(path: Path, *, follow_symlinks: bool = True) -> LocalWheel:
    """Hash a wheel and read its METADATA from the wheel itself; ``PublishError`` if it is not a
    dswheels wheel. (A ``<wheel>.metadata`` beside it is never believed: it may describe another wheel.)
    ``follow_symlinks=False``: a wheel of the published directory, which must not be a link."""
    try:
        wheel = parse_wheel(path.name)
    except WheelNameError as exc:
        raise PublishError(
            f"not a dswheels wheel: {exc}",
            hint="only wheels built by `dswheels build` can be published (their names carry the torch build)",
        ) from None
    contents = read_admitted(
        path,
        wheel,
        error=PublishError,
        hint="a wheel must be what its name says, and install only DeepSpeed's own files: rebuild it "
        "with `dswheels build` (docs/hostile-input.md, what a wheel may install)",
        follow_symlinks=follow_symlinks,
    )
    meta = contents.metadata
    return LocalWheel(
        path=path,
        wheel=wheel,
        sha256=contents.sha256,
        size=contents.size,
        metadata=contents.metadata_bytes,
        metadata_sha256=hashlib.sha256(contents.metadata_bytes).hexdigest(),
        requires_python=meta.requires_python,
    )
