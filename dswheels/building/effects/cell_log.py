"""The build log of one cell: a header, then every tool's output with dswheels' own notes between.

The tools' lines are appended by :func:`dswheels.host.proc.run`; what they say is read by
:mod:`dswheels.building.output_reading`.
"""

from __future__ import annotations

from pathlib import Path

from dswheels import __version__
from dswheels.host.clock import utc_now
from dswheels.host.log import TEXT_ERRORS
from dswheels.kernel.model import PlannedCell
from dswheels.kernel.naming import cell_id, wheel_filename
from dswheels.kernel.urls import redact_text
from dswheels.kernel.versions import format_version

__all__ = ["log_note", "write_log_header"]


def write_log_header(log: Path, planned: PlannedCell) -> None:
    """Start (or continue) ``log`` with what this build of ``planned`` is meant to produce."""
    tc = planned.toolchain
    lines = [
        f"wheel {wheel_filename(planned.cell)}",
        f"ops to build: {', '.join(planned.ops.build_names)}",
        (
            f"arch list: {tc.arch_list_text or '-'}; nvcc {format_version(tc.nvcc) if tc.nvcc else '-'}; "
            f"cpu baseline {tc.cpu_baseline}"
        ),
    ]
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8", errors=TEXT_ERRORS) as fh:
        fh.write(f"# dswheels {__version__} build of {cell_id(planned.cell)}, started {utc_now():%Y-%m-%dT%H:%M:%SZ}\n")
        for line in lines:
            fh.write(f"# {line}\n")


def log_note(log: Path, text: str) -> None:
    """A line of dswheels' own between the tools' output (a patch made, the environment set, the outcome)."""
    with log.open("a", encoding="utf-8", errors=TEXT_ERRORS) as fh:
        fh.write(f"[{utc_now():%H:%M:%S}] dswheels: {redact_text(text)}\n")
