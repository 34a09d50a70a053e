"""``ds_report`` output parsed into a structure (DeepSpeed has no machine-readable mode).

The format has been the same from 0.14 to 0.19.8: an op table (``name ..... [YES] ..... [OKAY]``,
with ANSI colours) and an environment block (``torch version .......... 2.14.1+cu130``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["DsReport", "parse_ds_report", "strip_ansi"]

_ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")
# "cpu_adam ..... [YES] ...... [OKAY]"; a long name leaves no room for dots:
# "deepspeed_not_implemented  [NO] ....... [OKAY]"
_OP_RE = re.compile(
    r"^(?P<name>[A-Za-z0-9_]+)\s+\.*\s*\[(?P<installed>YES|NO)\]\s+\.*\s*\[(?P<compatible>OKAY|NO)\]$",
)
_INFO_RE = re.compile(r"^(?P<key>[A-Za-z][A-Za-z0-9 ()./_-]*?) \.{3,} ?(?P<value>.*)$")


def strip_ansi(text: str) -> str:
    r"""Remove terminal colour codes.

    >>> strip_ansi("\x1b[92m[YES]\x1b[0m")
    '[YES]'
    """
    return _ANSI_RE.sub("", text)


@dataclass(frozen=True, slots=True)
class DsReport:
    ops: Mapping[str, tuple[bool, bool]]  # op -> (installed, compatible)
    info: Mapping[str, str] = field(default_factory=dict)  # "torch version" -> "2.14.1+cu130", ...
    ninja_ok: bool | None = None

    @property
    def installed(self) -> tuple[str, ...]:
        return tuple(name for name, (inst, _c) in self.ops.items() if inst)

    @property
    def compiled_with(self) -> str:
        """The "deepspeed wheel compiled w." line, e.g. ``torch 2.14, cuda 13.0``."""
        return self.info.get("deepspeed wheel compiled w.", "").strip()

    @property
    def nvcc(self) -> str:
        return self.info.get("nvcc version", "").strip()

    @property
    def torch_version(self) -> str:
        return self.info.get("torch version", "").strip()

    @property
    def torch_cuda(self) -> str:
        return self.info.get("torch cuda version", "").strip()

    def as_json(self) -> dict[str, object]:
        return {
            "ops": {name: {"installed": i, "compatible": c} for name, (i, c) in self.ops.items()},
            "installed": list(self.installed),
            "compiled_with": self.compiled_with,
            "torch_version": self.torch_version,
            "torch_cuda": self.torch_cuda or None,
            "nvcc": self.nvcc or None,
            "ninja_ok": self.ninja_ok,
            "info": dict(self.info),
        }


def parse_ds_report(text: str) -> DsReport:
    """Parse ``ds_report``'s output; raises ``ValueError`` when it has no op table at all.

    >>> r = parse_ds_report("ninja .................. [OKAY]\\n"
    ...     "cpu_adam ............... [YES] ...... [OKAY]\\nasync_io ............... [NO] ....... [NO]\\n"
    ...     "torch version .................... 2.13.0+cpu\\n"
    ...     "deepspeed wheel compiled w. ...... torch 2.13 \\n")
    >>> r.installed, r.torch_version, r.compiled_with, r.ninja_ok
    (('cpu_adam',), '2.13.0+cpu', 'torch 2.13', True)
    """
    ops: dict[str, tuple[bool, bool]] = {}
    info: dict[str, str] = {}
    ninja: bool | None = None
    for raw in strip_ansi(text).splitlines():
        line = raw.rstrip()
        if not line or line.startswith("-"):
            continue
        match = _OP_RE.match(line)
        if match:
            ops[match["name"]] = (match["installed"] == "YES", match["compatible"] == "OKAY")
            continue
        if line.startswith("ninja "):
            ninja = "[OKAY]" in line
            continue
        info_match = _INFO_RE.match(line)
        if info_match and not line.startswith("op name"):
            info[info_match["key"].strip()] = info_match["value"].strip()
    if not ops:
        msg = "ds_report printed no op table"
        raise ValueError(msg)
    return DsReport(ops=ops, info=info, ninja_ok=ninja)
