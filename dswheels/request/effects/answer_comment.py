"""The one answer comment of a wheel-request issue: made once, then edited, so a request edited ten times
still has one answer. Only a comment a bot made counts as it: a person cannot plant the marker to
have their comment overwritten (GitHub sets ``user.type``; a person's account is never "Bot")."""

from __future__ import annotations

from dswheels.host.github import GitHub
from dswheels.host.github_issues import comment, issue_comments, update_comment
from dswheels.kernel.untyped import Untyped
from dswheels.request.answer import ANSWER_MARKER

__all__ = ["upsert_answer"]


def _ours(item: object) -> int | None:
    """The comment's id when it is a bot's answer comment."""
    found = Untyped(item, "comment")
    try:
        body = found.at("body").opt_text() or ""
        bot = found.at("user").at("type").opt_text() == "Bot"
        return found.at("id").integer() if bot and body.startswith(ANSWER_MARKER) else None
    except ValueError:
        return None


def upsert_answer(gh: GitHub, number: int, body: str) -> None:
    for item in issue_comments(gh, number):
        comment_id = _ours(item)
        if comment_id is not None:
            if Untyped(item).at("body").data != body:
                update_comment(gh, comment_id, body)
            return
    comment(gh, number, body)
