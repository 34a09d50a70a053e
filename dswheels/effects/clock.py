"""The clock, in one place (the pure core must not read it)."""

from __future__ import annotations

import datetime as dt
import os
import time

__all__ = ["monotonic", "today", "utc_now"]


def monotonic() -> float:
    return time.monotonic()


def utc_now() -> dt.datetime:
    return dt.datetime.now(tz=dt.timezone.utc)


def today() -> str:
    """``YYYY-MM-DD`` (UTC) for dates written into files; ``SOURCE_DATE_EPOCH`` fixes it (reproducible output)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    moment = dt.datetime.fromtimestamp(int(epoch), tz=dt.timezone.utc) if epoch.isdigit() else utc_now()
    return moment.strftime("%Y-%m-%d")
