"""The clock, in one place (the pure core must not read it)."""

from __future__ import annotations

import datetime as dt
import time

from dswheels.host.environ import read_variable
from dswheels.kernel.envvars import source_date_epoch

__all__ = ["monotonic", "today", "utc_now"]


def monotonic() -> float:
    return time.monotonic()


def utc_now() -> dt.datetime:
    return dt.datetime.now(tz=dt.timezone.utc)


def today() -> str:
    """``YYYY-MM-DD`` (UTC) for dates written into files; ``SOURCE_DATE_EPOCH`` fixes it (reproducible output)."""
    epoch = read_variable("SOURCE_DATE_EPOCH", source_date_epoch)  # ASCII digits up to year 9999, or exit 2
    moment = dt.datetime.fromtimestamp(epoch, tz=dt.timezone.utc) if epoch is not None else utc_now()
    return moment.strftime("%Y-%m-%d")
