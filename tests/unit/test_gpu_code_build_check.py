"""The build refuses a wheel whose op lacks SASS its builder asked for, through the build's own entry point.

tests/unit/test_gpu_code.py calls the private ``_check_gpu_code`` directly, so it still passes
when ``check_postprocessed`` (what building/effects/cell.py runs after post-processing) stops calling it;
the real CUDA build test only sees a wheel that is right. Here the post-processed wheel is short
of sm_120 and ``check_postprocessed`` must refuse it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from dswheels.building.effects.postprocess import Postprocessed
from dswheels.building.effects.wheel_checks import check_postprocessed
from dswheels.building.output_reading import OpSources
from dswheels.kernel.binaries.fatbin import GpuCode, arch_number
from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import BuildError
from dswheels.kernel.model import PlannedCell
from dswheels.kernel.naming import parse_cell_id
from dswheels.plan.matrix.parse import parse_matrix
from dswheels.plan.planner import Combo, plan
from tests.conftest import ROOT

COMPAT = load_compat()
SHIPPED = parse_matrix((ROOT / "matrix" / "matrix.yml").read_text(), "matrix/matrix.yml", COMPAT)
EXT = "deepspeed/ops/adam/fused_adam_op.cp311-win_amd64.pyd"
FUSED_ADAM = OpSources(
    name="fused_adam",
    var="DS_BUILD_FUSED_ADAM",
    module="deepspeed.ops.adam.fused_adam_op",
    sources=("csrc/adam/fused_adam_frontend.cpp", "csrc/adam/multi_tensor_adam.cu"),
)


def _planned(cid: str) -> PlannedCell:
    cell = parse_cell_id(cid)
    combo = Combo(
        deepspeed=cell.deepspeed, torch=cell.torch, variant=cell.variant, python=cell.python, platform=cell.platform
    )
    return plan(SHIPPED, COMPAT, combo=combo).planned[0]


def _postprocessed(gpu: GpuCode) -> Postprocessed:
    return Postprocessed(
        wheel=Path("unused.whl"),
        sizes={EXT: 1},
        isa={},
        gpu={EXT: gpu},
        needs={},
        debug_archive=None,
        stripped_bytes=0,
        binaries={},
    )


def test_check_postprocessed_refuses_an_op_short_of_the_sass_its_builder_asked_for() -> None:
    planned = _planned("ds0.19.8-torch2.14-cu130-cp311-win_amd64")
    archs = frozenset(arch_number(t) for t in planned.toolchain.arch_list)
    ptx = tuple(arch_number(t) for t in planned.toolchain.arch_list if t.endswith("+PTX"))
    assert 120 in archs
    op = dataclasses.replace(FUSED_ADAM, sass=archs)  # what DeepSpeed's builder gives nvcc for this cell
    whole = GpuCode(sass=tuple(sorted(archs)), ptx=ptx)
    check_postprocessed(planned, _postprocessed(whole), ops=[op], names=[EXT], compat=COMPAT)  # all there: fine
    short = GpuCode(sass=tuple(sorted(archs - {120})), ptx=ptx)
    with pytest.raises(BuildError) as caught:
        check_postprocessed(planned, _postprocessed(short), ops=[op], names=[EXT], compat=COMPAT)
    assert "fused_adam: no SASS for sm_120, which its builder asked nvcc for" in (caught.value.details or "")
