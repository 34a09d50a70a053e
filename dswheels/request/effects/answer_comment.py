"""The one answer comment of a wheel-request issue: made once, then edited, so a request edited ten times
still has one answer. Only a comment a bot made counts as it: a person cannot plant the marker to
have their comment overwritten (GitHub sets ``user.type``; a person's account is never "Bot")."""

from __future__ import annotations

from dswheels.host.github import GitHub
from dswheels.host.github_issues import comment, issue_comments, update_comment
from dswheels.kernel.github_api import Comment
from dswheels.request.answer import ANSWER_MARKER

__all__ = ["upsert_answer"]


def _ours(item: Comment) -> bool:
    """Whether the comment is a bot's answer comment."""
    return item.by_bot and item.body.startswith(ANSWER_MARKER)


def upsert_answer(gh: GitHub, number: int, body: str) -> None:
    for item in issue_comments(gh, number):
        if _ours(item):
            if item.body != body:
                update_comment(gh, item.id, body)
            return
    comment(gh, number, body)
