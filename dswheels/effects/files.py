"""File writes that never leave a half-written result behind."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["replace_dir", "write_bytes_atomic", "write_text_atomic"]


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write to a temporary file beside ``path``, then rename it over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        Path(tmp).chmod(0o644)  # mkstemp makes it 0600: published files must be readable
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def replace_dir(target: Path, staged: Path) -> None:
    """Swap a fully written ``staged`` directory into place of ``target``.

    The old tree is renamed aside first and removed only after the new one is in place,
    so at every moment either the old or the new tree is whole under ``target``'s name
    (apart from the instant between the two renames).
    """
    target = target.resolve()
    old = target.with_name(f".{target.name}.old")
    if old.exists():
        shutil.rmtree(old)
    if target.exists():
        target.rename(old)
    try:
        staged.rename(target)
    except BaseException:
        if old.exists() and not target.exists():
            old.rename(target)
        raise
    if old.exists():
        shutil.rmtree(old)
