"""The recorded op flags, the plan's judgement of them, and the 0.19.8 CPU-op patch, on real inputs."""

from __future__ import annotations

import ast
import sys
import types
from dataclasses import replace
from pathlib import Path

import pytest

from dswheels.building.patches import PatchError, patch_cpu_builder_win32, patch_debug_flags
from dswheels.kernel.compat import load_compat
from dswheels.kernel.compiler_flags.op_flag_set import OpFlags
from dswheels.kernel.compiler_flags.record import FlagRecord, load_flag_record, parse_flag_record, render_flag_record
from dswheels.kernel.compiler_flags.screen import screen_ops
from dswheels.kernel.model import OpPlan
from dswheels.kernel.naming import cell_id, parse_cell_id
from dswheels.kernel.versions import format_version
from dswheels.plan.matrix.parse import parse_matrix
from dswheels.plan.planner import plan

ROOT = Path(__file__).parent.parent.parent
DATA = ROOT / "tests" / "data"
CPU_BUILDER_0198 = (DATA / "ds0198_cpu_builder.py.txt").read_text(encoding="utf-8")  # verbatim from the sdist
CPU_BUILDER_0140 = (DATA / "ds0140_cpu_builder.py.txt").read_text(encoding="utf-8")
COMPAT = load_compat()
RECORD = load_flag_record()
SHIPPED = parse_matrix((ROOT / "matrix" / "matrix.yml").read_text(encoding="utf-8"), "matrix/matrix.yml", COMPAT)


# --- the patch -----------------------------------------------------------------------------------


def _cxx_args(text: str, platform: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Run the patched CPUOpBuilder.cxx_args() itself, on an OpBuilder whose baseline is patched in."""

    class OpBuilder:
        def cpu_arch(self) -> str:
            return "/arch:AVX2" if sys.platform == "win32" else "-march=x86-64-v3"

        def simd_width(self) -> str:
            return "-D__AVX256__"

    package = types.ModuleType("op_builder")
    package.__deepspeed__ = True  # type: ignore[attr-defined]
    builder = types.ModuleType("op_builder.builder")
    builder.OpBuilder = OpBuilder  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "op_builder", package)
    monkeypatch.setitem(sys.modules, "op_builder.builder", builder)
    namespace: dict[str, object] = {}
    exec(compile(text, "op_builder/cpu/builder.py", "exec"), namespace)  # noqa: S102 - DeepSpeed's real code
    monkeypatch.setattr(sys, "platform", platform)
    cls = namespace["CPUOpBuilder"]
    assert isinstance(cls, type)
    result = cls().cxx_args()
    monkeypatch.setattr(sys, "platform", "linux")
    return list(result)


def test_the_patch_gives_cl_the_flags_of_the_other_builders_on_win32(monkeypatch: pytest.MonkeyPatch) -> None:
    patched = patch_cpu_builder_win32(CPU_BUILDER_0198)
    ast.parse(patched)
    assert _cxx_args(patched, "win32", monkeypatch) == ["-O2", "/arch:AVX2", "-D__AVX256__"]
    # Linux keeps DeepSpeed's own flags, byte for byte
    assert _cxx_args(patched, "linux", monkeypatch) == _cxx_args(CPU_BUILDER_0198, "linux", monkeypatch)
    assert _cxx_args(CPU_BUILDER_0198, "win32", monkeypatch)[:3] == ["-O3", "-g", "-Wno-reorder"]


def test_the_patch_applies_after_the_debug_flag_patch_too() -> None:
    text, count = patch_debug_flags(CPU_BUILDER_0198)
    assert count == 1
    assert "# dswheels:" in patch_cpu_builder_win32(text)


def test_the_patch_refuses_text_it_does_not_know() -> None:
    with pytest.raises(PatchError, match=r"expected one `def cxx_args\(self\):`.*found 0"):
        patch_cpu_builder_win32(CPU_BUILDER_0140)  # 0.14.0-0.14.2 return the list directly
    with pytest.raises(PatchError, match="already patched"):
        patch_cpu_builder_win32(patch_cpu_builder_win32(CPU_BUILDER_0198))
    with pytest.raises(PatchError, match="one `import os`, found 0"):
        patch_cpu_builder_win32(CPU_BUILDER_0198.replace("import os\n", "import os as _os\n"))


# --- the record ----------------------------------------------------------------------------------


def _op(name: str, cxx: tuple[str, ...], nvcc: tuple[str, ...] | None = None) -> OpFlags:
    return OpFlags(op=name, extension="CUDAExtension" if nvcc else "CppExtension", cxx=cxx, nvcc=nvcc)


def test_the_record_renders_and_reads_back_with_runs_of_releases() -> None:
    results = {
        (v, "win32", "cuda", "8.0"): {"cpu_adam": _op("cpu_adam", ("-O2",)), "quantizer": _op("quantizer", ("-O2",))}
        for v in ("0.14.3", "0.14.4", "0.15.0")
    }
    results[("0.14.4", "win32", "cuda", "8.0")] = {"cpu_adam": _op("cpu_adam", ("-O3", "-Wno-reorder"))}
    results[("0.15.0", "linux", "cpu", "")] = {"cpu_adam": _op("cpu_adam", ("-O3",))}
    text = render_flag_record(
        context={"torch": "2.15"},
        nvcc=RECORD.nvcc,
        results=results,
        not_recorded={"0.14.0 win32 cuda": "why"},
        about="",
    )
    assert '"0.14.3 0.15.0"' in text  # cpu_adam's first entry holds for two runs
    assert '"0.14.3..0.15.0"' not in text
    back = parse_flag_record(text)
    assert back.versions == ("0.14.3", "0.14.4", "0.15.0")
    for (version, *key), ops in results.items():
        found = back.lookup(version, (key[0], key[1], key[2]))
        assert found is not None
        assert found == (ops, True)
    assert back.lookup("0.14.3", ("win32", "cuda", "9.0")) == (results[("0.14.3", "win32", "cuda", "8.0")], False)
    assert back.lookup("0.14.3", ("linux", "cpu", "")) is None
    assert (
        render_flag_record(
            context={"torch": "2.15"},
            nvcc=RECORD.nvcc,
            results=results,
            not_recorded={"0.14.0 win32 cuda": "why"},
            about="",
        )
        == text
    )


def test_the_shipped_record_covers_every_release_the_workflow_can_name() -> None:
    releases = [format_version(v) for v in COMPAT.deepspeed_releases]
    assert list(RECORD.versions) == releases
    for version in ("0.14.5", "0.15.4", "0.16.5", "0.17.6", "0.18.9", "0.19.7", "0.19.8"):
        for key in (("win32", "cuda"), ("win32", "cpu"), ("linux", "cuda"), ("linux", "cpu")):
            arch_lists = [k[2] for k in RECORD.ops if k[:2] == key]
            assert arch_lists, key
            for arch in arch_lists:
                assert RECORD.lookup(version, (*key, arch)) is not None, (version, key, arch)
    # what is missing says why
    assert all(why for why in RECORD.not_recorded.values())


# --- the plan ------------------------------------------------------------------------------------


def test_every_windows_cell_of_the_shipped_matrix_builds_every_planned_op() -> None:
    result = plan(SHIPPED, COMPAT)
    windows = [p for p in result.planned if p.cell.platform.os == "windows"]
    assert windows
    assert not [d for d in result.dropped if any(r.rule == "op-flags" for r in d.reasons)]
    for item in result.planned:
        assert not [why for _name, why in item.ops.left_out if "rejects" in why], cell_id(item.cell)
    for item in windows:
        assert {"cpu_adam", "cpu_adagrad", "cpu_lion", "fused_adam"} <= set(item.ops.build_names)
        assert not [n for n in item.toolchain.notes if "not recorded" in n], cell_id(item.cell)


def _without_cpu_patch(record: FlagRecord) -> FlagRecord:
    """The record as if the 0.19.8 CPU ops were evaluated without dswheels' win32 patch."""
    ops = {key: dict(per_version) for key, per_version in record.ops.items()}
    for key, per_version in ops.items():
        if key[:2] == ("win32", "cuda"):
            per_version["0.19.8"] = {
                **per_version["0.19.8"],
                "cpu_adam": _op("cpu_adam", ("-O3", "-g0", "-Wno-reorder", "-fopenmp", "-D__SCALAR__")),
            }
    return replace(record, ops=ops)


def test_without_the_patch_the_plan_leaves_cpu_adam_out_naming_flag_and_version() -> None:
    cell = parse_cell_id("ds0.19.8-torch2.15-cu130-cp312-win_amd64")
    result = plan(SHIPPED, COMPAT, only=[cell_id(cell)], flag_record=_without_cpu_patch(RECORD))
    [item] = result.planned
    assert "cpu_adam" not in item.ops.build_names
    why = dict(item.ops.left_out)["cpu_adam"]
    assert "cl rejects its flag '-Wno-reorder' (D8021" in why
    assert "DeepSpeed 0.19.8 on win_amd64" in why


def test_an_explicit_op_list_drops_the_cell_instead() -> None:
    spec = replace(SHIPPED, ops=("cpu_adam", "fused_adam"))
    cid = "ds0.19.8-torch2.15-cu130-cp312-win_amd64"
    result = plan(spec, COMPAT, flag_record=_without_cpu_patch(RECORD))
    [dropped] = [d for d in result.dropped if cell_id(d.cell) == cid]
    [reason] = dropped.reasons
    assert reason.rule == "op-flags"
    assert reason.message.startswith("cpu_adam: cl rejects its flag '-Wno-reorder'")


def test_an_arch_list_deepspeed_cannot_spell_drops_the_cell() -> None:
    [item] = plan(SHIPPED, COMPAT, only=["ds0.19.8-torch2.15-cu130-cp312-win_amd64"]).planned
    arch = item.toolchain.arch_list_text
    broken = OpFlags(op="x", extension="CUDAExtension", cxx=("-O2",), nvcc=("-gencode=arch=compute_1.,code=sm_1.",))
    recorded = RECORD.ops[("win32", "cuda", arch)]["0.19.8"]
    ops = {
        ("win32", "cuda", arch): {"0.19.8": {n: replace(broken, op=n) if f.cuda else f for n, f in recorded.items()}}
    }
    _ops, _notes, reason = screen_ops(
        item.cell, item.ops, arch_list=arch, nvcc_flags=(), record=replace(RECORD, ops=ops), explicit=False
    )
    assert reason is not None
    assert reason.rule == "op-flags"
    assert f"the arch list {arch} is the cell's" in reason.message
    assert "compute_1." in reason.message
    assert reason.fix.startswith("set the matrix's arch_lists for cu130")


def test_a_release_or_an_arch_list_without_a_record_is_planned_with_a_note() -> None:
    cell = parse_cell_id("ds0.19.8-torch2.15-cu130-cp312-win_amd64")
    ops = OpPlan(build=(("cpu_adam", "CPU_ADAM"),), left_out=())
    empty = replace(RECORD, ops={}, not_recorded={"0.19.8 win32 cuda": "no sdist"})
    same, notes, reason = screen_ops(cell, ops, arch_list="8.0", nvcc_flags=(), record=empty, explicit=False)
    assert (same, reason) == (ops, None)
    expected = (
        "DeepSpeed 0.19.8's op flags are not recorded in op_flags.json for win32/cuda (no sdist): the build judges "
        "them before compiling"
    )
    assert notes == (expected,)
    same, notes, reason = screen_ops(cell, ops, arch_list="3.5", nvcc_flags=(), record=RECORD, explicit=False)
    assert (same, reason) == (ops, None)
    assert "other arch lists than 3.5" in notes[0]


def test_an_op_whose_builder_raised_on_the_recording_machine_is_judged_by_the_build() -> None:
    cell = parse_cell_id("ds0.19.8-torch2.15-cu130-cp312-linux_x86_64")
    ops = OpPlan(build=(("evoformer_attn", "EVOFORMER_ATTN"),), left_out=())
    arch = next(k[2] for k in RECORD.ops if k[:2] == ("linux", "cuda"))
    recorded = RECORD.lookup("0.19.8", ("linux", "cuda", arch))
    assert recorded is not None
    assert recorded[0]["evoformer_attn"].error  # CUTLASS is not on the recording machine
    same, notes, reason = screen_ops(cell, ops, arch_list=arch, nvcc_flags=(), record=RECORD, explicit=True)
    assert (same, reason) == (ops, None)
    assert notes[0].startswith("evoformer_attn: no recorded flags (")
