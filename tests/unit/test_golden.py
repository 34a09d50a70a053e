"""Golden files for every output format of `dswheels plan` (regenerate: pytest --update-golden)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dswheels.cli import main
from tests.conftest import DATA, GOLDEN

CASES = {
    "plan-table.txt": ["plan"],
    "plan-explain.txt": ["plan", "--explain"],
    "plan.json": ["plan", "--format", "json"],
    "plan-github.json": ["plan", "--format", "github"],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_plan_output_matches_golden(
    name: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    update_golden: bool,
) -> None:
    monkeypatch.chdir(DATA.parent)  # the matrix path in the output stays relative
    monkeypatch.setattr("dswheels.cli.plan.__version__", "0.0.0-golden")
    code = main([*CASES[name], "--matrix", "data/matrix-golden.yml"])
    out = capsys.readouterr().out
    assert code == 0
    golden = GOLDEN / name
    if update_golden:
        golden.write_text(out, encoding="utf-8")
    assert out == golden.read_text(encoding="utf-8")
    if name.endswith(".json"):
        json.loads(out)


def test_no_orphaned_golden_files() -> None:
    assert {p.name for p in GOLDEN.iterdir()} == set(CASES)


def test_github_output_is_one_line_for_github_output() -> None:
    text = (GOLDEN / "plan-github.json").read_text(encoding="utf-8")
    assert text.count("\n") == 1
    jobs = json.loads(text)["include"]
    assert len(jobs) <= 256
    assert all(isinstance(value, (str, list)) for job in jobs for value in job.values())


def test_golden_matrix_covers_the_interesting_decisions() -> None:
    plan = json.loads((GOLDEN / "plan.json").read_text(encoding="utf-8"))
    cells = {c["id"]: c for c in plan["cells"]}
    old = cells["ds0.15.1-torch2.1-cu121-cp311-win_amd64"]
    assert old["toolchain"]["host_compiler"]["version"] == "14.29"
    assert old["source"]["sha256"] == "1" * 64
    skip = cells["ds0.19.8-torch2.14-cu130-cp311-linux_x86_64"]
    assert skip["toolchain"]["skip_cuda_check"] is True
    assert skip["toolchain"]["nvcc"] == "13.2"
    assert "-DUSE_CUDA" in cells["ds0.19.8-torch2.14-cu126-cp311-win_amd64"]["toolchain"]["nvcc_append_flags"]
    assert {d["id"] for d in plan["dropped"]} >= {"ds0.19.8-torch2.5-cu124-cp313-win_amd64"}
    assert Path(plan["matrix"]).name == "matrix-golden.yml"
