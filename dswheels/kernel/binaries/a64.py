"""Prove that AArch64 code stays within a CPU baseline, from the machine code itself (no disassembler).

A64 instructions are one 32-bit little-endian word each, and every architecture feature after
Armv8.0 has its own encodings (the Arm Architecture Reference Manual, "A64 Instruction Set
Encoding", DDI 0487): an instruction of a feature is recognised by a mask and a value over its
word, exactly as the manual's encoding tables lay it out. :data:`FEATURES` lists the features a
compiler reaches for when it is told a newer CPU (``-mcpu=native`` on a Grace or a GitHub arm64
runner, ``-march=armv9-a``): the whole SVE/SVE2 and SME encoding spaces, and the Advanced SIMD,
floating-point, load/store and branch instructions of Armv8.3-8.6. A baseline (compat.yml
``cpu_baselines``, e.g. ``armv8.2-a``) names the features it does not have; any instruction of
one of them in an extension's executable sections fails the scan.

Not judged: what a baseline has (Armv8.0-8.2 with Advanced SIMD, the LSE atomics of 8.1, which
libgcc's outline atomics call after their own run-time check), and features no compiler emits
without intrinsics (the cryptographic extensions). Instructions in the hint space (``paciasp``,
``autiasp``, ``bti``) are no-ops on older CPUs and pass. There is no run-time dispatch on
AArch64 in DeepSpeed's CPU code (0.19.8 picks NEON or SVE at build time, ``simd_width()``), so,
unlike the x86 scan, nothing excuses an instruction: a faster level is a variant of its own.

Executable sections only; GCC keeps literal data in ``.rodata``, so every word read is an
instruction.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from dswheels.kernel.binaries.isa import IsaReport

__all__ = ["EM_AARCH64", "FEATURES", "A64Error", "Encoding", "elf_machine", "scan_a64", "scan_words"]

EM_AARCH64 = 183  # the ELF e_machine of AArch64 (the ELF for the Arm 64-bit Architecture ABI)
EM_X86_64 = 62
_MACHINES = MappingProxyType({EM_AARCH64: "aarch64", EM_X86_64: "x86_64"})
_SHF_EXECINSTR = 0x4
_SHT_NOBITS = 8
_SHDR = struct.Struct("<IIQQQQIIQQ")  # Elf64_Shdr


class A64Error(ValueError):
    """Bytes that claim to be an AArch64 ELF file but whose sections cannot be read."""


@dataclass(frozen=True, slots=True)
class Encoding:
    """One encoding class: an instruction word ``w`` is of it when ``w & mask == value``, unless it is of one
    of the ``unless`` classes (an older instruction the manual places inside it)."""

    mask: int
    value: int
    example: str  # an instruction of the class, as GNU as 2.40 spells it (the tests assemble it)
    unless: tuple[tuple[int, int], ...] = ()

    def matches(self, word: int) -> bool:
        return word & self.mask == self.value and not any(word & m == v for m, v in self.unless)


def _enc(mask: int, value: int, example: str, *, unless: tuple[tuple[int, int], ...] = ()) -> Encoding:
    return Encoding(mask, value, example, unless)


# fcvt between half and single/double precision is Armv8.0 (ftype 11, opcode 0001xx)
_FCVT_FROM_HALF = (0xFF3E7C00, 0x1E224000)


# Feature -> its encoding classes. Names are Arm's (FEAT_*); the comment says which Arm version makes it
# mandatory. Every class is checked against GNU as 2.40 by tests/unit/test_a64_isa.py.
FEATURES: Mapping[str, tuple[Encoding, ...]] = MappingProxyType(
    {
        # the whole SVE encoding space (op0 = 0010): SVE (optional from 8.2) and SVE2 (Armv9.0)
        "sve": (_enc(0x1E000000, 0x04000000, "ld1w {z0.s}, p0/z, [x0]"),),
        # SME (optional from 9.2): op0 = 0000 with bit 31 set, and smstart/smstop (msr svcr*)
        "sme": (
            _enc(0x9E000000, 0x80000000, "zero {za}"),
            _enc(0xFFFFF0FF, 0xD503407F, "smstart"),
        ),
        # Advanced SIMD dot product (optional from 8.2, mandatory 8.4): sdot/udot, vector and by element
        "dotprod": (
            _enc(0x9FE0FC00, 0x0E809400, "sdot v0.4s, v1.16b, v2.16b"),
            _enc(0x9FC0F400, 0x0F80E000, "udot v0.4s, v1.16b, v2.4b[1]"),
        ),
        # half-precision arithmetic (optional from 8.2): scalar data processing with ftype 11 (not fcvt,
        # which converts from and to half in 8.0), the vector and scalar SIMD FP16 groups, by element, fmov
        "fp16": (
            _enc(0x5FC00000, 0x1EC00000, "fadd h0, h1, h2", unless=(_FCVT_FROM_HALF,)),
            _enc(0x9F60C400, 0x0E400400, "fadd v0.8h, v1.8h, v2.8h"),
            _enc(0x9F7E0C00, 0x0E780800, "fabs v0.4h, v1.4h"),
            _enc(0xDF60C400, 0x5E400400, "fabd h0, h1, h2"),
            _enc(0xDF7E0C00, 0x5E780800, "fcmeq h0, h1, #0.0"),
            _enc(0x9FC03400, 0x0F001000, "fmla v0.8h, v1.8h, v2.h[1]"),
            _enc(0xDFC03400, 0x5F001000, "fmul h0, h1, v2.h[1]"),
            _enc(0x9FF8FC00, 0x0F00FC00, "fmov v0.8h, #1.0"),
        ),
        # fmlal/fmlsl (FEAT_FHM, optional from 8.2, mandatory 8.4)
        "fp16fml": (
            _enc(0xBFA0FC00, 0x0E20EC00, "fmlal v0.4s, v1.4h, v2.4h"),
            _enc(0xBFA0FC00, 0x2E20CC00, "fmlal2 v0.4s, v1.4h, v2.4h"),
            _enc(0xBFC0B400, 0x0F800000, "fmlal v0.4s, v1.4h, v2.h[1]"),
            _enc(0xBFC0B400, 0x2F808000, "fmlal2 v0.4s, v1.4h, v2.h[1]"),
        ),
        # load-acquire RCpc (8.3): ldapr; and its unscaled forms ldapur/stlur (FEAT_LRCPC2, 8.4)
        "rcpc": (
            _enc(0x3FFFFC00, 0x38BFC000, "ldapr w0, [x1]"),
            _enc(0x3F200C00, 0x19000000, "ldapur w0, [x1, #4]"),
        ),
        # pointer authentication (8.3) outside the hint space: retaa/braa/blraa, pacia/autia..., ldraa, pacga
        "pauth": (
            _enc(0xFE00F800, 0xD6000800, "retaa"),
            _enc(0xFFFF0000, 0xDAC10000, "pacia x0, x1"),
            _enc(0xFF200400, 0xF8200400, "ldraa x0, [x1]"),
            _enc(0xFFE0FC00, 0x9AC03000, "pacga x0, x1, x2"),
        ),
        "jscvt": (_enc(0xFFFFFC00, 0x1E7E0000, "fjcvtzs w0, d1"),),  # 8.3
        # complex-number fcmla/fcadd (8.3): vector and by element
        "fcma": (
            _enc(0xBF20E400, 0x2E00C400, "fcmla v0.4s, v1.4s, v2.4s, #90"),
            _enc(0xBF20EC00, 0x2E00E400, "fcadd v0.4s, v1.4s, v2.4s, #90"),
            _enc(0xBF009400, 0x2F001000, "fcmla v0.8h, v1.8h, v2.h[1], #90"),
        ),
        # flag manipulation (8.4): cfinv/xaflag/axflag, rmif, setf8/setf16
        "flagm": (
            _enc(0xFFFFFF9F, 0xD500401F, "cfinv"),
            _enc(0xFFE07C10, 0xBA000400, "rmif x0, #3, #2"),
            _enc(0xFFFFBC1F, 0x3A00080D, "setf8 w0"),
        ),
        # frint32z/frint32x/frint64z/frint64x (8.5): scalar and vector
        "frintts": (
            _enc(0xFFBE7C00, 0x1E284000, "frint32z s0, s1"),
            _enc(0x9FBFEC00, 0x0E21E800, "frint32x v0.4s, v1.4s"),
        ),
        # bfloat16 (8.6): bfcvt/bfcvtn, bfdot, bfmmla, bfmlalb/t (vector and by element)
        "bf16": (
            _enc(0xFFFFFC00, 0x1E634000, "bfcvt h0, s1"),
            _enc(0xBFFFFC00, 0x0EA16800, "bfcvtn v0.4h, v1.4s"),
            _enc(0xBFE0FC00, 0x2E40FC00, "bfdot v0.4s, v1.8h, v2.8h"),
            _enc(0xFFE0FC00, 0x6E40EC00, "bfmmla v0.4s, v1.8h, v2.8h"),
            _enc(0xBFE0FC00, 0x2EC0FC00, "bfmlalb v0.4s, v1.8h, v2.8h"),
            _enc(0xBFC0F400, 0x0F40F000, "bfdot v0.4s, v1.8h, v2.2h[1]"),
            _enc(0xBFC0F400, 0x0FC0F000, "bfmlalt v0.4s, v1.8h, v2.h[1]"),
        ),
        # int8 matrix multiply (8.6): smmla/ummla/usmmla, usdot/sudot
        "i8mm": (
            _enc(0xDFE0FC00, 0x4E80A400, "smmla v0.4s, v1.16b, v2.16b"),
            _enc(0xFFE0FC00, 0x4E80AC00, "usmmla v0.4s, v1.16b, v2.16b"),
            _enc(0xBFE0FC00, 0x0E809C00, "usdot v0.4s, v1.16b, v2.16b"),
            _enc(0xBFC0F400, 0x0F80F000, "usdot v0.4s, v1.16b, v2.4b[1]"),
            _enc(0xBFC0F400, 0x0F00F000, "sudot v0.4s, v1.16b, v2.4b[1]"),
        ),
    }
)

# what each feature is, for a report: "SVE/SVE2 instructions (Armv9.0; optional from 8.2)"
_WORDS = MappingProxyType(
    {
        "sve": "SVE/SVE2 (Armv9.0; optional from 8.2)",
        "sme": "SME (optional from Armv9.2)",
        "dotprod": "dot product (Armv8.4; optional from 8.2)",
        "fp16": "half-precision arithmetic (optional from Armv8.2)",
        "fp16fml": "fmlal/fmlsl (Armv8.4; optional from 8.2)",
        "rcpc": "load-acquire RCpc (Armv8.3, 8.4)",
        "pauth": "pointer authentication outside the hint space (Armv8.3)",
        "jscvt": "fjcvtzs (Armv8.3)",
        "fcma": "complex-number arithmetic (Armv8.3)",
        "flagm": "flag manipulation (Armv8.4)",
        "frintts": "frint32/frint64 (Armv8.5)",
        "bf16": "BFloat16 (Armv8.6)",
        "i8mm": "int8 matrix multiply (Armv8.6)",
    }
)


def _table(features: Sequence[str]) -> list[tuple[tuple[str, Encoding], ...]]:
    """The encodings of ``features`` indexed by an instruction's top byte: each word is tried only
    against the classes its top byte can belong to (a large extension has millions of words)."""
    table: list[list[tuple[str, Encoding]]] = [[] for _ in range(256)]
    for name in features:
        for enc in FEATURES[name]:
            top_mask, top_value = enc.mask >> 24, enc.value >> 24
            for byte in range(256):
                if byte & top_mask == top_value:
                    table[byte].append((name, enc))
    return [tuple(entries) for entries in table]


def _unknown(features: Sequence[str]) -> list[str]:
    return [f for f in features if f not in FEATURES]


def scan_words(sections: Sequence[bytes | memoryview], forbidden: Sequence[str], *, max_examples: int = 5) -> IsaReport:
    """Every 32-bit word of ``sections`` (executable code) against the ``forbidden`` features.

    >>> words = struct.pack("<3I", 0x8B020020, 0xA540A000, 0xB8BFC020)  # add; ld1w (SVE); ldapr (RCpc)
    >>> r = scan_words([words], ["sve", "rcpc"])
    >>> r.instructions, r.violations, r.kinds
    (3, 2, ('SVE/SVE2 (Armv9.0; optional from 8.2)', 'load-acquire RCpc (Armv8.3, 8.4)'))
    """
    if unknown := _unknown(forbidden):
        msg = f"unknown AArch64 features {unknown} (known: {', '.join(FEATURES)})"
        raise ValueError(msg)
    table = _table(forbidden)
    count = bad = 0
    kinds: set[str] = set()
    examples: list[str] = []
    for section in sections:
        usable = len(section) - len(section) % 4
        for (word,) in struct.iter_unpack("<I", section[:usable]):
            count += 1
            for name, enc in table[word >> 24]:
                if enc.matches(word):
                    bad += 1
                    kinds.add(_WORDS[name])
                    if len(examples) < max_examples:
                        examples.append(f"{word:08x} ({name}, like `{enc.example}`)")
                    break
    return IsaReport(instructions=count, violations=bad, examples=tuple(examples), kinds=tuple(sorted(kinds)))


def _headers(data: bytes) -> Iterator[tuple[int, ...]]:
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    if shnum and (shentsize < _SHDR.size or shoff + shnum * shentsize > len(data)):
        raise A64Error("section headers run past the end of the file")
    for i in range(shnum):
        yield _SHDR.unpack_from(data, shoff + i * shentsize)


def elf_machine(data: bytes) -> str | None:
    """The CPU a little-endian ELF64 file is for (``aarch64``, ``x86_64``, ``em<N>`` for others); None: not one.

    >>> elf_machine(b"\\x7fELF\\x02\\x01" + bytes(12) + struct.pack("<H", 183) + bytes(44)), elf_machine(b"MZ")
    ('aarch64', None)
    """
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    machine = struct.unpack_from("<H", data, 0x12)[0]
    return _MACHINES.get(machine, f"em{machine}")


def code_sections(data: bytes) -> list[memoryview]:
    """The executable sections of an AArch64 ELF64 file (``.text``, ``.init``, ``.plt``, ...), as views."""
    if elf_machine(data) != "aarch64":
        raise A64Error("not an AArch64 ELF64 little-endian file")
    view = memoryview(data)
    found = []
    for _name, sh_type, flags, _addr, offset, size, *_rest in _headers(data):
        if not flags & _SHF_EXECINSTR or sh_type == _SHT_NOBITS or size == 0:
            continue
        if offset + size > len(data):
            raise A64Error(f"an executable section at {offset:#x} runs past the end of the file")
        found.append(view[offset : offset + size])
    return found


def scan_a64(data: bytes, forbidden: Sequence[str], *, max_examples: int = 5) -> IsaReport:
    """An AArch64 extension's executable sections against the ``forbidden`` features (:func:`scan_words`)."""
    return scan_words(code_sections(data), forbidden, max_examples=max_examples)
