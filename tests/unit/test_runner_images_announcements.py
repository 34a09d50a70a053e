"""GitHub's announcements of runner images' retirement, read from the recorded issues (tests/data/upstream/)."""

from __future__ import annotations

import datetime as dt
import json

from dswheels.facts.runner_images import announcements
from dswheels.kernel.compat import load_compat
from tests.conftest import DATA

ISSUES = json.loads((DATA / "upstream" / "runner-images" / "issues.json").read_text(encoding="utf-8"))


def test_the_ubuntu_2204_announcement_reads_as_compat_yml_records_it() -> None:
    said = {a.number: a for a in announcements(ISSUES)}
    ubuntu = said[14254]
    assert ubuntu.labels == ("ubuntu-22.04", "ubuntu-22.04-arm")
    ends = load_compat().runner_images["ubuntu-22.04"].ends
    assert ends is not None
    assert (ubuntu.deprecated, ubuntu.brownouts, ubuntu.unsupported, ubuntu.reference) == (
        ends.deprecated,
        ends.brownouts,
        ends.unsupported,
        ends.announcement,
    )


def test_the_older_format_and_the_images_to_move_to() -> None:
    """#11101 writes ISO dates in bold and names the images to move to, which are not retired."""
    old = {a.number: a for a in announcements(ISSUES)}[11101]
    assert old.labels == ("ubuntu-20.04",)
    assert (old.deprecated, old.unsupported) == (dt.date(2025, 2, 1), dt.date(2025, 4, 15))
    assert old.brownouts[0] == dt.date(2025, 3, 4)
    assert old.brownouts[-1] == dt.date(2025, 4, 8)


def test_what_is_not_an_announcement_is_left_out() -> None:
    assert announcements({"message": "API rate limit exceeded"}) == ()
    assert announcements([{"number": 1, "title": "Add Python 3.15", "body": "no image retires"}]) == ()
    assert announcements([{"title": "no number"}, "not an issue"]) == ()
