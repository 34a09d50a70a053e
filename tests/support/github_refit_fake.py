"""The follow workflow's fake GitHub (tests/support/github_follow_fake.py) with what its cost refit calls:
finished wheels runs and their artifacts, and a branch, a commit and a pull request.

Answers in the shapes GitHub documents (API version 2022-11-28; docs.github.com/rest, each
endpoint's example response): "List workflow runs for a workflow" (``status`` also takes a
conclusion, e.g. ``success``), "List workflow run artifacts" (``{"total_count", "artifacts"}``),
"Create a reference" (201; 422 ``Reference already exists``), "Get repository content" (a file:
base64 ``content`` and its blob ``sha``), "Create or update file contents" (200 with ``content`` and
``commit``; 409 when ``sha`` is not the file's; 422 when it is missing), "List pull requests"
(``head`` as ``owner:branch``, ``state``) and "Create a pull request" (201; 422 ``A pull request
already exists for owner:branch.``).
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import unquote

from tests.support.github_follow_fake import FollowGitHub, _Handler, _routes, _State
from tests.support.github_http import Route

__all__ = ["RefitGitHub"]

_TIME = "2026-12-01T04:23:00Z"


def _blob(text: str) -> str:
    data = text.encode("utf-8")
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


@dataclass
class _RefitState(_State):
    files: dict[str, dict[str, str]] = field(default_factory=dict)  # branch -> path -> text
    heads: dict[str, str] = field(default_factory=dict)  # branch -> commit sha
    commits: dict[str, dict[str, str]] = field(default_factory=dict)  # commit sha -> the files then
    pulls: list[dict[str, Any]] = field(default_factory=list)
    artifacts: dict[int, list[dict[str, Any]]] = field(default_factory=dict)


class RefitGitHub(FollowGitHub):
    """``with RefitGitHub("octo/dswheels", workflows, files={"dswheels/compile_times.yml": text}) as gh``:
    the default branch ``main`` at one commit holding ``files``."""

    def __init__(self, repo: str, workflows: Path, *, files: dict[str, str]) -> None:
        self._files = files
        super().__init__(repo, workflows)

    def _make_handler(self) -> type[BaseHTTPRequestHandler]:
        state = _RefitState(repo=self.state.repo, workflows=self.state.workflows)
        sha = hashlib.sha1(b"main", usedforsecurity=False).hexdigest()
        state.heads["main"] = sha
        state.commits[sha] = dict(self._files)
        state.files["main"] = dict(self._files)
        self.state = state

        class Handler(_RefitHandler):
            routes = _refit_routes(state.repo) + _routes(state.repo)
            answers = state.log
            answers_lock = state.lock

        Handler.state = state
        return Handler

    @property
    def main_sha(self) -> str:
        return self.refit.heads["main"]

    @property
    def refit(self) -> _RefitState:
        assert isinstance(self.state, _RefitState)
        return self.state

    def add_finished_run(self, workflow: str, *, run_id: int, title: str, artifacts: list[str]) -> None:
        """A run of ``workflow`` that ended with success, holding artifacts of these names."""
        with self.state.lock:
            self.state.runs.setdefault(workflow, []).append(
                {
                    "id": run_id,
                    "name": workflow.removesuffix(".yml"),
                    "display_title": title,
                    "status": "completed",
                    "conclusion": "success",
                    "event": "push",
                    "run_attempt": 1,
                    "html_url": f"https://github.com/{self.state.repo}/actions/runs/{run_id}",
                    "created_at": _TIME,
                    "updated_at": _TIME,
                }
            )
            self.refit.artifacts[run_id] = [_artifact(next(self.state.ids), name, run_id) for name in artifacts]


def _artifact(artifact_id: int, name: str, run_id: int) -> dict[str, Any]:
    return {
        "id": artifact_id,
        "node_id": f"MDg6QXJ0aWZhY3Q{artifact_id}",
        "name": name,
        "size_in_bytes": 4096,
        "url": f"https://api.github.com/repos/o/r/actions/artifacts/{artifact_id}",
        "archive_download_url": f"https://api.github.com/repos/o/r/actions/artifacts/{artifact_id}/zip",
        "expired": False,
        "created_at": _TIME,
        "expires_at": "2027-03-01T04:23:00Z",
        "updated_at": _TIME,
        "workflow_run": {"id": run_id, "repository_id": 1, "head_repository_id": 1, "head_branch": "main"},
    }


def _refit_routes(repo_name: str) -> list[Route]:
    repo = f"/repos/{re.escape(repo_name)}"
    return [
        ("GET", re.compile(rf"{repo}/actions/runs/(?P<run_id>\d+)/artifacts"), "list_artifacts"),
        ("POST", re.compile(rf"{repo}/git/refs"), "create_ref"),
        ("GET", re.compile(rf"{repo}/contents/(?P<path>.+)"), "get_content"),
        ("PUT", re.compile(rf"{repo}/contents/(?P<path>.+)"), "put_content"),
        ("GET", re.compile(rf"{repo}/pulls"), "list_pulls"),
        ("POST", re.compile(rf"{repo}/pulls"), "create_pull"),
    ]


class _RefitHandler(_Handler):
    state: ClassVar[_RefitState]

    do_PUT = _Handler._route  # noqa: N815 - http.server's method names

    def _base(self) -> str:
        return f"http://{self.headers['Host']}"

    def list_artifacts(self, query: dict[str, str], *, run_id: str) -> None:
        items = self.state.artifacts.get(int(run_id))
        if items is None:
            self._send(404, {"message": "Not Found"})
            return
        page, per_page = int(query.get("page", 1)), min(int(query.get("per_page", 30)), 100)
        chunk = items[(page - 1) * per_page : page * per_page]
        self._send(200, {"total_count": len(items), "artifacts": chunk})

    def create_ref(self, _query: dict[str, str]) -> None:
        body = self._json()
        ref, sha = str(body.get("ref") or ""), str(body.get("sha") or "")
        if not ref.startswith("refs/heads/") or sha not in self.state.commits:
            self._send(422, {"message": "Reference update failed" if ref else "Invalid request."})
            return
        branch = ref.removeprefix("refs/heads/")
        with self.state.lock:
            if branch in self.state.heads:
                self._send(422, {"message": "Reference already exists"})
                return
            self.state.heads[branch] = sha
            self.state.files[branch] = dict(self.state.commits[sha])
        url = f"{self._base()}/repos/{self.state.repo}/git/refs/heads/{branch}"
        self._send(201, {"ref": ref, "node_id": "REF_1", "url": url, "object": {"type": "commit", "sha": sha}})

    def get_content(self, query: dict[str, str], *, path: str) -> None:
        branch = query.get("ref", "main")
        text = self.state.files.get(branch, {}).get(unquote(path))
        if text is None:
            self._send(404, {"message": "Not Found"})
            return
        encoded = base64.encodebytes(text.encode("utf-8")).decode("ascii")  # GitHub wraps it at 60 characters
        self._send(
            200,
            {
                "type": "file",
                "encoding": "base64",
                "size": len(text.encode("utf-8")),
                "name": unquote(path).rsplit("/", 1)[-1],
                "path": unquote(path),
                "content": encoded,
                "sha": _blob(text),
            },
        )

    def put_content(self, _query: dict[str, str], *, path: str) -> None:
        body = self._json()
        branch, name = str(body.get("branch") or "main"), unquote(path)
        files = self.state.files.get(branch)
        if files is None:
            self._send(404, {"message": "Branch not found"})
            return
        if name in files and "sha" not in body:
            self._send(422, {"message": 'Invalid request.\n\n"sha" wasn\'t supplied.'})
            return
        if name in files and body["sha"] != _blob(files[name]):
            self._send(409, {"message": f"{name} does not match {body['sha']}"})
            return
        text = base64.b64decode(str(body.get("content") or "")).decode("utf-8")
        with self.state.lock:
            files[name] = text
            commit = hashlib.sha1(f"{self.state.heads[branch]}{name}{text}".encode(), usedforsecurity=False).hexdigest()
            self.state.heads[branch] = commit
            self.state.commits[commit] = dict(files)
        content = {"name": name.rsplit("/", 1)[-1], "path": name, "sha": _blob(text), "type": "file"}
        self._send(200, {"content": content, "commit": {"sha": commit, "message": body.get("message")}})

    def list_pulls(self, query: dict[str, str]) -> None:
        head, state = query.get("head", ""), query.get("state", "open")
        items = [
            p
            for p in reversed(self.state.pulls)
            if (not head or p["head"]["label"] == head) and state in ("all", p["state"])
        ]
        self.paginate(items, base_url=self._base())

    def create_pull(self, _query: dict[str, str]) -> None:
        body = self._json()
        head, base = str(body.get("head") or ""), str(body.get("base") or "")
        owner = self.state.repo.split("/")[0]
        if head not in self.state.heads or base not in self.state.heads:
            errors = [
                {
                    "resource": "PullRequest",
                    "field": "head" if head not in self.state.heads else "base",
                    "code": "invalid",
                }
            ]
            self._send(422, {"message": "Validation Failed", "errors": errors})
            return
        if any(p["head"]["ref"] == head and p["state"] == "open" for p in self.state.pulls):
            message = f"A pull request already exists for {owner}:{head}."
            self._send(
                422,
                {
                    "message": "Validation Failed",
                    "errors": [{"resource": "PullRequest", "code": "custom", "message": message}],
                },
            )
            return
        with self.state.lock:
            number = len(self.state.issues) + len(self.state.pulls) + 1
            pull = {
                "id": next(self.state.ids),
                "number": number,
                "state": "open",
                "title": body.get("title"),
                "body": body.get("body"),
                "html_url": f"https://github.com/{self.state.repo}/pull/{number}",
                "head": {"label": f"{owner}:{head}", "ref": head, "sha": self.state.heads[head]},
                "base": {"label": f"{owner}:{base}", "ref": base, "sha": self.state.heads[base]},
                "maintainer_can_modify": bool(body.get("maintainer_can_modify")),
                "user": {"login": "github-actions[bot]", "type": "Bot"},
                "created_at": _TIME,
            }
            self.state.pulls.append(pull)
        self._send(201, pull)
