"""File writes that never leave a half-written result behind, and never replace what is published.

* :func:`write_bytes_atomic` replaces a file in one rename (a reader sees the old or the new
  bytes, never part of them).
* :func:`place_new` puts a fully written temporary file under its final name only if that
  name is free (a hard link: atomic and no-replace), so two writers of one name cannot
  silently replace each other.
* :func:`exclusive` serialises the runs that write one directory (an advisory lock file);
  inside it, :func:`sweep` removes what a run killed mid-write left behind.
* :func:`sha256_file` is the one digest of a file on disk (wheels, sources, manifests).
* :func:`open_regular` is the one way to open a file dswheels does not control (an input
  file, a published file, a file a local index links): only a regular file, never a device
  or a FIFO (the open never blocks), and, for published files, never through a link;
  :func:`read_bounded` and :func:`copy_bounded` read from it no more than a limit.
* Files and folders meant to be served get the mode the user's umask gives new files
  (0644/0755 under the usual 022), not ``mkstemp``/``mkdtemp``'s private 0600/0700.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import os
import secrets
import shutil
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from dswheels.host.destinations import destination_problem
from dswheels.kernel.errors import ConfigError, DswheelsError

__all__ = [
    "MAX_INPUT_BYTES",
    "TEMP_PREFIX",
    "NotRegularFileError",
    "copy_bounded",
    "exclusive",
    "failing_as",
    "link_opened",
    "open_regular",
    "place_new",
    "public_mode",
    "read_bounded",
    "replace_dir",
    "sha256_file",
    "staging_dir",
    "sweep",
    "temp_file",
    "write_bytes_atomic",
    "write_text_atomic",
]

# Every temporary name dswheels makes beside a published or served file starts with this, so
# a later run (holding the directory's lock) knows what a killed run left and may remove it.
TEMP_PREFIX = ".dswheels-tmp-"


def _umask() -> int:
    """The process umask, read without changing it where the system allows (Linux /proc)."""
    try:
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # elsewhere: read it by setting it, then put it back at once
    os.umask(mask)
    return mask


def public_mode(*, directory: bool) -> int:
    """The mode ``open``/``mkdir`` would give a new file or folder: 0666/0777 less the umask."""
    return (0o777 if directory else 0o666) & ~_umask()


def _temp_name(directory: Path, name: str) -> Path:
    return directory / f"{TEMP_PREFIX}{name[:80]}.{secrets.token_hex(6)}"


@contextlib.contextmanager
def temp_file(directory: Path, name: str) -> Iterator[Path]:
    """A new, empty, publicly readable temporary file beside ``name`` in ``directory``; removed
    on the way out unless it was renamed away.

    The name is chosen before the file is made (unlike ``mkstemp``), so an interruption
    (Ctrl-C, SIGTERM) at any point, even while it is being created, still removes it.
    """
    path = _temp_name(directory, name)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, public_mode(directory=False)))
        yield path
    finally:
        path.unlink(missing_ok=True)


@contextlib.contextmanager
def staging_dir(directory: Path, name: str) -> Iterator[Path]:
    """A new, publicly readable folder beside ``name`` (``name`` itself is not touched); removed
    with what is in it on the way out unless it was renamed away (same care as :func:`temp_file`)."""
    path = _temp_name(directory, name)
    try:
        path.mkdir(mode=public_mode(directory=True))
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


_WHY_NOT = {
    errno.ENOSPC: "the file system is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EFBIG: "the file is larger than this process may write",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "no permission to write there",
    errno.EPERM: "the system does not let files be made there (/sys, /proc and the like are not for files)",
    errno.ENOTDIR: "a part of the path is a file, not a directory",
    errno.ENOENT: "a directory on the way does not exist and cannot be made there",
}


@contextlib.contextmanager
def failing_as(error: type[DswheelsError], *, what: str, where: Path, kept: str) -> Iterator[None]:
    """Turn an ``OSError`` of the block (a write into ``where`` refused, a full disk) into ``error``:
    one paragraph saying which path failed and why, and what is ``kept``, not a traceback. A
    dangling link on the way to ``where`` is refused before the block runs. What the block
    writes goes through temporary names (:func:`temp_file`, :func:`staging_dir`), removed on
    the way out, so nothing half-written is left. ``where`` is judged first
    (:func:`dswheels.host.destinations.destination_problem`): a dangling link, a loop of links or a
    file on the way is ``error``; ``where`` itself a file is a ``ConfigError``."""
    problem = destination_problem(where)  # the one judgement of a destination (host/destinations.py)
    if problem is not None:
        raise (ConfigError if problem.itself else error)(
            f"{what}: {problem}",
            hint="dswheels does not write through a dangling link, a loop of links or a file: create its target, "
            "or give another directory",
        )
    try:
        yield
    except OSError as exc:
        reason = _WHY_NOT.get(exc.errno or 0, exc.strerror or str(exc))
        failed = f"{exc.filename}: " if exc.filename else ""
        raise error(
            f"{what}: {failed}{exc.strerror or exc}",
            details=reason if reason != exc.strerror else None,
            hint=f"nothing half-written was left, {kept}; give a directory you can write, on a file system "
            f"with room (not {where}), or make room and run again",
        ) from None


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write to a temporary file beside ``path``, then rename it over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with temp_file(path.parent, path.name) as tmp:
        with tmp.open("wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        tmp.replace(path)


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def place_new(tmp: Path, target: Path) -> bool:
    """Give the complete file ``tmp`` the name ``target`` only if no file has that name yet.

    True when placed; False when ``target`` already existed (nothing was changed). A hard
    link is atomic and never replaces; where the file system has none, Windows' rename
    (which refuses an existing name) is used, else an ``O_EXCL`` create of the final name
    that the bytes are then copied into.
    """
    try:
        os.link(tmp, target)
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV, errno.EMLINK, errno.ENOSYS):
            raise
        return _place_without_links(tmp, target)
    return True


def _place_without_links(tmp: Path, target: Path) -> bool:
    if os.name == "nt":
        try:
            tmp.rename(target)  # Windows: rename never replaces an existing file
        except FileExistsError:
            return False
        return True
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, public_mode(directory=False))
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as out, tmp.open("rb") as src:
        shutil.copyfileobj(src, out)
    return True


def sweep(directory: Path, *, prefix: str = TEMP_PREFIX) -> list[str]:
    """Remove the temporary files and folders a killed run left in ``directory`` (call it
    while holding :func:`exclusive` for the directory: then no live run owns them)."""
    removed: list[str] = []
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return removed
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            Path(entry.path).unlink(missing_ok=True)
        removed.append(entry.name)
    return removed


@contextlib.contextmanager
def exclusive(directory: Path, *, what: str, error: type[DswheelsError]) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``directory`` for the block: runs that write into
    one directory take turns.

    A second run that wants the same lock waits for the first to finish. The lock is the
    kernel's (``flock`` on the directory itself, so nothing is left in it; on Windows a
    ``.dswheels-lock`` file in it): it is released when its holder exits, even by SIGKILL,
    so a killed run never blocks the next one.
    """
    directory.mkdir(parents=True, exist_ok=True)
    try:
        if os.name == "nt":  # pragma: no cover - Windows opens no directories
            fd = os.open(directory / ".dswheels-lock", os.O_RDWR | os.O_CREAT, public_mode(directory=False))
        else:
            fd = os.open(directory, os.O_RDONLY)
    except OSError as exc:
        raise error(f"cannot lock {directory} for {what}: {exc.strerror}") from None
    try:
        _lock(fd)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _lock(fd: int) -> None:
    # sys.platform, not os.name: mypy checks each branch on the platform that runs it (`--platform win32`)
    if sys.platform == "win32":  # pragma: no cover - Windows
        import msvcrt  # noqa: PLC0415 - Windows only

        locked = False
        while not locked:  # LK_LOCK gives up after ~10 s: keep waiting
            with contextlib.suppress(OSError):
                msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
                locked = True
    else:
        import fcntl  # noqa: PLC0415 - POSIX only

        fcntl.flock(fd, fcntl.LOCK_EX)


def replace_dir(target: Path, staged: Path) -> None:
    """Swap a fully written ``staged`` directory into place of ``target``.

    On Linux the two trees are exchanged in one ``renameat2(RENAME_EXCHANGE)``: a reader
    sees the old tree or the new one at every moment. Elsewhere the old tree is renamed
    aside first and removed only after the new one is in place (at every moment one of
    them is whole, apart from the instant between the two renames).
    """
    target = target.resolve()
    old = target.with_name(f"{TEMP_PREFIX}{target.name}.old")
    if old.exists():
        shutil.rmtree(old)
    if target.is_dir() and _exchange(staged, target):
        shutil.rmtree(staged)  # now the old tree
        return
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


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux >= 3.15, glibc >= 2.28); False where unsupported."""
    if not hasattr(os, "uname") or os.uname().sysname != "Linux":
        return False
    import ctypes  # noqa: PLC0415 - Linux only

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    result = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    return bool(result == 0)


MAX_INPUT_BYTES = 16 * 1024**2  # matrix, lock, yanked and facts files are a few KB


class NotRegularFileError(ValueError):
    """A path dswheels was to read is not a regular file: a FIFO, a device, a directory, a socket,
    or (where links are refused) a symbolic link."""


_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
)


def _refuse(path: Path, mode: int) -> NotRegularFileError:
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return NotRegularFileError(f"{path} is {kind}, not a regular file: dswheels reads only regular files")


def open_regular(path: Path, *, follow_symlinks: bool = True) -> io.BufferedReader:
    """``path`` opened for reading, only if it is a regular file; :class:`NotRegularFileError` otherwise.

    The one way dswheels opens a file it does not control. It never blocks: the kind is checked
    before the open (a device or FIFO found there is not opened at all), and the open itself is
    non-blocking and takes no terminal (``O_NONBLOCK | O_NOCTTY``: a FIFO swapped in meanwhile
    opens at once, with or without a writer), then checked again on the open descriptor
    (``fstat``), which is what is read.
    ``follow_symlinks=False`` (what dswheels reads from a published directory or an index):
    a symbolic link is refused, never followed (``O_NOFOLLOW``), so a link placed beside
    published files cannot make dswheels read, serve or change what it points to.
    """
    before = path.stat() if follow_symlinks else path.lstat()
    if not stat.S_ISREG(before.st_mode):
        raise _refuse(path, before.st_mode)
    flags = os.O_RDONLY | _flag("O_NONBLOCK") | _flag("O_NOCTTY") | _flag("O_CLOEXEC") | _flag("O_BINARY")
    if not follow_symlinks:
        flags |= _flag("O_NOFOLLOW")
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_symlinks:  # replaced by a link since the lstat
            raise _refuse(path, stat.S_IFLNK) from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise _refuse(path, mode)
    return os.fdopen(fd, "rb")


def _flag(name: str) -> int:
    return int(getattr(os, name, 0))  # O_NONBLOCK, O_NOFOLLOW...: POSIX; O_BINARY: Windows


def _too_large(path: Path, limit: int) -> ValueError:
    return ValueError(f"{path} is larger than {_size(limit)}: not a file dswheels reads")


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):g} {unit}"
    return f"{n} bytes"


def read_bounded(path: Path, *, limit: int = MAX_INPUT_BYTES, follow_symlinks: bool = True) -> bytes:
    """The bytes of the regular file ``path`` (:func:`open_regular`), at most ``limit``.

    ``ValueError`` when it is larger (checked before reading, and again while reading: a file
    may grow) or not a regular file (:class:`NotRegularFileError`: ``/dev/zero``, a FIFO, a
    directory, a link where ``follow_symlinks`` is False); ``OSError`` when it cannot be opened.
    """
    with open_regular(path, follow_symlinks=follow_symlinks) as fh:
        if os.fstat(fh.fileno()).st_size > limit:
            raise _too_large(path, limit)
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise _too_large(path, limit)
    return data


def copy_bounded(src: BinaryIO, out: BinaryIO, *, limit: int, what: str, digest: hashlib._Hash | None = None) -> int:
    """Copy ``src`` into ``out`` a MiB at a time (updating ``digest``); the bytes copied.

    ``ValueError`` once ``src`` holds more than ``limit`` bytes: what was written so far is the
    caller's to remove (it writes into a temporary file that is).
    """
    copied = 0
    while chunk := src.read(min(1 << 20, limit + 1 - copied)):
        copied += len(chunk)
        if copied > limit:
            msg = f"{what} holds more than {_size(limit)}"
            raise ValueError(msg)
        if digest is not None:
            digest.update(chunk)
        out.write(chunk)
    return copied


def link_opened(src: io.BufferedReader, source: Path, target: Path, *, limit: int) -> None:
    """Give the regular file ``src`` (opened by :func:`open_regular` from ``source``) the new name
    ``target``: a hard link to that very file when a static server can read it, else a copy.

    The link is made by name, then checked to be the opened file (same device and inode): a
    name swapped meanwhile (for a link, or another file) is never what ends up at ``target``;
    then, and where links cannot be made, what was opened is copied (at most ``limit``
    bytes). A file without the read bits new files get (published with ``mkstemp``'s 0600 by
    an older dswheels) is copied with the mode of a new file: ``source``'s own mode is never
    changed (no ``chmod``, which a link would carry to the file it names).
    """
    opened = os.fstat(src.fileno())
    readable = public_mode(directory=False) & 0o444
    if opened.st_mode & readable == readable:
        nofollow = {"follow_symlinks": False} if os.link in os.supports_follow_symlinks else {}
        try:
            os.link(source, target, **nofollow)
        except OSError:
            pass  # another file system, or none: copy
        else:
            linked = target.lstat()
            if (linked.st_dev, linked.st_ino) == (opened.st_dev, opened.st_ino):
                return
            target.unlink()
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _flag("O_NOFOLLOW") | _flag("O_BINARY"), 0o666)
    with os.fdopen(fd, "wb") as out:
        src.seek(0)
        copy_bounded(src, out, limit=limit, what=str(source))


def sha256_file(path: Path, *, follow_symlinks: bool = True) -> str:
    """The hex sha256 of a regular file (:func:`open_regular`), read a MiB at a time (wheels reach gigabytes)."""
    digest = hashlib.sha256()
    with open_regular(path, follow_symlinks=follow_symlinks) as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
