"""Unpack a source archive (tar, tar.gz, zip) without letting any member land outside the tree.

Every archive kind goes through the same steps: read the member list, judge every name and
every link with :mod:`dswheels.kernel.archive` (one containment rule, resolved through the
archive's own links, for POSIX and Windows paths alike), and only then write, into a
staging folder beside the destination that replaces it once complete. Files are created
with ``O_EXCL | O_NOFOLLOW`` below folders that are checked to resolve inside the tree, and
every link is checked again on disk after it is made, so a link can never be written
through. A bad archive leaves nothing behind.
"""

from __future__ import annotations

import itertools
import lzma
import os
import shutil
import stat
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from dswheels.host.files import replace_dir, staging_dir
from dswheels.host.tar_bounds import open_tar
from dswheels.kernel.archive import ArchiveMemberError, Parts, link_parts, member_parts, resolve_member
from dswheels.kernel.errors import SourceError

__all__ = ["MAX_MEMBERS", "MAX_UNPACKED_BYTES", "extract_archive"]

MAX_MEMBERS = 100_000  # DeepSpeed's sdist has ~1,600
MAX_UNPACKED_BYTES = 2 * 1024**3  # its tree is ~11 MB: a bomb stops here, not at a full disk
_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class _Member:
    parts: Parts  # below the top folder
    kind: str  # "dir" | "file" | "symlink" | "hardlink"
    link: str = ""  # symlink text, or the hard link's target member (below the top folder)
    executable: bool = False
    size: int = 0
    open: Callable[[], IO[bytes] | None] | None = None


def _refuse(why: str) -> ArchiveMemberError:
    """Why a member cannot be unpacked; :func:`extract_archive` words it for the archive."""
    return ArchiveMemberError(why)


def _fail(archive: Path, why: str, what: str) -> SourceError:
    return SourceError(
        f"refusing to unpack {archive.name}: {why}",
        hint=f"this archive is not {what} as published; delete it from the cache, and check where "
        "it came from before pinning it",
    )


def _below_top(parts: Parts) -> Parts | None:
    return parts[1:] or None


def _tar_members(tar: tarfile.TarFile) -> Iterator[_Member]:
    for info in tar:
        parts = _below_top(member_parts(info.name))
        if parts is None:
            continue
        if info.isdir():
            yield _Member(parts, "dir")
        elif info.issym():
            yield _Member(parts, "symlink", link=info.linkname)
        elif info.islnk():
            target = _below_top(member_parts(info.linkname))
            if target is None:
                raise _refuse(f"{info.name!r} is a hard link to the top folder")
            yield _Member(parts, "hardlink", link="/".join(target))
        elif info.isreg():
            yield _Member(
                parts,
                "file",
                executable=bool(info.mode & 0o111),
                size=info.size,
                open=lambda info=info: tar.extractfile(info),  # type: ignore[misc]
            )
        else:
            kind = "a device" if info.ischr() or info.isblk() else "a FIFO" if info.isfifo() else "a special member"
            raise _refuse(f"{info.name!r} is {kind}; a source archive holds files, folders and links")


def _zip_members(zf: zipfile.ZipFile) -> Iterator[_Member]:
    for info in zf.infolist():
        parts = _below_top(member_parts(info.filename))
        if parts is None:
            continue
        mode = info.external_attr >> 16 if info.create_system == 3 else 0  # 3: made on Unix
        file_type = stat.S_IFMT(mode)
        if info.is_dir() or file_type == stat.S_IFDIR:
            yield _Member(parts, "dir")
        elif file_type == stat.S_IFLNK:
            if info.file_size > 4096:
                raise _refuse(f"{info.filename!r}: a link whose target is {info.file_size} bytes long")
            yield _Member(parts, "symlink", link=zf.read(info).decode("utf-8", "surrogateescape"))
        elif file_type in (0, stat.S_IFREG):
            yield _Member(
                parts,
                "file",
                executable=bool(mode & 0o111),
                size=info.file_size,
                open=lambda info=info: zf.open(info),  # type: ignore[misc]
            )
        else:
            raise _refuse(f"{info.filename!r} is a special file (mode {oct(mode)})")


def _judge(members: list[_Member], max_bytes: int) -> None:
    """Every member inside the tree, through every link, before a byte is written."""
    if sum(m.size for m in members) > max_bytes:
        raise _refuse(f"it unpacks to more than {max_bytes >> 20} MiB")
    links = {m.parts: m.link for m in members if m.kind == "symlink"}
    kinds: dict[Parts, str] = {}
    folded: dict[str, Parts] = {}
    for member in members:
        _judge_name(member, kinds, folded)
        _judge_place(member, links)
    files = {m.parts for m in members if m.kind == "file"}
    for member in members:
        if member.kind == "hardlink" and tuple(member.link.split("/")) not in files:
            raise _refuse(f"the hard link {'/'.join(member.parts)!r} -> {member.link!r} is not to a file of it")


def _judge_name(member: _Member, kinds: dict[Parts, str], folded: dict[str, Parts]) -> None:
    """A name given once (folders aside), and not one name with another on a case-insensitive file system."""
    name = "/".join(member.parts)
    earlier = kinds.get(member.parts)
    if earlier is not None and not (earlier == member.kind == "dir"):
        raise _refuse(f"{name!r} appears twice; which one wins differs between unpackers")
    kinds[member.parts] = member.kind
    key = name.casefold()
    if folded.setdefault(key, member.parts) != member.parts:
        raise _refuse(f"{name!r} and {'/'.join(folded[key])!r} are one name on Windows and macOS")


def _judge_place(member: _Member, links: Mapping[Parts, str]) -> None:
    """Not below a link (it would be written through it), and a link that stays inside the tree."""
    name = "/".join(member.parts)
    for depth in range(1, len(member.parts)):
        if member.parts[:depth] in links:
            raise _refuse(f"{name!r} lies below the link {'/'.join(member.parts[:depth])!r}")
    if member.kind == "symlink":
        link_parts(member.link)  # the text itself: not absolute, no drive, no backslash
        if resolve_member(member.parts, links) is None:
            raise _refuse(f"the link {name!r} -> {member.link!r} resolves outside the tree")


def _inside(path: Path, root: Path) -> bool:
    real = os.path.realpath(path)
    return real == str(root) or real.startswith(str(root) + os.sep)


def _parent(root: Path, parts: Parts) -> Path:
    """The member's folder, made if missing, after proving it resolves inside the tree."""
    parent = root.joinpath(*parts[:-1])
    parent.mkdir(parents=True, exist_ok=True)
    if not _inside(parent, root):
        msg = f"{'/'.join(parts)!r} would be written outside the tree"
        raise ArchiveMemberError(msg)
    return parent


def _write_file(root: Path, member: _Member, source: IO[bytes], budget: list[int]) -> None:
    """``budget``: [bytes still allowed, the bound] (the archive's headers may understate the sizes)."""
    target = _parent(root, member.parts) / member.parts[-1]
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(target, flags, 0o777 if member.executable else 0o666)  # the umask applies
    with os.fdopen(fd, "wb") as out:
        while chunk := source.read(_CHUNK):
            budget[0] -= len(chunk)
            if budget[0] < 0:  # the headers understated the sizes
                msg = f"it unpacks to more than {budget[1] >> 20} MiB"
                raise ArchiveMemberError(msg)
            out.write(chunk)


def _make_link(root: Path, member: _Member) -> None:
    target = _parent(root, member.parts) / member.parts[-1]
    source = target.parent / member.link
    try:
        target.symlink_to(member.link, target_is_directory=source.is_dir())
    except OSError:
        # Windows without symlink rights: a copy (setup.py replaces these trees on win32 anyway)
        if not _inside(source, root):
            msg = f"the link {'/'.join(member.parts)!r} resolves outside the tree"
            raise ArchiveMemberError(msg) from None
        if source.is_dir():
            shutil.copytree(source, target, symlinks=True)
        elif source.is_file():
            shutil.copyfile(source, target)


def _write(root: Path, members: list[_Member], max_bytes: int) -> None:
    budget = [max_bytes, max_bytes]
    for member in members:
        if member.kind == "dir":
            _parent(root, (*member.parts, "x"))
        elif member.kind == "file":
            assert member.open is not None  # noqa: S101 - every file member has an opener
            handle = member.open()
            if handle is None:
                continue
            with handle:
                _write_file(root, member, handle, budget)
    for member in members:
        if member.kind == "hardlink":  # a copy: the two names need not stay one file
            with root.joinpath(*member.link.split("/")).open("rb") as handle:
                _write_file(root, _Member(member.parts, "file"), handle, budget)
    # links last, so no file is ever written through one; git archives keep DeepSpeed's
    # directory links (deepspeed/ops/op_builder -> ../../op_builder)
    for member in sorted((m for m in members if m.kind == "symlink"), key=lambda m: len(m.parts)):
        _make_link(root, member)
    for member in members:
        if member.kind == "symlink" and not _inside(root.joinpath(*member.parts), root):
            msg = f"the link {'/'.join(member.parts)!r} -> {member.link!r} resolves outside the tree"
            raise ArchiveMemberError(msg)


@contextmanager
def _open_members(archive: Path, max_bytes: int) -> Iterator[list[_Member]]:
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            yield _bounded(_zip_members(zf))
    else:  # every member header judged before tarfile reads it (a 2 GiB long name from 300 KB of xz)
        with open_tar(archive, max_bytes=max_bytes, max_members=2 * MAX_MEMBERS) as tar:
            yield _bounded(_tar_members(tar))


def _bounded(members: Iterator[_Member]) -> list[_Member]:
    found = list(itertools.islice(members, MAX_MEMBERS + 1))
    if len(found) > MAX_MEMBERS:
        raise _refuse(f"more than {MAX_MEMBERS} members")
    return found


def extract_archive(
    archive: Path, dest: Path, *, max_bytes: int = MAX_UNPACKED_BYTES, what: str = "a DeepSpeed source"
) -> None:
    """Unpack a ``.tar.gz``/``.tar.xz``/``.tar``/``.zip`` archive into ``dest``, dropping the top folder.

    ``dest`` is replaced whole once the archive is unpacked; ``SourceError`` (and ``dest``
    untouched, nothing left beside it) when any member could land outside it, or the members
    add up to more than ``max_bytes``. ``what`` the archive should be, for the error's hint.
    """
    dest = dest.absolute()
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        with staging_dir(dest.parent, dest.name) as staging, _open_members(archive, max_bytes) as members:
            _judge(members, max_bytes)
            _write(Path(os.path.realpath(staging)), members, max_bytes)
            replace_dir(dest, staging)
    except ArchiveMemberError as exc:
        raise _fail(archive, str(exc), what) from None
    except (tarfile.TarError, zipfile.BadZipFile, zlib.error, lzma.LZMAError, struct.error, OSError, EOFError) as exc:
        raise SourceError(f"cannot unpack {archive.name}: {exc}", hint="delete it from the cache and retry") from None
    except (ValueError, NotImplementedError, RuntimeError) as exc:  # zip: an unknown compression, encryption
        raise SourceError(f"cannot unpack {archive.name}: {exc}", hint="delete it from the cache and retry") from None
