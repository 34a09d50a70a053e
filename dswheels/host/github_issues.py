"""The GitHub calls the workflows' own steps share: comments on an issue, and starting a workflow.

Each needs one permission of the job's token: ``issues: write`` for comments, ``actions: write``
for a dispatch. A dispatch made with the workflow's ``GITHUB_TOKEN`` does start a run: it is the
documented exception to "events made with GITHUB_TOKEN start no workflow".
"""

from __future__ import annotations

from collections.abc import Mapping

from dswheels.host.github import GitHub
from dswheels.kernel.github_api import Comment, read_comment

__all__ = ["comment", "dispatch", "issue_comments", "update_comment"]


def issue_comments(gh: GitHub, number: int) -> list[Comment]:
    """Every comment of issue ``number``, oldest first."""
    found = []
    for item in gh.paginate(f"repos/{gh.repo}/issues/{number}/comments", what="comments"):
        with gh.reading():
            found.append(read_comment(item))
    return found


def comment(gh: GitHub, number: int, body: str) -> None:
    """A new comment on issue ``number`` (nothing of the answer is read)."""
    gh.request("POST", f"repos/{gh.repo}/issues/{number}/comments", json={"body": body}, expected=(201,))


def update_comment(gh: GitHub, comment_id: int, body: str) -> None:
    gh.request("PATCH", f"repos/{gh.repo}/issues/comments/{comment_id}", json={"body": body})


def dispatch(gh: GitHub, workflow: str, *, ref: str, inputs: Mapping[str, str]) -> None:
    """``POST .../actions/workflows/<workflow>/dispatches``: what ``gh workflow run`` does."""
    gh.request(
        "POST",
        f"repos/{gh.repo}/actions/workflows/{workflow}/dispatches",
        json={"ref": ref, "inputs": dict(inputs)},
        expected=(204,),
        retry=False,  # a lost answer must not start a second build
    )
