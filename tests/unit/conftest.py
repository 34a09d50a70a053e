"""Fixtures the unit tests share."""

from __future__ import annotations

import pytest

from dswheels.kernel.compat import Compat
from tests.unit.machines import COMPAT


@pytest.fixture(scope="module")
def compat() -> Compat:
    """The shipped compat.yml, read once."""
    return COMPAT
