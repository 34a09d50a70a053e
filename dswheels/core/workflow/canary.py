"""The canary: the cheapest Windows cell, with one CPU op and one CUDA op, to prove a fork's Windows path.

A fork's first full tag build runs a hundred Windows jobs of an hour or more each. The canary
runs the same pipeline (CUDA install, MSVC, the sdist with its Windows files, the builders'
flags, the compile, post-processing, verify) on one cell in about 20 minutes, so a broken
Windows path shows before the matrix is launched. Its wheel is never published: it lacks most
ops.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from dswheels.core.model import OpPlan, PlannedCell, Platform

__all__ = ["CANARY_OPS", "pick_canary", "restrict_ops"]

# cpu_adam (C++ with the CPU baseline flags, built by MSVC) and fused_adam (one .cu file, every arch
# of the variant): both exist in every DeepSpeed the compat rules know.
CANARY_OPS = ("cpu_adam", "fused_adam")


def restrict_ops(planned: PlannedCell, names: Sequence[str], *, why: str) -> PlannedCell:
    """``planned`` building only ``names`` (each must be planned for it); the rest is left out with ``why``.

    Raises ``ValueError`` naming the ops the cell does not build.
    """
    wanted = set(names)
    unknown = sorted(wanted - set(planned.ops.build_names))
    if unknown:
        planned_names = ", ".join(planned.ops.build_names) or "none"
        raise ValueError(f"not planned for this cell: {', '.join(unknown)} (it builds {planned_names})")
    build = tuple((name, var) for name, var in planned.ops.build if name in wanted)
    left_out = tuple((name, why) for name, _var in planned.ops.build if name not in wanted)
    return replace(planned, ops=OpPlan(build=build, left_out=(*planned.ops.left_out, *left_out)))


def _cost(item: PlannedCell) -> tuple[int, bool, tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Fewest archs first (the compile), then the newest DeepSpeed and torch (what forks build first), then
    the oldest Python: the one with the longest record of wheels for everything the build installs."""
    cell = item.cell

    def newest(version: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(-part for part in version)

    archs = len(item.toolchain.arch_list)
    return (archs, cell.python.free_threaded, newest(cell.deepspeed), newest(cell.torch), cell.python.version)


def pick_canary(planned: Sequence[PlannedCell]) -> PlannedCell | None:
    """The cheapest planned Windows CUDA cell that builds both canary ops, restricted to them; None: no such cell."""
    candidates = [
        item
        for item in planned
        if item.cell.platform is Platform.WIN_AMD64
        and item.cell.variant.is_cuda
        and set(CANARY_OPS) <= set(item.ops.build_names)
    ]
    if not candidates:
        return None
    best = min(candidates, key=_cost)
    return restrict_ops(best, CANARY_OPS, why="canary: one CPU op and one CUDA op prove the Windows path")
