"""``dswheels inspect``'s pure part: a DeepSpeed wheel's contents described, with the warnings a user needs."""

from __future__ import annotations

import pytest

from dswheels.kernel.binaries.dlls import load_dll_facts
from dswheels.kernel.binaries.extension import read_extension
from dswheels.kernel.compat import load_compat
from dswheels.kernel.wheel_contents import parse_installed_info, parse_metadata
from dswheels.verify.inspection import Inspection, NotDeepSpeedError, inspect_wheel, render_inspection
from tests.conftest import DATA

PYD = "deepspeed/ops/adam/fused_adam_op.cp311-win_amd64.pyd"
SO = "deepspeed/ops/adam/cpu_adam_op.cpython-311-x86_64-linux-gnu.so"
BUILDER = (
    "class FusedAdamBuilder(CUDAOpBuilder):\n    NAME = 'fused_adam'\n"
    "    def absolute_name(self):\n        return f'deepspeed.ops.adam.{self.NAME}_op'\n"
)
INSTALLED = (
    "version='0.16.5'\ninstalled_ops={'fused_adam': 1, 'cpu_adam': 1, 'async_io': False}\n"
    "accelerator_name='cuda'\ntorch_info={'version': '2.6', 'cuda_version': '12.4'}\n"
)
METADATA = (
    "Metadata-Version: 2.1\nName: deepspeed\nVersion: 0.16.5\n"
    "Requires-Dist: torch\nRequires-Dist: torch; extra == 'all'\n"
)


def _inspect(filename: str, member: str, data: bytes, *, metadata: str = METADATA) -> Inspection:
    compat = load_compat()
    return inspect_wheel(
        filename=filename,
        metadata=parse_metadata(metadata),
        installed=parse_installed_info(INSTALLED),
        names=(member, "deepspeed/ops/op_builder/fused_adam.py"),
        builder_sources={"deepspeed/ops/op_builder/fused_adam.py": BUILDER},
        binaries={member: read_extension(member, data)},
        dll_facts=load_dll_facts(),
        libstdcxx=compat.libstdcxx,
        toolkit_sm={"12.4": frozenset({50, 60, 70, 80, 90}), "13.0": frozenset({75, 80, 90, 100, 120})},
    )


def test_windows_wheel() -> None:
    found = _inspect("deepspeed-0.16.5-cp311-cp311-win_amd64.whl", PYD, (DATA / "pe" / "fixture.pyd").read_bytes())
    assert (found.version, found.local_label, found.platform_tag, found.python_tag) == (
        "0.16.5",
        "",
        "win_amd64",
        "cp311",
    )
    assert found.torch_requirements == ("torch",)
    assert found.installed_ops == ("fused_adam", "cpu_adam")
    (ext,) = found.extensions
    assert ext.op == "fused_adam"
    assert {v.name: v.ok for v in ext.dlls} == {
        "c10.dll": True,
        "mystery.dll": False,
        "KERNEL32.dll": True,
        "msvcrt.dll": True,
    }
    assert found.target == "torch 2.6 (CUDA 12)"
    warnings = "\n".join(found.warnings)
    assert "torch is not pinned (Requires-Dist: torch)" in warnings
    assert "installed_ops lists cpu_adam, but the wheel has no extension for them" in warnings
    assert "fused_adam imports mystery.dll: not part of Windows" in warnings
    # the fixture carries PTX compute_80, so no "no PTX" warning; sm_75 is beyond this toolkit_sm for 12.4
    assert "no PTX" not in warnings
    assert "SASS sm_75 but torch_info says CUDA 12.4" in warnings
    text = render_inspection(found)
    assert "  torch pin        torch\n" in text
    assert "gpu      SASS sm_75, sm_80; PTX compute_80" in text
    assert "UNEXPECTED mystery.dll" in text
    data = found.as_json()
    assert data["extensions"][0]["gpu"] == {"sass": ["sm_75", "sm_80"], "ptx": ["compute_80"]}  # type: ignore[index]
    assert data["local_label"] is None


def test_linux_wheel_reports_its_glibc_floor() -> None:
    found = _inspect(
        "deepspeed-0.16.5+cu124torch2.6-cp311-cp311-linux_x86_64.whl",
        SO,
        (DATA / "elf" / "libfixture.so").read_bytes(),
        metadata=METADATA.replace("Requires-Dist: torch\n", "Requires-Dist: torch==2.6.*\n"),
    )
    (ext,) = found.extensions
    assert ext.binary.format == "elf"
    assert ext.runtime.startswith("glibc 2.2.5, GLIBCXX 3.4.30")
    assert found.target == ""
    assert not any("not pinned" in w for w in found.warnings)
    assert "needs    glibc 2.2.5, GLIBCXX 3.4.30" in render_inspection(found)


def test_not_deepspeed() -> None:
    with pytest.raises(NotDeepSpeedError, match="a wheel of torch, not of deepspeed"):
        _inspect("torch-2.6.0-cp311-cp311-win_amd64.whl", PYD, b"")


def test_extensions_are_judged_against_where_their_ops_are_imported_from() -> None:
    """An extension no builder imports is flagged, and a built op with no file at its builder's module says where
    its file should be; an extension one folder off is paired with its op."""
    compat = load_compat()
    builders = {
        "deepspeed/ops/op_builder/fused_adam.py": BUILDER,
        "deepspeed/ops/op_builder/cpu_adam.py": BUILDER.replace("FusedAdam", "CPUAdam").replace("fused_", "cpu_"),
    }
    stray = "deepspeed/ops/cpu_adam_op.cp311-win_amd64.pyd"  # one folder above deepspeed/ops/adam/
    data = (DATA / "pe" / "fixture.pyd").read_bytes()
    found = inspect_wheel(
        filename="deepspeed-0.16.5-cp311-cp311-win_amd64.whl",
        metadata=parse_metadata(METADATA),
        installed=parse_installed_info(INSTALLED),
        names=(PYD, stray, *builders),
        builder_sources=builders,
        binaries={PYD: read_extension(PYD, data), stray: read_extension(stray, data)},
        dll_facts=load_dll_facts(),
        libstdcxx=compat.libstdcxx,
        toolkit_sm={},
    )
    by_file = {e.binary.member: e for e in found.extensions}
    assert (by_file[PYD].op, by_file[PYD].module, by_file[PYD].misplaced) == (
        "fused_adam",
        "deepspeed.ops.adam.fused_adam_op",
        "",
    )
    assert by_file[stray].op == "cpu_adam"
    assert by_file[stray].misplaced == (
        f"{stray} imports as deepspeed.ops.cpu_adam_op, but cpu_adam's builder loads deepspeed.ops.adam.cpu_adam_op "
        "(its absolute_name()): loading cpu_adam raises ModuleNotFoundError wherever DeepSpeed calls its builder's "
        "load()"
    )
    assert by_file[stray].misplaced in found.warnings
    assert not any("installed_ops lists cpu_adam" in w for w in found.warnings)  # said once, by the pairing
    text = render_inspection(found)
    assert "module   deepspeed.ops.cpu_adam_op: NOT where its op is imported from (see the warnings)" in text
    assert "module   deepspeed.ops.adam.fused_adam_op: fused_adam's builder imports it from here" in text
    # without the stray file: the op's absence, with the path its builder loads
    alone = inspect_wheel(
        filename="deepspeed-0.16.5-cp311-cp311-win_amd64.whl",
        metadata=parse_metadata(METADATA),
        installed=parse_installed_info(INSTALLED),
        names=(PYD, *builders),
        builder_sources=builders,
        binaries={PYD: read_extension(PYD, data)},
        dll_facts=load_dll_facts(),
        libstdcxx=compat.libstdcxx,
        toolkit_sm={},
    )
    assert (
        "installed_ops lists cpu_adam, but no extension sits where its builder loads it from "
        "(deepspeed.ops.adam.cpu_adam_op: deepspeed/ops/adam/cpu_adam_op.*.so|.pyd): loading cpu_adam raises "
        "ModuleNotFoundError"
    ) in alone.warnings
