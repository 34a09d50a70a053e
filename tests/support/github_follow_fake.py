"""A loopback stand-in for the GitHub REST calls the follow workflow makes (issues, dispatches, runs).

GitHub cannot be reached from the test machine; this answers in the shapes GitHub documents
(API version 2022-11-28): docs.github.com/rest/issues/issues ("List repository issues" lists
pull requests too, newest first, ``per_page`` up to 100 with ``Link`` pagination; "Create an
issue" 201; "Update an issue" 200, ``state``/``state_reason``), /rest/issues/comments ("Create
an issue comment" 201), /rest/actions/workflows ("Create a workflow dispatch event": 204 and
no body; 404 for an unknown workflow; 422 ``Unexpected inputs provided: [...]`` for inputs the
workflow does not declare) and /rest/actions/workflow-runs ("List workflow runs for a
workflow": ``{"total_count", "workflow_runs": [...]}``, filtered by ``status``). A request
without a token is ``401 Requires authentication``.

Dispatch input *values* are not checked against ``choice`` options here: the wheels workflow
is gaining the value ``matrix`` for its axes (the lead's change), which GitHub will check.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

import yaml

from tests.support.github_http import GitHubHandler, Route
from tests.support.servers import LoopbackServer

__all__ = ["Dispatch", "FollowGitHub"]

_TIME = "2026-11-24T04:23:00Z"


@dataclass
class Dispatch:
    workflow: str
    ref: str
    inputs: dict[str, str]


@dataclass
class _State:
    repo: str
    workflows: Path  # .github/workflows of the repository
    issues: list[dict[str, Any]] = field(default_factory=list)
    comments: list[dict[str, Any]] = field(default_factory=list)  # every issue's, oldest first (``issue`` added)
    dispatches: list[Dispatch] = field(default_factory=list)
    runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    log: list[tuple[str, str, int]] = field(default_factory=list)
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    lock: threading.Lock = field(default_factory=threading.Lock)
    # "issue" / "run": changes a copy of each object of that kind as it is served (a hostile server)
    tamper: dict[str, Callable[[dict[str, Any]], None]] = field(default_factory=dict)

    def served(self, kind: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        change = self.tamper.get(kind)
        if change is None:
            return items
        copies = copy.deepcopy(items)
        for item in copies:
            change(item)
        return copies


class FollowGitHub(LoopbackServer):
    """``with FollowGitHub("octo/dswheels", workflows_dir) as gh: gh.api_url``."""

    def __init__(self, repo: str, workflows: Path) -> None:
        self.state = _State(repo=repo, workflows=workflows)
        super().__init__(ThreadingHTTPServer(("127.0.0.1", 0), self._make_handler()))

    def _make_handler(self) -> type[BaseHTTPRequestHandler]:
        return _handler(self.state)

    @property
    def api_url(self) -> str:
        return self.base_url

    def add_run(self, workflow: str, *, status: str, title: str) -> None:
        with self.state.lock:
            self.state.runs.setdefault(workflow, []).append(_run(next(self.state.ids), workflow, status, title))

    @property
    def issues(self) -> list[dict[str, Any]]:
        return [dict(i) for i in self.state.issues]

    def add_issue(self, number: int, *, labels: tuple[str, ...] = ()) -> None:
        """An issue a person opened (the events of the request tests are about it)."""
        with self.state.lock:
            self.state.issues.append(
                {
                    "id": next(self.state.ids),
                    "number": number,
                    "title": "",
                    "body": "",
                    "state": "open",
                    "labels": [{"name": name} for name in labels],
                    "user": {"login": "octocat", "type": "User"},
                }
            )

    def comments_on(self, number: int) -> list[str]:
        """The bodies of issue ``number``'s comments, oldest first."""
        return [str(c["body"]) for c in self.state.comments if c["issue"] == number]

    def comment_as(self, number: int, body: str, *, login: str, kind: str = "User") -> None:
        """A comment someone else made (a person planting the answer's marker, say)."""
        with self.state.lock:
            self.state.comments.append(_comment(next(self.state.ids), number, body, login=login, kind=kind))


def _run(run_id: int, workflow: str, status: str, title: str) -> dict[str, Any]:
    return {
        "id": run_id,
        "name": workflow.removesuffix(".yml"),
        "display_title": title,
        "status": status,
        "conclusion": None,
        "event": "workflow_dispatch",
        "created_at": _TIME,
    }


def _comment(comment_id: int, number: int, body: str, *, login: str, kind: str) -> dict[str, Any]:
    """GitHub's issue comment object (docs: "Create an issue comment", 201), with the issue it is on."""
    return {
        "id": comment_id,
        "node_id": f"IC_{comment_id}",
        "url": f"https://api.github.com/repos/o/r/issues/comments/{comment_id}",
        "html_url": f"https://github.com/o/r/issues/{number}#issuecomment-{comment_id}",
        "body": body,
        "user": {"login": login, "id": 41898282, "type": kind},
        "created_at": _TIME,
        "updated_at": _TIME,
        "author_association": "NONE",
        "issue": number,  # not GitHub's: what the fake files it under
    }


def _declared_inputs(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    data = yaml.load(text, Loader=yaml.BaseLoader)  # noqa: S506 - BaseLoader: strings only, `on` stays "on"
    dispatch = (data.get("on") or {}).get("workflow_dispatch")
    return dict(dispatch.get("inputs") or {}) if isinstance(dispatch, dict) else {}


def _routes(repo_name: str) -> list[Route]:
    repo = f"/repos/{re.escape(repo_name)}"
    return [
        ("GET", re.compile(rf"{repo}/issues"), "list_issues"),
        ("POST", re.compile(rf"{repo}/issues"), "create_issue"),
        ("PATCH", re.compile(rf"{repo}/issues/(?P<number>\d+)"), "update_issue"),
        ("POST", re.compile(rf"{repo}/issues/(?P<number>\d+)/comments"), "create_comment"),
        ("GET", re.compile(rf"{repo}/issues/(?P<number>\d+)/comments"), "list_comments"),
        ("PATCH", re.compile(rf"{repo}/issues/comments/(?P<comment_id>\d+)"), "update_comment"),
        ("GET", re.compile(rf"{repo}/actions/workflows/(?P<workflow>[^/]+)/runs"), "list_runs"),
        ("POST", re.compile(rf"{repo}/actions/workflows/(?P<workflow>[^/]+)/dispatches"), "create_dispatch"),
    ]


class _Handler(GitHubHandler):
    """The follow workflow's endpoints; :func:`_handler` binds a subclass to one repository's ``state``."""

    state: ClassVar[_State]

    def _json(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        data = json.loads(self.rfile.read(length) or b"{}")
        return data if isinstance(data, dict) else {}

    def _route(self) -> None:
        if not self.headers.get("Authorization", "").startswith("Bearer "):
            self._send(401, {"message": "Requires authentication", "documentation_url": "https://docs.github.com/rest"})
            return
        found = self.route(urlsplit(self.path).path)
        if found is None:
            self._send(404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})
            return
        name, groups = found
        getattr(self, name)(self.query_params(), **groups)

    do_GET = do_POST = do_PATCH = _route  # noqa: N815 - http.server's method names

    def list_issues(self, query: dict[str, str]) -> None:
        wanted = query.get("state", "open")
        items = [i for i in reversed(self.state.issues) if wanted in ("all", i["state"])]
        self.paginate(self.state.served("issue", items), base_url=f"http://{self.headers['Host']}")

    def create_issue(self, _query: dict[str, str]) -> None:
        body = self._json()
        if not body.get("title"):
            self._send(
                422,
                {
                    "message": "Validation Failed",
                    "errors": [{"resource": "Issue", "code": "missing_field", "field": "title"}],
                },
            )
            return
        with self.state.lock:
            number = len(self.state.issues) + 1
            issue = {
                "id": next(self.state.ids),
                "number": number,
                "title": body["title"],
                "body": body.get("body") or "",
                "state": "open",
                "state_reason": None,
                "labels": [],
                "user": {"login": "github-actions[bot]", "type": "Bot"},
                "html_url": f"https://github.com/{self.state.repo}/issues/{number}",
                "created_at": _TIME,
                "updated_at": _TIME,
            }
            self.state.issues.append(issue)
        self._send(201, issue)

    def _issue(self, number: str) -> dict[str, Any] | None:
        return next((i for i in self.state.issues if i["number"] == int(number)), None)

    def update_issue(self, _query: dict[str, str], *, number: str) -> None:
        issue = self._issue(number)
        if issue is None:
            self._send(404, {"message": "Not Found"})
            return
        with self.state.lock:
            issue.update({k: v for k, v in self._json().items() if k in ("title", "body", "state", "state_reason")})
        self._send(200, issue)

    def create_comment(self, _query: dict[str, str], *, number: str) -> None:
        if self._issue(number) is None:
            self._send(404, {"message": "Not Found"})
            return
        text = str(self._json().get("body") or "")
        with self.state.lock:
            made = _comment(next(self.state.ids), int(number), text, login="github-actions[bot]", kind="Bot")
            self.state.comments.append(made)
        self._send(201, {k: v for k, v in made.items() if k != "issue"})

    def list_comments(self, _query: dict[str, str], *, number: str) -> None:
        if self._issue(number) is None:
            self._send(404, {"message": "Not Found"})
            return
        items = [{k: v for k, v in c.items() if k != "issue"} for c in self.state.comments if c["issue"] == int(number)]
        self.paginate(items, base_url=f"http://{self.headers['Host']}")

    def update_comment(self, _query: dict[str, str], *, comment_id: str) -> None:
        found = next((c for c in self.state.comments if c["id"] == int(comment_id)), None)
        if found is None:
            self._send(404, {"message": "Not Found"})
            return
        with self.state.lock:
            found["body"] = str(self._json().get("body") or "")
        self._send(200, {k: v for k, v in found.items() if k != "issue"})

    def list_runs(self, query: dict[str, str], *, workflow: str) -> None:
        if _declared_inputs(self.state.workflows / workflow) is None:
            self._send(404, {"message": "Not Found"})
            return
        # `status` takes a status or a conclusion ("success": finished with success)
        wanted = query.get("status")
        items = [r for r in self.state.runs.get(workflow, []) if wanted in (None, r["status"], r.get("conclusion"))]
        self._send(200, {"total_count": len(items), "workflow_runs": self.state.served("run", list(reversed(items)))})

    def create_dispatch(self, _query: dict[str, str], *, workflow: str) -> None:
        declared = _declared_inputs(self.state.workflows / workflow)
        if declared is None:
            self._send(404, {"message": "Not Found"})
            return
        body = self._json()
        inputs = {str(k): str(v) for k, v in (body.get("inputs") or {}).items()}
        unexpected = sorted(set(inputs) - set(declared))
        if not body.get("ref") or unexpected:
            message = f"Unexpected inputs provided: {json.dumps(unexpected)}" if unexpected else "ref is required"
            self._send(422, {"message": message})
            return
        with self.state.lock:
            self.state.dispatches.append(Dispatch(workflow, str(body["ref"]), inputs))
            runs = self.state.runs.setdefault(workflow, [])
            runs.append(_run(next(self.state.ids), workflow, "queued", workflow.removesuffix(".yml")))
        self._send(204)


def _handler(repository: _State) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        state = repository
        routes = _routes(repository.repo)
        answers = repository.log
        answers_lock = repository.lock

    return Handler
