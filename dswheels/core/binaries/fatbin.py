"""Which GPU code an extension carries: SASS per architecture and PTX, read from its fatbin.

A CUDA extension keeps its device code in the ``.nv_fatbin`` section of an ELF file (Linux)
or the ``.nv_fatb`` section of a PE file (a Windows ``.pyd``): one or more fatbin
containers (magic ``0xBA55ED50``), each a list of entries of kind 1 (PTX) or 2 (ELF = SASS)
with the target architecture in the entry header. This reads the headers only (payloads may
be compressed), so it works without NVIDIA's ``cuobjdump``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from dswheels.core.binaries.pe import read_pe

__all__ = [
    "FatbinEntry",
    "GpuCode",
    "GpuCodeJudgement",
    "arch_number",
    "elf_sections",
    "fatbin_section",
    "gpu_code",
    "judge_gpu_code",
]

_FATBIN_MAGIC = 0xBA55ED50
_KIND = {1: "ptx", 2: "sass"}


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


def elf_sections(data: bytes) -> dict[str, tuple[int, int]]:
    """Section name -> (offset, size) of a little-endian ELF64 file; {} for anything else."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return {}
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shoff == 0 or shnum == 0 or shoff + shnum * shentsize > len(data) or shstrndx >= shnum:
        return {}
    headers = []
    for i in range(shnum):
        name, _type, _flags, _addr, offset, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
        headers.append((name, offset, size))
    strtab = headers[shstrndx][1]
    sections: dict[str, tuple[int, int]] = {}
    for name, offset, size in headers:
        start = strtab + name
        end = data.find(b"\0", start)
        if end < 0:
            continue
        sections[data[start:end].decode("ascii", "replace")] = (offset, size)
    return sections


def _entries(section: bytes) -> list[FatbinEntry]:
    found: list[FatbinEntry] = []
    pos = 0
    while pos + 16 <= len(section):
        magic, _version, header_size, fat_size = struct.unpack_from("<IHHQ", section, pos)
        if magic != _FATBIN_MAGIC:
            pos += 8  # containers are 8-byte aligned
            continue
        entry = pos + header_size
        end = min(entry + fat_size, len(section))
        while entry + 0x20 <= end:
            kind, _v, entry_header, payload = struct.unpack_from("<HHIQ", section, entry)
            arch = struct.unpack_from("<I", section, entry + 0x1C)[0]
            found.append(FatbinEntry(kind=_KIND.get(kind, "other"), arch=arch))
            if entry_header == 0:
                break
            entry += entry_header + payload
        pos = max(end, pos + 16)
    return found


def fatbin_section(data: bytes) -> bytes | None:
    """The device-code section of an ELF (``.nv_fatbin``) or PE (``.nv_fatb``) extension; None without one.

    Raises :class:`dswheels.core.binaries.pe.PeError` for a PE file that cannot be read.
    """
    section = elf_sections(data).get(".nv_fatbin")
    if section is not None:
        offset, size = section
        return data[offset : offset + size]
    image = read_pe(data)
    return image.section_bytes(data, ".nv_fatb") if image is not None else None


def gpu_code(data: bytes) -> GpuCode | None:
    """The SASS and PTX architectures in an extension's fatbin section; None when it has none.

    >>> gpu_code(b"not an elf") is None
    True
    """
    section = fatbin_section(data)
    if section is None:
        return None
    entries = _entries(section)
    return GpuCode(
        sass=tuple(sorted({e.arch for e in entries if e.kind == "sass"})),
        ptx=tuple(sorted({e.arch for e in entries if e.kind == "ptx"})),
    )
