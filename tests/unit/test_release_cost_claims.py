"""The release costs the README and docs/costs.md state are what `dswheels plan --costs` says of
the shipped matrix today (they went stale once, when the facts dropped torch 2.15 + cu126)."""

from __future__ import annotations

import re

import pytest

from dswheels.cli import main
from dswheels.core.compat import load_compat
from dswheels.core.versions import format_version
from tests.conftest import ROOT

_JOBS = re.compile(r"^(\d+) build job\(s\)", re.MULTILINE)
_TAG = re.compile(r"tag to the last wheel indexed: ~(\d+) min")
_HOURS = re.compile(
    r"estimated ([\d.]+) runner-hours \(one job per cell: (\d+) jobs, ([\d.]+) runner-hours\); "
    r"the longest job ~(\d+) min"
)


def _costs(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, int, int, int, int, int]:
    """(jobs, cells, runner-hours, runner-hours one job per cell, longest job's minutes, tag to last wheel
    indexed in minutes), hours rounded."""
    assert main(["plan", "--costs", *args]) == 0
    out = capsys.readouterr().out
    jobs, hours, tag = _JOBS.search(out), _HOURS.search(out), _TAG.search(out)
    assert jobs is not None, out
    assert hours is not None, out
    assert tag is not None, out
    return (
        int(jobs.group(1)),
        int(hours.group(2)),
        round(float(hours.group(1))),
        round(float(hours.group(3))),
        int(hours.group(4)),
        int(tag.group(1)),
    )


def _prose(path: str) -> str:
    return " ".join((ROOT / path).read_text().split())


def test_the_stated_release_costs_are_the_models(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    newest = format_version(load_compat().deepspeed_releases[-1])
    jobs, cells, hours, per_cell, longest, tag = _costs(capsys, "--deepspeed", newest)
    readme, costs = _prose("README.md"), _prose("docs/costs.md")
    assert (
        f"(one tag: DeepSpeed {newest}, {cells} cells) takes {jobs} jobs and about {hours} runner-hours**, "
        f"against {cells} jobs and about {per_cell} runner-hours with one job per cell" in readme
    )
    assert f"about {longest} minutes" in readme
    assert f"indexed about {tag} minutes after the push" in readme
    assert f"indexed about {tag} minutes after the push" in costs
    assert (
        f"one tag (DeepSpeed {newest}, {cells} cells) in {jobs} jobs and about {hours} runner-hours, "
        f"against {cells} jobs and about {per_cell} runner-hours one job per cell" in costs
    )
    jobs, cells, hours, per_cell, longest, _ = _costs(capsys)
    assert (
        f"both DeepSpeed versions ({cells} cells) in {jobs} jobs and about {hours} runner-hours "
        f"({per_cell} one per cell)" in costs
    )
    assert f"about {longest} minutes" in costs
