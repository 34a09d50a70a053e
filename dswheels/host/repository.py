"""A repository's own files when no path is given: looked up from a starting directory upward, so a
command finds them from any directory of a clone (as git finds its root), not only from the top."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

__all__ = ["repository_file"]


def repository_file(relative: Path, *, near: Iterable[Path]) -> Path | None:
    """``relative`` in the nearest directory at or above each of ``near`` (tried in order) that has it."""
    for start in near:
        folder = start.resolve()
        for candidate in (folder, *folder.parents):
            if (candidate / relative).is_file():
                return candidate / relative
    return None
