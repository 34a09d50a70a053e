"""A planned cell for tests that need one whole (manifests, plan files): planned by the real planner."""

from __future__ import annotations

from dataclasses import replace

from dswheels.kernel.binaries.linux_runtime import RuntimeFloor
from dswheels.kernel.compat import load_compat
from dswheels.kernel.model import PlannedCell
from dswheels.kernel.naming import parse_cell_id
from dswheels.plan.matrix.parse import parse_matrix
from dswheels.plan.planner import resolve_cell

__all__ = ["planned_cell"]

# only the matrix's defaults matter (runners, ops: all, cpu_baseline): the cell comes from its id
_MATRIX = """\
schema: 1
deepspeed: ["0.19.8"]
torch: [{version: "2.13", variants: [cpu]}]
python: ["3.11"]
platforms: [linux_x86_64, win_amd64]
runners:
  win_amd64: {build: [windows-2022], smoke: [self-hosted, windows, gpu]}
  linux_x86_64: {build: [ubuntu-22.04], smoke: [self-hosted, linux, gpu]}
"""


def planned_cell(cid: str, *, linux_runtime: RuntimeFloor | None = None) -> PlannedCell:
    """The cell ``cid`` as `dswheels plan` plans it; ``linux_runtime`` replaces the promised floor."""
    compat = load_compat()
    result = resolve_cell(parse_cell_id(cid), compat, parse_matrix(_MATRIX, "(tests)", compat))
    if isinstance(result, PlannedCell):
        if linux_runtime is None:
            return result
        return replace(result, toolchain=replace(result.toolchain, linux_runtime=linux_runtime))
    msg = f"{cid} cannot be planned: {'; '.join(r.message for r in result.reasons)}"
    raise ValueError(msg)
