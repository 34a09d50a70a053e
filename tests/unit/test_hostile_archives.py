"""Source archives that try to write or link outside the tree: every kind, both path flavours.

Each archive is a real tar, tar.gz or zip written here; :func:`extract_archive` must either
unpack it with everything inside the destination, or refuse it with ``SourceError`` and
leave nothing behind. The property test builds archives from a grammar of hostile member
names and links (and harmless ones) and checks exactly that, whatever the mix.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
import warnings
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dswheels.host.downloads import extract_archive
from dswheels.kernel.errors import SourceError
from tests.support.fuzz import examples

KINDS = ("tar", "tar.gz", "zip")


@dataclass(frozen=True)
class M:
    """One archive member: a file, folder, symlink, hard link or device."""

    name: str
    kind: str = "file"  # file | dir | symlink | hardlink | chardev | fifo
    data: bytes = b"x"
    link: str = ""


def write_archive(path: Path, kind: str, members: Sequence[M]) -> Path:
    if kind == "zip":
        with zipfile.ZipFile(path, "w") as zf, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # duplicate names are the point of some cases
            for m in members:
                zinfo = zipfile.ZipInfo(m.name + ("/" if m.kind == "dir" else ""))
                zinfo.create_system = 3
                mode = {"file": stat.S_IFREG | 0o644, "dir": stat.S_IFDIR | 0o755, "symlink": stat.S_IFLNK | 0o777}
                zinfo.external_attr = mode.get(m.kind, stat.S_IFCHR | 0o644) << 16
                zf.writestr(zinfo, m.link.encode() if m.kind in ("symlink", "hardlink") else m.data)
        return path
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz" if kind == "tar.gz" else "w", format=tarfile.GNU_FORMAT) as tar:
        for m in members:
            info = tarfile.TarInfo(m.name)
            info.type = {
                "file": tarfile.REGTYPE,
                "dir": tarfile.DIRTYPE,
                "symlink": tarfile.SYMTYPE,
                "hardlink": tarfile.LNKTYPE,
                "chardev": tarfile.CHRTYPE,
                "fifo": tarfile.FIFOTYPE,
            }[m.kind]
            info.linkname = m.link
            info.size = len(m.data) if m.kind == "file" else 0
            tar.addfile(info, io.BytesIO(m.data) if m.kind == "file" else None)
    path.write_bytes(buffer.getvalue())
    return path


def _outside_snapshot(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _assert_contained(tmp_path: Path, dest: Path, before: set[str]) -> None:
    """Nothing new beside ``dest``, and every path under it resolves inside it."""
    rel = str(dest.relative_to(tmp_path))
    after = {p for p in _outside_snapshot(tmp_path) if not p.startswith(rel + os.sep) and p != rel}
    assert after == before, f"written outside the tree: {sorted(after - before)}"
    if dest.exists():
        root = os.path.realpath(dest)
        for path in dest.rglob("*"):
            real = os.path.realpath(path)
            assert real == root or real.startswith(root + os.sep), f"{path} resolves to {real}"


def unpack(tmp_path: Path, kind: str, members: Sequence[M]) -> tuple[Path, SourceError | None]:
    archive = write_archive(tmp_path / f"src.{kind}", kind, members)
    (tmp_path / "work").mkdir(exist_ok=True)
    dest = tmp_path / "work" / "src"
    before = _outside_snapshot(tmp_path)
    error = None
    try:
        extract_archive(archive, dest)
    except SourceError as exc:
        error = exc
        assert not dest.exists(), "a refused archive left a half-unpacked tree"
    _assert_contained(tmp_path, dest, before)
    return dest, error


GOOD = [M("top/setup.py", data=b"setup"), M("top/op_builder/builder.py", data=b"b")]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "bad",
    [
        M("top/../escaped"),
        M("/abs/escaped"),
        M("top/..\\..\\escaped"),  # Windows separators
        M("top/C:/escaped"),  # a drive letter
        M("top/C:escaped"),  # drive-relative
        M("\\\\server\\share\\escaped"),  # UNC
        M("top/file.txt:stream"),  # an NTFS stream
        M("top/.. /escaped"),  # '.. ' is '..' on Windows
        M("top/NUL"),  # a Windows device
        M("top/com1.txt"),
        M("top/a\x01b"),  # a control character
    ],
    ids=lambda m: repr(m.name),
)
def test_member_names_that_escape_on_some_os_are_refused(tmp_path: Path, kind: str, bad: M) -> None:
    _dest, error = unpack(tmp_path, kind, [*GOOD, bad])
    assert error is not None
    assert "refusing to unpack" in error.message


@pytest.mark.parametrize("kind", ["tar", "tar.gz", "zip"])
@pytest.mark.parametrize(
    "links",
    [
        [M("top/out", "symlink", link="../..")],
        [M("top/abs", "symlink", link="/etc")],
        [M("top/win", "symlink", link="..\\..\\x")],
        # each link stays inside on its own text; the chain leaves (issue 13)
        [M("top/x", "dir"), M("top/x/l1", "symlink", link=".."), M("top/esc", "symlink", link="x/l1/..")],
        # a chain through a link that is created later
        [M("top/a", "symlink", link="b/.."), M("top/b", "symlink", link="c/.."), M("top/c", "symlink", link="..")],
        # a loop
        [M("top/p", "symlink", link="q"), M("top/q", "symlink", link="p")],
        # a file written below a link would go through it
        [M("top/d", "symlink", link="."), M("top/d/file")],
    ],
    ids=["dotdot", "absolute", "backslash", "chain", "chain-forward", "loop", "through-link"],
)
def test_links_are_judged_by_where_they_resolve(tmp_path: Path, kind: str, links: list[M]) -> None:
    _dest, error = unpack(tmp_path, kind, [*GOOD, *links])
    assert error is not None


@pytest.mark.parametrize("kind", ["tar", "tar.gz"])
@pytest.mark.parametrize(
    "bad",
    [
        [M("top/h", "hardlink", link="top/../../etc/passwd")],
        [M("top/h", "hardlink", link="/etc/passwd")],
        [M("top/h", "hardlink", link="top/missing")],
        [M("top/s", "symlink", link="setup.py"), M("top/h", "hardlink", link="top/s")],
        [M("top/dev", "chardev")],
        [M("top/fifo", "fifo")],
        [M("top/setup.py", data=b"other")],  # a duplicate: which one wins differs between unpackers
        [M("top/SETUP.py")],  # one name on Windows and macOS
    ],
    ids=["hardlink-dotdot", "hardlink-abs", "hardlink-missing", "hardlink-to-link", "device", "fifo", "dup", "case"],
)
def test_hard_links_devices_and_duplicates(tmp_path: Path, kind: str, bad: list[M]) -> None:
    _dest, error = unpack(tmp_path, kind, [*GOOD, *bad])
    assert error is not None


@pytest.mark.parametrize("kind", KINDS)
def test_a_deepspeed_shaped_tree_unpacks_with_its_links(tmp_path: Path, kind: str) -> None:
    members = [
        *GOOD,
        M("top/deepspeed/ops", "dir"),
        M("top/deepspeed/ops/op_builder", "symlink", link="../../op_builder"),
        M("top/bin/ds", data=b"#!/bin/sh\n"),
    ]
    if kind != "zip":
        members.append(M("top/bin/ds_copy", "hardlink", link="top/bin/ds"))
    dest, error = unpack(tmp_path, kind, members)
    assert error is None
    assert (dest / "deepspeed" / "ops" / "op_builder" / "builder.py").read_bytes() == b"b"
    assert (dest / "setup.py").read_bytes() == b"setup"
    if kind != "zip":
        assert (dest / "bin" / "ds_copy").read_bytes() == b"#!/bin/sh\n"


def test_a_previous_tree_is_replaced_whole_and_a_refused_one_leaves_it(tmp_path: Path) -> None:
    dest, error = unpack(tmp_path, "tar.gz", GOOD)
    assert error is None
    (dest / "stale.txt").write_text("from an earlier run")
    extract_archive(write_archive(tmp_path / "again.tar", "tar", GOOD), dest)
    assert not (dest / "stale.txt").exists()
    before = sorted(p.name for p in dest.rglob("*"))
    with pytest.raises(SourceError):
        extract_archive(write_archive(tmp_path / "bad.zip", "zip", [*GOOD, M("top/../x")]), dest)
    assert sorted(p.name for p in dest.rglob("*")) == before


@pytest.mark.parametrize("garbage", [b"", b"not an archive", b"\x1f\x8b\x08\x00" + b"\x00" * 20, b"PK\x03\x04junk"])
def test_garbage_is_a_source_error(tmp_path: Path, garbage: bytes) -> None:
    archive = tmp_path / "src.tar.gz"
    archive.write_bytes(garbage)
    with pytest.raises(SourceError):
        extract_archive(archive, tmp_path / "work" / "src")
    assert not (tmp_path / "work" / "src").exists()


@pytest.mark.parametrize("flag", ["method", "encrypted"])
def test_zip_members_it_cannot_read_are_source_errors(tmp_path: Path, flag: str) -> None:
    """Found by atheris: a compression method zipfile lacks raised NotImplementedError (a traceback)."""
    archive = write_archive(tmp_path / "src.zip", "zip", GOOD)
    data = bytearray(archive.read_bytes())
    for header in (b"PK\x03\x04", b"PK\x01\x02"):  # local header and central directory entry
        at = 0
        while (at := data.find(header, at)) != -1:
            if flag == "method":  # compression method: 99 (AES) is not one zipfile reads
                offset = 8 if header == b"PK\x03\x04" else 10
                data[at + offset : at + offset + 2] = (99).to_bytes(2, "little")
            else:  # general purpose flag bit 0: encrypted
                offset = 6 if header == b"PK\x03\x04" else 8
                data[at + offset] |= 1
            at += 4
    archive.write_bytes(bytes(data))
    with pytest.raises(SourceError):
        extract_archive(archive, tmp_path / "work" / "src")
    assert not (tmp_path / "work" / "src").exists()


def test_truncated_archives_are_source_errors(tmp_path: Path) -> None:
    for kind in KINDS:
        whole = write_archive(tmp_path / f"whole.{kind}", kind, [*GOOD, M("top/big", data=os.urandom(50_000))])
        data = whole.read_bytes()
        for cut in (len(data) // 3, len(data) // 2):
            archive = tmp_path / f"cut.{kind}"
            archive.write_bytes(data[:cut])
            with pytest.raises(SourceError):
                extract_archive(archive, tmp_path / "work" / "src")


# --- the property: any archive from the grammar is unpacked inside, or refused leaving nothing ---

_SEGMENTS = st.sampled_from(
    ["a", "b", "x", "..", ".", "", "C:", "c:x", "a\\..", "..\\..", "NUL", "con.txt", ".. ", "...", "a:b", "\\\\s"]
)
_PATHS = st.lists(_SEGMENTS, min_size=1, max_size=4).map("/".join)
_MEMBERS = st.one_of(
    st.builds(M, name=_PATHS.map(lambda p: "top/" + p)),
    st.builds(M, name=_PATHS, kind=st.just("dir")),
    st.builds(M, name=_PATHS.map(lambda p: "top/" + p), kind=st.just("symlink"), link=_PATHS),
    st.builds(M, name=_PATHS.map(lambda p: "top/" + p), kind=st.just("symlink"), link=st.just("/etc")),
    st.builds(M, name=_PATHS.map(lambda p: "top/" + p), kind=st.just("hardlink"), link=_PATHS.map("top/".__add__)),
)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(KINDS), extra=st.lists(_MEMBERS, max_size=6))
def test_any_archive_stays_inside_or_is_refused(
    tmp_path_factory: pytest.TempPathFactory, kind: str, extra: list[M]
) -> None:
    tmp_path = tmp_path_factory.mktemp("arch")
    if kind == "zip":
        extra = [m for m in extra if m.kind != "hardlink"]
    unpack(tmp_path, kind, [*GOOD, *extra])
