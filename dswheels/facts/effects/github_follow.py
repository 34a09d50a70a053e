"""The GitHub calls the follow workflow makes: its one issue, and the wheels workflow's runs (comments and
dispatches are :mod:`dswheels.host.github_issues`, shared with the request workflow).

Each needs one permission of the job's token: issues (``issues: write``), workflow runs and
dispatches (``actions: write``; reading runs is included). A dispatch made with the
workflow's ``GITHUB_TOKEN`` does start a run: it is the documented exception to "events made
with GITHUB_TOKEN start no workflow".
"""

from __future__ import annotations

from typing import Any

from dswheels.host.github import GitHub, api_object
from dswheels.host.github_issues import comment, dispatch

__all__ = ["close_issue", "comment", "create_issue", "dispatch", "open_issues", "runs", "update_issue"]

JSON = dict[str, Any]


def open_issues(gh: GitHub) -> list[JSON]:
    """Open issues (pull requests are listed by this endpoint too; callers tell them apart)."""
    return list(gh.paginate(f"repos/{gh.repo}/issues", params={"state": "open"}))


def create_issue(gh: GitHub, *, title: str, body: str) -> JSON:
    return api_object(
        gh.request("POST", f"repos/{gh.repo}/issues", json={"title": title, "body": body}, expected=(201,))
    )


def update_issue(gh: GitHub, number: int, *, title: str, body: str) -> JSON:
    return api_object(gh.request("PATCH", f"repos/{gh.repo}/issues/{number}", json={"title": title, "body": body}))


def close_issue(gh: GitHub, number: int) -> None:
    gh.request("PATCH", f"repos/{gh.repo}/issues/{number}", json={"state": "closed", "state_reason": "completed"})


def runs(gh: GitHub, workflow: str) -> list[JSON]:
    """The workflow's runs that are not finished (queued, waiting or in progress)."""
    found: list[JSON] = []
    for status in ("queued", "in_progress", "waiting", "requested", "pending"):
        response = gh.request(
            "GET", f"repos/{gh.repo}/actions/workflows/{workflow}/runs", params={"status": status, "per_page": 100}
        )
        items = api_object(response).get("workflow_runs")
        found += [run for run in items or [] if isinstance(run, dict)]
    return found
