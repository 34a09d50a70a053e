"""The wheels workflow, run here end to end for one Linux cell (tests/gha/dryrun.py).

The same chain GitHub runs: plan (dispatch inputs validated by dswheels plan) -> build (a
real DeepSpeed build of one op) -> verify -> upload -> release (publish to a directory) ->
pages (index regenerated from everything published, deployed), then a tag push that finds
the wheel published and builds nothing. Every `run:` step is executed exactly as written.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import require
from tests.gha.actions import find_python
from tests.gha.dryrun import dry_run

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]


def test_the_workflow_chain_runs_here_for_one_linux_cell(tmp_path: Path) -> None:
    require(sys.platform == "linux", "the dry run stands in for the workflow's ubuntu runners")
    require(shutil.which("gcc") is not None and shutil.which("g++") is not None, "a C++ compiler builds the op")
    require(find_python("3.11") is not None and find_python("3.12") is not None, "Python 3.11 and 3.12 (setup-python)")
    lines: list[str] = []

    def say(line: str) -> None:
        lines.append(line)
        print(line, flush=True)

    start = time.monotonic()
    result = dry_run(tmp_path / "dryrun", say=say)
    print(f"dry run took {time.monotonic() - start:.0f}s")
    assert result.ok, "\n".join([*result.problems, "--- log tail:", *lines[-80:]])
    # the GPU smoke test was skipped visibly, not pretended
    summary = (result.dispatch.out / "jobs" / "plan-0" / "summary.md").read_text(encoding="utf-8")
    assert "no GPU smoke test" in summary
    # the Windows-only steps were evaluated and skipped on the Linux leg
    assert "-- No GNU link.exe: skipped" in lines
    assert "-- Build" in lines  # the one build step ran (the same on Windows)
    assert "-- Verify" in lines
