"""linux_aarch64 in the plan: one test per fact of compat.yml's aarch64 entries (each with its source), what the
shipped matrix plans from them, and what `plan --explain` says where torch publishes no wheel."""

from __future__ import annotations

import pytest

from dswheels.kernel.compat import load_compat
from dswheels.kernel.compat.entries import AARCH64_KEY
from dswheels.kernel.compiler_flags.judge import judge_op
from dswheels.kernel.compiler_flags.op_flag_set import OpFlags
from dswheels.kernel.compiler_flags.record import load_flag_record
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.model import DroppedCell, PlannedCell, Platform, Python, Variant
from dswheels.kernel.naming import cell_id, parse_cell_id, partition, wheel_filename
from dswheels.kernel.platform_traits import traits
from dswheels.kernel.versions import TorchMinor
from dswheels.plan.effects.matrix_file import load_matrix
from dswheels.plan.matrix.parse import parse_matrix
from dswheels.plan.planner import plan, resolve_cell
from tests.conftest import ROOT

COMPAT = load_compat()
SPEC = load_matrix(ROOT / "matrix" / "matrix.yml", COMPAT)
PLAN = plan(SPEC, COMPAT)
ARM = [p for p in PLAN.planned if p.cell.platform is Platform.LINUX_AARCH64]


def _resolve(cid: str) -> PlannedCell | DroppedCell:
    return resolve_cell(parse_cell_id(cid), COMPAT, SPEC)


def _planned(cid: str) -> PlannedCell:
    item = _resolve(cid)
    assert isinstance(item, PlannedCell), item
    return item


def _dropped(cid: str) -> DroppedCell:
    item = _resolve(cid)
    assert isinstance(item, DroppedCell), cid
    return item


def test_the_shipped_matrix_plans_aarch64_cells_beside_the_x86_64_ones() -> None:
    assert ARM
    x86 = {(p.cell.deepspeed, p.cell.torch, p.cell.variant, p.cell.python) for p in PLAN.planned}
    for item in ARM:
        # pypa's manylinux_2_28 image for arm64 on GitHub's arm64 runner: torch's own aarch64 floor
        assert item.toolchain.runner_image == "manylinux_2_28_aarch64"
        assert item.toolchain.runs_on == ("ubuntu-24.04-arm",)
        assert item.toolchain.container == COMPAT.runner_images["manylinux_2_28_aarch64"].container
        assert item.toolchain.gcc_toolset
        assert item.toolchain.linux_runtime == COMPAT.linux_runtime_floor
        assert item.toolchain.cpu_baseline == "armv8.2-a"
        # torch publishes for aarch64 what it publishes for x86_64 (from 2.9): every aarch64 cell has its twin
        assert (item.cell.deepspeed, item.cell.torch, item.cell.variant, item.cell.python) in x86


@pytest.mark.parametrize("minor", ["2.0", "2.5", "2.8"])
def test_no_aarch64_cell_before_torch_2_9_and_the_plan_says_why(minor: str) -> None:
    # torch-sbsa-ci: 2.9 is the first release PyTorch built for aarch64 with x86_64's CUDA variants (#162364)
    (reason,) = _dropped(f"ds0.19.8-torch{minor}-cpu-cp311-linux_aarch64").reasons
    assert reason.rule == "torch-platform"
    assert "records no linux_aarch64 wheels of torch" in reason.message
    assert "from torch 2.9" in reason.message
    assert "#162364" in reason.source
    assert "2.9-2.15" in reason.fix
    assert COMPAT.sources["torch-sbsa-ci"].count("#162364") == 1


def test_the_pythons_are_pypis_aarch64_tags() -> None:
    # pypi-torch-aarch64: 2.15.0's manylinux_2_28_aarch64 wheels are cp311-cp315 (+ 3.14t, 3.15t); 2.14.1's cp310-cp314
    assert [str(p) for p in COMPAT.torch[TorchMinor((2, 15))].python[AARCH64_KEY]] == [
        "3.11", "3.12", "3.13", "3.14", "3.15", "3.14t", "3.15t"
    ]  # fmt: skip
    assert Python.parse("3.10") in COMPAT.torch[TorchMinor((2, 14))].python[AARCH64_KEY]
    (reason,) = _dropped("ds0.19.8-torch2.15-cu132-cp310-linux_aarch64").reasons
    assert reason.rule == "torch-python"
    assert "has no Python 3.10 wheel for linux_aarch64" in reason.message
    assert "pypi-torch-aarch64" in reason.source
    assert "pypi-torch-aarch64" in COMPAT.sources


def test_the_variants_are_torchs_aarch64_builds() -> None:
    # torch-sbsa-ci: x86_64's CUDA matrix from 2.9 (inferred: download.pytorch.org is not readable here)
    names = {m: [v.name for v in COMPAT.torch[TorchMinor(m)].variants_for(AARCH64_KEY)] for m in ((2, 14), (2, 15))}
    assert names == {(2, 14): ["cu126", "cu130", "cu132", "cpu"], (2, 15): ["cu130", "cu132", "cpu"]}
    assert COMPAT.torch[TorchMinor((2, 15))].inferred_for(AARCH64_KEY)
    (reason,) = _dropped("ds0.19.8-torch2.15-cu126-cp312-linux_aarch64").reasons
    assert reason.rule == "torch-variant"
    assert "has no cu126 build for linux_aarch64 (inferred)" in reason.message
    assert "torch-sbsa-ci" in reason.source


@pytest.mark.parametrize(
    ("minor", "pypi"), [((2, 9), "cpu"), ((2, 10), "cpu"), ((2, 11), "cu130"), ((2, 14), "cu130"), ((2, 15), "cu132")]
)
def test_what_pypis_own_aarch64_wheel_is(minor: tuple[int, int], pypi: str) -> None:
    # pypi-torch-aarch64: torch/version.py inside each minor's wheel (+cpu, +cu130, +cu132)
    assert COMPAT.pypi_variant(minor, AARCH64_KEY) == pypi
    assert COMPAT.pypi_variant(minor, "linux") == COMPAT.torch_pypi_linux_variant[minor]  # x86_64's, as before


def test_the_arch_list_is_what_torchs_aarch64_wheels_carry_and_covers_graces_gpus() -> None:
    # pypi-torch-aarch64: torch._C's arch flags in 2.11.0-2.15.0: sm_80 sm_90 sm_100 sm_110 sm_120, no PTX
    for cid in ("ds0.19.8-torch2.14-cu130-cp311-linux_aarch64", "ds0.19.8-torch2.15-cu132-cp312-linux_aarch64"):
        assert _planned(cid).toolchain.arch_list == ("8.0", "9.0", "10.0", "11.0", "12.0")
    archs = {
        int(a.replace(".", "")) for a in _planned("ds0.19.8-torch2.14-cu130-cp311-linux_aarch64").toolchain.arch_list
    }
    # GH200 sm_90; GB200 sm_100 and GB300 sm_103 (sm_100 SASS runs there); DGX Spark sm_121 (sm_120's); Thor sm_110
    for gpu in (90, 100, 103, 110, 121):
        assert max(a for a in archs if a // 10 == gpu // 10 and a <= gpu) >= gpu // 10 * 10
    row = COMPAT.torch_arch_list((2, 14), "cu130", AARCH64_KEY)
    assert row is not None
    assert not row.inferred
    assert "pypi-torch-aarch64" in row.source
    # the x86_64 row of the same variant is another one: +PTX on 12.0, no 11.0
    assert COMPAT.torch_arch_list((2, 14), "cu130", "linux") is not row


def test_the_toolkit_is_nvidias_sbsa_build_with_the_same_gcc_gate() -> None:
    # nvidia-redist (linux-sbsa archives), host-config-sbsa (the aarch64 wheels' host_config.h: GCC <= 15 for 13.0)
    item = _planned("ds0.19.8-torch2.14-cu130-cp311-linux_aarch64")
    assert item.toolchain.cuda_toolkit == "13.0.3"
    assert item.toolchain.host_compiler.kind == "gcc"
    assert int(item.toolchain.host_compiler.version) <= COMPAT.cuda[(13, 0)].gcc_max == 15
    assert "host-config-sbsa" in COMPAT.cuda[(13, 0)].source
    assert traits(Platform.LINUX_AARCH64).cuda_redist == "linux-sbsa"
    assert not [n for n in item.toolchain.notes if "cuda-redist" in n]


def test_the_runner_is_githubs_arm64_image() -> None:
    # updates-2026-11-28: GitHub's arm64 runners; arm-cores: Cobalt 100 (Neoverse N2). ubuntu-22.04-arm retires
    # with ubuntu-22.04 (actions/runner-images#14254): not recorded, so no cell can plan onto it
    arm = COMPAT.runner_images["ubuntu-24.04-arm"]
    assert (arm.os, arm.arch) == ("linux", "aarch64")
    assert "updates-2026-11-28" in arm.source
    assert "ubuntu-22.04-arm" not in COMPAT.runner_images
    # the container the cells build in: the same pinned cibuildwheel tag as x86_64's, on the arm64 runner
    image = COMPAT.runner_images["manylinux_2_28_aarch64"]
    assert (image.os, image.arch, image.label, image.glibc) == ("linux", "aarch64", "ubuntu-24.04-arm", (2, 28))
    assert image.container.startswith("quay.io/pypa/manylinux_2_28_aarch64@sha256:")
    assert "2026.08.15-1" in image.source
    assert "2026.08.15-1" in COMPAT.runner_images["manylinux_2_28"].source
    # an x86_64 image cannot build an aarch64 cell, nor the other way round (the matrix check says so)
    text = (ROOT / "matrix" / "matrix.yml").read_text(encoding="utf-8")
    for x86 in ("manylinux_2_28", "ubuntu-24.04"):
        with pytest.raises(ConfigError) as err:
            parse_matrix(text.replace("build: [manylinux_2_28_aarch64]", f"build: [{x86}]"), "m", COMPAT)
        assert f"image {x86!r} runs on x86_64, not aarch64" in (err.value.details or str(err.value))


def test_the_cpu_baseline_and_the_flag_judge_on_aarch64() -> None:
    # arm-cores (Neoverse N1 = Armv8.2-A and newer), ds-setup (-D__NEON__ / -D__SVE__ from 0.19.7)
    baseline = COMPAT.baseline_for("aarch64")
    assert (baseline.name, baseline.gcc, baseline.simd) == ("armv8.2-a", "-march=armv8.2-a", "-D__NEON__")
    assert COMPAT.baseline_for("x86_64").name == "x86-64-v2"
    # the record's (x86-64-v2) baseline flags are swapped for the cell's: nothing is left out on aarch64
    item = _planned("ds0.19.8-torch2.14-cpu-cp311-linux_aarch64")
    assert "cpu_adam" in item.ops.build_names
    assert not [reason for _, reason in item.ops.left_out if "rejects" in reason]
    record = load_flag_record()
    found = record.lookup("0.19.8", ("linux", "cpu", ""))
    assert found is not None
    cpu_adam = found[0]["cpu_adam"]
    assert "-march=x86-64-v2" in cpu_adam.cxx
    # unswapped, AArch64 gcc would stop at the x86 baseline: the swap is what keeps the op
    fatal = judge_op(cpu_adam, platform=Platform.LINUX_AARCH64, deepspeed="0.19.8", nvcc=record.nvcc)
    assert [f.issue.flag for f in fatal if f.fatal] == ["-march=x86-64-v2"]
    # DeepSpeed's own aarch64 branch (-march=native) is refused on both CPUs
    native = OpFlags(op="cpu_adam", extension="CppExtension", cxx=("-O3", "-march=native", "-D__SVE__"), nvcc=None)
    for platform in (Platform.LINUX_AARCH64, Platform.LINUX_X86_64):
        issues = judge_op(native, platform=platform, deepspeed="0.19.8", nvcc=record.nvcc)
        assert [(f.issue.flag, f.issue.code) for f in issues if f.fatal] == [("-march=native", "host-cpu")]


def test_the_index_serves_an_aarch64_wheel_in_its_own_variant_and_torch_partition() -> None:
    item = _planned("ds0.19.8-torch2.10-cpu-cp311-linux_aarch64")
    assert cell_id(item.cell) == "ds0.19.8-torch2.10-cpu-cp311-linux_aarch64"
    assert wheel_filename(item.cell) == "deepspeed-0.19.8+cputorch2.10-cp311-cp311-linux_aarch64.whl"
    # the partition of its variant and torch, beside the x86_64 wheel of the same cell: pip and uv take the one
    # whose platform tag fits the machine, as from PyTorch's own cu130 index
    assert partition(item.cell) == "cpu-torch2.10"
    assert Variant.parse("cu130").name == "cu130"


def test_the_arm64_container_keeps_the_promise_only_inside_it() -> None:
    """pypa's aarch64 image sets AUDITWHEEL_PLAT=manylinux_2_28_aarch64: there the cell keeps the plan's floor; built
    anywhere else (the arm64 root under qemu, the x86_64 image) it promises only the tag it gets."""
    from dswheels.building.effects.floor_tag import as_built_here

    item = ARM[0]
    assert as_built_here(item, {"AUDITWHEEL_PLAT": "manylinux_2_28_aarch64"}) is item
    for environ in ({}, {"AUDITWHEEL_PLAT": "manylinux_2_28_x86_64"}):
        elsewhere = as_built_here(item, environ)
        assert elsewhere.toolchain.linux_runtime is None
        assert "built outside the plan's manylinux_2_28_aarch64 container" in elsewhere.toolchain.notes[-1]
