"""The GitHub calls of follow.yml's cost refit: the wheels runs and their artifacts (``actions: read``), and
a branch, a commit and a pull request with the refit compile_times.yml (``contents: write``,
``pull-requests: write``; the repository must let Actions create pull requests: Settings > Actions >
General > "Allow GitHub Actions to create and approve pull requests")."""

from __future__ import annotations

import base64
from urllib.parse import quote

from dswheels.host.github import GitHub, GitHubAPIError
from dswheels.kernel.github_api import (
    Artifact,
    PullRequest,
    WorkflowRun,
    read_artifacts,
    read_blob_sha,
    read_pull,
    read_runs,
)

__all__ = ["create_branch", "create_pull", "file_sha", "pulls_for", "put_file", "run_artifacts", "succeeded_runs"]

_MAX_ARTIFACT_PAGES = 10  # 1,000 artifacts: four times the jobs a run can have


def succeeded_runs(gh: GitHub, workflow: str) -> list[WorkflowRun]:
    """The workflow's newest runs that finished with success (one page: the newest 30)."""
    response = gh.request(
        "GET", f"repos/{gh.repo}/actions/workflows/{workflow}/runs", params={"status": "success", "per_page": 30}
    )
    node = gh.answer(response, "")
    with gh.reading():
        return list(read_runs(node))


def run_artifacts(gh: GitHub, run_id: int) -> list[Artifact]:
    """Every artifact of a run (``{"total_count", "artifacts"}``, 100 a page)."""
    found: list[Artifact] = []
    for page in range(1, _MAX_ARTIFACT_PAGES + 1):
        response = gh.request(
            "GET", f"repos/{gh.repo}/actions/runs/{run_id}/artifacts", params={"per_page": 100, "page": page}
        )
        node = gh.answer(response, "")
        with gh.reading():
            items = read_artifacts(node)
        found += items
        if len(items) < 100:
            break
    return found


def pulls_for(gh: GitHub, branch: str) -> list[PullRequest]:
    """The pull requests, open or closed, from ``branch`` of this repository."""
    owner = gh.repo.split("/")[0]
    found = []
    for item in gh.paginate(
        f"repos/{gh.repo}/pulls", what="pulls", params={"head": f"{owner}:{branch}", "state": "all"}
    ):
        with gh.reading():
            found.append(read_pull(item, gh.place))
    return found


def create_branch(gh: GitHub, branch: str, sha: str) -> bool:
    """``branch`` at commit ``sha``; False when it exists already (422 "Reference already exists")."""
    try:
        gh.request(
            "POST", f"repos/{gh.repo}/git/refs", json={"ref": f"refs/heads/{branch}", "sha": sha}, expected=(201,)
        )
    except GitHubAPIError as exc:
        if exc.status == 422:
            return False
        raise
    return True


def file_sha(gh: GitHub, path: str, *, ref: str) -> str:
    """The blob sha of ``path`` on ``ref`` (what a contents update names as the file it replaces)."""
    response = gh.request("GET", f"repos/{gh.repo}/contents/{quote(path)}", params={"ref": ref})
    node = gh.answer(response, "")
    with gh.reading():
        return read_blob_sha(node)


def put_file(gh: GitHub, path: str, *, branch: str, text: str, sha: str, message: str) -> None:
    """One commit on ``branch`` replacing ``path`` (blob ``sha``) with ``text``."""
    payload = {
        "message": message,
        "content": base64.b64encode(text.encode("utf-8")).decode("ascii"),
        "sha": sha,
        "branch": branch,
    }
    gh.request("PUT", f"repos/{gh.repo}/contents/{quote(path)}", json=payload, expected=(200, 201), retry=False)


def create_pull(gh: GitHub, *, head: str, base: str, title: str, body: str) -> PullRequest:
    payload = {"title": title, "head": head, "base": base, "body": body, "maintainer_can_modify": True}
    response = gh.request("POST", f"repos/{gh.repo}/pulls", json=payload, expected=(201,), retry=False)
    node = gh.answer(response, "pull")
    with gh.reading():
        return read_pull(node, gh.place)
