"""Tar member headers that would take memory before any check runs (issue 30, point 4).

``tarfile`` reads a GNU long name or link and a PAX header whole, at the size its header
states, and sparse maps for as long as the archive says more follow. The archives here are
written header by header (``tests/support`` builds no such thing); :func:`extract_archive`
must refuse each with ``SourceError`` before that read, and the property draws sequences of
headers of every kind and size and checks that nothing but a tree inside the destination or a
``SourceError`` comes out.
"""

from __future__ import annotations

import gzip
import io
import lzma
import os
import subprocess
import sys
import tarfile
import textwrap
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dswheels.host import tar_bounds
from dswheels.host.downloads import extract_archive
from dswheels.host.tar_bounds import MAX_HEADER_BYTES, open_tar
from dswheels.kernel.archive import ArchiveMemberError
from dswheels.kernel.errors import SourceError
from tests.conftest import ROOT
from tests.support.fuzz import examples

BLOCK = 512


def header(name: str, kind: bytes, size: int, *, link: str = "") -> bytes:
    """One 512-byte ustar header stating ``size`` (the data is the caller's)."""
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = size
    info.linkname = link
    info.mode = 0o644
    return info.tobuf(tarfile.USTAR_FORMAT, "utf-8", "surrogateescape")


def padded(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % BLOCK)


def pax_records(**records: str) -> bytes:
    out = b""
    for key, value in records.items():
        body = f" {key.replace('_', '.')}={value}\n".encode()
        length = len(body) + len(str(len(body)))
        length = len(body) + len(str(length))
        out += str(length).encode() + body
    return out


def member(name: str, data: bytes = b"x") -> bytes:
    return header(name, tarfile.REGTYPE, len(data)) + padded(data)


def end() -> bytes:
    return b"\0" * (2 * BLOCK)


def write(path: Path, raw: bytes) -> Path:
    suffix = path.name.rpartition(".tar")[2]
    if suffix == ".gz":
        raw = gzip.compress(raw, 1)
    elif suffix == ".xz":
        raw = lzma.compress(raw, preset=0)
    path.write_bytes(raw)
    return path


def refused(tmp_path: Path, raw: bytes, kind: str = "tar", max_bytes: int = 2 << 30) -> str:
    archive = write(tmp_path / f"a.{kind}", raw)
    with pytest.raises(SourceError) as caught:
        extract_archive(archive, tmp_path / "dest", max_bytes=max_bytes)
    assert not (tmp_path / "dest").exists()
    return caught.value.message


@pytest.mark.parametrize("kind", ["tar", "tar.gz", "tar.xz"])
@pytest.mark.parametrize(
    "type_",
    [tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE],
)
def test_a_header_member_larger_than_the_bound_is_refused_before_it_is_read(
    tmp_path: Path, kind: str, type_: bytes
) -> None:
    """The data is there (a reader that takes it would read 64 KiB + 1) and after it a harmless member."""
    big = MAX_HEADER_BYTES + 1
    raw = header("././@LongLink", type_, big) + padded(b"a" * big) + member("top/x") + end()
    assert "member header" in refused(tmp_path, raw, kind)


def test_a_header_stating_2_gib_with_nothing_behind_it_is_refused_by_what_it_states(tmp_path: Path) -> None:
    raw = header("././@LongLink", tarfile.GNUTYPE_LONGNAME, 2 * 1024**3) + end()
    assert "2,147,483,648 bytes" in refused(tmp_path, raw, "tar.xz")


def test_headers_up_to_the_bound_are_read(tmp_path: Path) -> None:
    """A long name of 4 KiB (PATH_MAX) and a PAX header of the bound's size are ordinary."""
    name = "top/" + ("d" * 200 + "/") * 19 + "f"
    pax = pax_records(path="top/p", comment="c" * (MAX_HEADER_BYTES - 100))
    raw = (
        member("top/a")
        + header("././@LongLink", tarfile.GNUTYPE_LONGNAME, len(name) + 1)
        + padded(name.encode() + b"\0")
        + member(name[:90])
        + header("pax", tarfile.XHDTYPE, len(pax))
        + padded(pax)
        + member("top/b")
        + end()
    )
    archive = write(tmp_path / "a.tar", raw)
    assert len(pax) <= MAX_HEADER_BYTES
    extract_archive(archive, tmp_path / "dest")
    assert (tmp_path / "dest" / name.removeprefix("top/")).is_file()
    assert (tmp_path / "dest" / "p").is_file()


def test_header_members_together_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tar_bounds, "MAX_HEADER_TOTAL", 10 * 1024)
    pax = pax_records(comment="c" * 1000)
    raw = b"".join(header("pax", tarfile.XHDTYPE, len(pax)) + padded(pax) + member(f"top/{i}") for i in range(20))
    assert "member headers add up to more than" in refused(tmp_path, raw + end())


def test_sparse_members_of_either_kind_are_refused(tmp_path: Path) -> None:
    gnu = header("top/s", tarfile.GNUTYPE_SPARSE, 0) + member("top/x") + end()
    (tmp_path / "gnu").mkdir()
    assert "sparse member" in refused(tmp_path / "gnu", gnu)
    pax = pax_records(GNU_sparse_major="1", GNU_sparse_minor="0", GNU_sparse_name="top/s", GNU_sparse_realsize="9")
    raw = header("pax", tarfile.XHDTYPE, len(pax)) + padded(pax) + member("top/s", b"1\n" * 300) + end()
    (tmp_path / "pax").mkdir()
    assert "sparse member" in refused(tmp_path / "pax", raw)


def test_member_headers_and_stated_sizes_are_counted_as_they_are_read(tmp_path: Path) -> None:
    many = b"".join(member(f"top/{i}") for i in range(50)) + end()
    archive = write(tmp_path / "a.tar", many)
    with (
        pytest.raises(ArchiveMemberError, match="more than 10 member headers"),
        open_tar(archive, max_bytes=1 << 20, max_members=10) as tar,
    ):
        list(tar)
    huge = header("top/a", tarfile.REGTYPE, 3 << 20) + end()  # states 3 MiB, holds none of it
    (tmp_path / "b").mkdir()
    assert "unpacks to more than 1 MiB" in refused(tmp_path / "b", huge, max_bytes=1 << 20)


def _xz_with_long_name(path: Path, size: int) -> Path:
    """A ``.tar.xz`` whose first header is a GNU long name of ``size`` bytes of zeros: concatenated xz
    streams (one 16 MiB stream of zeros repeated), so 2 GiB take about 300 KB and no time to write."""
    chunk = 16 * 1024**2
    assert size % chunk == 0
    zeros = lzma.compress(bytes(chunk), preset=0)
    with path.open("wb") as out:
        out.write(lzma.compress(header("././@LongLink", tarfile.GNUTYPE_LONGNAME, size), preset=0))
        for _ in range(size // chunk):
            out.write(zeros)
        out.write(lzma.compress(member("top/x") + end(), preset=0))
    return path


@pytest.mark.skipif(sys.platform == "win32", reason="an address-space limit is POSIX")
def test_the_issues_archive_is_refused_at_once_under_a_memory_limit(tmp_path: Path) -> None:
    """A 300 KB .tar.xz whose first member header is a GNU long name of 2 GiB (the issue's), unpacked in a
    child limited to 2 GiB of address space: refused in seconds, no ``MemoryError``."""
    archive = _xz_with_long_name(tmp_path / "bomb.tar.xz", 2 * 1024**3)
    assert archive.stat().st_size < 400_000
    script = textwrap.dedent(f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, 2 * 1024**3))
        from pathlib import Path
        from dswheels.host.downloads import extract_archive
        from dswheels.kernel.errors import SourceError
        try:
            extract_archive(Path({str(archive)!r}), Path({str(tmp_path / "dest")!r}))
        except SourceError as exc:
            print("refused:", exc.message)
    """)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused:" in done.stdout
    assert "member header" in done.stdout
    assert time.monotonic() - started < 30
    assert not (tmp_path / "dest").exists()


# --- the property: headers of every kind and size, in any order -------------------------------------------------

_TYPES = [
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
    tarfile.GNUTYPE_SPARSE,
    tarfile.REGTYPE,
    tarfile.DIRTYPE,
    tarfile.SYMTYPE,
    b"Z",  # unknown: tarfile takes it for a file
]
_SIZES = [0, 1, 100, MAX_HEADER_BYTES, MAX_HEADER_BYTES + 1, 1 << 30, 8**11 - 1]


@st.composite
def _headers(draw: st.DrawFn) -> tuple[bytes, bool]:
    """A header and its data (whole, cut short or absent); whether it is one over the bound, with its data."""
    type_ = draw(st.sampled_from(_TYPES))
    size = draw(st.sampled_from(_SIZES))
    name = draw(st.sampled_from(["top/a", "top/b/c", "././@LongLink", "top/" + "n" * 90]))
    body = draw(st.sampled_from(["whole", "short", "none", "pax"]))
    data = b""
    if body == "pax":
        data = pax_records(path="top/p", mtime="1.5")
    elif body == "whole" and size <= MAX_HEADER_BYTES + 1:
        data = b"a" * size
    elif body == "short":
        data = b"a" * min(size, 700)
    stated = len(data) if body == "pax" else size
    raw = header(name, type_, stated, link="a" if type_ == tarfile.SYMTYPE else "") + padded(data)
    over = type_ in tar_bounds._HEADERS and stated > MAX_HEADER_BYTES and len(data) == stated
    return raw, over


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kind=st.sampled_from(["tar", "tar.gz", "tar.xz"]),
    headers=st.lists(_headers(), max_size=6),
    ending=st.sampled_from([b"", end(), b"\0" * 100, b"junk"]),
)
def test_any_sequence_of_headers_is_unpacked_inside_or_refused(
    tmp_path_factory: pytest.TempPathFactory, kind: str, headers: Sequence[tuple[bytes, bool]], ending: bytes
) -> None:
    """Whatever the headers state, the memory taken stays small (tarfile never reads what one states
    beyond the bound), and the outcome is a tree inside the destination or a ``SourceError``."""
    root = tmp_path_factory.mktemp("h")
    raw = member("top/first") + b"".join(h for h, _over in headers) + ending
    archive = write(root / f"a.{kind}", raw)
    dest = root / "dest"
    message = ""
    tracemalloc.start()
    try:
        extract_archive(archive, dest, max_bytes=4 << 20)
    except SourceError as exc:
        message = exc.message
    else:
        real = os.path.realpath(dest)
        for path in dest.rglob("*"):
            assert os.path.realpath(path).startswith(real + os.sep)
    finally:
        _now, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < 8 << 20, f"{peak:,} bytes taken"
    if message:
        assert not dest.exists()
    if headers and headers[0][1]:  # the first header after a good member states too much: that is the refusal
        assert "member header" in message
    assert sorted(p.name for p in root.iterdir()) == sorted(["a." + kind, *(["dest"] if dest.exists() else [])])


def test_a_deepspeed_shaped_pax_sdist_is_unaffected(tmp_path: Path) -> None:
    """setuptools writes sdists in the PAX format: every member may carry a PAX header."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for i in range(300):
            data = f"# {i}\n".encode()
            info = tarfile.TarInfo(f"deepspeed-0.19.8/op_builder/b{i}_\u00e9.py")  # non-ASCII: a PAX header each
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    archive = tmp_path / "deepspeed-0.19.8.tar.gz"
    archive.write_bytes(buffer.getvalue())
    extract_archive(archive, tmp_path / "src")
    assert len(list((tmp_path / "src" / "op_builder").iterdir())) == 300
