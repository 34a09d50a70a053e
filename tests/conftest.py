"""Shared test configuration: golden files, the opt-outs for slow or GPU tests, and the processes tests start.

Every process a test starts carries :data:`tests.support.processes.MARK` in its environment, and
one still running after its test (a server, a daemon such as sccache's server) fails that test
and is stopped; the session fails too if one survives it. sccache's server runs on a port of
the suite's own (``SCCACHE_SERVER_PORT``), never on the one a developer's own builds use.
"""

from __future__ import annotations

import os
import socket
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.processes import MARK, Survivor, marked, stop

TESTS = Path(__file__).parent
ROOT = TESTS.parent
DATA = TESTS / "data"
GOLDEN = TESTS / "unit" / "golden"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="rewrite golden files from the current output")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


def require(condition: bool, why: str) -> None:
    """Skip when a prerequisite is missing, but fail in CI: CI must run every test for real."""
    if condition:
        return
    if os.environ.get("CI") or os.environ.get("DSWHEELS_REQUIRE_ALL") == "1":
        pytest.fail(f"prerequisite missing in CI: {why}")
    pytest.skip(why)


# --- no process outlives the test that started it ------------------------------------------------

_SAVED: dict[str, str | None] = {}
_RUN = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def pytest_configure(config: pytest.Config) -> None:
    own = {MARK: _RUN, "SCCACHE_SERVER_PORT": str(_free_port())}
    for name, value in own.items():
        _SAVED[name] = os.environ.get(name)
        os.environ[name] = value


def pytest_unconfigure(config: pytest.Config) -> None:
    for name, value in _SAVED.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def survivors(grace: float = 3.0) -> list[Survivor]:
    """The suite's processes still running after ``grace`` seconds (those just stopped get the time to exit)."""
    deadline = time.monotonic() + grace
    found = marked(_RUN)
    while found and time.monotonic() < deadline:
        time.sleep(0.1)
        found = marked(_RUN)
    return found


@pytest.fixture(autouse=True)
def _stops_what_it_starts() -> Iterator[None]:
    """Fail the test (at teardown) that leaves a process running, and stop it. Linux: /proc."""
    yield
    if sys.platform != "linux":
        return
    left = survivors()
    if left:
        stop(left)
        pytest.fail(
            "processes this test (or its fixtures) started still run after it; a test stops what it starts:\n"
            + "\n".join(f"  {s}" for s in left),
            pytrace=False,
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The session fails when any process it started survives it (stopped here, then reported)."""
    if sys.platform != "linux":
        return
    left = survivors()
    if not left:
        return
    stop(left)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = ["processes the test session started survived it (stopped now):", *(f"  {s}" for s in left)]
    if reporter is not None:
        reporter.write_line("\n".join(lines), red=True)
    else:
        sys.stderr.write("\n".join(lines) + "\n")
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
