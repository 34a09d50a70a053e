"""Recorded ``issues`` / ``issue_comment`` webhook payloads (tests/data/github-events/) with a test's values planted."""

from __future__ import annotations

import copy
import json
from functools import cache
from typing import Any

from tests.conftest import DATA

__all__ = ["FORM_BODY", "form_body", "issue_event"]

EVENTS = DATA / "github-events"


@cache
def _recorded(name: str) -> dict[str, Any]:
    data = json.loads((EVENTS / f"{name}.json").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def form_body(*, deepspeed: str, torch: str, python: str, os: str) -> str:
    """The body GitHub renders for the wheel-request form's answers (each field's label a ``###`` heading)."""
    return (
        f"### DeepSpeed version\n\n{deepspeed}\n\n"
        f"### torch version, as torch.__version__ prints it\n\n{torch}\n\n"
        f"### Python version\n\n{python}\n\n"
        f"### Operating system\n\n{os}"
    )


FORM_BODY = form_body(deepspeed="0.19.8", torch="2.14.1+cu130", python="3.12", os="Linux (x86_64)")


def issue_event(
    action: str,
    *,
    repository: str,
    number: int = 7,
    body: str | None = FORM_BODY,
    title: str = "Wheel request",
    labels: tuple[str, ...] = ("wheel-request",),
    label: str | None = None,
) -> dict[str, Any]:
    """The recorded payload of ``issues.<action>`` (``issue_comment.created`` for "comment") with these values."""
    name = "issue_comment-created" if action == "comment" else f"issues-{action}"
    event = copy.deepcopy(_recorded(name))
    issue = event["issue"]
    issue.update({"number": number, "title": title, "body": body, "state": "open"})
    issue["labels"] = [{**issue["labels"][0], "name": name_, "default": False} for name_ in labels]
    owner, repo = repository.split("/")
    event["repository"].update({"name": repo, "full_name": repository, "default_branch": "main"})
    event["repository"]["owner"]["login"] = owner
    if label is not None:
        event["label"] = {**_recorded("issues-labeled")["label"], "name": label, "default": False}
    return event
