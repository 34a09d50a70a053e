"""Matrix values that follow the facts: ``{newest: N}`` and ``variants: all`` (docs/matrix.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dswheels.cli import main
from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.versions import format_version
from dswheels.plan.costs import load_costs
from dswheels.plan.jobs import plan_jobs
from dswheels.plan.matrix.parse import parse_matrix
from dswheels.plan.matrix.spec import MatrixSpec
from dswheels.plan.planner import plan
from dswheels.plan.render_plan import render_table
from tests.conftest import ROOT

RUNNERS = """\
python: ["3.12"]
platforms: [linux_x86_64, win_amd64]
runners:
  linux_x86_64: {build: [ubuntu-22.04], smoke: [self-hosted]}
  win_amd64: {build: [windows-2022], smoke: [self-hosted]}
"""


def _spec(body: str) -> MatrixSpec:
    return parse_matrix(body + RUNNERS, "m.yml", load_compat())


def test_newest_deepspeed_releases_follow_compat_yml() -> None:
    compat = load_compat()
    spec = _spec('deepspeed: {newest: 2}\ntorch: [{version: "2.14", variants: [cpu]}]\n')
    assert spec.deepspeed == tuple(sorted(compat.deepspeed_releases, reverse=True)[:2])
    assert spec.resolved[0].startswith("deepspeed {newest: 2} -> 0.19.8, 0.19.7: the newest of compat.yml")


def test_newest_torch_minors_with_every_variant_each_has() -> None:
    spec = _spec('deepspeed: ["0.19.8"]\ntorch: {newest: 3, variants: all}\n')
    by_minor = {format_version(t): [v.name for v in vs] for t, vs in spec.torch}
    assert by_minor == {
        "2.15": ["cu130", "cu132", "cpu"],
        "2.14": ["cu126", "cu130", "cu132", "cpu"],
        "2.13": ["cu126", "cu130", "cu132", "cpu"],
    }
    assert spec.resolved[0].startswith("torch {newest: 3, variants: all} -> 2.15, 2.14, 2.13")
    assert "torch 2.15 -> cu130, cu132, cpu" in spec.resolved


def test_a_variant_list_with_newest_keeps_what_each_minor_has_and_says_what_it_left_out() -> None:
    spec = _spec(
        'deepspeed: ["0.19.8"]\ntorch:\n  - {newest: 2, variants: [cu126, cpu]}\n  - {version: "2.9", variants: all}\n'
    )
    by_minor = {format_version(t): [v.name for v in vs] for t, vs in spec.torch}
    assert by_minor == {"2.15": ["cpu"], "2.14": ["cu126", "cpu"], "2.9": ["cu126", "cu128", "cu130", "cpu"]}
    assert "torch 2.15 -> cpu (it has no cu126)" in spec.resolved


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("deepspeed: {newest: 0}\n", "newest: expected a whole number of DeepSpeed releases"),
        ("deepspeed: {newest: two}\n", "newest: expected a whole number"),
        ("deepspeed: {newest: 500}\n", "asks for more DeepSpeed releases than compat.yml knows"),
        ("deepspeed: {latest: 2}\n", "unknown key 'latest' in a deepspeed entry"),
    ],
)
def test_bad_deepspeed_selectors_are_reported_on_their_line(body: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        _spec(body + 'torch: [{version: "2.14", variants: [cpu]}]\n')
    assert message in (info.value.details or "")


def test_a_torch_entry_needs_version_or_newest_not_both() -> None:
    with pytest.raises(ConfigError) as info:
        _spec('deepspeed: ["0.19.8"]\ntorch: [{version: "2.14", newest: 2, variants: all}]\n')
    assert "either 'version' or 'newest'" in (info.value.details or "")


def test_plan_says_what_the_selectors_resolved_to() -> None:
    spec = _spec("deepspeed: {newest: 1}\ntorch: {newest: 1, variants: all}\n")
    planned = plan(spec, load_compat())
    text = render_table(planned, plan_jobs(planned.planned, load_costs()))
    assert text.startswith("resolved m.yml: deepspeed {newest: 1} -> 0.19.8")
    assert "resolved m.yml: torch 2.15 -> cu130, cu132, cpu" in text


def test_the_shipped_matrix_plans_no_torch_2_15_cu126_cell(capsys: pytest.CaptureFixture[str]) -> None:
    matrix = ROOT / "matrix" / "matrix.yml"
    assert main(["plan", "--matrix", str(matrix), "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert "-torch2.15-cu130-" in out
    assert "-torch2.15-cu126-" not in out
    assert main(["plan", "--matrix", str(matrix), "--explain"]) == 0
    assert "-torch2.15-cu126-" not in capsys.readouterr().out  # not even as a dropped cell: it is not asked for


def test_the_shipped_matrix_uses_the_selectors() -> None:
    text = Path(ROOT / "matrix" / "matrix.yml").read_text(encoding="utf-8")
    assert "deepspeed: {newest: 2}" in text
    assert "torch: {newest: 3, variants: all}" in text
