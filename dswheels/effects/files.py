"""File writes that never leave a half-written result behind, and never replace what is published.

* :func:`write_bytes_atomic` replaces a file in one rename (a reader sees the old or the new
  bytes, never part of them).
* :func:`place_new` puts a fully written temporary file under its final name only if that
  name is free (a hard link: atomic and no-replace), so two writers of one name cannot
  silently replace each other.
* :func:`exclusive` serialises the runs that write one directory (an advisory lock file);
  inside it, :func:`sweep` removes what a run killed mid-write left behind.
* :func:`sha256_file` is the one digest of a file on disk (wheels, sources, manifests).
* Files and folders meant to be served get the mode the user's umask gives new files
  (0644/0755 under the usual 022), not ``mkstemp``/``mkdtemp``'s private 0600/0700.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

from dswheels.errors import DswheelsError

__all__ = [
    "MAX_INPUT_BYTES",
    "TEMP_PREFIX",
    "exclusive",
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


def read_bounded(path: Path, *, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of ``path``, or ``ValueError`` once it passes ``limit`` (``/dev/zero``, a FIFO, a huge file)."""
    with path.open("rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        msg = f"{path} is larger than {limit >> 20} MiB: not a file dswheels reads"
        raise ValueError(msg)
    return data


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file, read a MiB at a time (wheels reach gigabytes)."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
