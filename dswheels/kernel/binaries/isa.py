"""Prove that compiled code stays within a CPU baseline, from its disassembly.

``objdump -d`` (AT&T syntax) of every extension is scanned for instructions a CPU at the
baseline does not have. The baseline's facts come from compat.yml (``forbidden_registers``);
from them follow the instruction encodings that must be absent too:

* ``ymm`` forbidden (no AVX): no VEX-encoded instruction at all, even on ``xmm`` registers
  (``-march=native`` on an AVX host turns plain scalar float code into ``vaddss %xmm..``);
* ``zmm`` forbidden (no AVX-512): no opmask registers ``%k0``-``%k7`` either (AVX-512VL
  instructions on ``ymm``/``xmm`` use them), and, where objdump shows the encoding, no
  EVEX-encoded instruction at all (first opcode byte ``62``, invalid outside EVEX in 64-bit mode):
  AVX-512VL code on ``ymm`` without a mask is EVEX too;
* ``ymm`` forbidden: no VEX-encoded instruction either (``c4``/``c5``: BMI1/2's ``andn``, ``shlx``,
  ... work on general registers), nor ``lzcnt`` or ``movbe`` (x86-64-v3; a CPU without ``lzcnt``
  runs it as ``bsr`` and answers differently, without a fault);
* at every level: no instruction of an extension above x86-64-v4 (:data:`ABOVE_V4`: AVX512-BF16,
  VNNI, AVX512-FP16, AMX, VBMI, ...), which ``-march=native`` on a newer CPU emits and no level
  dswheels builds for has: an ISA variant compiled for x86-64-v4 is judged too.

Some DeepSpeed code is *meant* to go above the baseline: the CPU ``deepspeed_shm_comm`` op
compiles its reduce kernels with ``__attribute__((target("avx512bw")))`` and, from 0.19.8 on,
picks them at run time with ``__builtin_cpu_supports``. An extension that detects CPU
features itself (it contains ``cpuid``) is reported as *dispatching at run time*: its
above-baseline code is legitimate only on CPUs that have it. Without that detection any
above-baseline instruction fails the check (0.14.2-0.19.7 run those kernels unconditionally).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ABOVE_V4", "IsaReport", "IsaScan", "scan_disassembly"]

# "  addr:\t<bytes>\t<mnemonic> <operands>", or without bytes (--no-show-raw-insn) "  addr:\t<mnemonic> ..."; a long
# instruction's further bytes continue on a line of their own ("  addr:\t<bytes>")
_ADDR_RE = re.compile(r"^\s*[0-9a-f]+:$")
_BYTES_RE = re.compile(r"^(?:[0-9a-f]{2} ?)+\s*$")
# a pseudo-prefix objdump writes before the mnemonic ("{vex} vpdpbusd": the VEX form of an EVEX instruction) is skipped
_TEXT_RE = re.compile(r"^(?:\{[a-z0-9]+\}\s*)*(?P<insn>[a-z][a-z0-9.]*)(?P<ops>.*)$")
_LEGACY_PREFIXES = frozenset({"66", "67", "f2", "f3", "2e", "3e", "26", "36", "64", "65", "f0"})
# mnemonic prefixes of the x86 extensions above x86-64-v4 (Intel SDM vol. 2; binutils' opcode tables)
ABOVE_V4: dict[str, tuple[str, ...]] = {
    "AVX512-BF16": ("vcvtne2ps2bf16", "vcvtneps2bf16", "vdpbf16ps"),
    "VNNI (AVX512-VNNI, AVX-VNNI)": ("vpdpbusd", "vpdpwssd", "vpdpbssd", "vpdpbsud", "vpdpbuud"),
    "AVX512-IFMA": ("vpmadd52",),
    "AVX512-VBMI": ("vpermb", "vpermi2b", "vpermt2b", "vpmultishiftqb"),
    "AVX512-VBMI2": ("vpcompressb", "vpcompressw", "vpexpandb", "vpexpandw", "vpshld", "vpshrd"),
    "AVX512-BITALG/VPOPCNTDQ": ("vpopcnt", "vpshufbitqmb"),
    "AVX512-VP2INTERSECT": ("vp2intersect",),
    "GFNI": ("gf2p8", "vgf2p8"),
    "AMX": ("ldtilecfg", "sttilecfg", "tileloadd", "tilestored", "tilezero", "tilerelease", "tdpb", "tdpfp16"),
    "AVX512-ER/PF/4FMAPS/4VNNIW (Xeon Phi)": ("vexp2p", "vrcp28", "vrsqrt28", "vgatherpf", "vscatterpf", "v4f", "vp4d"),
}
# AVX512-FP16: arithmetic on packed/scalar halves (F16C's vcvtph2ps/vcvtps2ph are x86-64-v3)
_FP16_RE = re.compile(
    r"^v(?:(?:add|sub|mul|div|sqrt|max|min|rcp|rsqrt|getexp|getmant|scalef|reduce|rndscale|fpclass|cmp)[ps]h"
    r"|f(?:n?m(?:add|sub)|maddsub|msubadd)[0-9]{3}[ps]h|fc?(?:madd|mul)c[ps]h|movsh|movw"
    r"|cvt(?:ph2(?:psx|pd|u?dq|u?w|u?qq)|sh2s[sd]|(?!ps2ph$)\w+2phx?|\w+2sh))$",
    re.ASCII,
)
_V3_LEGACY = ("lzcnt", "movbe")  # x86-64-v3 instructions outside VEX
# VEX/EVEX instructions are the AVX ones: every mnemonic starts with "v" and works on vector
# registers (VMX instructions like vmcall take no vector register, so they do not match).
_VECTOR_REG_RE = re.compile(r"%[xyz]mm[0-9]+")
_MASK_RE = re.compile(r"%k[0-7]\b")


@dataclass(frozen=True, slots=True)
class IsaReport:
    instructions: int  # instructions scanned
    violations: int  # instructions above the baseline
    examples: tuple[str, ...]  # a few offending lines (stripped)
    kinds: tuple[str, ...]  # what was found, e.g. "ymm registers (AVX)"
    runtime_dispatch: bool = False  # the code detects CPU features itself (cpuid)

    @property
    def ok(self) -> bool:
        """Nothing above the baseline, or only code selected at run time by CPU feature detection."""
        return self.violations == 0 or self.runtime_dispatch

    def describe(self, baseline: str) -> str:
        if self.violations == 0:
            return f"{self.instructions} instructions, none above {baseline}"
        what = f"{self.violations} of {self.instructions} instructions above {baseline} ({', '.join(self.kinds)})"
        if self.runtime_dispatch:
            return f"{what}, in code it selects at run time by CPU feature detection (cpuid)"
        return f"{what} and no CPU feature detection: it faults on older CPUs, e.g. {self.examples[0]}"


class IsaScan:
    """The scan of one disassembly, fed line by line (:meth:`feed`) as objdump prints it: the
    text of a large extension (millions of instructions) is never held, only the counts."""

    def __init__(self, forbidden_registers: Sequence[str], *, max_examples: int = 5) -> None:
        forbidden = set(forbidden_registers)
        self._forbidden = forbidden
        self._no_avx = "ymm" in forbidden
        self._no_avx512 = "zmm" in forbidden
        self._max_examples = max_examples
        self._count = 0
        self._bad = 0
        self._dispatch = False
        self._examples: list[str] = []
        self._kinds: set[str] = set()

    def feed(self, line: str) -> None:
        parts = line.split("\t")
        if len(parts) < 2 or not _ADDR_RE.match(parts[0]):
            return
        raw = parts[1] if len(parts) > 2 else ""
        if len(parts) == 2 and _BYTES_RE.match(parts[1]):
            return  # the further bytes of a long instruction
        match = _TEXT_RE.match(parts[-1].strip())
        if match is None:
            return
        self._count += 1
        insn, ops = match.group("insn"), match.group("ops")
        if insn == "cpuid":
            self._dispatch = True
        found = self._judge(insn, ops, _opcode_byte(raw))
        if found:
            self._bad += 1
            self._kinds.add(found)
            if len(self._examples) < self._max_examples:
                self._examples.append(" ".join(line.split()))

    def _judge(self, insn: str, ops: str, opcode: str) -> str:
        """What makes one instruction above the level ("" when nothing does), the highest level's reason first:
        the kinds found then say which level the code needs (``dswheels inspect``)."""
        above = next((name for name, starts in ABOVE_V4.items() if insn.startswith(starts)), None)
        if above is None and _FP16_RE.match(insn):
            above = "AVX512-FP16"
        if above:
            return f"instructions above x86-64-v4 ({above})"
        if self._no_avx512 and ("%zmm" in ops or _MASK_RE.search(ops)):
            return "AVX-512 instructions (zmm or opmask registers)"
        if self._no_avx512 and opcode == "62":
            return "AVX-512 instructions (EVEX-encoded)"
        if self._no_avx and insn.startswith("v") and _VECTOR_REG_RE.search(ops):
            return "AVX (VEX-encoded) instructions"
        if self._no_avx and (opcode in {"c4", "c5"} or insn in _V3_LEGACY):
            return "x86-64-v3 instructions (BMI, LZCNT, MOVBE)"
        if any(f"%{reg}" in ops for reg in self._forbidden):
            return "registers " + ", ".join(sorted(r for r in self._forbidden if f"%{r}" in ops))
        return ""

    def report(self) -> IsaReport:
        return IsaReport(
            instructions=self._count,
            violations=self._bad,
            examples=tuple(self._examples),
            kinds=tuple(sorted(self._kinds)),
            runtime_dispatch=self._dispatch,
        )


def _opcode_byte(raw: str) -> str:
    """The first byte after the legacy prefixes of an instruction's bytes ("" when objdump did not show them).

    >>> _opcode_byte("62 f1 7c 48 58 c1 "), _opcode_byte("66 0f 58 c1"), _opcode_byte("")
    ('62', '0f', '')
    """
    for byte in raw.split():
        if byte not in _LEGACY_PREFIXES:
            return byte
    return ""


def scan_disassembly(text: str, forbidden_registers: Sequence[str], *, max_examples: int = 5) -> IsaReport:
    """Count instructions above the baseline in ``objdump -d`` output.

    >>> dis = "  10:\\t0f 58 c1             \\taddps  %xmm1,%xmm0\\n  13:\\tc5 f4 58 c2  \\tvaddps %ymm2,%ymm1,%ymm0\\n"
    >>> r = scan_disassembly(dis, ["ymm", "zmm"])
    >>> r.instructions, r.violations, r.kinds
    (2, 1, ('AVX (VEX-encoded) instructions',))
    """
    scan = IsaScan(forbidden_registers, max_examples=max_examples)
    for line in text.splitlines():
        scan.feed(line)
    return scan.report()
