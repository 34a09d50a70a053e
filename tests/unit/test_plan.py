"""Planning: known real-life combinations are judged right, and every planned cell is sound."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings

from dswheels.kernel.compat import Compat, load_compat
from dswheels.kernel.compat.entries import RunnerImage
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.model import Cell, DroppedCell, PlannedCell, Platform, Source, SourceKind, Variant
from dswheels.kernel.naming import cell_id, parse_cell_id
from dswheels.kernel.versions import TorchMinor, parse_version
from dswheels.plan.effects.matrix_file import load_matrix
from dswheels.plan.matrix.parse import parse_matrix
from dswheels.plan.matrix.spec import MatrixSpec
from dswheels.plan.planner import Combo, plan, resolve_cell
from dswheels.plan.rules import check_cell
from tests.unit.strategies import cells

COMPAT = load_compat()

MATRIX = """\
schema: 1
deepspeed: ["0.19.8"]
torch: [{version: "2.14", variants: [cu130]}]
python: ["3.11"]
platforms: [linux_x86_64, win_amd64]
runners:
  win_amd64: {build: [windows-2022], smoke: [self-hosted, windows, gpu]}
  linux_x86_64: {build: [manylinux_2_28, ubuntu-24.04], smoke: [self-hosted, linux, gpu]}
"""
SPEC = parse_matrix(MATRIX, "m.yml", COMPAT)


def planned(cid: str) -> PlannedCell:
    result = resolve_cell(parse_cell_id(cid), COMPAT, SPEC)
    assert isinstance(result, PlannedCell), result
    return result


def rules_of(cid: str) -> set[str]:
    return {r.rule for r in check_cell(parse_cell_id(cid), COMPAT)}


# --- acceptance: combinations from real life ------------------------------------------------


def test_torch21_cu121_deepspeed_0151_on_windows_is_valid() -> None:
    item = planned("ds0.15.1-torch2.1-cu121-cp311-win_amd64")
    tc = item.toolchain
    assert tc.nvcc == (12, 1)
    assert tc.cuda_toolkit == "12.1.1"
    # nvcc 12.1 rejects _MSC_VER 1944 (VS 17.14) and its STL wants CUDA >= 12.4: the v142 toolset
    assert tc.host_compiler.version == "14.29"
    assert not tc.skip_cuda_check
    # PyPI's sdist, its sha256 from PyPI's JSON API: verifiable with no hand-made pin (the GitHub tag
    # archive has no published digest, and with CI=true an unpinned one stopped every Windows job)
    assert item.source == Source(kind=SourceKind.SDIST, url="", sha256="")
    assert item.torch_version == "2.1.2"
    assert item.torch_index == "https://download.pytorch.org/whl/cu121"
    assert "async_io" not in item.ops.build_names
    assert "fused_adam" in item.ops.build_names


def test_torch25_python313_on_windows_has_no_wheel() -> None:
    assert rules_of("ds0.19.8-torch2.5-cu124-cp313-win_amd64") == {"torch-python"}
    assert rules_of("ds0.19.8-torch2.5-cu124-cp313-linux_x86_64") == set()


def test_nvcc132_with_torch_cu130_needs_the_skip_for_deepspeed_up_to_0198() -> None:
    for ds in ("0.19.7", "0.19.8"):
        item = planned(f"ds{ds}-torch2.14-cu130-cp311-linux_x86_64")
        assert not item.toolchain.skip_cuda_check  # exact match by default
        result = plan(SPEC, COMPAT, combo=Combo(deepspeed=parse_version(ds), torch=TorchMinor((2, 14))), nvcc=(13, 2))
        for cell in result.planned:
            assert cell.toolchain.skip_cuda_check, cell_id(cell.cell)
            assert "no CUDA 13 list" in cell.toolchain.cuda_check
            assert cell.toolchain.nvcc == (13, 2)


def test_cuda12_minor_mismatch_inside_the_whitelist_needs_no_skip() -> None:
    result = plan(SPEC, COMPAT, combo=Combo(torch=TorchMinor((2, 14)), variant=Variant.parse("cu126")), nvcc=(12, 8))
    assert result.planned
    for item in result.planned:
        assert not item.toolchain.skip_cuda_check
        assert "minor-mismatch list" in item.toolchain.cuda_check


def test_cuda12_minor_mismatch_outside_an_older_whitelist_needs_the_skip() -> None:
    # DeepSpeed 0.16.3's list stops at 12.6: nvcc 12.8 with torch cu126 would be refused
    result = plan(
        SPEC,
        COMPAT,
        combo=Combo(deepspeed=(0, 16, 3), torch=TorchMinor((2, 7)), variant=Variant.parse("cu126")),
        nvcc=(12, 8),
    )
    assert all(item.toolchain.skip_cuda_check for item in result.planned)


def test_strict_cuda_check_drops_instead_of_skipping() -> None:
    spec = parse_matrix(MATRIX + "cuda_check: strict\n", "m.yml", COMPAT)
    with pytest.raises(ConfigError) as info:
        plan(spec, COMPAT, combo=Combo(torch=TorchMinor((2, 14))), nvcc=(13, 2))
    assert "cuda-check-strict" in (info.value.details or "")


def test_deepspeed_0140_on_windows_is_not_native() -> None:
    assert "deepspeed-windows-native" in rules_of("ds0.14.0-torch2.3-cu121-cp311-win_amd64")
    assert "deepspeed-windows-native" not in rules_of("ds0.14.5-torch2.3-cu121-cp311-win_amd64")


def test_torch214_with_deepspeed_0194_on_linux_is_not_buildable() -> None:
    assert "deepspeed-torch-cxx20-linux" in rules_of("ds0.19.4-torch2.14-cu126-cp311-linux_x86_64")
    assert rules_of("ds0.19.5-torch2.14-cu126-cp311-linux_x86_64") == set()
    # the CPU accelerator's ops carry no -std flag: not affected
    assert rules_of("ds0.19.4-torch2.14-cpu-cp311-linux_x86_64") == set()


def test_cuda13_with_torch214_needs_deepspeed_0197() -> None:
    assert "deepspeed-nvcc13-cxx20" in rules_of("ds0.19.6-torch2.14-cu130-cp311-linux_x86_64")
    assert rules_of("ds0.19.7-torch2.14-cu130-cp311-linux_x86_64") == set()


# --- toolchain resolution ------------------------------------------------------------------------


def test_windows_torch29_gets_use_cuda_and_cuda132_the_conforming_preprocessor() -> None:
    assert "-DUSE_CUDA" in planned("ds0.19.8-torch2.9-cu128-cp312-win_amd64").toolchain.nvcc_flags
    assert "-DUSE_CUDA" not in planned("ds0.19.8-torch2.8-cu128-cp312-win_amd64").toolchain.nvcc_flags
    flags = planned("ds0.19.8-torch2.14-cu132-cp312-win_amd64").toolchain.nvcc_flags
    assert "-Xcompiler=/Zc:preprocessor" in flags
    assert not planned("ds0.19.8-torch2.14-cu130-cp312-linux_x86_64").toolchain.nvcc_flags


def test_a_self_hosted_builder_like_windows_2025_gets_the_old_toolset() -> None:
    spec = parse_matrix(
        MATRIX.replace("build: [windows-2022]", "build: [{labels: [self-hosted, win], like: windows-2025}]"),
        "m.yml",
        COMPAT,
    )
    # windows-2025 (VS 2026) still has the v142 toolset side by side: no escape flags needed
    item = resolve_cell(parse_cell_id("ds0.15.1-torch2.1-cu121-cp311-win_amd64"), COMPAT, spec)
    assert isinstance(item, PlannedCell)
    assert item.toolchain.host_compiler.version == "14.29"
    assert item.toolchain.runs_on == ("self-hosted", "win")


def test_cuda118_needs_an_older_gcc_toolset_in_the_container() -> None:
    item = planned("ds0.16.9-torch2.4-cu118-cp311-linux_x86_64")
    assert item.toolchain.runner_image == "manylinux_2_28"
    assert item.toolchain.host_compiler.version == "11"  # gcc-toolset-11, which the job installs
    assert item.toolchain.gcc_toolset
    single = MATRIX.replace("build: [manylinux_2_28, ubuntu-24.04]", "build: [ubuntu-24.04]")
    spec = parse_matrix(single, "m.yml", COMPAT)
    dropped = resolve_cell(parse_cell_id("ds0.16.9-torch2.4-cu118-cp311-linux_x86_64"), COMPAT, spec)
    assert isinstance(dropped, DroppedCell)
    assert dropped.reasons[0].rule == "host-compiler"
    assert "GCC <= 11" in dropped.reasons[0].message
    assert "manylinux_2_28" in dropped.reasons[0].fix


def test_arch_list_is_torch_list_within_what_nvcc_targets() -> None:
    assert (
        planned("ds0.19.8-torch2.14-cu130-cp311-linux_x86_64").toolchain.arch_list_text
        == "7.5;8.0;8.6;9.0;10.0;12.0+PTX"
    )
    assert planned("ds0.19.8-torch2.14-cu130-cp311-win_amd64").toolchain.arch_list_text == "7.5;8.0;8.6;9.0;10.0;12.0"
    # torch cu128 lists 10.0/12.0; with nvcc 12.6 those cannot be targeted and are dropped, with a note
    result = plan(
        SPEC, COMPAT, combo=Combo(torch=TorchMinor((2, 9)), variant=Variant.parse("cu128"), platform=None), nvcc=(12, 6)
    )
    for item in result.planned:
        assert "10.0" not in item.toolchain.arch_list
        assert any("cannot target sm_120" in note for note in item.toolchain.notes)


def test_cpu_variant_has_no_cuda_toolchain() -> None:
    item = planned("ds0.19.8-torch2.13-cpu-cp311-linux_x86_64")
    tc = item.toolchain
    assert tc.nvcc is None
    assert tc.arch_list == ()
    assert not tc.skip_cuda_check
    assert set(item.ops.build_names) == {
        "cpu_adam",
        "fused_adam",
        "cpu_adagrad",
        "cpu_lion",
        "deepspeed_shm_comm",
        "pin_memory",
    }
    left = dict(item.ops.left_out)
    assert "oneCCL" in left["deepspeed_ccl_comm"]
    assert "no sources" in left["deepspeed_not_implemented"]


def test_an_explicit_op_list_builds_exactly_those() -> None:
    spec = parse_matrix(MATRIX + "ops: [cpu_adam, fused_adam, async_io]\n", "m.yml", COMPAT)
    linux = resolve_cell(parse_cell_id("ds0.19.8-torch2.14-cu130-cp311-linux_x86_64"), COMPAT, spec)
    windows = resolve_cell(parse_cell_id("ds0.19.8-torch2.14-cu130-cp311-win_amd64"), COMPAT, spec)
    assert isinstance(linux, PlannedCell)
    assert isinstance(windows, PlannedCell)
    assert set(linux.ops.build_names) == {"async_io", "fused_adam", "cpu_adam"}
    assert set(windows.ops.build_names) == {"fused_adam", "cpu_adam"}
    assert "Linux-only" in dict(windows.ops.left_out)["async_io"]
    assert dict(linux.ops.left_out)["fused_lamb"] == "not in the matrix's ops list"


# --- selection -----------------------------------------------------------------------------------------


def test_only_selects_matrix_cells_by_glob() -> None:
    result = plan(SPEC, COMPAT, only=["*-linux_x86_64"])
    assert [cell_id(p.cell) for p in result.planned] == ["ds0.19.8-torch2.14-cu130-cp311-linux_x86_64"]


def test_only_that_matches_nothing_is_an_error_with_a_suggestion() -> None:
    with pytest.raises(ConfigError) as info:
        plan(SPEC, COMPAT, only=["ds0.19.8-torch2.14-cu130-cp311-linux_x86"])
    assert "matches no cell" in (info.value.details or "")
    assert "did you mean 'ds0.19.8-torch2.14-cu130-cp311-linux_x86_64'" in (info.value.details or "")


def test_a_combo_outside_the_matrix_is_planned_when_allowed() -> None:
    combo = Combo(
        deepspeed=(0, 15, 1), torch=TorchMinor((2, 1)), variant=Variant.parse("cu121"), python=None, platform=None
    )
    result = plan(SPEC, COMPAT, combo=combo)
    assert {cell_id(p.cell) for p in result.planned} == {
        "ds0.15.1-torch2.1-cu121-cp311-linux_x86_64",
        "ds0.15.1-torch2.1-cu121-cp311-win_amd64",
    }


def test_an_impossible_combo_says_why_and_what_would_work() -> None:
    combo = Combo(torch=TorchMinor((2, 9)), variant=Variant.parse("cu121"))
    with pytest.raises(ConfigError) as info:
        plan(SPEC, COMPAT, combo=combo)
    details = info.value.details or ""
    assert "torch 2.9 has no cu121 build" in details
    assert "cu121 exists for torch 2.1-2.5" in details


# --- properties ----------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(cells)
def test_every_planned_cell_passes_every_rule_and_its_toolchain_is_sound(cell: Cell) -> None:
    reasons = check_cell(cell, COMPAT)
    result = resolve_cell(cell, COMPAT, SPEC) if not reasons else None
    if result is None or isinstance(result, DroppedCell):
        return
    assert check_cell(result.cell, COMPAT) == ()
    tc = result.toolchain
    release = COMPAT.torch[cell.torch]
    assert cell.python in release.python[cell.platform.os]
    assert cell.variant in release.variants_for(cell.platform.os)
    if cell.variant.cuda:
        toolkit = COMPAT.cuda[tc.nvcc or (0, 0)]
        accepted = COMPAT.arch_tokens(cell.torch)
        for token in tc.arch_list:
            assert token.removesuffix("+PTX") in accepted
            assert token.removesuffix("+PTX").replace(".", "") in toolkit.sm
        if tc.host_compiler.kind == "gcc":
            assert int(tc.host_compiler.version) <= toolkit.gcc_max
        else:
            major, minor = parse_version(tc.host_compiler.version)
            msc = 100 * (major + 5) + minor
            assert toolkit.msvc[0] <= msc < toolkit.msvc[1] or tc.nvcc_flags
    assert result.ops.build, "a planned wheel builds at least one op"
    assert not set(result.ops.build_names) & {name for name, _ in result.ops.left_out}


def test_ids_are_unique_and_round_trip_over_the_shipped_matrix() -> None:
    spec = load_matrix(Path(__file__).parents[2] / "matrix" / "matrix.yml", COMPAT)
    result = plan(spec, COMPAT)
    ids = [cell_id(p.cell) for p in result.planned] + [cell_id(d.cell) for d in result.dropped]
    assert len(ids) == len(set(ids))
    for item in result.planned:
        assert parse_cell_id(cell_id(item.cell)) == item.cell
        assert check_cell(item.cell, COMPAT) == ()


def test_an_image_with_only_new_msvc_uses_escape_flags_for_old_cuda() -> None:
    """No clean toolset: the pre-VS-2026 one with -D_ALLOW_COMPILER_AND_STL_VERSION_MISMATCH."""
    from dataclasses import replace

    image = COMPAT.runner_images["windows-2022"]
    compat = replace(COMPAT, runner_images={**COMPAT.runner_images, "windows-2022": replace(image, msvc=("14.44",))})
    item = resolve_cell(parse_cell_id("ds0.15.1-torch2.1-cu121-cp311-win_amd64"), compat, SPEC)
    assert isinstance(item, PlannedCell)
    assert item.toolchain.host_compiler.version == "14.44"
    assert "-D_ALLOW_COMPILER_AND_STL_VERSION_MISMATCH" in item.toolchain.nvcc_flags
    # VS 2026 toolsets crash old nvcc front ends even with the flags: no fallback there
    compat26 = replace(COMPAT, runner_images={**COMPAT.runner_images, "windows-2022": replace(image, msvc=("14.51",))})
    dropped = resolve_cell(parse_cell_id("ds0.15.1-torch2.1-cu121-cp311-win_amd64"), compat26, SPEC)
    assert isinstance(dropped, DroppedCell)
    assert "no MSVC toolset of windows-2022 works with nvcc 12.1" in dropped.reasons[0].message


# --- the Linux runtime promise and the image that keeps it ---------------------------------------

ABOVE = "above the promised linux_runtime"


def test_linux_cells_carry_the_promise_and_an_image_above_it_is_noted() -> None:
    spec = parse_matrix(MATRIX.replace("manylinux_2_28, ubuntu-24.04", "ubuntu-24.04"), "m.yml", COMPAT)
    linux = resolve_cell(parse_cell_id("ds0.19.8-torch2.14-cu130-cp311-linux_x86_64"), COMPAT, spec)
    assert isinstance(linux, PlannedCell)
    assert linux.toolchain.linux_runtime == COMPAT.linux_runtime_floor
    assert linux.toolchain.runner_image == "ubuntu-24.04"
    assert any(ABOVE in n and "glibc 2.39" in n and "GLIBCXX 3.4.33" in n for n in linux.toolchain.notes)
    assert planned("ds0.19.8-torch2.14-cu130-cp311-win_amd64").toolchain.linux_runtime is None


def test_the_manylinux_container_keeps_the_promise_without_a_note() -> None:
    item = planned("ds0.19.8-torch2.14-cu130-cp311-linux_x86_64")  # MATRIX lists the container first
    tc = item.toolchain
    assert (tc.runner_image, tc.runs_on) == ("manylinux_2_28", ("ubuntu-24.04",))
    assert tc.container.startswith("quay.io/pypa/manylinux_2_28_x86_64@sha256:")  # pinned by digest
    assert (tc.host_compiler.version, tc.gcc_toolset) == ("14", True)  # gcc-toolset-14, the image's default
    assert not [n for n in tc.notes if ABOVE in n]
    assert not planned("ds0.19.8-torch2.14-cu130-cp311-win_amd64").toolchain.container  # Windows: the runner


def test_a_matrix_that_raises_the_promise_gets_it_and_no_note() -> None:
    spec = parse_matrix(MATRIX + 'linux_runtime: {glibc: "2.39", glibcxx: "3.4.33"}\n', "m.yml", COMPAT)
    item = resolve_cell(parse_cell_id("ds0.19.8-torch2.14-cu130-cp311-linux_x86_64"), COMPAT, spec)
    assert isinstance(item, PlannedCell)
    assert item.toolchain.linux_runtime is not None
    assert item.toolchain.linux_runtime.as_json() == {"glibc": "2.39", "glibcxx": "3.4.33", "cxxabi": "1.3.15"}
    assert not [n for n in item.toolchain.notes if ABOVE in n]


def test_every_shipped_linux_cell_builds_in_the_manylinux_container_within_the_promise() -> None:
    spec = load_matrix(Path(__file__).parents[2] / "matrix" / "matrix.yml", COMPAT)
    linux = [p for p in plan(spec, COMPAT).planned if p.cell.platform.os == "linux"]
    assert linux
    for item in linux:
        # pypa's manylinux_2_28 image for the cell's CPU, on GitHub's runner of that CPU (ubuntu-24.04, -arm)
        arm = item.cell.platform is Platform.LINUX_AARCH64
        want, label = ("manylinux_2_28_aarch64", "ubuntu-24.04-arm") if arm else ("manylinux_2_28", "ubuntu-24.04")
        assert item.toolchain.runner_image == want, cell_id(item.cell)
        assert item.toolchain.runs_on == (label,), cell_id(item.cell)
        assert item.toolchain.gcc_toolset, cell_id(item.cell)
        assert item.toolchain.linux_runtime == COMPAT.linux_runtime_floor
        assert not [n for n in item.toolchain.notes if ABOVE in n], cell_id(item.cell)


def _compat_with_image(gccs: tuple[str, ...]) -> tuple[Compat, MatrixSpec]:
    image = RunnerImage(name="old-linux", os="linux", msvc=(), gcc=gccs, inferred=False, source="test")
    compat = dataclasses.replace(COMPAT, runner_images={**COMPAT.runner_images, "old-linux": image})
    matrix = MATRIX.replace("platforms: [linux_x86_64, win_amd64]", "platforms: [linux_x86_64]").replace(
        "build: [manylinux_2_28, ubuntu-24.04]", "build: [old-linux]"
    )
    return compat, parse_matrix(matrix, "m.yml", compat)


def test_torch_headers_set_the_oldest_gcc() -> None:
    compat, spec = _compat_with_image(("10", "11"))
    item = resolve_cell(parse_cell_id("ds0.19.8-torch2.14-cu130-cp311-linux_x86_64"), compat, spec)
    assert isinstance(item, PlannedCell)
    assert item.toolchain.host_compiler.version == "11"
    assert "GCC >= 11" in item.toolchain.host_compiler.why
    assert "202002L" in item.toolchain.host_compiler.why
    assert "old-linux default is GCC 10" in item.toolchain.host_compiler.why
    older = resolve_cell(parse_cell_id("ds0.19.8-torch2.13-cu130-cp311-linux_x86_64"), compat, spec)
    assert isinstance(older, PlannedCell)
    assert older.toolchain.host_compiler.version == "10"  # torch 2.13's headers take C++17


def test_an_image_with_only_too_old_a_gcc_drops_the_cell() -> None:
    compat, spec = _compat_with_image(("10",))
    dropped = resolve_cell(parse_cell_id("ds0.19.8-torch2.14-cu130-cp311-linux_x86_64"), compat, spec)
    assert isinstance(dropped, DroppedCell)
    assert dropped.reasons[0].rule == "host-compiler"
    assert "no GCC >= 11 and <=" in dropped.reasons[0].message
    assert "__cplusplus" in dropped.reasons[0].message
