"""Read an environment variable as a flag is read: parsed by what it means, or bad input naming it.

The parsers are :mod:`dswheels.kernel.envvars`'s. A value that does not parse is a
:class:`~dswheels.kernel.errors.ConfigError` (exit 2): ``$NAME='value': why``, the value left out for
secrets. :func:`check_environment` runs before every command for the variables every command
may use (so a bad one stops the command before it does anything, as a bad flag does); the
rest are checked where they are read.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from dswheels.kernel.envvars import SECRET, plain_path, source_date_epoch, switch
from dswheels.kernel.errors import ConfigError

__all__ = ["check_environment", "read_variable"]

T = TypeVar("T")


def _shown(name: str, text: str) -> str:
    if name in SECRET:
        return f"${name}"
    shown = text if len(text) <= 80 else text[:77] + "..."
    return f"${name}={shown!r}"


def read_variable(
    name: str, parse: Callable[[str], T], *, env: Mapping[str, str] | None = None, hint: str | None = None
) -> T | None:
    """``$name`` parsed by ``parse``; None when unset or empty; ConfigError naming it when ``parse`` refuses it."""
    text = (os.environ if env is None else env).get(name, "")
    if not text:
        return None
    try:
        return parse(text)
    except ValueError as exc:
        hint = hint or f"unset {name}, or correct it (docs/hostile-input.md says what each variable must be)"
        raise ConfigError(f"{_shown(name, text)}: {exc}", hint=hint) from None


_NOT_REGULAR = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (a write would wait for a reader)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _appendable(text: str) -> str:
    """A file GitHub Actions names for a step to append to: a regular file, or a new one in a folder that
    exists. Judged by looking (``stat``), never by opening: a FIFO with no reader is named, not waited on."""
    path = Path(plain_path(text))
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if not path.parent.is_dir():
            msg = f"its folder {path.parent} does not exist"
            raise ValueError(msg) from None
        return text
    except OSError as exc:  # a loop of links, a file on the way
        msg = f"{exc.strerror}: not the regular file GitHub Actions names for the step to append to"
        raise ValueError(msg) from None
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _NOT_REGULAR if test(mode)), "not a regular file")
        msg = f"{kind}, not the regular file GitHub Actions names for the step to append to"
        raise ValueError(msg)
    return text


def check_environment(env: Mapping[str, str] | None = None) -> bool:
    """Check the variables every command may read; return ``DSWHEELS_DEBUG``'s value."""
    debug = read_variable("DSWHEELS_DEBUG", switch, env=env)
    read_variable(
        "SOURCE_DATE_EPOCH",
        source_date_epoch,
        env=env,
        hint="unset it, or give the seconds since 1970 of the date to write (e.g. git log -1 --format=%ct)",
    )
    for name in ("GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GITHUB_ENV", "GITHUB_PATH"):
        read_variable(name, _appendable, env=env, hint=f"unset {name} outside GitHub Actions")
    return bool(debug)
