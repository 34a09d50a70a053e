"""Prove that compiled code stays within a CPU baseline, from its disassembly.

``objdump -d`` (AT&T syntax) of every extension is scanned for instructions a CPU at the
baseline does not have. The baseline's facts come from compat.yml (``forbidden_registers``);
from them follow the instruction encodings that must be absent too:

* ``ymm`` forbidden (no AVX): no VEX-encoded instruction at all, even on ``xmm`` registers
  (``-march=native`` on an AVX host turns plain scalar float code into ``vaddss %xmm..``);
* ``zmm`` forbidden (no AVX-512): no opmask registers ``%k0``-``%k7`` either (AVX-512VL
  instructions on ``ymm``/``xmm`` use them).

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

__all__ = ["IsaReport", "IsaScan", "scan_disassembly"]

_INSN_RE = re.compile(r"^\s*[0-9a-f]+:\s+(?:[0-9a-f]{2} )*\s*(?P<insn>[a-z][a-z0-9.]*)(?P<ops>.*)$")
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
        match = _INSN_RE.match(line)
        if match is None:
            return
        self._count += 1
        insn, ops = match.group("insn"), match.group("ops")
        if insn == "cpuid":
            self._dispatch = True
        found = ""
        if self._no_avx and insn.startswith("v") and _VECTOR_REG_RE.search(ops):
            found = "AVX (VEX-encoded) instructions"
        elif self._no_avx512 and ("%zmm" in ops or _MASK_RE.search(ops)):
            found = "AVX-512 instructions (zmm or opmask registers)"
        elif any(f"%{reg}" in ops for reg in self._forbidden):
            found = "registers " + ", ".join(sorted(r for r in self._forbidden if f"%{r}" in ops))
        if found:
            self._bad += 1
            self._kinds.add(found)
            if len(self._examples) < self._max_examples:
                self._examples.append(" ".join(line.split()))

    def report(self) -> IsaReport:
        return IsaReport(
            instructions=self._count,
            violations=self._bad,
            examples=tuple(self._examples),
            kinds=tuple(sorted(self._kinds)),
            runtime_dispatch=self._dispatch,
        )


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
