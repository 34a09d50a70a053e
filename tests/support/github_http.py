"""The HTTP plumbing every loopback fake of GitHub's REST API shares.

JSON answers (with the ``X-GitHub-Api-Version-Selected`` header GitHub sends), a log of every
answer, a route table of ``(method, path pattern, handler method)``, and list pagination the
way GitHub documents it (``per_page`` at most 100, ``Link`` with ``next``/``last``/``first``
URLs that keep the request's other query parameters). The releases fake
(:mod:`tests.support.github_fake_routes`) and the follow workflow's fake
(:mod:`tests.support.github_follow_fake`) answer their own endpoints on top of it.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlencode, urlsplit

__all__ = ["GitHubHandler", "Route"]

Route = tuple[str, re.Pattern[str], str]  # method, path pattern (fullmatch), handler method name


class GitHubHandler(BaseHTTPRequestHandler):
    """A subclass binds ``routes``, ``answers`` (the log) and ``answers_lock``; see :meth:`route`."""

    protocol_version = "HTTP/1.1"
    routes: ClassVar[list[Route]]
    answers: ClassVar[list[tuple[str, str, int]]]  # method, path (with query), status
    answers_lock: ClassVar[threading.Lock | threading.RLock]

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        pass

    def _send(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
        data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        self.send_response(status)
        content_type = "application/octet-stream" if isinstance(body, bytes) else "application/json; charset=utf-8"
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-GitHub-Api-Version-Selected", "2022-11-28")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        with self.answers_lock:
            self.answers.append((self.command, self.path, status))

    def route(self, path: str) -> tuple[str, dict[str, str]] | None:
        """The handler method this request's method and ``path`` name, and the path's named groups."""
        for method, pattern, name in self.routes:
            match = pattern.fullmatch(path)
            if method == self.command and match:
                return name, match.groupdict()
        return None

    def query_params(self) -> dict[str, str]:
        return {k: v[-1] for k, v in parse_qs(urlsplit(self.path).query).items()}

    def paginate(self, items: list[dict[str, Any]], *, base_url: str, page_size: int = 100) -> None:
        """One page of ``items`` (already newest first), with GitHub's ``Link`` header."""
        query = self.query_params()
        per_page = min(int(query.get("per_page", 30)), 100, page_size)
        page = int(query.get("page", 1))
        last = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page : page * per_page]
        others = {k: v for k, v in query.items() if k not in ("per_page", "page")}
        path = urlsplit(self.path).path

        def link(number: int, rel: str) -> str:
            return f'<{base_url}{path}?{urlencode({**others, "per_page": per_page, "page": number})}>; rel="{rel}"'

        links = [link(page + 1, "next"), link(last, "last")] if page < last else []
        if page > 1:
            links.append(link(1, "first"))
        self._send(200, chunk, {"Link": ", ".join(links)} if links else None)
