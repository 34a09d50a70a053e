"""Every path a command writes, judged against what it reads and what is published, before it changes anything.

A command's flags say what it does with each path they name (:class:`~dswheels.cli.flags.PathUse`);
:func:`judge_paths` looks at all of them at once, after the flags are settled and before the command
runs, and refuses (ConfigError, exit 2: the flag, the path, what is wrong and what to do) an output

* that cannot be what the command makes of it: a file that is there as a folder, a FIFO, a device or a
  socket; a folder that is there as something else; a path below a file, through a dangling link or a
  loop of links (the one rule of destinations, :mod:`dswheels.host.destinations`); a place this user
  may not write. ``publish --dir`` and ``index --out`` that cannot be written keep round two's exit 7
  (PublishError), judged as early;
* that would replace what the command reads: an input file, a wheel or the manifest beside it;
* that lies in a folder of published files: one ``publish --dir`` fills (it keeps its ledger there) or a
  site ``index`` wrote (its marker), wherever they are, and the published folders a command reads
  (``index --from``, a local ``--index``...): no output replaces a published file. Only ``publish``
  adds to its own folder, and only ``index`` replaces its own site;
* that is a file inside a folder the command writes into or replaces (the site is swapped whole; among
  built or published wheels a report could take a wheel's name), or the same file as another output;
* that is a folder the command replaces whole and that holds what it reads.

Nothing is written when a path is refused, not even the command's ``--report``. Writing can still fail
after the judgement (a full disk, a file system that says no only when asked); the stage then says so
with its own exit code.
"""

from __future__ import annotations

import argparse
import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dswheels.cli.flags import Flags, PathUse, each_flag
from dswheels.host.destinations import destination_problem
from dswheels.index.pages import MARKER
from dswheels.kernel.errors import ConfigError, DswheelsError, PublishError
from dswheels.kernel.locations import WHEELHOUSE
from dswheels.kernel.manifest import manifest_name
from dswheels.stores.ledger import LEDGER

__all__ = ["judge_paths"]

_OUTPUTS = (PathUse.WRITES, PathUse.WRITES_INTO, PathUse.PUBLISHES_INTO, PathUse.REPLACES)
_FOLDERS_WRITTEN = (PathUse.WRITES_INTO, PathUse.PUBLISHES_INTO, PathUse.REPLACES)
_PUBLISHED = (PathUse.READS_PUBLISHED, PathUse.PUBLISHES_INTO, PathUse.REPLACES)


@dataclass(frozen=True, slots=True)
class _Named:
    """A path a flag names: as given, and where it really is (links followed) for comparisons."""

    label: str  # how a message names it: "--report r.json", "dist/x.whl" (an argument)
    path: Path
    use: PathUse
    real: str

    def __str__(self) -> str:
        return self.label


def _real(path: Path) -> str:
    return os.path.normcase(os.path.realpath(path))


def _within(inner: str, outer: str) -> bool:
    """Whether ``inner`` is ``outer`` or lies below it (both real)."""
    try:
        return os.path.commonpath([inner, outer]) == outer
    except ValueError:  # Windows: another drive
        return False


def _local(value: object) -> Path | None:
    """A flag's value as a local path; None for a URL (``--index``, ``--published``) or ``pip``."""
    if value is None or value == "":
        return None
    text = str(value)
    if text.startswith("file://"):
        return Path(text.removeprefix("file://"))
    if "://" in text or text == "pip":
        return None
    return Path(text)


def _named(args: argparse.Namespace, flags: Flags) -> list[_Named]:
    found = []
    for flag in each_flag(flags):
        if flag.path is None:
            continue
        value = getattr(args, flag.key, None)
        values = list(value) if isinstance(value, list | tuple) else [value]
        if flag.path is PathUse.READS_WHEELS and not values:
            values = [WHEELHOUSE]  # none named: what `dswheels build` wrote (kernel/locations.py)
        for path in (path for path in map(_local, values) if path is not None):
            label = str(path) if flag.positional else f"{flag.name} {path}"
            found.append(_Named(label, path, flag.path, _real(path)))
    return found


def _read(named: _Named) -> Iterator[tuple[str, str]]:
    """The files an input stands for, each with how a message names it: a wheels argument is each wheel and
    the manifest beside it (a folder: the wheels in it and one level down)."""
    if named.use is PathUse.READS:
        yield named.real, named.label
        return
    try:
        if named.path.is_dir():
            entries = list(named.path.iterdir())
            entries += [p for sub in entries if sub.is_dir() for p in sub.iterdir()]
            wheels = [p for p in entries if p.name.endswith(".whl")]
        else:
            wheels = [named.path]
    except OSError:
        return  # the command says what is wrong with what it reads
    for wheel in wheels:
        yield _real(wheel), f"the wheel {wheel}"
        manifest = wheel.with_name(manifest_name(wheel.name))
        yield _real(manifest), f"{manifest}, the manifest of the wheel {wheel}"


# --- what a path is ---------------------------------------------------------------------------------------

_FOLDER_HINT = "give a folder that exists (or can be made) and that you can write"
_FILE_HINT = "give a file in a folder that exists (or can be made) and that you can write"


def _refuse(named: _Named, what: str, hint: str, error: type[DswheelsError] = ConfigError) -> DswheelsError:
    return error(f"{named}: {what}", hint=hint)


def _cannot_write(named: _Named) -> type[DswheelsError]:
    """The error of a place that cannot be written: ``publish`` and ``index`` keep round two's exit 7."""
    return PublishError if named.use in (PathUse.PUBLISHES_INTO, PathUse.REPLACES) else ConfigError


def _judge_kind(named: _Named) -> None:
    """The output can be made there: the folder it is, or is in, passes the one rule of destinations
    (:func:`~dswheels.host.destinations.destination_problem`: what exists on the way is a folder, no
    dangling link, no loop); a file is not there as something else; and this user may write there."""
    wants_file = named.use is PathUse.WRITES
    folder = named.path.parent if wants_file else named.path
    problem = destination_problem(folder)
    if problem is not None:
        error = ConfigError if problem.itself or wants_file else _cannot_write(named)
        raise _refuse(named, str(problem), _FILE_HINT if wants_file else _FOLDER_HINT, error)
    if wants_file:
        _judge_file_itself(named)
    # what is written: the folder (a site is made beside itself and swapped in: its parent), else what
    # of the way to it exists
    written = named.path.parent if wants_file or named.use is PathUse.REPLACES else named.path
    existing = next((place for place in (written, *written.parents) if place.exists()), None)
    if existing is not None and not os.access(existing, os.W_OK):
        raise _refuse(
            named,
            f"{existing} cannot be written by this user",
            _FILE_HINT if wants_file else _FOLDER_HINT,
            _cannot_write(named),
        )


def _judge_file_itself(named: _Named) -> None:
    try:
        mode = named.path.lstat().st_mode
        if stat.S_ISLNK(mode):
            mode = named.path.stat().st_mode
    except FileNotFoundError:
        if named.path.is_symlink():
            target = named.path.readlink()
            raise _refuse(named, f"is a symbolic link to {target}, which does not exist", _FILE_HINT) from None
        return  # a new file
    except OSError as exc:
        what = "is a loop of symbolic links" if exc.errno == errno.ELOOP else exc.strerror or str(exc)
        raise _refuse(named, what, _FILE_HINT) from None
    if stat.S_ISDIR(mode):
        raise _refuse(named, "is a folder", "name the file to write, e.g. a name inside it")
    if not stat.S_ISREG(mode):
        raise _refuse(named, f"is {_kind(mode)}, not a file", "name a regular file (or a new one)")


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


# --- what a path is to the others ---------------------------------------------------------------------------

# the folders of published files, wherever they are and whoever names them: what `publish --dir` fills keeps
# its ledger, a site `index` writes its marker
_PUBLISHED_BY = (
    (LEDGER, PathUse.PUBLISHES_INTO, "a folder `dswheels publish` fills"),
    (MARKER, PathUse.REPLACES, "a site `dswheels index` wrote"),
)


def _published_at(folder: Path) -> tuple[PathUse, str] | None:
    """Whether ``folder`` holds published files: the use of whoever writes it, and what it is."""
    for name, use, what in _PUBLISHED_BY:
        if os.path.lexists(folder / name):
            return use, what
    return None


def _published_above(real: str) -> tuple[Path, str] | None:
    """The nearest folder above ``real`` that holds published files, and what it is."""
    for folder in Path(real).parents:
        if (found := _published_at(folder)) is not None:
            return folder, found[1]
    return None


def _judge_published(out: _Named) -> None:
    """No output lies in a folder of published files; only `publish` adds to its own, only `index` replaces its own."""
    hint = "name a place outside the folders of published files"
    if (above := _published_above(out.real)) is not None:
        folder, what = above
        raise _refuse(out, f"is inside {folder}, {what}: no output may replace a published file", hint)
    itself = _published_at(Path(out.real)) if out.use is not PathUse.WRITES else None
    if itself is not None and itself[0] is not out.use:
        raise _refuse(out, f"is {itself[1]}: no other output goes there", hint)


def _judge_file(out: _Named, named: list[_Named], inputs: dict[str, str]) -> None:
    if out.real in inputs:
        raise _refuse(
            out,
            f"is {inputs[out.real]}, which this command reads: writing there would replace it",
            "write it elsewhere, not over what the command reads",
        )
    for other in named:
        if other is out:
            continue
        if other.use is PathUse.WRITES and other.real == out.real:
            raise _refuse(out, f"is also {other}: one would replace the other", "give each output its own file")
        if other.use in _FOLDERS_WRITTEN and _within(out.real, other.real):
            raise _refuse(out, f"is inside {other}, which this command writes", "write it outside that folder")
        if other.use is PathUse.READS_PUBLISHED and _within(out.real, other.real):
            raise _refuse(
                out,
                f"is inside {other}, which holds published files: no output replaces a published file",
                "write it outside the folders of published files",
            )


def _judge_folder(out: _Named, named: list[_Named]) -> None:
    for other in named:
        if other is out or other.use not in (*_PUBLISHED, PathUse.READS, PathUse.READS_WHEELS):
            continue
        inside = _within(out.real, other.real)
        holds = _within(other.real, out.real)
        if other.use in _PUBLISHED and inside:
            raise _refuse(
                out,
                f"is inside {other}, which holds published files: no output replaces a published file",
                "give a folder outside the folders of published files",
            )
        if out.use is PathUse.REPLACES and holds:
            raise _refuse(
                out,
                f"holds {other}, which this command reads: it would be replaced with the folder",
                "give a folder that holds none of what the command reads",
            )


def judge_paths(args: argparse.Namespace, flags: Flags) -> None:
    """Refuse (ConfigError) the first output ``args`` names that cannot be written, or may not be."""
    named = _named(args, flags)
    inputs = {
        real: label
        for item in named
        if item.use in (PathUse.READS, PathUse.READS_WHEELS)
        for real, label in _read(item)
    }
    for out in (item for item in named if item.use in _OUTPUTS):
        _judge_kind(out)
        _judge_published(out)
        if out.use is PathUse.WRITES:
            _judge_file(out, named, inputs)
        else:
            _judge_folder(out, named)
