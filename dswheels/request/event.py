"""The one GitHub event a request step reads: the ``issues`` webhook payload the runner writes to
``$GITHUB_EVENT_PATH`` (the workflow hands the step its path, never a value of it).

Only what the request workflow acts on is taken, each value typed: the action, the issue's number,
state and labels, its body (still untrusted text: :mod:`dswheels.request.form` reads it), and for a
``labeled`` action the label. Anything else of the wrong shape is a :class:`ConfigError`.
"""

from __future__ import annotations

from dataclasses import dataclass

from dswheels.kernel.errors import ConfigError
from dswheels.kernel.jsondoc import parse_json
from dswheels.kernel.untyped import Untyped

__all__ = ["MAX_EVENT_BYTES", "IssueEvent", "parse_issue_event"]

MAX_EVENT_BYTES = 25 * 1024**2  # GitHub caps a webhook payload at 25 MB


@dataclass(frozen=True, kw_only=True, slots=True)
class IssueEvent:
    action: str  # opened, edited, reopened, labeled, ...
    number: int
    open: bool
    labels: frozenset[str]
    body: str | None  # untrusted: what the author wrote, or edited later
    label: str | None  # the label a ``labeled`` action added
    repository: str  # OWNER/NAME the event is from


def parse_issue_event(data: bytes, *, event_name: str) -> IssueEvent:
    """The ``issues`` event in ``data``; ConfigError for any other event or a payload of another shape."""
    if event_name != "issues":
        raise ConfigError(
            f"a wheel request is answered on an `issues` event, not {event_name[:40]!r}",
            hint="the request workflow (.github/workflows/requests.yml) runs on issues events only",
        )
    try:
        root = Untyped(parse_json(data, what="the event payload"), "event")
        issue = root.at("issue")
        if issue.opt("pull_request") is not None:
            raise ConfigError("the event is about a pull request, not an issue")
        labeled = root.opt("label")
        number = issue.at("number").integer()
        if number < 1:
            raise ConfigError(f"event.issue.number: not an issue number ({number})")
        return IssueEvent(
            action=root.at("action").text(),
            number=number,
            open=issue.at("state").text() == "open",
            labels=frozenset(label.at("name").text() for label in issue.at("labels").seq()),
            body=issue.at("body").opt_text(),
            label=labeled.at("name").text() if labeled is not None and labeled.data is not None else None,
            repository=root.at("repository").at("full_name").text(),
        )
    except ValueError as exc:  # a value of another shape (Untyped names its path), or not JSON
        raise ConfigError(f"not an issues event payload: {exc}") from None
