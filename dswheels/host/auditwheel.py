"""Run PyPA's auditwheel on a Linux wheel and read its verdict (:mod:`dswheels.kernel.manylinux`).

``auditwheel show --json`` only reads the wheel; nothing is grafted into it (``repair`` would copy
torch's libraries in). It runs in dswheels' own interpreter, where the package's dependencies put
it (Linux only: auditwheel reads the system's ``ld.so`` configuration, and refuses other systems).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path

from dswheels.host import proc
from dswheels.kernel.errors import DswheelsError
from dswheels.kernel.manylinux import AuditwheelOutputError, FloorVerdict, read_auditwheel_show

__all__ = ["AUDITWHEEL", "auditwheel_available", "judge_floor"]

AUDITWHEEL = (sys.executable, "-m", "auditwheel")
_TIMEOUT = 600.0  # a 2 GB CUDA wheel is read in well under a minute


def auditwheel_available() -> bool:
    """auditwheel is importable here: dswheels depends on it on Linux only (the marker in pyproject.toml)."""
    return importlib.util.find_spec("auditwheel") is not None


def judge_floor(
    wheel: Path,
    excluded: Sequence[str],
    *,
    error: type[DswheelsError],
    log_file: Path | None = None,
) -> FloorVerdict:
    """auditwheel's verdict on ``wheel``, the libraries matching ``excluded`` (torch's) left out."""
    done = proc.capture(
        [*AUDITWHEEL, "show", "--json", wheel],
        log_file=log_file,
        timeout=_TIMEOUT,
        error=error,
        what="auditwheel show",
    )
    # auditwheel logs to stderr (merged here, before its output); its JSON, indented, ends the output
    output = done.output
    start = 0 if output.startswith("{") else output.find("\n{") + 1
    if start <= 0 and not output.startswith("{"):
        why = f"exit {done.returncode}" if done.returncode else "no JSON"
        raise error(
            f"auditwheel show failed on {wheel.name} ({why}): {' | '.join(done.tail[-5:])}",
            hint="run `python -m auditwheel show WHEEL` to see why",
        )
    try:
        return read_auditwheel_show(output[start:], excluded)
    except AuditwheelOutputError as exc:
        raise error(f"auditwheel show on {wheel.name}: {exc}", hint="is auditwheel the version pinned?") from None
