"""The plan contract read back: every planned cell the renderer writes parses to the same typed cell,
and a plan that is not what dswheels writes is refused naming the key."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings

from dswheels.cli import main
from dswheels.kernel.model import Plan, PlannedCell, Source, SourceKind
from dswheels.kernel.plan_json import PlanFormatError, parse_plan, parse_planned_cell, planned_cell_json, render_json
from tests.conftest import DATA, GOLDEN
from tests.unit.strategies import planned_cells, plans


@given(planned_cells)
@settings(max_examples=300)
def test_a_planned_cell_round_trips_through_its_json(item: PlannedCell) -> None:
    assert parse_planned_cell(json.loads(json.dumps(planned_cell_json(item)))) == item


@given(plans)
@settings(max_examples=100)
def test_a_plan_round_trips_through_the_document_the_plan_job_writes(plan: Plan) -> None:
    text = render_json(plan, version="1.2.3")
    assert parse_plan(json.loads(text)) == plan  # notes are for people: not in the contract


def test_the_golden_plan_reads_back_and_renders_to_the_same_bytes(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    golden = (GOLDEN / "plan.json").read_text(encoding="utf-8")
    plan = parse_plan(json.loads(golden))
    assert len(plan.planned) == 14
    assert render_json(plan, version="0.0.0-golden") == golden
    # and it is the plan the planner makes, the same typed cells
    monkeypatch.chdir(DATA.parent)
    assert main(["plan", "--format", "json", "--matrix", "data/matrix-golden.yml"]) == 0
    assert parse_plan(json.loads(capsys.readouterr().out)) == plan


def _golden_cell() -> dict[str, Any]:
    cell: dict[str, Any] = json.loads((GOLDEN / "plan.json").read_text(encoding="utf-8"))["cells"][0]
    return cell


def _edit(path: str, value: object) -> dict[str, Any]:
    data = _golden_cell()
    *parents, last = path.split(".")
    node = data
    for key in parents:
        node = node[key]
    if value is KeyError:
        del node[last]
    else:
        node[last] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "words"),
    [
        (
            "wheel",
            "deepspeed-0.19.8-cp311-cp311-win_amd64.whl",
            "wheel is 'deepspeed-0.19.8-cp311-cp311-win_amd64.whl'",
        ),
        ("id", "ds0.19.8-torch2.14-cu126-cp312-win_amd64", "but the cell's own fields make it"),
        ("platform", "win32", "platform: unknown platform 'win32'"),
        ("variant", "rocm6", "variant: not a torch variant"),
        ("deepspeed", "0.19.x", "deepspeed: not a plain dotted version"),
        ("torch", "2.14.1", "torch: give MAJOR.MINOR (e.g. '2.14'), not '2.14.1'"),
        ("torch_version", None, "torch_version: expected a string"),
        ("toolchain.skip_cuda_check", "no", "toolchain.skip_cuda_check: expected true or false"),
        ("toolchain.runs_on", "windows-2022", "toolchain.runs_on: expected a list"),
        ("toolchain.nvcc", "twelve", "toolchain.nvcc: not a plain dotted version"),
        ("toolchain.linux_runtime", {"glibc": "2.x"}, "toolchain.linux_runtime.glibc is not a version: '2.x'"),
        ("ops.build", [{"name": "cpu_adam", "env": "CPU_ADAM"}], "ops.build[0].env: expected DS_BUILD_<OP>"),
        ("source.kind", "git", "source.kind: unknown source kind 'git'"),
        ("smoke_runs_on", KeyError, "smoke_runs_on: expected a list"),
    ],
)
def test_a_cell_that_is_not_what_dswheels_writes_is_refused_naming_the_key(
    path: str, value: object, words: str
) -> None:
    with pytest.raises(PlanFormatError) as info:
        parse_planned_cell(_edit(path, value), path=".cells[0]")
    assert words in str(info.value)
    assert str(info.value).startswith("cells[0]")


def test_a_document_of_another_schema_or_mode_is_refused() -> None:
    document = json.loads((GOLDEN / "plan.json").read_text(encoding="utf-8"))
    with pytest.raises(PlanFormatError, match=r"schema is 'dswheels.plan/2'; this dswheels reads dswheels.plan/1"):
        parse_plan({**document, "schema": "dswheels.plan/2"})
    with pytest.raises(PlanFormatError, match="mode: 'everything' is none of matrix, combo, canary"):
        parse_plan({**document, "mode": "everything"})
    with pytest.raises(PlanFormatError, match="the plan: expected an object"):
        parse_plan([document])
    with pytest.raises(PlanFormatError, match=r"dropped\[0\].id: not a cell id"):
        parse_plan({**document, "dropped": [{"id": "x", "reasons": []}]})


def test_a_legacy_git_archive_source_reads_as_an_archive() -> None:
    item = parse_planned_cell(
        _edit("source", {"kind": "git-archive", "url": "https://x/v0.19.8.tar.gz", "sha256": None})
    )
    assert item.source == Source(kind=SourceKind.ARCHIVE, url="https://x/v0.19.8.tar.gz", sha256="")
    assert replace(item, source=parse_planned_cell(_golden_cell()).source) == parse_planned_cell(_golden_cell())
