"""The release costs the README and docs/costs.md state are what the command they name prints.

Each claim names its command (`dswheels plan --costs ...`) right before its numbers; the test runs
exactly that command on the shipped matrix and compares every number. They drifted twice: when
the facts dropped torch 2.15 + cu126, and when the README quoted one tag's numbers after a command
that plans both DeepSpeed versions of the matrix.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

import pytest

from dswheels.cli import main
from dswheels.kernel.compat import load_compat
from dswheels.kernel.versions import format_version
from tests.conftest import ROOT

_JOBS = re.compile(r"^(\d+) build job\(s\)", re.MULTILINE)
_HOURS = re.compile(
    r"estimated ([\d.]+) runner-hours \(one job per cell: (\d+) jobs, ([\d.]+) runner-hours\); "
    r"the longest job ~(\d+) min"
)
_TAG = re.compile(r"tag to the last wheel indexed: ~(\d+) min")
_COMMAND = r"`(?P<command>dswheels plan --costs[^`]*)`"
# README.md: "`dswheels plan --costs --deepspeed X` (...), **a full release of the shipped matrix (one tag:
# DeepSpeed X, N cells) takes J jobs and about H runner-hours**, against N jobs and about P runner-hours with one
# job per cell; the longest job (...) about M minutes (...), and the tag's last wheel is indexed about T minutes after
# the push"
_README = re.compile(
    _COMMAND + r" \([^)]*\), \*\*a full release of the shipped matrix \(one tag: DeepSpeed (?P<version>[\d.]+), "
    r"(?P<cells>\d+) cells\) takes (?P<jobs>\d+) jobs and about (?P<hours>\d+) runner-hours\*\*, against "
    r"(?P<cells2>\d+) jobs and about (?P<per_cell>\d+) runner-hours with one job per cell; the longest job "
    r"\([^)]*\) about (?P<longest>\d+) minutes .*? indexed about (?P<tag>\d+) minutes after the push"
)
# docs/costs.md: "`COMMAND`: one tag (DeepSpeed X, N cells) in J jobs and about H runner-hours, against N jobs and
# about P runner-hours one job per cell, its last wheel indexed about T minutes after the push; `COMMAND`: both
# DeepSpeed versions (N cells) in J jobs and about H runner-hours (P one per cell). The longest job, ..., about M
# minutes."
_COSTS_TAG = re.compile(
    _COMMAND + r": one tag \(DeepSpeed (?P<version>[\d.]+), (?P<cells>\d+) cells\) in (?P<jobs>\d+) jobs and about "
    r"(?P<hours>\d+) runner-hours, against (?P<cells2>\d+) jobs and about (?P<per_cell>\d+) runner-hours one job per "
    r"cell, its last wheel indexed about (?P<tag>\d+) minutes after the push"
)
_COSTS_ALL = re.compile(
    _COMMAND + r": both DeepSpeed versions \((?P<cells>\d+) cells\) in (?P<jobs>\d+) jobs and about (?P<hours>\d+) "
    r"runner-hours \((?P<per_cell>\d+) one per cell\)\. The longest job, .*?, about (?P<longest>\d+) minutes"
)


@dataclass(frozen=True)
class Costs:
    jobs: int
    cells: int
    hours: int  # rounded, as the prose states them
    per_cell: int
    longest: int  # minutes
    tag: int  # minutes from the tag's push to its last wheel indexed (the critical path)


def _costs(capsys: pytest.CaptureFixture[str], command: str) -> Costs:
    argv = shlex.split(command)
    assert argv[:3] == ["dswheels", "plan", "--costs"], command
    assert main(argv[1:]) == 0
    out = capsys.readouterr().out
    jobs, hours, tag = _JOBS.search(out), _HOURS.search(out), _TAG.search(out)
    assert jobs is not None, out
    assert hours is not None, out
    assert tag is not None, out
    return Costs(
        jobs=int(jobs.group(1)),
        cells=int(hours.group(2)),
        hours=round(float(hours.group(1))),
        per_cell=round(float(hours.group(3))),
        longest=int(hours.group(4)),
        tag=int(tag.group(1)),
    )


def _stated(match: re.Match[str] | None, where: str) -> dict[str, str]:
    assert match is not None, f"{where}: the release-cost claim is not in the shape this test reads"
    return match.groupdict()


def _check(claim: dict[str, str], real: Costs) -> None:
    for key in ("jobs", "cells", "hours", "per_cell", "longest", "tag", "cells2"):
        if key in claim and claim[key] is not None:
            expected = real.cells if key == "cells2" else getattr(real, key)
            assert int(claim[key]) == expected, (
                f"`{claim['command']}`: the text says {key} {claim[key]}, it prints {real}"
            )


def _prose(path: str) -> str:
    return " ".join((ROOT / path).read_text().split())


@pytest.fixture
def _in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the shipped matrix, as a user runs the command from the clone


@pytest.mark.usefixtures("_in_repo")
def test_the_readmes_release_costs_are_what_its_command_prints(capsys: pytest.CaptureFixture[str]) -> None:
    claim = _stated(_README.search(_prose("README.md")), "README.md")
    newest = format_version(load_compat().deepspeed_releases[-1])
    assert claim["version"] == newest, "one tag builds the newest DeepSpeed release"
    assert shlex.split(claim["command"])[3:] == ["--deepspeed", newest], "the command plans exactly that one tag"
    _check(claim, _costs(capsys, claim["command"]))


@pytest.mark.usefixtures("_in_repo")
def test_the_costs_docs_numbers_are_what_their_commands_print(capsys: pytest.CaptureFixture[str]) -> None:
    prose = _prose("docs/costs.md")
    tag = _stated(_COSTS_TAG.search(prose), "docs/costs.md (one tag)")
    assert shlex.split(tag["command"])[3:] == ["--deepspeed", tag["version"]]
    _check(tag, _costs(capsys, tag["command"]))
    both = _stated(_COSTS_ALL.search(prose), "docs/costs.md (both versions)")
    _check(both, _costs(capsys, both["command"]))


def test_a_claim_after_the_wrong_command_fails(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The drift this test exists for: one tag's numbers after a command that plans both versions."""
    monkeypatch.chdir(ROOT)
    claim = _stated(_README.search(_prose("README.md")), "README.md")
    wrong = {**claim, "command": "dswheels plan --costs"}
    with pytest.raises(AssertionError, match="the text says jobs"):
        _check(wrong, _costs(capsys, wrong["command"]))
