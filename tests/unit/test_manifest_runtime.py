"""The manifest's ``runtime`` and ``producer`` (schema 2, still reading 1), and how verify judges the floor."""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from dswheels.kernel.binaries.linux_runtime import LibstdcxxRelease, RuntimeFloor
from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.manifest import (
    MANIFEST_SCHEMA,
    BuiltOp,
    FileInfo,
    Manifest,
    ManifestError,
    manifest_name,
    parse_manifest,
    render_manifest,
)
from dswheels.kernel.naming import parse_cell_id
from dswheels.verify.effects.prove import load_expected
from dswheels.verify.registry import Check
from dswheels.verify.static_checks import Expected, ExpectedFrom, expected_from_manifest
from dswheels.verify.step import _plan_expectation
from tests.support.planned import planned_cell
from tests.support.verify_facts import elf, run_checks, wheel_facts

COMPAT = load_compat()
CELL = parse_cell_id("ds0.19.8-torch2.13-cpu-cp311-linux_x86_64")
SO = "deepspeed/ops/adam/cpu_adam_op.cpython-311-x86_64-linux-gnu.so"
# what cpu_adam_op of a real 0.19.8 build here needs (readelf --version-info, GCC 12.2, glibc 2.36)
CPU_ADAM_NEEDS = {
    "libm.so.6": ("GLIBC_2.2.5", "GLIBC_2.29"),
    "libstdc++.so.6": ("GLIBCXX_3.4.30", "GLIBCXX_3.4.21", "CXXABI_1.3.9", "CXXABI_1.3"),
    "libc.so.6": ("GLIBC_2.14", "GLIBC_2.34", "GLIBC_2.2.5"),
    "libgcc_s.so.1": ("GCC_3.0",),
}
CPU_ADAM_FLOOR = RuntimeFloor(glibc=(2, 34), glibcxx=(3, 4, 30), cxxabi=(1, 3, 9))
PROMISE = RuntimeFloor(glibc=(2, 35), glibcxx=(3, 4, 30), cxxabi=(1, 3, 13))
PLANNED = planned_cell("ds0.19.8-torch2.13-cpu-cp311-linux_x86_64", linux_runtime=PROMISE)


def _manifest(**kw: object) -> Manifest:
    base = Manifest(
        cell_id="ds0.19.8-torch2.13-cpu-cp311-linux_x86_64",
        plan=PLANNED,
        wheel=FileInfo(
            filename="deepspeed-0.19.8+cputorch2.13-cp311-cp311-linux_x86_64.whl", size=10, sha256="ab" * 32
        ),
        accelerator="cpu",
        torch_version="2.13.0+cpu",
        torch_cuda=None,
        python_version="3.11.7",
        toolchain={"cxx": "c++ (Debian 12.2.0-14) 12.2.0"},
        cpu_baseline="x86-64-v2",
        arch_list="",
        env={"DS_BUILD_CPU_ADAM": "1"},
        ops_built=(BuiltOp("cpu_adam", "DS_BUILD_CPU_ADAM", SO, "deepspeed.ops.adam.cpu_adam_op", 1234, 12.5),),
        ops_left_out={},
        durations={"total": 100.0},
        source={"kind": "sdist"},
        source_changes=(),
        created="2026-11-23T00:00:00Z",
        dswheels="0.1.0",
        runtime=CPU_ADAM_FLOOR,
    )
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


# --- the manifest --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "runtime",
    [
        CPU_ADAM_FLOOR,
        RuntimeFloor(glibc=(2, 17)),
        RuntimeFloor(glibc=(2, 35), glibcxx=(3, 4, 30), cxxabi=(1, 3, 13), private=("GLIBC_PRIVATE",)),
        None,
    ],
)
def test_runtime_round_trips(runtime: RuntimeFloor | None) -> None:
    manifest = _manifest(runtime=runtime)
    text = render_manifest(manifest)
    data = json.loads(text)
    assert data["schema"] == MANIFEST_SCHEMA == "dswheels.manifest/3"
    assert data["runtime"] == (runtime.as_json() if runtime else None)
    assert parse_manifest(text) == manifest


def test_a_schema_1_manifest_is_still_read() -> None:
    data = json.loads(render_manifest(_manifest()))
    data["schema"] = "dswheels.manifest/1"
    del data["runtime"], data["producer"]
    old = parse_manifest(json.dumps(data))
    assert old.runtime is None
    assert old.producer == "dswheels build"


def test_source_changes_round_trip_and_a_schema_2_manifest_has_none() -> None:
    changes = ("added MANIFEST_win.in (316 bytes): in DeepSpeed's git, not in its sdist; win32 needs it",)
    manifest = _manifest(source_changes=changes)
    data = json.loads(render_manifest(manifest))
    assert data["source_changes"] == list(changes)
    assert parse_manifest(render_manifest(manifest)).source_changes == changes
    data["schema"] = "dswheels.manifest/2"
    del data["source_changes"]
    assert parse_manifest(json.dumps(data)).source_changes == ()


def test_each_ops_sass_round_trips_and_an_older_manifest_has_none() -> None:
    fused = BuiltOp(
        "fused_adam", "DS_BUILD_FUSED_ADAM", "f.so", "deepspeed.ops.adam.fused_adam_op", 9, 1.0, sass=(75, 80)
    )
    manifest = _manifest(ops_built=(fused,))
    data = json.loads(render_manifest(manifest))
    assert data["ops"]["built"][0]["sass"] == [75, 80]
    assert parse_manifest(render_manifest(manifest)) == manifest
    del data["ops"]["built"][0]["sass"]
    assert parse_manifest(json.dumps(data)).ops_built[0].sass == ()


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda d: d["runtime"].update(glibc="2.3x"), "runtime.glibc is not a version: '2.3x'"),
        (lambda d: d.update(producer="make"), "producer 'make' is none of dswheels build"),
        (
            lambda d: d.update(schema="dswheels.manifest/4"),
            "this dswheels reads dswheels.manifest/1, dswheels.manifest/2, dswheels.manifest/3",
        ),
    ],
)
def test_bad_runtime_fields_are_errors(edit: object, words: str) -> None:
    data = json.loads(render_manifest(_manifest()))
    assert callable(edit)
    edit(data)
    with pytest.raises(ManifestError) as info:
        parse_manifest(json.dumps(data))
    assert words in str(info.value)


# --- what verify expects and how it judges -------------------------------------------------------


def _without_promise() -> Manifest:
    return _manifest(
        plan=dataclasses.replace(PLANNED, toolchain=dataclasses.replace(PLANNED.toolchain, linux_runtime=None))
    )


def test_the_promise_comes_from_the_manifests_plan_else_compat() -> None:
    expected = expected_from_manifest(_manifest(), CELL, default_runtime=RuntimeFloor(glibc=(2, 17)))
    assert expected.linux_runtime == RuntimeFloor(glibc=(2, 35), glibcxx=(3, 4, 30), cxxabi=(1, 3, 13))
    assert expected.linux_runtime_from == "the manifest's plan"
    assert expected.recorded_runtime == CPU_ADAM_FLOOR
    # a manifest from before `runtime` (and the plan's promise): compat.yml's promise
    older = expected_from_manifest(
        dataclasses.replace(_without_promise(), runtime=None), CELL, default_runtime=COMPAT.linux_runtime_floor
    )
    assert older.linux_runtime == COMPAT.linux_runtime_floor
    assert "compat.yml" in older.linux_runtime_from
    # a build for its own machine, or a container cell built outside it: no promise, its tag says its floor
    here = expected_from_manifest(_without_promise(), CELL, default_runtime=COMPAT.linux_runtime_floor)
    assert here.linux_runtime is None
    windows = parse_cell_id("ds0.19.8-torch2.13-cpu-cp311-win_amd64")
    assert expected_from_manifest(_manifest(), windows).linux_runtime is None
    # an unreadable promise is the manifest's error now, when it is read (it never reaches verify)
    data = json.loads(render_manifest(_manifest()))
    data["plan"]["toolchain"]["linux_runtime"] = {"glibc": "two"}
    with pytest.raises(ManifestError, match=r"plan\.toolchain\.linux_runtime\.glibc is not a version: 'two'"):
        parse_manifest(json.dumps(data))
    data["plan"]["toolchain"]["linux_runtime"] = None
    assert parse_manifest(json.dumps(data)).plan.toolchain.linux_runtime is None


def test_an_older_manifest_without_a_promise_in_its_plan_is_read() -> None:
    data = json.loads(render_manifest(_manifest()))
    data["schema"] = "dswheels.manifest/1"
    del data["runtime"], data["producer"], data["plan"]["toolchain"]["linux_runtime"]
    data["plan"]["source"]["kind"] = "git-archive"  # before one source served every platform
    old = parse_manifest(json.dumps(data))
    assert old.plan.toolchain.linux_runtime is None
    assert old.plan.source.kind == "archive"
    older = expected_from_manifest(old, CELL, default_runtime=COMPAT.linux_runtime_floor)
    assert older.linux_runtime == COMPAT.linux_runtime_floor


def test_the_manifests_plan_is_a_typed_planned_cell_and_must_be_its_cell() -> None:
    manifest = parse_manifest(render_manifest(_manifest()))
    assert manifest.plan == PLANNED
    data = json.loads(render_manifest(_manifest()))
    data["cell_id"] = "ds0.19.8-torch2.13-cpu-cp312-linux_x86_64"
    with pytest.raises(ManifestError, match="is not its plan's"):
        parse_manifest(json.dumps(data))
    data = json.loads(render_manifest(_manifest()))
    data["plan"]["wheel"] = "deepspeed-0.19.8-py3-none-any.whl"
    with pytest.raises(ManifestError, match=r"plan\.wheel is .* but the cell's own fields make it"):
        parse_manifest(json.dumps(data))


def linux_runtime_checks(
    needs: Mapping[str, Mapping[str, tuple[str, ...]]], expected: Expected, libstdcxx: Sequence[LibstdcxxRelease]
) -> list[Check]:
    """The registry's two runtime checks of the ELF extensions ``needs`` describes."""
    facts = wheel_facts(expected, binaries={m: elf(m, n) for m, n in needs.items()}, libstdcxx=libstdcxx)
    return run_checks(("linux runtime", "manifest runtime"), facts)


def _expected(promise: RuntimeFloor | None, recorded: RuntimeFloor | None = None) -> Expected:
    return Expected(
        cell=CELL,
        ops=("cpu_adam",),
        modules={"cpu_adam": "deepspeed.ops.adam.cpu_adam_op"},
        cpu_baseline="x86-64-v2",
        linux_runtime=promise,
        linux_runtime_from="the manifest's plan",
        recorded_runtime=recorded,
    )


def test_a_wheel_at_the_promise_passes() -> None:
    promise = COMPAT.runtime_floor(glibc=(2, 35), glibcxx=(3, 4, 30))  # a matrix's linux_runtime: Ubuntu 22.04
    checks = linux_runtime_checks({SO: CPU_ADAM_NEEDS}, _expected(promise, CPU_ADAM_FLOOR), COMPAT.libstdcxx)
    assert [(c.name, c.ok) for c in checks] == [("linux runtime", True)]
    assert "needs glibc 2.34, GLIBCXX 3.4.30 (libstdc++ of GCC >= 12.1), CXXABI 1.3.9" in checks[0].detail
    assert "promised at most glibc 2.35" in checks[0].detail
    # the shipped promise is torch's floor (manylinux_2_28): a wheel built on Debian 12 needs more
    [above] = linux_runtime_checks({SO: CPU_ADAM_NEEDS}, _expected(COMPAT.linux_runtime_floor), COMPAT.libstdcxx)
    assert not above.ok
    assert "GLIBC_2.34 > 2.28, GLIBCXX_3.4.30 > 3.4.24" in above.detail


def test_a_wheel_above_the_promise_fails_naming_the_extension_and_the_fix() -> None:
    promise = COMPAT.runtime_floor(glibc=(2, 31), glibcxx=(3, 4, 28))  # Ubuntu 20.04
    other = "deepspeed/ops/lion/cpu_lion_op.cpython-311-x86_64-linux-gnu.so"
    needs: dict[str, dict[str, tuple[str, ...]]] = {SO: CPU_ADAM_NEEDS, other: {"libc.so.6": ("GLIBC_2.2.5",)}}
    [check] = linux_runtime_checks(needs, _expected(promise), COMPAT.libstdcxx)
    assert not check.ok
    assert (
        "cpu_adam_op.cpython-311-x86_64-linux-gnu.so needs GLIBC_2.34 > 2.31, GLIBCXX_3.4.30 > 3.4.28" in check.detail
    )
    assert "cpu_lion" not in check.detail  # only the extensions above it are named
    assert "version `...' not found" in check.detail
    assert "build on an older image" in check.detail
    assert "raise linux_runtime" in check.detail


def test_a_manifest_recording_another_floor_fails() -> None:
    wrong = RuntimeFloor(glibc=(2, 17), glibcxx=(3, 4, 21), cxxabi=(1, 3, 9))
    checks = {c.name: c for c in linux_runtime_checks({SO: CPU_ADAM_NEEDS}, _expected(None, wrong), COMPAT.libstdcxx)}
    assert checks["linux runtime"].ok  # no promise: nothing to exceed
    assert not checks["manifest runtime"].ok
    assert "the manifest records glibc 2.17" in checks["manifest runtime"].detail


def test_no_elf_extension_no_runtime_check() -> None:
    assert linux_runtime_checks({}, _expected(COMPAT.linux_runtime_floor), COMPAT.libstdcxx) == []


def test_docs_manifest_md_documents_exactly_the_keys_written() -> None:
    from tests.conftest import ROOT

    doc = (ROOT / "docs" / "manifest.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `([a-z_.]+)` \|", doc, flags=re.MULTILINE))
    data = json.loads(render_manifest(_manifest()))
    written = {f"ops.{k}" for k in data["ops"]} | (set(data) - {"ops"})
    assert written == documented
    assert f"`{MANIFEST_SCHEMA}`" in doc
    runtime_row = next(line for line in doc.splitlines() if line.startswith("| `runtime` |"))
    for family in data["runtime"]:
        assert family in runtime_row


# --- which expectation verify takes ---------------------------------------------------------------


def test_a_manifest_beside_the_wheel_wins_without_reading_the_matrix(tmp_path: Path) -> None:
    """The plan is consulted only for a wheel without a manifest: a broken --matrix cannot fail the others."""
    wheel = tmp_path / _manifest().wheel.filename
    (tmp_path / manifest_name(wheel.name)).write_text(render_manifest(_manifest()), encoding="utf-8")
    matrix = tmp_path / "matrix.yml"
    matrix.write_text("python: [unclosed\n", encoding="utf-8")
    from_plan = functools.partial(_plan_expectation, matrix=matrix)

    expected = load_expected(wheel, CELL, from_plan, None, compat=COMPAT)

    assert expected.source == ExpectedFrom.MANIFEST
    assert expected.ops == ("cpu_adam",)
    (tmp_path / manifest_name(wheel.name)).unlink()
    with pytest.raises(ConfigError, match=r"matrix\.yml"):
        load_expected(wheel, CELL, from_plan, None, compat=COMPAT)
