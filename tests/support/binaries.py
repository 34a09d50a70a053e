"""ELF, PE and fatbin files built from their parts, with whatever links a test asks for.

The binary readers (``dswheels.kernel.binaries``) follow offsets a file states: a chain of
version records, import descriptors naming DLLs by RVA, fatbin entries sized by their headers.
Random bytes rarely make such a chain; these builders make files whose *shape* is valid (a real
ELF header and section table, a real PE with sections and an import directory) and whose links
are what the test chose: overlapping, pointing back, pointing at themselves, counting more
than the file holds. The hypothesis strategies in tests/unit/test_hostile_binaries.py draw
those choices.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "SHT_GNU_VERDEF",
    "SHT_GNU_VERNEED",
    "SHT_STRTAB",
    "ElfSection",
    "elf",
    "fatbin",
    "pe",
    "place",
    "quadratic_verneed",
]

SHT_STRTAB = 3
SHT_GNU_VERDEF = 0x6FFFFFFD
SHT_GNU_VERNEED = 0x6FFFFFFE
_SHDR = struct.Struct("<IIQQQQIIQQ")


@dataclass(frozen=True)
class ElfSection:
    name: bytes
    type: int
    data: bytes
    link: int = 0  # a section index of the file: 1 is the first section given
    info: int = 0  # for version sections: how many entries the chain has
    size: int | None = None  # what the header says (None: the data's length); more than the file holds is a lie
    offset: int | None = None  # where the header says the data is (None: where it was put)
    name_at: int | None = None  # the header's name offset into .shstrtab (None: its own name)


def _align(data: bytearray, to: int) -> None:
    data += bytes(-len(data) % to)


def elf(sections: Sequence[ElfSection]) -> bytes:
    """A little-endian ELF64 shared object holding ``sections`` (index 1, 2, ...) and a .shstrtab."""
    names = bytearray(b"\0")
    offsets: list[int] = []
    out = bytearray(64)
    for section in sections:
        _align(out, 8)
        offsets.append(len(out))
        out += section.data
    shstrtab_at = len(out)
    name_at = []
    for section in sections:
        name_at.append(len(names))
        names += section.name + b"\0"
    shstrtab_name = len(names)
    names += b".shstrtab\0"
    out += names
    _align(out, 8)
    shoff = len(out)
    out += bytes(_SHDR.size)  # the null section
    for section, offset, name in zip(sections, offsets, name_at, strict=True):
        size = len(section.data) if section.size is None else section.size
        at = offset if section.offset is None else section.offset
        named = name if section.name_at is None else section.name_at
        out += _SHDR.pack(named, section.type, 2, 0, at, size, section.link, section.info, 8, 0)
    out += _SHDR.pack(shstrtab_name, SHT_STRTAB, 0, 0, shstrtab_at, len(names), 0, 0, 1, 0)
    out[:16] = b"\x7fELF\x02\x01\x01" + bytes(9)
    struct.pack_into("<HHI", out, 16, 3, 62, 1)  # ET_DYN, EM_X86_64, EV_CURRENT
    struct.pack_into("<Q", out, 0x28, shoff)
    struct.pack_into("<HHHHHH", out, 0x34, 64, 56, 0, _SHDR.size, len(sections) + 2, len(sections) + 1)
    return bytes(out)


def place(size: int, records: Sequence[tuple[int, bytes]]) -> bytes:
    """``size`` zero bytes with each record written at its offset (later ones win where they overlap)."""
    out = bytearray(size)
    for offset, record in records:
        out[offset : offset + len(record)] = record[: max(0, size - offset)]
    return bytes(out[:size])


def quadratic_verneed(size: int) -> bytes:
    """The issue's ELF: a ``.gnu.version_r`` of ``size`` bytes whose every 16 bytes read both as a
    Verneed (``cnt=0xffff``, ``vn_aux=vn_next=16``) and as a Vernaux (``vna_next=16``): each
    library's version chain runs over every later record, ~n^2/2 names for n records."""
    strings = b"\0libc.so.6\0GLIBC_2.2.5\0" + bytes(16)
    record = struct.pack("<HHIII", 1, 0xFFFF, 1, 16, 16)  # vna_name (= vn_aux) 16: a name in the table
    last = struct.pack("<HHIII", 1, 0xFFFF, 1, 16, 0)  # vna_next 0: every chain ends here
    count = size // 16
    return elf(
        [
            ElfSection(b".dynstr", SHT_STRTAB, strings),
            ElfSection(b".gnu.version_r", SHT_GNU_VERNEED, record * (count - 1) + last, link=1, info=count - 1),
        ]
    )


def fatbin(containers: Sequence[tuple[int, int, Sequence[tuple[int, int, int, int]]]]) -> bytes:
    """Fatbin containers, each ``(header_size, stated fat_size or -1 for the real one, entries)``;
    an entry is ``(kind, arch, header_size, payload_size)`` followed by that many payload bytes
    (capped at 64 so a stated size may lie)."""
    out = bytearray()
    for header_size, fat_size, entries in containers:
        body = bytearray()
        for kind, arch, entry_header, payload in entries:
            head = bytearray(max(0x20, min(entry_header, 0x50)))
            struct.pack_into("<HHIQ", head, 0, kind, 0x101, entry_header, payload)
            struct.pack_into("<I", head, 0x1C, arch)
            body += head + b"\xab" * min(payload, 64)
        head = bytearray(max(16, min(header_size, 64)))
        struct.pack_into("<IHHQ", head, 0, 0xBA55ED50, 1, header_size, len(body) if fat_size < 0 else fat_size)
        out += head + body
        _align(out, 8)
    return bytes(out)


_COFF = struct.Struct("<HHIIIHH")
_SECTION = struct.Struct("<8sIIII12xI")


def pe(
    *,
    sections: Sequence[tuple[int, int, bytes]],
    import_rva: int = 0,
    delay_rva: int = 0,
    count: int | None = None,
    names: Sequence[str] = (),
) -> bytes:
    """A PE32+ DLL whose sections are ``(virtual address, virtual size, raw bytes)``, raw data laid
    out one after the other from 0x400; the import and delay-load directories at the given RVAs
    (0: none). ``count`` overrides NumberOfSections (to claim more than the table holds); ``names``
    name the first sections (the rest are ``.s<index>``)."""
    out = bytearray(0x40)
    out[:2] = b"MZ"
    struct.pack_into("<I", out, 0x3C, 0x40)
    out += b"PE\0\0"
    opt_size = 112 + 16 * 8
    out += _COFF.pack(0x8664, len(sections) if count is None else count, 0, 0, 0, opt_size, 0x2022)
    opt = bytearray(opt_size)
    struct.pack_into("<H", opt, 0, 0x20B)
    struct.pack_into("<Q", opt, 24, 0x180000000)
    table_end = len(out) + opt_size + _SECTION.size * len(sections)
    raw_at = max(0x400, (table_end + 0x1FF) // 0x200 * 0x200)
    struct.pack_into("<I", opt, 60, raw_at)  # SizeOfHeaders
    struct.pack_into("<I", opt, 108, 16)  # NumberOfRvaAndSizes
    struct.pack_into("<II", opt, 112 + 8 * 1, import_rva, 40)
    struct.pack_into("<II", opt, 112 + 8 * 13, delay_rva, 64)
    out += opt
    raw = bytearray()
    for i, (vaddr, vsize, data) in enumerate(sections):
        offset = raw_at + len(raw)
        name = names[i] if i < len(names) else f".s{i}"
        out += _SECTION.pack(name.encode(), vsize, vaddr, len(data), offset if data else 0, 0x40000040)
        raw += data
    out += bytes(raw_at - len(out))
    return bytes(out + raw)
