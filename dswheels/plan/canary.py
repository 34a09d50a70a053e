"""The canary: one Windows cell with the few ops that cover the classes that break, to prove a fork's Windows path.

A fork's first full tag build runs a hundred Windows jobs of an hour or more each. The canary
runs the same pipeline (CUDA install, MSVC, the sdist with its Windows files, the builders'
flags, the compile, post-processing, verify) on one cell in about half an hour, so a broken
Windows path shows before the matrix is launched. Its wheel is never published: it lacks most
ops.

What broke Windows builds, and what the canary builds for it:

- a CUDA toolkit newer than the rest (CUDA >= 13.2: CCCL's headers need MSVC's conforming
  preprocessor, compat.yml windows-cuda132-preprocessor): the cell with the newest nvcc;
- a CUDA component the installer was not asked for (``cuda_profiler_api.h``, C1083): random_ltd,
  the cheapest op that includes it (csrc/includes/context.h -> gemm_test.h; with cuBLAS and cuRAND);
- C++ through MSVC with the CPU baseline flags: cpu_adam;
- one ``.cu`` file with torch's ATen CUDA headers for every arch of the variant: fused_adam.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from dswheels.kernel.model import OpPlan, PlannedCell, Platform

__all__ = ["CANARY_OPS", "PROFILER_API_OPS", "pick_canary", "restrict_ops", "windows_cuda"]

# The ops whose sources include <cuda_profiler_api.h> in DeepSpeed 0.19.8: random_ltd, transformer and
# stochastic_transformer through custom_cuda_layers.h -> context.h -> gemm_test.h:10; transformer_inference's
# softmax.cu, transform.cu and apply_rotary_pos_emb.cu. random_ltd (1 + 3 units) is the cheapest of them.
PROFILER_API_OPS = ("random_ltd", "transformer", "stochastic_transformer", "transformer_inference")
# every op exists in every DeepSpeed the compat rules know (compat.yml ops: >= 0.14.0)
CANARY_OPS = ("cpu_adam", "fused_adam", "random_ltd")


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


def _cost(item: PlannedCell) -> tuple[tuple[int, ...], int, bool, tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """The newest nvcc first (the toolkit class that breaks), then the fewest archs (the compile), then the
    newest DeepSpeed and torch (what forks build first), then the oldest Python: the one with the longest
    record of wheels for everything the build installs."""
    cell = item.cell

    def newest(version: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(-part for part in version)

    archs = len(item.toolchain.arch_list)
    nvcc = newest(item.toolchain.nvcc or ())
    return (nvcc, archs, cell.python.free_threaded, newest(cell.deepspeed), newest(cell.torch), cell.python.version)


def windows_cuda(item: PlannedCell) -> bool:
    """Whether ``item`` is a Windows CUDA cell: what the canary is drawn from."""
    return item.cell.platform is Platform.WIN_AMD64 and item.cell.variant.is_cuda


def pick_canary(planned: Sequence[PlannedCell]) -> PlannedCell | None:
    """The planned Windows CUDA cell with the newest nvcc that builds every canary op, restricted to them;
    None: no such cell."""
    candidates = [item for item in planned if windows_cuda(item) and set(CANARY_OPS) <= set(item.ops.build_names)]
    if not candidates:
        return None
    best = min(candidates, key=_cost)
    return restrict_ops(best, CANARY_OPS, why="canary: the ops that cover what breaks Windows builds")
