"""Which GPU code an extension carries: SASS per architecture and PTX, read from its fatbin.

A CUDA extension keeps its device code in the ``.nv_fatbin`` section of an ELF file (Linux)
or the ``.nv_fatb`` section of a PE file (a Windows ``.pyd``): one or more fatbin
containers (magic ``0xBA55ED50``), each a list of entries of kind 1 (PTX) or 2 (ELF = SASS)
with the target architecture in the entry header. This reads the headers only (payloads may
be compressed), so it works without NVIDIA's ``cuobjdump``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from dswheels.kernel.binaries.pe import read_pe

__all__ = [
    "FatbinEntry",
    "FatbinError",
    "GpuCode",
    "GpuCodeJudgement",
    "arch_number",
    "fatbin_section",
    "gpu_code",
    "judge_gpu_code",
]

_FATBIN_MAGIC = 0xBA55ED50
_KIND = {1: "ptx", 2: "sass"}
_ENTRY_FIELDS = 0x20  # an entry header's fields end with the arch at 0x1C
_SHDR = struct.Struct("<IIQQQQ")  # the fields of an Elf64_Shdr read here (it is 64 bytes)


class FatbinError(ValueError):
    """A device-code section whose fatbin entries cannot be read as nvcc writes them."""


@dataclass(frozen=True, slots=True)
class FatbinEntry:
    kind: str  # "sass" | "ptx" | "other"
    arch: int  # 75 for sm_75 / compute_75


@dataclass(frozen=True, slots=True)
class GpuCode:
    sass: tuple[int, ...]
    ptx: tuple[int, ...]

    def describe(self) -> str:
        sass = ", ".join(f"sm_{a}" for a in self.sass) or "none"
        ptx = ", ".join(f"compute_{a}" for a in self.ptx) or "none"
        return f"SASS {sass}; PTX {ptx}"


@dataclass(frozen=True, slots=True)
class GpuCodeJudgement:
    """One extension's GPU code against the plan's arch list: what it has that was not planned,
    and what its op's own builder said it would have and it lacks."""

    code: GpuCode
    unplanned_sass: tuple[int, ...]
    unplanned_ptx: tuple[int, ...]
    missing_sass: tuple[int, ...]

    @property
    def ok(self) -> bool:
        return bool(self.code.sass) and not (self.unplanned_sass or self.unplanned_ptx or self.missing_sass)

    def problems(self) -> list[str]:
        out = [] if self.code.sass else ["no SASS at all"]
        if self.unplanned_sass:
            out.append(f"SASS for unplanned sm_{', sm_'.join(map(str, self.unplanned_sass))}")
        if self.unplanned_ptx:
            out.append(f"PTX for unplanned compute_{', compute_'.join(map(str, self.unplanned_ptx))}")
        if self.missing_sass:
            out.append(self.missing_text)
        return out

    @property
    def missing_text(self) -> str:
        """The missing SASS in words ("" when none is missing)."""
        if not self.missing_sass:
            return ""
        return f"no SASS for sm_{', sm_'.join(map(str, self.missing_sass))}, which its builder asked nvcc for"


def judge_gpu_code(
    code: GpuCode, arch_list: Sequence[str], expected_sass: frozenset[int] = frozenset()
) -> GpuCodeJudgement:
    """SASS only for the planned archs (and some), PTX only where ``+PTX``, and every arch in
    ``expected_sass`` (the archs the op's builder gives nvcc when built alone; empty: not known).

    >>> j = judge_gpu_code(GpuCode(sass=(75, 90), ptx=(80,)), ("7.5", "8.0+PTX"), frozenset({75, 80}))
    >>> j.ok, j.problems()
    (False, ['SASS for unplanned sm_90', 'no SASS for sm_80, which its builder asked nvcc for'])
    """
    sass_ok = {arch_number(t) for t in arch_list}
    ptx_ok = {arch_number(t) for t in arch_list if t.endswith("+PTX")}
    return GpuCodeJudgement(
        code=code,
        unplanned_sass=tuple(sorted(set(code.sass) - sass_ok)),
        unplanned_ptx=tuple(sorted(set(code.ptx) - ptx_ok)),
        missing_sass=tuple(sorted(expected_sass - set(code.sass))),
    )


def arch_number(token: str) -> int:
    """``7.5`` -> 75, ``12.0+PTX`` -> 120, ``9.0a`` -> 90.

    >>> arch_number("12.0+PTX"), arch_number("9.0a")
    (120, 90)
    """
    base = token.removesuffix("+PTX").rstrip("af")
    major, _, minor = base.partition(".")
    return int(major) * 10 + int(minor or 0)


def _elf_section(data: bytes, wanted: bytes) -> tuple[int, int] | None:
    """(offset, size) of the section named ``wanted`` in a little-endian ELF64 file (the last of
    that name); None for anything else. Each header's name is compared where it lies, not read
    out: 65,535 headers naming one long unterminated string cost no more than their count."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shoff == 0 or shentsize < _SHDR.size or shoff + shnum * shentsize > len(data) or shstrndx >= shnum:
        return None
    strtab = _SHDR.unpack_from(data, shoff + shstrndx * shentsize)[4]
    key = wanted + b"\0"
    found = None
    for i in range(shnum):
        name, _type, _flags, _addr, offset, size = _SHDR.unpack_from(data, shoff + i * shentsize)
        start = strtab + name
        if data[start : start + len(key)] == key:
            found = (offset, size)
    return found


def _entries(data: bytes, start: int, stop: int) -> Iterator[FatbinEntry]:
    """Every entry of every fatbin container in ``data[start:stop]`` (a section, read in place: a
    large one is not copied). Containers are found by their magic (8-byte aligned); within one,
    each entry's header says how far the next is. An entry header shorter than its own fields
    would make entries overlap (each byte read as the next header): that is a malformed fatbin,
    refused, so the walk is linear in the section's size."""
    pos = start
    while pos + 16 <= stop:
        magic, _version, header_size, fat_size = struct.unpack_from("<IHHQ", data, pos)
        if magic != _FATBIN_MAGIC:
            pos += 8  # containers are 8-byte aligned
            continue
        entry = pos + header_size
        end = min(entry + fat_size, stop)
        while entry + _ENTRY_FIELDS <= end:
            kind, _v, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
            arch = struct.unpack_from("<I", data, entry + 0x1C)[0]
            yield FatbinEntry(kind=_KIND.get(kind, "other"), arch=arch)
            if entry_header == 0:
                break
            if entry_header < _ENTRY_FIELDS:
                raise FatbinError(
                    f"malformed fatbin: the entry at {entry - start:#x} of its section says its header is "
                    f"{entry_header} bytes, less than the {_ENTRY_FIELDS} its fields take (entries would overlap)"
                )
            entry += entry_header + payload
        pos = max(end, pos + 16)


def _fatbin_span(data: bytes) -> tuple[int, int] | None:
    """Where the device-code section lies in ``data``: (start, stop), within the file."""
    section = _elf_section(data, b".nv_fatbin")
    if section is not None:
        offset, size = section
    else:
        image = read_pe(data)
        found = image.section(".nv_fatb") if image is not None else None
        if found is None:
            return None
        offset, size = found.raw_offset, found.file_size
    start = min(offset, len(data))
    return start, min(start + size, len(data))


def fatbin_section(data: bytes) -> bytes | None:
    """The device-code section of an ELF (``.nv_fatbin``) or PE (``.nv_fatb``) extension; None without one.

    Raises :class:`dswheels.kernel.binaries.pe.PeError` for a PE file that cannot be read.
    """
    span = _fatbin_span(data)
    return data[span[0] : span[1]] if span is not None else None


def gpu_code(data: bytes) -> GpuCode | None:
    """The SASS and PTX architectures in an extension's fatbin section; None when it has none.

    Raises :class:`FatbinError` for entries that overlap, :class:`~dswheels.kernel.binaries.pe.PeError`
    for a PE file that cannot be read.

    >>> gpu_code(b"not an elf") is None
    True
    """
    span = _fatbin_span(data)
    if span is None:
        return None
    sass: set[int] = set()
    ptx: set[int] = set()
    for entry in _entries(data, *span):  # sets, not a list: a section of many entries keeps only its archs
        if entry.kind == "sass":
            sass.add(entry.arch)
        elif entry.kind == "ptx":
            ptx.add(entry.arch)
    return GpuCode(sass=tuple(sorted(sass)), ptx=tuple(sorted(ptx)))
