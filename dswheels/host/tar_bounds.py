"""A tar archive whose member headers are judged before ``tarfile`` reads them.

``tarfile`` reads a GNU long name or link (``L``/``K``) and a PAX header (``x``/``g``) whole,
as one ``read(size)`` of the size the header states, before it hands the member to anyone:
a 300 KB ``.tar.xz`` whose first header states a 2 GiB long name took 2 GiB of memory before
any check of dswheels ran. Sparse maps (old GNU ``S`` members, PAX ``GNU.sparse.*``) are read
block after block for as long as the archive says more follow. Here every member's header is
judged where ``tarfile`` dispatches it (``TarInfo._proc_member``, the one place every header
passes, from Python 3.8 to 3.14), before that read:

- a header member (``L``, ``K``, ``x``, ``g``, Solaris ``X``) states at most
  :data:`MAX_HEADER_BYTES`, and all of them together at most :data:`MAX_HEADER_TOTAL`;
- no sparse member of either kind (no source or NVIDIA archive has one);
- at most ``max_members`` headers, and the sizes the members state add up to at most
  ``max_bytes`` (checked as each is read, so a stream is never decompressed past the budget).

A refusal is :class:`~dswheels.kernel.archive.ArchiveMemberError`, raised through ``tarfile``
(which would take a ``HeaderError`` after the first member for the end of the archive).
"""

from __future__ import annotations

import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar, NoReturn

from dswheels.kernel.archive import ArchiveMemberError

__all__ = ["MAX_HEADER_BYTES", "MAX_HEADER_TOTAL", "open_tar"]

MAX_HEADER_BYTES = 64 * 1024  # a PAX header of a real archive holds a path, times and ids: hundreds of bytes
MAX_HEADER_TOTAL = 64 * 1024**2  # all of them: DeepSpeed's sdist has ~1,600 members, cuBLAS's archive a few hundred
_HEADERS = frozenset(
    {tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE}
)


def _refuse(why: str) -> NoReturn:
    raise ArchiveMemberError(why)


class _Budget:
    """What one archive has stated so far."""

    def __init__(self, *, max_bytes: int, max_members: int) -> None:
        self.max_bytes = max_bytes
        self.max_members = max_members
        self.headers = 0  # header members' bytes
        self.members = 0  # headers read, of every kind
        self.data = 0  # bytes the members state

    def take(self, info: tarfile.TarInfo) -> None:
        self.members += 1
        if self.members > self.max_members:
            _refuse(f"more than {self.max_members:,} member headers")
        if info.type == tarfile.GNUTYPE_SPARSE:
            _refuse(f"{info.name!r} is a sparse member; a source archive holds files, folders and links")
        if info.type in _HEADERS:
            if info.size > MAX_HEADER_BYTES:
                _refuse(f"a member header (type {info.type!r}) of {info.size:,} bytes, more than {MAX_HEADER_BYTES:,}")
            self.headers += info.size
            if self.headers > MAX_HEADER_TOTAL:
                _refuse(f"its member headers add up to more than {MAX_HEADER_TOTAL >> 20} MiB")
            return
        self.data += info.size
        if self.data > self.max_bytes:
            _refuse(f"it unpacks to more than {self.max_bytes >> 20} MiB")


class _JudgedTarInfo(tarfile.TarInfo):
    budget: ClassVar[_Budget]

    def _proc_member(self, tar: tarfile.TarFile) -> tarfile.TarInfo:
        self.budget.take(self)
        proc = tarfile.TarInfo._proc_member  # type: ignore[attr-defined]  # noqa: SLF001 - the one dispatch
        result: tarfile.TarInfo = proc(self, tar)
        return result

    # PAX sparse maps, read from the data blocks until a newline or a count is met
    def _proc_gnusparse_00(self, *_args: object) -> NoReturn:
        _refuse(f"{self.name!r} is a sparse member (PAX GNU.sparse)")

    _proc_gnusparse_01 = _proc_gnusparse_00
    _proc_gnusparse_10 = _proc_gnusparse_00


@contextmanager
def open_tar(path: Path, *, max_bytes: int, max_members: int) -> Iterator[tarfile.TarFile]:
    """``path`` (tar, gzip, bzip2 or xz) opened for reading with every member header judged first
    (see the module docstring); ``ArchiveMemberError`` from the open or the iteration when one is refused."""

    class _Info(_JudgedTarInfo):
        budget = _Budget(max_bytes=max_bytes, max_members=max_members)

    # "r:*" tries each compression in turn, each from the start: each try gets a fresh budget
    opened = None
    for mode in ("r:", "r:gz", "r:bz2", "r:xz"):
        _Info.budget = _Budget(max_bytes=max_bytes, max_members=max_members)
        try:
            opened = tarfile.open(path, mode, tarinfo=_Info)  # noqa: SIM115 - closed below, by the with
        except (tarfile.ReadError, tarfile.CompressionError):
            continue
        break
    if opened is None:
        msg = f"{path.name} is not a tar archive dswheels reads (plain, gzip, bzip2 or xz)"
        raise tarfile.ReadError(msg)
    with opened as tar:
        yield tar
