"""One judgement of an extension's GPU code, shared by build and verify: nothing unplanned, and
(at build time, where DeepSpeed's own builders say which) nothing missing."""

from __future__ import annotations

import dataclasses

import pytest

from dswheels.building.effects.wheel_checks import _check_gpu_code
from dswheels.building.output_reading import OpSources
from dswheels.kernel.binaries.fatbin import GpuCode, gpu_code, judge_gpu_code
from dswheels.kernel.compat import load_compat
from dswheels.kernel.compiler_flags.judge import sass_archs
from dswheels.kernel.compiler_flags.op_flag_set import OpFlags
from dswheels.kernel.errors import BuildError
from dswheels.kernel.model import PlannedCell
from dswheels.kernel.naming import parse_cell_id
from dswheels.plan.matrix.parse import parse_matrix
from dswheels.plan.planner import Combo, plan
from dswheels.verify.static_checks import Expected
from tests.conftest import ROOT
from tests.support.verify_facts import run_check, wheel_facts, with_gpu
from tests.unit.machines import DATA

COMPAT = load_compat()
SHIPPED = parse_matrix((ROOT / "matrix" / "matrix.yml").read_text(), "matrix/matrix.yml", COMPAT)
# a real nvcc 13.0 fatbin in a real Windows DLL: SASS sm_75 and sm_80, PTX compute_80 (tests/data/pe/README.md)
_READ = gpu_code((DATA / "pe" / "fixture.pyd").read_bytes())
assert _READ is not None
REAL: GpuCode = _READ
EXT = "deepspeed/ops/adam/fused_adam_op.cp311-win_amd64.pyd"


def _planned(cid: str) -> PlannedCell:
    cell = parse_cell_id(cid)
    combo = Combo(
        deepspeed=cell.deepspeed, torch=cell.torch, variant=cell.variant, python=cell.python, platform=cell.platform
    )
    return plan(SHIPPED, COMPAT, combo=combo).planned[0]


def _op(sass: frozenset[int]) -> OpSources:
    return OpSources(
        name="fused_adam",
        var="DS_BUILD_FUSED_ADAM",
        module="deepspeed.ops.adam.fused_adam_op",
        sources=("csrc/adam/fused_adam_frontend.cpp", "csrc/adam/multi_tensor_adam.cu"),
        sass=sass,
    )


def test_the_real_fatbin_is_what_the_fixture_says() -> None:
    assert GpuCode(sass=(75, 80), ptx=(80,)) == REAL


@pytest.mark.parametrize(
    ("arch_list", "expected", "problems"),
    [
        (("7.5", "8.0+PTX"), frozenset({75, 80}), []),
        (("7.5", "8.0"), frozenset(), ["PTX for unplanned compute_80"]),
        (("8.0+PTX",), frozenset(), ["SASS for unplanned sm_75"]),
        (("7.5", "8.0+PTX", "9.0"), frozenset({75, 80, 90}), ["no SASS for sm_90, which its builder asked nvcc for"]),
    ],
)
def test_judge_gpu_code(arch_list: tuple[str, ...], expected: frozenset[int], problems: list[str]) -> None:
    judged = judge_gpu_code(REAL, arch_list, expected)
    assert judged.problems() == problems
    assert judged.ok == (not problems)


def test_no_sass_at_all_is_a_problem() -> None:
    judged = judge_gpu_code(GpuCode(sass=(), ptx=(80,)), ("8.0+PTX",))
    assert not judged.ok
    assert judged.problems() == ["no SASS at all"]


def test_sass_archs_reads_the_gencode_flags_deepspeed_writes() -> None:
    # OpBuilder.compute_capability_args(): code=sm_N per arch, and code=compute_N for +PTX
    flags = OpFlags(
        "fused_adam",
        "CUDAExtension",
        ("-O3",),
        (
            "-O3",
            "-gencode=arch=compute_75,code=sm_75",
            "-gencode=arch=compute_80,code=sm_80",
            "-gencode=arch=compute_80,code=compute_80",
        ),
    )
    assert sass_archs(flags) == frozenset({75, 80})
    assert sass_archs(OpFlags("cpu_adam", "CppExtension", ("-O3",), None)) == frozenset()


def test_the_build_refuses_an_op_short_of_the_archs_its_builder_asked_for() -> None:
    planned = _planned("ds0.19.8-torch2.14-cu130-cp311-win_amd64")
    archs = {int(t.removesuffix("+PTX").replace(".", "")) for t in planned.toolchain.arch_list}
    with pytest.raises(BuildError) as caught:
        _check_gpu_code(
            planned, {EXT: GpuCode(sass=tuple(sorted(archs - {120})), ptx=())}, [_op(frozenset(archs))], [EXT]
        )
    assert "fused_adam: no SASS for sm_120, which its builder asked nvcc for" in (caught.value.details or "")
    # the same code is fine when the builder itself filtered sm_120 out (an op's filter_ccs)
    _check_gpu_code(
        planned, {EXT: GpuCode(sass=tuple(sorted(archs - {120})), ptx=())}, [_op(frozenset(archs - {120}))], [EXT]
    )


def test_verify_requires_the_sass_the_manifest_says_the_builder_asked_for() -> None:
    cell = parse_cell_id("ds0.19.8-torch2.14-cu130-cp311-win_amd64")
    asked = Expected(
        cell=cell, ops=("fused_adam",), arch_list=("7.5", "8.0+PTX", "9.0"), sass={EXT: frozenset({75, 80, 90})}
    )
    (check,) = run_check("gpu code", wheel_facts(asked, binaries={EXT: with_gpu(EXT, REAL)}))
    assert not check.ok
    assert "no SASS for sm_90, which its builder asked nvcc for" in check.detail
    # without the manifest's record (an older manifest, or a plan) only unplanned code is judged
    (check,) = run_check(
        "gpu code", wheel_facts(dataclasses.replace(asked, sass={}), binaries={EXT: with_gpu(EXT, REAL)})
    )
    assert check.ok
