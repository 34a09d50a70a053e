"""The clock, in one place (the pure core must not read it)."""

from __future__ import annotations

import datetime as dt
import time

__all__ = ["monotonic", "utc_now"]


def monotonic() -> float:
    return time.monotonic()


def utc_now() -> dt.datetime:
    return dt.datetime.now(tz=dt.timezone.utc)
