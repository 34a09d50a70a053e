"""compat.yml's runner images against GitHub's announcements of their retirement (actions/runner-images).

GitHub announces an image's end in an issue labelled ``Announcement`` (the API's issue list):
``[Ubuntu] The Ubuntu 22 based runner images will begin deprecation on September 17th and will be
fully unsupported by April 17th ...`` (#14254), with the image labels in backticks, the target dates
(``Deprecation: September 17th, 2026``, ``Retirement: April 17th, 2027``; older ones write
``deprecation on **2025-02-01** ... fully unsupported by **2025-04-15**``) and the brownout days
(``March 23, 14:00 UTC - ...``, without a year: the one between deprecation and retirement).
:func:`announcements` reads them from the issues as GitHub's one reader of an issue list typed them
(:func:`dswheels.kernel.github_api.read_issues`); :func:`compare_runner_images` finds an image
compat.yml records without its announced end, or with other dates. Pure: the fetch is the effects'
(``--runner-images``). A date no calendar has (``February 30th``) is no date: the announcement says
less, it is not an error.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dswheels.facts.context import Context
from dswheels.facts.findings import Kind
from dswheels.kernel.github_api import Issue

__all__ = ["ImageAnnouncement", "announcements", "compare_runner_images"]

SOURCE = "runner-images"
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")  # fmt: skip
_MONTH_DAY = r"(?P<month>[A-Z][a-z]+)\s+(?P<day>[0-9]{1,2})(?:st|nd|rd|th)?"
_DATE = rf"(?:\*\*)?(?:(?P<iso>[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}})|{_MONTH_DAY},?\s*(?P<year>[0-9]{{4}})?)"
_DEPRECATION = re.compile(rf"(?:Deprecation:\s*|deprecation (?:will begin )?on\s+){_DATE}", re.IGNORECASE)
_END = re.compile(rf"(?:Retirement:\s*|unsupported (?:by|from|on)\s+){_DATE}", re.IGNORECASE)
_BROWNOUT_LINE = re.compile(rf"^\W*{_MONTH_DAY}\b.*[0-9]{{1,2}}:[0-9]{{2}}\s*UTC", re.MULTILINE)
_LABEL = re.compile(r"`((?:ubuntu|windows|macos)-[0-9a-z.\-]+)`")
_INSTEAD = re.compile(r"\b(?:updated|migrated?|moved?|switch(?:ed)?|changed?) to\b", re.IGNORECASE)
_SECTION = re.compile(r"brownouts? (?:are|is) scheduled(?P<text>.*?)(?:\n#|\Z)", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True, kw_only=True, slots=True)
class ImageAnnouncement:
    """One announcement of runner images' retirement, as far as it says."""

    number: int
    title: str
    labels: tuple[str, ...]  # the image labels it names (`ubuntu-22.04`, `ubuntu-22.04-arm`)
    deprecated: dt.date | None
    brownouts: tuple[dt.date, ...]
    unsupported: dt.date | None

    @property
    def reference(self) -> str:
        return f"actions/runner-images#{self.number}"


def _date(match: re.Match[str], *, year: int | None = None) -> dt.date | None:
    """The day ``match`` names (its digits are ASCII: the patterns' ``[0-9]``); None for none a calendar has."""
    groups = match.groupdict()
    try:
        if groups.get("iso"):
            return dt.date.fromisoformat(groups["iso"])
        month = groups["month"].lower()
        if month not in _MONTHS:
            return None
        written = groups.get("year")
        chosen = int(written) if written else year
        return dt.date(chosen, _MONTHS.index(month) + 1, int(groups["day"])) if chosen else None
    except ValueError:  # "February 30th", "2027-13-01", year 0
        return None


def _dated(pattern: re.Pattern[str], text: str) -> dt.date | None:
    """The first date ``pattern`` finds that says its year (a title often leaves it out; the body says it)."""
    return next((day for match in pattern.finditer(text) if (day := _date(match)) is not None), None)


def _brownouts(body: str, deprecated: dt.date | None, unsupported: dt.date | None) -> tuple[dt.date, ...]:
    """The brownout days: each line of the schedule's first date, in the year between the two ends."""
    section = _SECTION.search(body)
    if section is None or unsupported is None:
        return ()
    days = []
    for line in _BROWNOUT_LINE.finditer(section["text"]):
        for year in (unsupported.year, unsupported.year - 1):
            day = _date(line, year=year)
            if day is not None and day <= unsupported and (deprecated is None or day >= deprecated):
                days.append(day)
                break
    return tuple(sorted(set(days)))


def _announcement(issue: Issue) -> ImageAnnouncement | None:
    if issue.is_pull_request:
        return None
    title, body = issue.title, issue.body.replace("\r\n", "\n")
    text = f"{title}\n{body}"
    # the labels retired, not the ones a line says to move to ("should be updated to `ubuntu-24.04`")
    retired = (_INSTEAD.split(line, maxsplit=1)[0] for line in text.splitlines())
    labels = tuple(dict.fromkeys(label for part in retired for label in _LABEL.findall(part)))
    if not labels:
        return None
    unsupported = _dated(_END, text)
    deprecated = _dated(_DEPRECATION, text)
    if unsupported is None and deprecated is None:
        return None
    return ImageAnnouncement(
        number=issue.number,
        title=title,
        labels=labels,
        deprecated=deprecated,
        brownouts=_brownouts(body, deprecated, unsupported),
        unsupported=unsupported,
    )


def announcements(issues: Iterable[Issue]) -> tuple[ImageAnnouncement, ...]:
    """The retirement announcements among the API's issues (other issues and pull requests are left out)."""
    return tuple(a for issue in issues if (a := _announcement(issue)) is not None)


def _iso(day: dt.date | None) -> str:
    return day.isoformat() if day else "?"


def compare_runner_images(ctx: Context, seen: Sequence[ImageAnnouncement]) -> None:
    """Each image compat.yml records (a container's by its host label) against the announcement naming it."""
    for name, image in sorted(ctx.compat.runner_images.items()):
        if image.container:
            continue  # not a runner label: its host's entry is checked
        said = next((a for a in sorted(seen, key=lambda a: -a.number) if name in a.labels), None)
        if said is None:
            continue
        entry = f"runner_images.{name}.ends"
        dates = (
            f"deprecation {_iso(said.deprecated)}, brownouts {', '.join(map(_iso, said.brownouts)) or 'none'}, "
            f"unsupported from {_iso(said.unsupported)}"
        )
        ends = image.ends
        if ends is None:
            ctx.add(
                Kind.NEW,
                entry,
                f"{said.reference} announces its retirement ({dates}); compat.yml records none: add `ends` "
                "(dswheels plan warns 90 days ahead of each day)",
                SOURCE,
                person="record the dates and the announcement in compat.yml by hand",
            )
            continue
        recorded = (ends.deprecated, ends.brownouts, ends.unsupported, ends.announcement)
        announced = (said.deprecated, said.brownouts, said.unsupported, said.reference)
        if recorded != announced:
            ctx.add(
                Kind.DISAGREES,
                entry,
                f"{said.reference} says {dates}; compat.yml records deprecation {_iso(ends.deprecated)}, "
                f"brownouts {', '.join(map(_iso, ends.brownouts)) or 'none'}, unsupported from "
                f"{_iso(ends.unsupported)} ({ends.announcement})",
                SOURCE,
                person="update the dates in compat.yml by hand",
            )
