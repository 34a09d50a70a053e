"""Shared test configuration: golden files and the opt-outs for slow or GPU tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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
