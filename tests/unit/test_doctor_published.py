"""doctor against a published index, its JSON and text output, and a Linux system's runtime
against what the published wheels need (facts recorded from real machines)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from dswheels.cli import main
from dswheels.doctor import IndexView, Status, diagnose
from dswheels.doctor.machine_facts import (
    Facts,
    LinuxRuntime,
)
from dswheels.doctor.machine_facts_json import facts_from_data, facts_to_data
from dswheels.doctor.render_report import DOCTOR_SCHEMA, render_json, render_text
from dswheels.kernel.binaries.linux_runtime import PublishedRuntime, RuntimeFloor
from dswheels.kernel.compat import Compat
from dswheels.kernel.index_files import IndexFile
from dswheels.kernel.model import Platform, Python, Variant
from dswheels.kernel.naming import cell_id, try_parse_wheel, wheel_filename
from tests.unit.machines import (
    DATA,
    NEWEST_DS,
    load_machine,
    machine_data,
    machine_names,
    one,
    statuses,
)

# --- the published index ------------------------------------------------------------------------


def _file(name: str) -> IndexFile:
    return IndexFile(
        filename=name,
        url=f"https://example.org/files/{name}",
        sha256="0" * 64,
        wheel=try_parse_wheel(name),
    )


def test_published_wheel_is_picked(compat: Compat) -> None:
    files = tuple(
        _file(n)
        for n in (
            "deepspeed-0.19.7+cu124torch2.6-cp312-cp312-win_amd64.whl",
            "deepspeed-0.19.8+cu124torch2.6-cp312-cp312-win_amd64.whl",
            "deepspeed-0.19.8+cu126torch2.6-cp312-cp312-win_amd64.whl",
        )
    )
    index = IndexView(url="https://example.org", files=files)
    report = diagnose(load_machine("windows-healthy-cu124"), compat, index=index)
    assert report.verdict.wheel is not None
    assert report.verdict.wheel.filename == "deepspeed-0.19.8+cu124torch2.6-cp312-cp312-win_amd64.whl"
    assert one(report, "index").status is Status.OK
    older = diagnose(load_machine("windows-healthy-cu124"), compat, index=index, deepspeed=(0, 19, 7))
    assert older.verdict.wheel is not None
    assert older.verdict.wheel.filename.startswith("deepspeed-0.19.7+cu124torch2.6")


def test_nearest_published_cells(compat: Compat) -> None:
    files = tuple(
        _file(n)
        for n in (
            "deepspeed-0.19.8+cu124torch2.5-cp312-cp312-win_amd64.whl",
            "deepspeed-0.19.8+cu124torch2.7-cp312-cp312-win_amd64.whl",
            "deepspeed-0.19.8+cu126torch2.6-cp312-cp312-win_amd64.whl",
            "deepspeed-0.19.8+cu124torch2.6-cp311-cp311-win_amd64.whl",
        )
    )
    report = diagnose(load_machine("windows-healthy-cu124"), compat, index=IndexView(url="x", files=files))
    assert report.verdict.wheel is None
    assert report.verdict.nearest == (
        "torch 2.6 is installed; wheels exist for torch 2.5 and 2.7 with cu124 (Python 3.12, win_amd64)",
        "torch 2.6 cu124 is installed; for torch 2.6 wheels exist with cu126 (Python 3.12, win_amd64)",
        "Python 3.12 is in use; torch 2.6 cu124 wheels exist for Python 3.11 (win_amd64)",
    )
    index = one(report, "index")
    assert index.status is Status.WARN
    assert index.title == f"no published wheel for ds{NEWEST_DS}-torch2.6-cu124-cp312-win_amd64"


def test_unreadable_index_fails(compat: Compat) -> None:
    """doctor was told to read it: what it says cannot be known, so the answer is not OK (exit 9)."""
    index = IndexView(url="https://example.org", error="cannot reach the index")
    report = diagnose(load_machine("linux-healthy-cu128"), compat, index=index)
    assert one(report, "index").status is Status.FAIL
    assert report.worst is Status.FAIL
    assert report.verdict.nearest == ()


# --- output -------------------------------------------------------------------------------------


def test_json_report_shape(compat: Compat) -> None:
    facts = load_machine("windows-cu121-msvc1444")
    data = json.loads(render_json(diagnose(facts, compat), facts, version="0"))
    assert data["schema"] == DOCTOR_SCHEMA
    assert data["status"] == "ok"
    assert {c["id"] for c in data["checks"]} >= {"platform", "python", "torch", "gpu", "cuda_home", "toolkit", "msvc"}
    verdict = data["verdict"]
    assert verdict["cell"] == f"ds{NEWEST_DS}-torch2.3-cu121-cp311-win_amd64"
    assert verdict["wheel_filename"] == f"deepspeed-{NEWEST_DS}+cu121torch2.3-cp311-cp311-win_amd64.whl"
    assert verdict["local_build"]["host_compiler"]["version"] == "14.29"
    assert verdict["local_build"]["status"] == "warn"
    assert facts_from_data(data["facts"]) == facts


def test_text_report(compat: Compat) -> None:
    text = render_text(diagnose(load_machine("windows-cu121-msvc1444"), compat))
    assert "[OK  ] torch 2.3.1+cu121 (CUDA 12.1)" in text
    assert f"  this environment   ds{NEWEST_DS}-torch2.3-cu121-cp311-win_amd64" in text
    assert "  local build        works with the steps below" in text
    assert "    needs:   use MSVC 14.29: call vcvarsall.bat x64 -vcvars_ver=14.29" in text
    assert text.rstrip().endswith("0 warnings, 0 failures")


@pytest.mark.parametrize(("name", "code"), [("windows-healthy-cu124", 0), ("windows-cpu-torch-gpu", 9)])
def test_cli_judges_saved_facts(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, code: int) -> None:
    saved = tmp_path / "doctor.json"
    saved.write_text(json.dumps({"schema": DOCTOR_SCHEMA, "facts": machine_data(name)}), encoding="utf-8")
    assert main(["doctor", "--facts", str(saved)]) == code
    out = capsys.readouterr().out
    assert "verdict" in out
    assert main(["doctor", "--facts", str(saved), "--json"]) == code
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == ("ok" if code == 0 else "fail")


def test_cli_rejects_bad_facts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "doctor.json"
    saved.write_text(json.dumps({"facts": {"os": 3}}), encoding="utf-8")
    assert main(["doctor", "--facts", str(saved)]) == 2
    assert "facts.os: expected a string" in capsys.readouterr().err


def test_recorded_machines_are_documented() -> None:
    readme = (DATA / "machines" / "README.md").read_text(encoding="utf-8")
    for name in machine_names():
        assert f"`{name}`" in readme, f"{name} has no provenance in tests/data/machines/README.md"
        assert machine_data(name).get("provenance"), name


def test_cell_of_the_environment_round_trips(compat: Compat) -> None:
    report = diagnose(load_machine("linux-healthy-cu128"), compat)
    cell = report.verdict.cell
    assert cell is not None
    assert (cell.torch, cell.variant, cell.python, cell.platform) == (
        (2, 8),
        Variant.parse("cu128"),
        Python.parse("3.12"),
        Platform.LINUX_X86_64,
    )
    assert cell_id(cell) == report.verdict.cell_id


# --- glibc / libstdc++ of a Linux system against what the wheels need ----------------------------


def _manifest_wheel(compat: Compat, name: str) -> tuple[IndexView, str]:
    """An index publishing the wheel doctor picks for the recorded cputorch machines."""
    report = diagnose(load_machine(name), compat)
    cell = report.verdict.cell
    assert cell is not None
    filename = wheel_filename(cell)
    return IndexView(url="https://example.org", files=(_file(filename),)), filename


def test_this_machine_meets_the_promised_runtime(compat: Compat) -> None:
    for name in ("linux-cuda13-cputorch-nogpu", "linux-cuda13-cudatorch-nogpu"):
        check = one(diagnose(load_machine(name), compat), "linux_runtime")
        assert check.status is Status.OK, check
        assert check.title == "glibc 2.36, libstdc++ GLIBCXX_3.4.30: loads the published Linux wheels"
        assert "the published Linux wheels need glibc >= 2.28 and GLIBCXX_3.4.24 (GCC 7's libstdc++)" in check.detail
        assert "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30 defines up to GLIBCXX_3.4.30 and CXXABI_1.3.13" in (
            check.detail
        )


def _rhel7_like() -> Facts:
    """The recorded RHEL 9-like machine with RHEL 7's glibc 2.17 and GCC 4.8's libstdc++: below torch's floor."""
    facts = load_machine("linux-rhel9-like-cputorch")
    assert facts.linux_runtime is not None
    old = dataclasses.replace(
        facts.linux_runtime, glibc="glibc 2.17", libstdcxx="/usr/lib64/libstdc++.so.6.0.19", glibcxx="3.4.19"
    )
    return dataclasses.replace(facts, linux_runtime=dataclasses.replace(old, cxxabi="1.3.7"))


def test_a_rhel9_like_system_loads_the_published_wheels(compat: Compat) -> None:
    """RHEL 9 (glibc 2.34, GCC 11's libstdc++) is above torch's floor, manylinux_2_28: the wheels run there."""
    check = one(diagnose(load_machine("linux-rhel9-like-cputorch"), compat), "linux_runtime")
    assert check.status is Status.OK, check


def test_a_system_below_torchs_floor_fails_with_the_fix(compat: Compat) -> None:
    report = diagnose(_rhel7_like(), compat)
    check = one(report, "linux_runtime")
    assert check.status is Status.FAIL
    assert report.worst is Status.FAIL
    assert check.detail.startswith(
        "the published Linux wheels need glibc >= 2.28 and GLIBCXX_3.4.24 (GCC 7's libstdc++) and CXXABI_1.3.11; "
        "this system has glibc 2.17; /usr/lib64/libstdc++.so.6.0.19 defines up to GLIBCXX_3.4.19 and CXXABI_1.3.7"
    )
    assert "GLIBC_2.28 > 2.17, GLIBCXX_3.4.24 > 3.4.19, CXXABI_1.3.11 > 1.3.7" in check.detail
    assert 'Loading an op would fail with "version `GLIBC_2.28\' not found"' in check.detail
    assert check.fix.startswith("build locally with `dswheels build`")
    assert "glibc cannot be replaced inside an environment" in check.fix
    # libstdc++ alone too old: a conda env with a newer one is the other way out
    facts = _rhel7_like()
    assert facts.linux_runtime is not None
    newer_glibc = dataclasses.replace(facts.linux_runtime, glibc="glibc 2.28")
    only_cxx = one(diagnose(dataclasses.replace(facts, linux_runtime=newer_glibc), compat), "linux_runtime")
    assert only_cxx.status is Status.FAIL
    assert "GLIBCXX_3.4.24 > 3.4.19" in only_cxx.detail
    assert "GLIBC_2" not in only_cxx.detail
    assert only_cxx.fix.startswith("build locally with `dswheels build` (a wheel built here needs only this system's")


def test_with_an_index_the_picked_wheels_own_runtime_is_judged(compat: Compat) -> None:
    index, filename = _manifest_wheel(compat, "linux-rhel9-like-cputorch")
    # a wheel built on an old system needs less than the promise: it loads on RHEL 9
    modest = PublishedRuntime(
        filename, "https://example.org/x.manifest.json", RuntimeFloor(glibc=(2, 17), glibcxx=(3, 4, 29))
    )
    report = diagnose(load_machine("linux-rhel9-like-cputorch"), compat, index=index, published=modest)
    assert report.verdict.wheel is not None
    assert report.verdict.wheel.filename == filename
    check = one(report, "linux_runtime")
    assert check.status is Status.OK, check
    assert f"the published wheel {filename} (its build manifest) needs glibc >= 2.17 and GLIBCXX_3.4.29" in (
        check.detail
    )
    # and one that needs more than this machine has fails here, though the promise holds
    index, filename = _manifest_wheel(compat, "linux-cuda13-cputorch-nogpu")
    greedy = PublishedRuntime(filename, "u", RuntimeFloor(glibc=(2, 39), glibcxx=(3, 4, 33), cxxabi=(1, 3, 15)))
    check = one(
        diagnose(load_machine("linux-cuda13-cputorch-nogpu"), compat, index=index, published=greedy), "linux_runtime"
    )
    assert check.status is Status.FAIL
    assert "GLIBC_2.39 > 2.36, GLIBCXX_3.4.33 > 3.4.30, CXXABI_1.3.15 > 1.3.13" in check.detail
    # a manifest without runtime (or none at all): the promise, and the check says so
    absent = PublishedRuntime(filename, "u", None, "the index has no build manifest beside the wheel")
    check = one(
        diagnose(load_machine("linux-cuda13-cputorch-nogpu"), compat, index=index, published=absent), "linux_runtime"
    )
    assert check.status is Status.OK
    assert f"[judged by the promise: for {filename}, the index has no build manifest beside the wheel]" in check.detail
    # the manifest of another wheel than the one picked is not used
    other = PublishedRuntime("deepspeed-other.whl", "u", RuntimeFloor(glibcxx=(3, 4, 99)))
    check = one(
        diagnose(load_machine("linux-cuda13-cputorch-nogpu"), compat, index=index, published=other), "linux_runtime"
    )
    assert check.status is Status.OK


def test_no_runtime_check_on_windows_or_for_older_recordings(compat: Compat) -> None:
    assert "linux_runtime" not in statuses(diagnose(load_machine("windows-healthy-cu124"), compat))
    assembled = load_machine("linux-healthy-cu128")  # assembled from recordings that predate the probe
    assert assembled.linux_runtime is None
    assert "linux_runtime" not in statuses(diagnose(assembled, compat))
    # facts of a Windows machine never carry it, even if a file claims so
    facts = dataclasses.replace(
        load_machine("windows-healthy-cu124"), linux_runtime=load_machine("linux-rhel9-like-cputorch").linux_runtime
    )
    assert "linux_runtime" not in statuses(diagnose(facts, compat))


def test_an_unreadable_libstdcxx_is_a_warning(compat: Compat) -> None:
    facts = load_machine("linux-cuda13-cputorch-nogpu")
    assert facts.linux_runtime is not None
    lr = dataclasses.replace(
        facts.linux_runtime, libstdcxx="", glibcxx="", cxxabi="", how="", error="no libstdc++.so.6 found"
    )
    check = one(diagnose(dataclasses.replace(facts, linux_runtime=lr), compat), "linux_runtime")
    assert check.status is Status.WARN
    assert "no libstdc++.so.6 found" in check.detail
    assert "not read: GLIBCXX, CXXABI" in check.detail


def test_runtime_facts_round_trip_and_old_files_load() -> None:
    data = machine_data("linux-rhel9-like-cputorch")
    facts = facts_from_data(data)
    assert facts.linux_runtime == LinuxRuntime(
        glibc="glibc 2.34",
        libstdcxx="/usr/lib64/libstdc++.so.6.0.29",
        glibcxx="3.4.29",
        cxxabi="1.3.13",
        how="loaded by torch",
    )
    assert facts_to_data(facts)["linux_runtime"] == data["linux_runtime"]
    del data["linux_runtime"]
    assert facts_from_data(data).linux_runtime is None
    assert "linux_runtime" not in facts_to_data(facts_from_data(data))


def test_cli_fails_a_machine_below_torchs_floor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "doctor.json"
    saved.write_text(json.dumps({"facts": facts_to_data(_rhel7_like())}), encoding="utf-8")
    assert main(["doctor", "--facts", str(saved)]) == 9
    out = capsys.readouterr().out
    assert "[FAIL] glibc/libstdc++ older than the published Linux wheels need" in out
    assert "fix: build locally with `dswheels build`" in out


# --- an arm64 machine (linux_aarch64) ----------------------------------------------------------------


ARM_WHEEL = "deepspeed-0.19.8+cputorch2.10-cp311-cp311-linux_aarch64.whl"


def test_an_arm64_machine_gets_the_aarch64_wheel_of_its_partition(compat: Compat) -> None:
    # the arm64 machine's own facts (recorded in an arm64 root under qemu: torch 2.10.0+cpu, Python 3.11)
    facts = load_machine("linux-aarch64-qemu-cputorch")
    assert (facts.machine, facts.python.platform if facts.python else None) == ("aarch64", "linux-aarch64")
    # the partition cpu-torch2.10 holds both CPUs' wheels of the cell: the x86_64 one is not this machine's
    files = (_file(ARM_WHEEL.replace("linux_aarch64", "linux_x86_64")), _file(ARM_WHEEL))
    report = diagnose(facts, compat, index=IndexView(url="https://example.org", files=files))
    assert one(report, "platform").status is Status.OK
    assert "linux_aarch64 wheels" in one(report, "platform").title
    assert report.verdict.wheel is not None
    assert report.verdict.wheel.filename == ARM_WHEEL
    assert one(report, "index").status is Status.OK


def test_an_x86_64_machine_is_refused_the_aarch64_wheel(compat: Compat) -> None:
    # an x86_64 machine with the same torch minor, variant and Python as an aarch64 wheel of the index
    facts = load_machine("linux-cuda13-cputorch-nogpu")  # torch 2.13.0+cpu, Python 3.11, x86_64
    arm = ARM_WHEEL.replace("torch2.10", "torch2.13")
    report = diagnose(facts, compat, index=IndexView(url="https://example.org", files=(_file(arm),)))
    assert report.verdict.wheel is None
    assert report.verdict.nearest == ("the index has no linux_x86_64 wheels at all",)
    # and the arm64 machine is refused the x86_64 one the same way
    x86 = _file(ARM_WHEEL.replace("linux_aarch64", "linux_x86_64"))
    arm_report = diagnose(load_machine("linux-aarch64-qemu-cputorch"), compat, index=IndexView(url="x", files=(x86,)))
    assert arm_report.verdict.wheel is None
    assert arm_report.verdict.nearest == ("the index has no linux_aarch64 wheels at all",)
