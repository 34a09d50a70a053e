"""GitHub's announcements of runner images' retirement, read from the recorded issues (tests/data/upstream/)."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from dswheels.facts.runner_images import announcements
from dswheels.kernel.compat import load_compat
from dswheels.kernel.github_api import Issue, read_issues
from dswheels.kernel.remote_json import RemoteDocumentError, RemoteJson
from tests.conftest import DATA


def _issues(data: object) -> tuple[Issue, ...]:
    """The answer as GitHub's one reader of an issue list types it (``Downloader.get_github_issues``)."""
    return read_issues(RemoteJson(data, "issues", document="GitHub's answer"))


ISSUES = _issues(json.loads((DATA / "upstream" / "runner-images" / "issues.json").read_text(encoding="utf-8")))


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
    assert announcements(_issues([{"number": 1, "title": "Add Python 3.15", "body": "no image retires"}])) == ()
    # a pull request (the issues endpoint lists them too) is no announcement, whatever it says
    body = "`ubuntu-22.04` ... Retirement: April 17th, 2027"
    assert announcements(_issues([{"number": 2, "title": "x", "body": body, "pull_request": {}}])) == ()
    # a date no calendar has is no date: the announcement says less, facts check does not stop
    odd = "`ubuntu-22.04` Deprecation: September 17th, 2026. Retirement: February 30th, 2027"
    (said,) = announcements(_issues([{"number": 3, "title": "x", "body": odd}]))
    assert (said.labels, said.deprecated, said.unsupported) == (("ubuntu-22.04",), dt.date(2026, 9, 17), None)


def test_what_is_not_an_issue_list_is_refused_by_githubs_reader() -> None:
    """Not left out one by one: an answer GitHub's API would not send is refused whole (the source unreadable)."""
    with pytest.raises(RemoteDocumentError, match="expected a list"):
        _issues({"message": "API rate limit exceeded"})
    with pytest.raises(RemoteDocumentError, match=r"issues\[0\]\.number"):
        _issues([{"title": "no number"}, "not an issue"])
    with pytest.raises(RemoteDocumentError, match=r"issues\[1\]"):
        _issues([{"number": 1}, "not an issue"])
