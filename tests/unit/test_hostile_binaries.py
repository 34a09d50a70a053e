"""The binary readers on files whose shape is valid and whose links are hostile.

Random bytes rarely make a chain of records: 200,000 random mutations of real ELF and PE files
did not find the quadratic version walk, one crafted file did. These files are built from
their parts (tests/support/binaries.py) with links drawn to overlap, point back, point at
themselves or count more than the file holds, and records repeated (the shape that makes a
walk revisit them). The contract, for ELF version records, PE imports and fatbins alike: a
result or the reader's typed error (``malformed``), each record read at most once, so what a
file yields, and the time it takes, are bounded by its size. ``nox -s fuzz`` runs the
properties with 50 times the examples.
"""

from __future__ import annotations

import struct
import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dswheels.kernel.binaries.extension import BinaryError, read_extension
from dswheels.kernel.binaries.fatbin import FatbinError, gpu_code
from dswheels.kernel.binaries.linux_runtime import ElfError, version_defs, version_needs
from dswheels.kernel.binaries.pe import PeError, read_pe
from tests.fuzz.targets import binary, seed_binaries
from tests.support.binaries import (
    SHT_GNU_VERDEF,
    SHT_GNU_VERNEED,
    SHT_STRTAB,
    ElfSection,
    elf,
    fatbin,
    pe,
    quadratic_verneed,
)
from tests.support.fuzz import examples

PROPERTY = settings(max_examples=examples(300), deadline=None)


@dataclass(frozen=True)
class Built:
    """A built file and what it was built from (hypothesis prints the recipe, not kilobytes of bytes)."""

    data: bytes = field(repr=False)
    recipe: str
    size: int = 0  # the size of the structure under test, where it matters


# names at 1, 11, 23, 38; the tail is unterminated and longer than any soname or version name
STRINGS = b"\0libc.so.6\0GLIBC_2.2.5\0libstdc++.so.6\0GLIBCXX_3.4.30\0" + b"N" * 300
_NAMES = st.sampled_from([1, 11, 23, 38, 0, len(STRINGS) - 10, len(STRINGS) + 5, 2**32 - 1])
# relative links: 0 ends a chain (or, for vn_aux/vd_aux, points at the record itself), less than a
# record overlaps it, a record's size follows it, 2**32 - 1 runs off the file
_LINKS = st.sampled_from([16, 16, 16, 0, 1, 4, 8, 12, 20, 24, 32, 48, 2**32 - 1]) | st.integers(0, 96)
_COUNTS = st.sampled_from([1, 2, 3, 0xFFFF, 0])
_VERNEED = struct.Struct("<HHIII")
_VERDEF = struct.Struct("<HHHHIII")


def _repeated(draw: st.DrawFn, record: st.SearchStrategy[bytes]) -> bytes:
    """A few drawn records repeated: the shape of a chain that walks over the same records again."""
    pattern = draw(st.lists(record, min_size=1, max_size=6))
    body = b"".join(pattern * draw(st.integers(1, 12)))
    if draw(st.booleans()):
        body += draw(record)[:12] + bytes(4)  # a last record whose link is 0: every chain that reaches it ends
    return body[: max(1, len(body) - draw(st.sampled_from([0, 0, 1, 7, 15])))]


def _version_file(draw: st.DrawFn, sh_type: int, body: bytes) -> Built:
    """An ELF whose version section (index 1, at offset 64) holds ``body``, its strings at index 2;
    the header's link, entry count and size drawn too, and sometimes a second section of the type
    over the same bytes."""
    records = len(body) // 8
    info = draw(st.sampled_from([records, 1, 2, 2**32 - 1]) | st.integers(0, 64))
    size = draw(st.sampled_from([None, None, None, len(body) + 8, 2**40]))
    link = draw(st.sampled_from([2, 2, 2, 1, 99]))
    sections = [
        ElfSection(b".gnu.version", sh_type, body, link=link, info=info, size=size),
        ElfSection(b".dynstr", SHT_STRTAB, STRINGS),
    ]
    if draw(st.integers(0, 9)) == 0:
        sections.append(ElfSection(b".gnu.version.again", sh_type, b"", link=2, info=info, offset=64, size=len(body)))
    recipe = f"body={body.hex()} info={info} size={size} link={link} sections={len(sections)}"
    return Built(elf(sections), recipe, len(body) if size is None else size)


@st.composite
def verneed_files(draw: st.DrawFn) -> Built:
    """A ``.gnu.version_r`` of 16-byte records, each as readable as a Verneed (vn_cnt, vn_file,
    vn_aux, vn_next) as it is as a Vernaux (its vn_aux is then vna_name, its vn_next vna_next)."""
    record = st.builds(
        _VERNEED.pack,
        st.integers(0, 2),
        _COUNTS,
        _NAMES,
        _LINKS | _NAMES,
        _LINKS,
    )
    return _version_file(draw, SHT_GNU_VERNEED, _repeated(draw, record))


@st.composite
def verdef_files(draw: st.DrawFn) -> Built:
    """A ``.gnu.version_d`` of 20-byte Verdefs with 8-byte Verdaux records (name, next) between them."""
    verdef = st.builds(
        lambda flags, cnt, aux, nxt: _VERDEF.pack(1, flags, 1, cnt, 0, aux, nxt),
        st.sampled_from([0, 1]),
        _COUNTS,
        _LINKS,
        _LINKS,
    )
    verdaux = st.builds(lambda name, nxt: struct.pack("<II", name, nxt), _NAMES, _LINKS)
    return _version_file(draw, SHT_GNU_VERDEF, _repeated(draw, st.one_of(verdef, verdaux)))


@PROPERTY
@given(verneed_files())
def test_version_needs_read_each_record_once(case: Built) -> None:
    try:
        needs = version_needs(case.data)
    except ElfError:
        return
    assert needs is not None
    names = [name for versions in needs.values() for name in versions]
    # every name comes from a record of its own: at most one per 16 bytes of the section
    assert len(names) <= case.size // 16
    assert all(len(name) <= 255 for name in [*needs, *names])


@PROPERTY
@given(verdef_files())
def test_version_defs_read_each_record_once(case: Built) -> None:
    try:
        names = version_defs(case.data)
    except ElfError:
        return
    assert names is not None
    assert len(names) <= case.size // 20  # one name per Verdef, and Verdefs do not overlap
    assert all(len(name) <= 255 for name in names)


def test_the_issues_overlapping_version_records_are_refused_at_once() -> None:
    """64 KiB of records that each read as a library with 0xffff versions chained 16 bytes apart: the
    walk visited ~n^2/2 of them (8.4 million names, 4 s; 1 MiB: MemoryError). Now: malformed."""
    data = quadratic_verneed(64 * 1024)
    start = time.monotonic()
    with pytest.raises(ElfError, match=r"\.gnu\.version_r is malformed: the entry at 0x\w+ overlaps a record"):
        version_needs(data)
    with pytest.raises(BinaryError, match=r"x\.so: \.gnu\.version_r is malformed"):
        read_extension("x.so", data)
    assert time.monotonic() - start < 5


def _needs(records: list[tuple[int, ...]], *, info: int, size: int | None = None) -> bytes:
    """An ELF whose .gnu.version_r is ``records`` (Verneed-shaped tuples, 16 bytes each) in order."""
    body = b"".join(_VERNEED.pack(*r) for r in records)
    return elf(
        [
            ElfSection(b".gnu.version_r", SHT_GNU_VERNEED, body, link=2, info=info, size=size),
            ElfSection(b".dynstr", SHT_STRTAB, STRINGS),
        ]
    )


def _aux(name: int, nxt: int) -> tuple[int, ...]:
    """A Vernaux (hash 0, flags 0, other 2) as the Verneed-shaped tuple of the same 16 bytes."""
    return (0, 0, 2 << 16, name, nxt)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        # a library whose version records start at itself (vn_aux = 0)
        (_needs([(1, 1, 1, 0, 0)], info=1), "the version record at 0x40 overlaps"),
        # the next library lies inside the first one's version records (vn_next = 16)
        (_needs([(1, 1, 1, 16, 16), _aux(11, 0)], info=2), "the entry at 0x50 overlaps"),
        # a version record whose vna_next points into itself
        (_needs([(1, 2, 1, 16, 0), _aux(11, 4), _aux(11, 0)], info=1), "the version record at 0x54 overlaps"),
        # a vn_aux that would point back were it signed (2**32 - 16): offsets are unsigned, it runs off
        (
            _needs([(1, 1, 1, 32, 16), (1, 1, 23, 2**32 - 16, 0), _aux(11, 0)], info=2),
            "runs past its section",
        ),
        # the second library's records are the first's (both vn_aux land on the same record)
        (_needs([(1, 1, 1, 32, 16), (1, 1, 23, 16, 0), _aux(11, 0)], info=2), "the version record at 0x60 overlaps"),
        # more versions than the section holds
        (_needs([(1, 0xFFFF, 1, 16, 0), _aux(11, 16)], info=1), "version record runs past its section"),
        # a section larger than the file
        (_needs([(1, 1, 1, 16, 0), _aux(11, 0)], info=1, size=2**40), "points outside the file"),
        # a name longer than any soname (the table's unterminated tail)
        (_needs([(1, 1, len(STRINGS) - 300, 16, 0), _aux(11, 0)], info=1), "longer than 255 bytes"),
    ],
)
def test_hostile_version_needs_are_malformed(data: bytes, words: str) -> None:
    with pytest.raises(ElfError, match=words):
        version_needs(data)


def test_sound_chains_still_read_and_a_huge_entry_count_only_bounds_them() -> None:
    sound = [(1, 2, 1, 16, 48), _aux(11, 16), _aux(11, 0), (1, 1, 23, 16, 0), _aux(38, 0)]
    expected = {"libc.so.6": ("GLIBC_2.2.5", "GLIBC_2.2.5"), "libstdc++.so.6": ("GLIBCXX_3.4.30",)}
    assert version_needs(_needs(sound, info=2)) == expected
    assert version_needs(_needs(sound, info=2**32 - 1)) == expected  # the chain's own end stops it


def test_a_second_version_section_over_the_same_bytes_is_malformed() -> None:
    body = b"".join(_VERNEED.pack(*r) for r in [(1, 1, 1, 16, 0), _aux(11, 0)])
    data = elf(
        [
            ElfSection(b".gnu.version_r", SHT_GNU_VERNEED, body, link=2, info=1),
            ElfSection(b".dynstr", SHT_STRTAB, STRINGS),
            ElfSection(b".gnu.version_r2", SHT_GNU_VERNEED, b"", link=2, info=1, offset=64, size=len(body)),
        ]
    )
    with pytest.raises(ElfError, match=r"2 sections of its type \(an object has one\)"):
        version_needs(data)


def _defs(body: bytes, info: int) -> bytes:
    return elf(
        [
            ElfSection(b".gnu.version_d", SHT_GNU_VERDEF, body, link=2, info=info),
            ElfSection(b".dynstr", SHT_STRTAB, STRINGS),
        ]
    )


def test_verdefs_may_share_a_name_record_as_real_libraries_do() -> None:
    """libjansson.so.4 (Debian 12): the BASE verdef and its one version verdef both name the same
    Verdaux. That is no overlap of records read as chain links: it reads as readelf shows it."""
    body = _VERDEF.pack(1, 1, 1, 1, 0, 40, 20) + _VERDEF.pack(1, 0, 2, 1, 0, 20, 0) + struct.pack("<II", 1, 0)
    assert version_defs(_defs(body, info=2)) == ("libc.so.6",)


def test_verdefs_that_overlap_are_malformed() -> None:
    body = _VERDEF.pack(1, 0, 1, 1, 0, 20, 4) + bytes(20) + struct.pack("<II", 1, 0)  # vd_next 4: inside itself
    with pytest.raises(ElfError, match=r"\.gnu\.version_d is malformed: the entry at 0x44 overlaps"):
        version_defs(_defs(body, info=2))


# --- PE: the import directory's RVAs ---------------------------------------------------------------

_DESCRIPTOR = struct.Struct("<IIIII")


def _first_section_offset(image_sections: list[tuple[int, int, int, int]], rva: int, header_size: int) -> int:
    """The resolution the reader promises, the slow way: the first section in table order that holds the RVA."""
    for vaddr, extent, raw_offset, raw_size in image_sections:
        if vaddr <= rva < vaddr + extent:
            if rva - vaddr >= raw_size:
                raise PeError("uninitialised")
            return raw_offset + rva - vaddr
    if rva < header_size:
        return rva
    raise PeError("in no section")


def _imports_the_slow_way(data: bytes, import_rva: int) -> tuple[str, ...]:
    image = read_pe(data)
    assert image is not None
    if import_rva == 0:  # no import directory
        return ()
    table = [(s.virtual_address, max(s.virtual_size, s.raw_size), s.raw_offset, s.raw_size) for s in image.sections]
    header_size = struct.unpack_from("<I", data, 0x40 + 24 + 60)[0]
    at = _first_section_offset(table, import_rva, header_size)
    names: list[str] = []
    while True:
        if at + _DESCRIPTOR.size > len(data) or len(names) >= 4096:
            raise PeError("past the end")
        fields = _DESCRIPTOR.unpack_from(data, at)
        if not any(fields):
            return tuple(names)
        offset = _first_section_offset(table, fields[3], header_size)
        if not 0 <= offset < len(data):
            raise PeError("outside")
        end = data.find(b"\0", offset, offset + 512)
        if end < 0:
            raise PeError("unterminated")
        names.append(data[offset:end].decode("ascii", "replace"))
        at += _DESCRIPTOR.size


@st.composite
def pe_files(draw: st.DrawFn) -> Built:
    """Sections whose virtual ranges overlap (or not) in any table order, an import directory in one
    of them whose descriptors name DLLs by RVAs into any section, the header, the directory itself
    or nowhere."""
    count = draw(st.integers(1, 6))
    layout = []
    for _ in range(count):
        vaddr = draw(st.sampled_from([0x1000, 0x1000, 0x1800, 0x2000, 0x3000, 0]) | st.integers(0, 0x4000))
        vsize = draw(st.sampled_from([0x1000, 0x800, 0x200, 0, 0x10000]))
        raw = draw(st.sampled_from([0x400, 0x400, 0x200, 0]))
        layout.append((vaddr, vsize, raw))
    home = draw(st.integers(0, count - 1))  # the section whose raw data holds the directory
    targets = [v + draw(st.sampled_from([0x100, 0x180, 0x300, 0x10])) for v, _size, _raw in layout]
    targets += [0x80, 0x40 + 4, 2**31, 2**32 - 1]  # the header, the PE signature, nowhere
    sections = []
    for index, (vaddr, vsize, raw) in enumerate(layout):
        body = bytearray(raw)
        if raw >= 0x200:
            name = f"dll{index}.dll".encode()
            for at in (0x100, 0x180):
                body[at : at + len(name) + 1] = name + b"\0"
        if index == home and raw:
            names = draw(st.lists(st.sampled_from(targets) | st.just(layout[home][0]), max_size=8))
            table = b"".join(_DESCRIPTOR.pack(0, 0, 0, rva, 0) for rva in names)
            if draw(st.booleans()):
                table += bytes(_DESCRIPTOR.size)  # the terminating descriptor (without it: whatever follows)
            body[: len(table)] = table[:raw]
        sections.append((vaddr, vsize, bytes(body)))
    import_rva = draw(st.sampled_from([layout[home][0], layout[home][0] + 4, 0x80]))
    return Built(pe(sections=sections, import_rva=import_rva), f"layout={layout} home={home}", import_rva)


@PROPERTY
@given(pe_files())
def test_pe_imports_resolve_as_the_first_section_that_holds_them(case: Built) -> None:
    data, import_rva = case.data, case.size
    try:
        image = read_pe(data)
    except PeError:
        image = None
    try:
        slow = _imports_the_slow_way(data, import_rva)
    except PeError:
        slow = None
    if image is None or slow is None:
        assert image is None
        assert slow is None
        return
    assert image.imports == slow


def test_many_sections_and_many_imports_cost_no_more_than_their_count() -> None:
    """30,000 sections and 4,095 imports that each resolve into the last section: one loop over the
    sections per import was 123 million steps; a lookup by address is a few per import."""
    dlls = [f"d{i}.dll".encode() for i in range(4095)]
    table_rva = 0x100000
    names_rva = table_rva + (len(dlls) + 1) * _DESCRIPTOR.size
    rvas = [names_rva + sum(len(d) + 1 for d in dlls[:i]) for i in range(len(dlls))]
    last = b"".join(_DESCRIPTOR.pack(0, 0, 0, rva, 0) for rva in rvas) + bytes(_DESCRIPTOR.size)
    last += b"".join(d + b"\0" for d in dlls)
    sections = [(0x1000 + i * 0x10, 0x10, b"") for i in range(30_000)] + [(table_rva, len(last), last)]
    data = pe(sections=sections, import_rva=table_rva)
    start = time.monotonic()
    image = read_pe(data)
    assert time.monotonic() - start < 5
    assert image is not None
    assert len(image.imports) == len(dlls)
    assert image.imports[-1] == "d4094.dll"


def test_a_section_count_larger_than_the_file_is_an_error() -> None:
    with pytest.raises(PeError, match=r"the section table \(65535 sections\) runs past the end"):
        read_pe(pe(sections=[(0x1000, 0x200, bytes(0x200))], count=0xFFFF))


# --- fatbins -----------------------------------------------------------------------------------------

_ARCHS = st.sampled_from([75, 80, 90, 120])
_ENTRY = st.tuples(
    st.sampled_from([1, 2, 3]),
    _ARCHS,
    st.sampled_from([0x50, 0x50, 0x40, 0x20, 0, 1, 0x10, 0x1F, 2**32 - 1]),
    st.sampled_from([0, 8, 64, 2**64 - 1]),
)
_CONTAINER = st.tuples(
    st.sampled_from([16, 16, 0, 8, 64, 0xFFFF]),
    st.sampled_from([-1, -1, 0, 0x30, 2**64 - 1]),
    st.lists(_ENTRY, max_size=6),
)


@PROPERTY
@given(st.lists(_CONTAINER, min_size=1, max_size=4), st.booleans())
def test_fatbins_give_their_archs_or_are_malformed(
    containers: list[tuple[int, int, list[tuple[int, int, int, int]]]], windows: bool
) -> None:
    section = fatbin(containers)
    if windows:
        layout = [(0x1000, 0x200, bytes(0x200)), (0x2000, len(section), section)]
        data = pe(sections=layout, names=[".text", ".nv_fatb"])
    else:
        data = elf([ElfSection(b".nv_fatbin", 1, section)])
    drawn = {arch for _h, _f, entries in containers for _k, arch, _eh, _p in entries}
    try:
        code = read_extension("x.pyd" if windows else "x.so", data).gpu
    except BinaryError as exc:
        refused = str(exc)
    else:
        assert code is not None
        assert set(code.sass) | set(code.ptx) <= drawn
        return
    assert "malformed fatbin" in refused


def test_entries_that_overlap_are_a_malformed_fatbin() -> None:
    """An entry header of 1 byte: each next "entry" starts one byte on, inside the last one."""
    data = elf([ElfSection(b".nv_fatbin", 1, fatbin([(16, -1, [(2, 80, 1, 0), (2, 90, 0x50, 0)])]))])
    with pytest.raises(FatbinError, match=r"malformed fatbin: the entry at 0x10 .* header is 1 bytes"):
        gpu_code(data)
    sound = elf([ElfSection(b".nv_fatbin", 1, fatbin([(16, -1, [(2, 80, 0x50, 0), (1, 90, 0x50, 8)])]))])
    code = gpu_code(sound)
    assert code is not None
    assert (code.sass, code.ptx) == ((80,), (90,))


def test_finding_the_fatbin_section_does_not_read_every_section_name() -> None:
    """2,000 section headers whose names are the suffixes of one 128 KiB name: reading each name
    out held 128 MB; the fatbin's section is found by comparing ten bytes per header."""
    long_name = b"A" * (128 * 1024)
    sections = [ElfSection(long_name, 1, b"")]
    sections += [ElfSection(b"", 1, b"", name_at=1 + i * 64) for i in range(2000)]
    sections.append(ElfSection(b".nv_fatbin", 1, fatbin([(16, -1, [(2, 80, 0x50, 0)])])))
    data = elf(sections)
    tracemalloc.start()
    try:
        code = gpu_code(data)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert code is not None
    assert code.sass == (80,)
    assert peak < 4 * 1024**2


def test_the_fuzz_target_reads_its_structure_aware_seeds(tmp_path: Path) -> None:
    """``nox -s fuzz`` starts atheris from these seeds (real files and built hostile ones): each is
    read or refused by the target, never a traceback."""
    seed_binaries(tmp_path)
    seeds = sorted(tmp_path.iterdir())
    assert {p.name for p in seeds} >= {"libfixture.so", "fixture.pyd", "overlapping-verneed.so", "fatbin.pyd"}
    for seed in seeds:
        binary(seed.read_bytes())
    with pytest.raises(BinaryError, match="malformed"):
        read_extension("x.so", (tmp_path / "overlapping-verneed.so").read_bytes())
