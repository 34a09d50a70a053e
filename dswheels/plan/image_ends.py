"""Warnings for the runner images a plan builds on that GitHub is retiring (compat.yml ``runner_images.*.ends``).

GitHub announces an image's end months ahead, then fails its jobs on purpose on brownout days before
it is gone (ubuntu-22.04: actions/runner-images#14254). A plan whose cells build on such an image is
warned 90 days ahead of the first of those days, so the matrix moves before a tag's build fails.
Pure: the day is handed in (``dswheels plan`` passes the clock's, which ``SOURCE_DATE_EPOCH`` fixes).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping

from dswheels.kernel.compat.entries import RunnerImage
from dswheels.kernel.model import PlannedCell

__all__ = ["WARN_DAYS", "image_end_warnings", "planned_images"]

WARN_DAYS = 90


def planned_images(planned: Iterable[PlannedCell], images: Mapping[str, RunnerImage]) -> list[RunnerImage]:
    """The images the plan's cells build on, and the runner images their containers run on, each once."""
    names: dict[str, None] = {}
    for item in planned:
        image = images.get(item.toolchain.runner_image)
        if image is not None:
            names[image.name] = None
            names[image.label] = None
    return [images[n] for n in names if n in images]


def image_end_warnings(images: Iterable[RunnerImage], today: dt.date, *, days: int = WARN_DAYS) -> tuple[str, ...]:
    """One warning per image whose next brownout or end is at most ``days`` ahead of ``today`` (or already past).

    >>> from dswheels.kernel.compat import load_compat
    >>> old = load_compat().runner_images["ubuntu-22.04"]
    >>> image_end_warnings([old], dt.date(2026, 11, 28))
    ()
    >>> print(image_end_warnings([old], dt.date(2027, 1, 1))[0])  # doctest: +ELLIPSIS
    runner image ubuntu-22.04: brownout (its jobs fail on purpose) on 2027-03-23, in 81 days; ...
    """
    warnings = []
    for image in images:
        ends = image.ends
        if ends is None:
            continue
        source = f"GitHub deprecated it on {ends.deprecated.isoformat()} ({ends.announcement})"
        fix = "move its cells to another image (runners in the matrix)"
        if today > ends.unsupported:
            warnings.append(
                f"runner image {image.name}: unsupported since {ends.unsupported.isoformat()}, its jobs no longer "
                f"run; {source}: {fix}"
            )
            continue
        upcoming = ends.upcoming(today)
        day, what = upcoming[0]
        if (day - today).days > days:
            continue
        rest = ", ".join(d.isoformat() for d, _ in upcoming[1:] if d != ends.unsupported)
        warnings.append(
            f"runner image {image.name}: {what} on {day.isoformat()}, in {(day - today).days} days"
            + (f"; then {rest}" if rest else "")
            + f"; unsupported from {ends.unsupported.isoformat()}. {source}: {fix}"
        )
    return tuple(warnings)
