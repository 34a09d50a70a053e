"""The follow workflow, run here end to end (tests/gha/follow_dryrun.py): sources and GitHub on loopback.

Three runs of the real .github/workflows/follow.yml on a copy of this tree whose compat.yml
does not know DeepSpeed 0.19.8 yet: the scheduled run opens ONE drift issue with the proposed
diff and dispatches wheels.yml for the new release and for the matrix's unpublished cells; a
second run the same day keeps that issue and starts nothing while those builds are queued;
with DSWHEELS_FOLLOW=off nothing runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import require
from tests.gha.actions import find_python
from tests.gha.follow_dryrun import follow_dry_run

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]


def test_the_follow_workflow_runs_here(tmp_path: Path, dswheels_cache: Path) -> None:
    require(sys.platform == "linux", "the dry run stands in for the workflow's ubuntu runners")
    require(find_python("3.12") is not None, "Python 3.12 (setup-python)")
    lines: list[str] = []
    result = follow_dry_run(tmp_path / "follow", cache=dswheels_cache, say=lines.append)
    assert result.ok, "\n".join([*result.problems, "--- log tail:", *lines[-80:]])
    (issue,) = result.issues
    body = str(issue["body"])
    assert "DeepSpeed 0.19.8 is on PyPI" in body
    assert "```diff" in body
    assert '"0.19.7", "0.19.8"' in body  # the proposed edit: the new release appended
    assert next(d.inputs for d in result.dispatches) == {
        "deepspeed": "0.19.8",
        "torch": "matrix",
        "cuda": "matrix",
        "python": "matrix",
        "platform": "matrix",
        "canary": "false",
        "publish": "true",
    }
    assert len(result.dispatches) == 2  # the second run waited for the queued builds
