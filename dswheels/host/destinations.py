"""A folder a command will write into, judged before it does anything: the one rule for every
destination (``cuda install --dest``, ``build --out``/``--work-dir``/``--cache-dir``, the cache
directory, ``ci plan --out``, ``publish --dir``, ``index --out``).

A destination is a folder that exists, or a path that can become one: every part of the way
to it that exists is a folder (or a link to one), and nothing on the way is a link that names
nothing (it would be written through: its target made) or a loop of links. The path itself may
be a link to a folder (the user's choice). It is judged by looking (``lstat``/``stat``), never by
opening or creating anything, so a FIFO or a device on the way is named, not waited on.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from dswheels.kernel.errors import ConfigError, DswheelsError

__all__ = ["NotADestinationError", "destination_problem", "judge_destination"]


class NotADestinationError(ValueError):
    """Why a path cannot be written into as a folder; ``itself``: the path exists and is not a folder
    (rather than something on the way to it)."""

    def __init__(self, why: str, *, itself: bool) -> None:
        super().__init__(why)
        self.itself = itself


_KINDS = (
    (stat.S_ISREG, "a regular file"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a folder")


def _followed(place: Path) -> os.stat_result | None:
    """``place``'s own kind through its link; None when the link names nothing."""
    try:
        return place.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            msg = f"{place} is a loop of symbolic links ({place} -> {place.readlink()} -> ...)"
            raise NotADestinationError(msg, itself=False) from None
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise


def destination_problem(path: Path) -> NotADestinationError | None:
    """Why ``path`` cannot be a folder dswheels writes into (None: it can); see the module docstring."""
    path = path if path.is_absolute() else Path.cwd() / path  # not normalised: the kernel resolves link/..
    for place in [*reversed(path.parents), path]:
        try:
            problem = _place_problem(place, itself=place == path, path=path)
        except NotADestinationError as exc:
            return exc
        except FileNotFoundError:
            return None  # the rest is made as folders
        except OSError:
            return None  # unreadable on the way: the write says why, with the writer's own error
        if problem is not None:
            return problem
    return None


def _place_problem(place: Path, *, itself: bool, path: Path) -> NotADestinationError | None:
    """What is wrong with one existing part of the way (``FileNotFoundError``: it does not exist)."""
    mode = place.lstat().st_mode
    if stat.S_ISLNK(mode):
        followed = _followed(place)
        if followed is None:
            return NotADestinationError(
                f"{place} is a symbolic link to {place.readlink()}, which does not exist", itself=False
            )
        mode = followed.st_mode
    if stat.S_ISDIR(mode):
        return None
    what = f"{place} exists and is {_kind(mode)}, not a directory"
    return NotADestinationError(what if itself else f"{what} (on the way to {path})", itself=itself)


def judge_destination(path: Path, *, what: str, error: type[DswheelsError] = ConfigError) -> Path:
    """``path`` unchanged when it can be a folder dswheels writes into; else a ``ConfigError`` (exit 2)
    when it exists and is not a folder, and ``error`` when the way to it is (a dangling link, a loop of
    links, a file on the way). ``what``: the flag or variable that named it."""
    problem = destination_problem(path)
    if problem is None:
        return path
    raise (ConfigError if problem.itself else error)(
        f"{what}: {problem}",
        hint="dswheels writes only into a folder, never through a link that names nothing: give a new path or "
        "an existing folder (nothing at that path was changed)",
    )
