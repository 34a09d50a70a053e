"""The GitHub calls the follow workflow makes: its one issue, and the wheels workflow's runs (comments and
dispatches are :mod:`dswheels.host.github_issues`, shared with the request workflow).

Each needs one permission of the job's token: issues (``issues: write``), workflow runs and
dispatches (``actions: write``; reading runs is included). A dispatch made with the
workflow's ``GITHUB_TOKEN`` does start a run: it is the documented exception to "events made
with GITHUB_TOKEN start no workflow".
"""

from __future__ import annotations

from dswheels.host.github import GitHub
from dswheels.host.github_issues import comment, dispatch
from dswheels.kernel.github_api import Issue, WorkflowRun, read_issue, read_runs

__all__ = ["close_issue", "comment", "create_issue", "dispatch", "open_issues", "runs", "update_issue"]


def open_issues(gh: GitHub) -> list[Issue]:
    """Open issues (pull requests are listed by this endpoint too; callers tell them apart)."""
    found = []
    for item in gh.paginate(f"repos/{gh.repo}/issues", what="issues", params={"state": "open"}):
        with gh.reading():
            found.append(read_issue(item))
    return found


def create_issue(gh: GitHub, *, title: str, body: str) -> Issue:
    response = gh.request("POST", f"repos/{gh.repo}/issues", json={"title": title, "body": body}, expected=(201,))
    node = gh.answer(response, "issue")
    with gh.reading():
        return read_issue(node)


def update_issue(gh: GitHub, number: int, *, title: str, body: str) -> None:
    gh.request("PATCH", f"repos/{gh.repo}/issues/{number}", json={"title": title, "body": body})


def close_issue(gh: GitHub, number: int) -> None:
    gh.request("PATCH", f"repos/{gh.repo}/issues/{number}", json={"state": "closed", "state_reason": "completed"})


def runs(gh: GitHub, workflow: str) -> list[WorkflowRun]:
    """The workflow's runs that are not finished (queued, waiting or in progress)."""
    found: list[WorkflowRun] = []
    for status in ("queued", "in_progress", "waiting", "requested", "pending"):
        response = gh.request(
            "GET", f"repos/{gh.repo}/actions/workflows/{workflow}/runs", params={"status": status, "per_page": 100}
        )
        node = gh.answer(response, "")
        with gh.reading():
            found += read_runs(node)
    return found
