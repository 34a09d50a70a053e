"""What a compiler will say about one flag: fatal (the compile stops) or a warning.

The judges (:mod:`dswheels.kernel.compiler_flags.msvc`, :mod:`dswheels.kernel.compiler_flags.gcc`,
:mod:`dswheels.kernel.compiler_flags.nvcc`) return :class:`FlagIssue` for one flag list;
:mod:`dswheels.kernel.compiler_flags.judge` names the op, the compiler, the DeepSpeed version and the
platform (:class:`Finding`). Every issue carries the source of its rule.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Finding", "FlagIssue"]


@dataclass(frozen=True, slots=True)
class FlagIssue:
    flag: str
    fatal: bool
    code: str  # the compiler's own message id where it has one: D8021, D9002, LNK4044, ...
    why: str  # what the compiler does with it, in words
    source: str  # where that behaviour is documented or was observed


@dataclass(frozen=True, slots=True)
class Finding:
    """One issue of one op's flags, with everything a person needs to act on it."""

    op: str
    tool: str  # "cl" | "link" | "g++" | "nvcc" | "cl (via nvcc -Xcompiler)" | ...
    issue: FlagIssue
    deepspeed: str  # "0.19.8"
    platform: str  # "win_amd64" | "linux_x86_64"

    @property
    def fatal(self) -> bool:
        return self.issue.fatal

    def describe(self) -> str:
        """``cpu_adam: cl rejects '-Wno-reorder' (D8021 ...) [DeepSpeed 0.19.8, win_amd64]``."""
        verb = "rejects" if self.fatal else "warns about"
        code = f"{self.issue.code}: " if self.issue.code else ""
        return (
            f"{self.op}: {self.tool} {verb} {self.issue.flag!r} ({code}{self.issue.why}) "
            f"[DeepSpeed {self.deepspeed}, {self.platform}; source: {self.issue.source}]"
        )
