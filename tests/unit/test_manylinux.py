"""A Linux wheel's floor as its tag: auditwheel's JSON read, tags compared, names parsed, the pick refusing a
wheel whose tag asks for a newer glibc than the system has.

The recorded ``auditwheel show --json`` (tests/data/auditwheel/show-cpu-debian12.json) is auditwheel 6.8.2's
verdict on the CPU wheel ``nox -s main`` built on Debian 12 (glibc 2.36, GCC 12): its symbols allow
manylinux_2_35, and it links torch's libc10/libtorch_cpu/libtorch_python, which only the exclusion of
torch's libraries keeps from making it ``linux_x86_64``.
"""

from __future__ import annotations

import json

import pytest

from dswheels.doctor.pick import Wanted, nearest, pick_wheel
from dswheels.kernel.compat import load_compat
from dswheels.kernel.index_files import IndexFile
from dswheels.kernel.manylinux import (
    AuditwheelOutputError,
    manylinux_glibc,
    read_auditwheel_show,
    retag_wheel_file,
    tag_problem,
)
from dswheels.kernel.model import Platform, Python, Variant
from dswheels.kernel.naming import WheelNameError, cell_id, parse_wheel, wheel_filename
from dswheels.kernel.versions import TorchMinor
from dswheels.verify.binary_checks import manylinux_tag_verdict
from tests.conftest import DATA

SHOW = (DATA / "auditwheel" / "show-cpu-debian12.json").read_text(encoding="utf-8")
TORCH_LIBS = load_compat().torch_provided_libraries
NAME = "deepspeed-0.19.8+cputorch2.13-cp311-cp311-{}.whl"


def test_the_recorded_verdict_is_manylinux_2_35_with_torchs_libraries_left_out() -> None:
    verdict = read_auditwheel_show(SHOW, TORCH_LIBS)
    assert verdict.tag == "manylinux_2_35_x86_64"
    assert verdict.glibc == (2, 35)
    assert verdict.symbols_tag == "manylinux_2_35_x86_64"
    assert verdict.torch_libraries == ("libc10.so", "libtorch_cpu.so", "libtorch_python.so")
    assert "GLIBCXX_3.4.30" in verdict.versioned_symbols["libstdc++.so.6"]


def test_without_the_exclusion_no_manylinux_tag_fits() -> None:
    """What auditwheel itself says (overall_tag linux_x86_64): torch's libraries are nowhere on the system."""
    verdict = read_auditwheel_show(SHOW, ["libc10*.so*"])  # libtorch_* not excluded
    assert verdict.tag == "linux_x86_64"
    assert verdict.glibc is None
    assert "libtorch_cpu.so, libtorch_python.so, neither a system library it allows nor torch's" in verdict.describe()
    assert json.loads(SHOW)["overall_tag"] == "linux_x86_64"


def test_the_symbols_bound_the_tag_from_below() -> None:
    """A policy upgrade that only torch's libraries block but whose symbols the wheel exceeds is never taken."""
    data = json.loads(SHOW)
    data["sym_tag"] = "manylinux_2_39_x86_64"
    assert read_auditwheel_show(json.dumps(data), TORCH_LIBS).tag == "manylinux_2_39_x86_64"


def test_blacklisted_symbols_and_odd_abis_block_a_tag() -> None:
    data = json.loads(SHOW)
    data["policy_upgrades"]["manylinux_2_35_x86_64"]["blacklisted_symbols"] = {"libz.so.1": ["gzflags"]}
    assert read_auditwheel_show(json.dumps(data), TORCH_LIBS).tag == "manylinux_2_36_x86_64"
    data = json.loads(SHOW)
    data["unsupported_isa"] = True
    verdict = read_auditwheel_show(json.dumps(data), TORCH_LIBS)
    assert verdict.tag == "linux_x86_64"
    assert "uses an ISA, which no manylinux tag allows" in verdict.describe()


def test_an_aarch64_wheels_verdict_names_its_cpu() -> None:
    """auditwheel names the wheel's CPU in its tags (it judges an aarch64 wheel on x86_64 too): the floor of a
    linux_aarch64 wheel is manylinux_2_N_aarch64, and one no tag fits keeps linux_aarch64, never linux_x86_64."""
    arm = SHOW.replace("_x86_64", "_aarch64")
    verdict = read_auditwheel_show(arm, TORCH_LIBS)
    assert (verdict.tag, verdict.glibc) == ("manylinux_2_35_aarch64", (2, 35))
    assert Platform.from_tag(verdict.tag) is Platform.LINUX_AARCH64
    data = json.loads(arm)
    data["unsupported_isa"] = True
    assert read_auditwheel_show(json.dumps(data), TORCH_LIBS).tag == "linux_aarch64"
    assert read_auditwheel_show(arm, ["libc10*.so*"]).tag == "linux_aarch64"
    # verify's check is the same: an aarch64 wheel tagged older than its binaries need fails
    assert tag_problem("manylinux_2_28_aarch64", verdict) == (
        "tagged manylinux_2_28_aarch64 (glibc 2.28), but its binaries need manylinux_2_35_aarch64 (auditwheel)"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "not JSON"),
        ("[" * 100_000, "not JSON"),  # nested too deeply: json.loads' RecursionError was a traceback
        ('{"version": ' + "1" * 5000 + "}", "not JSON"),  # past int()'s 4,300 digits
        (json.dumps({"version": 2}), "version 2"),
        (json.dumps({"version": 1, "wheel": "w", "error": "not a platform wheel"}), "not a platform wheel"),
        (json.dumps({"version": 1, "wheel": "w", "sym_tag": "x"}), "sym_tag or overall_tag missing"),
        (
            json.dumps({"version": 1, "sym_tag": "linux_x86_64", "overall_tag": "linux_x86_64", "policy_upgrades": []}),
            "policy_upgrades is not an object",
        ),
    ],
)
def test_output_that_is_not_auditwheels_is_refused(text: str, message: str) -> None:
    with pytest.raises(AuditwheelOutputError, match=message):
        read_auditwheel_show(text, TORCH_LIBS)


def test_a_tag_below_the_binaries_need_is_refused_and_linux_claims_nothing() -> None:
    verdict = read_auditwheel_show(SHOW, TORCH_LIBS)
    assert tag_problem("manylinux_2_28_x86_64", verdict) == (
        "tagged manylinux_2_28_x86_64 (glibc 2.28), but its binaries need manylinux_2_35_x86_64 (auditwheel)"
    )
    assert tag_problem("manylinux2014_x86_64", verdict) is not None  # a legacy alias is read as glibc 2.17
    assert tag_problem("manylinux_2_35_x86_64", verdict) is None
    assert tag_problem("manylinux_2_39_x86_64", verdict) is None  # a narrower claim is honest, only narrower
    assert tag_problem("linux_x86_64", verdict) is None
    check = manylinux_tag_verdict(NAME.format("manylinux_2_28_x86_64"), verdict)
    assert not check.ok
    assert "pip would install it where an op fails to load" in check.detail
    assert manylinux_tag_verdict(NAME.format("manylinux_2_35_x86_64"), verdict).ok
    unjudged = manylinux_tag_verdict(NAME.format("manylinux_2_28_x86_64"), None)
    assert unjudged.ok
    assert "not judged" in unjudged.detail


def test_tags_and_the_wheel_file() -> None:
    assert manylinux_glibc("manylinux_2_28_aarch64") == (2, 28)
    assert manylinux_glibc("manylinux1_x86_64") == (2, 5)
    assert manylinux_glibc("musllinux_1_2_x86_64") is None
    assert manylinux_glibc("win_amd64") is None
    # ASCII digits only, at most 9 per part as every version's (int() of 5,000 digits raised ValueError)
    assert manylinux_glibc("manylinux_2_\u0662\u0668_x86_64") is None
    assert manylinux_glibc(f"manylinux_2_{'9' * 5000}_x86_64") is None
    text = "Wheel-Version: 1.0\nGenerator: setuptools\nRoot-Is-Purelib: false\nTag: cp311-cp311-linux_x86_64\n"
    assert retag_wheel_file(text, "linux_x86_64", "manylinux_2_35_x86_64").splitlines()[-1] == (
        "Tag: cp311-cp311-manylinux_2_35_x86_64"
    )


def test_a_manylinux_name_is_the_linux_cells_and_keeps_its_tag() -> None:
    wheel = parse_wheel(NAME.format("manylinux_2_28_x86_64"))
    assert cell_id(wheel.cell) == "ds0.19.8-torch2.13-cpu-cp311-linux_x86_64"
    assert wheel.platform_tag == "manylinux_2_28_x86_64"
    assert wheel.canonical == NAME.format("manylinux_2_28_x86_64")
    assert wheel_filename(wheel.cell) == NAME.format("linux_x86_64")  # what `python -m build` names it
    assert parse_wheel(NAME.format("linux_x86_64")).cell == wheel.cell  # wheels of before the tag still read
    with pytest.raises(WheelNameError, match="musllinux"):
        parse_wheel(NAME.format("musllinux_1_2_x86_64"))
    # an aarch64 wheel's floor names its CPU: the linux_aarch64 cell of the same versions (issue 34)
    arm = parse_wheel(NAME.format("manylinux_2_28_aarch64"))
    assert cell_id(arm.cell) == "ds0.19.8-torch2.13-cpu-cp311-linux_aarch64"
    assert arm.platform_tag == "manylinux_2_28_aarch64"
    assert wheel_filename(arm.cell) == NAME.format("linux_aarch64")
    with pytest.raises(WheelNameError):
        parse_wheel(NAME.format("manylinux_2_28_i686"))  # a CPU dswheels builds nothing for


def _file(tag: str) -> IndexFile:
    name = NAME.format(tag)
    return IndexFile(filename=name, url=f"files/{name}", wheel=parse_wheel(name))


def test_the_pick_leaves_out_a_wheel_whose_tag_asks_for_a_newer_glibc() -> None:
    wanted = Wanted(
        torch=TorchMinor((2, 13)),
        variant=Variant.parse("cpu"),
        python=Python.parse("3.11"),
        platform=Platform.LINUX_X86_64,
        glibc=(2, 31),  # Ubuntu 20.04
    )
    newer = _file("manylinux_2_35_x86_64")
    assert pick_wheel(wanted, [newer]) is None
    (why,) = nearest(wanted, [newer])
    assert why == (
        f"{newer.filename}, the wheel for this environment, needs glibc >= 2.35 (its tag); this system has "
        "glibc 2.31: pip and uv refuse it (no matching distribution)"
    )
    torch_floor = _file("manylinux_2_28_x86_64")
    assert pick_wheel(wanted, [newer, torch_floor]) == torch_floor
    # an unknown glibc, or no floor in the tag: the pick is the name's alone
    assert pick_wheel(Wanted(wanted.torch, wanted.variant, wanted.python, wanted.platform), [newer]) == newer
    assert pick_wheel(wanted, [_file("linux_x86_64")]) is not None
