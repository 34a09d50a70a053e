"""Real HTTP servers on loopback for the tests.

:class:`LoopbackServer` runs any handler on 127.0.0.1 from a background thread while in a
``with`` block (the fake GitHub is one). :class:`StaticServer` serves a directory the way
GitHub Pages or any static host does (``dir/`` -> ``dir/index.html``, 404 otherwise) and
keeps a log of what was asked for and how many bytes went out, so a test can prove that an
installer fetched only ``.metadata`` files while resolving, or measure what it transferred.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["LoopbackServer", "Request", "StaticServer"]


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str  # decoded, without the query
    status: int
    sent: int  # bytes written back, headers included


class _Counter:
    def __init__(self, inner: IO[bytes]) -> None:
        self.inner = inner
        self.count = 0

    def write(self, data: bytes) -> int:
        self.count += len(data)
        return self.inner.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _Handler(SimpleHTTPRequestHandler):
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.wfile = _Counter(self.wfile)  # type: ignore[assignment,arg-type]
        self._status = 0

    def send_response(self, code: int, message: str | None = None) -> None:
        self._status = code
        super().send_response(code, message)

    def handle_one_request(self) -> None:
        counter: _Counter = self.wfile  # type: ignore[assignment]
        before = counter.count
        self._status = 0
        super().handle_one_request()
        if self._status:
            path = unquote(urlsplit(self.path).path)
            self.server.record(Request(self.command, path, self._status, counter.count - before))

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path) -> None:
        super().__init__(("127.0.0.1", 0), functools.partial(_Handler, directory=str(root)))
        self.log: list[Request] = []
        self._lock = threading.Lock()

    def record(self, request: Request) -> None:
        with self._lock:
            self.log.append(request)


class LoopbackServer:
    """``with LoopbackServer(server) as s: s.base_url`` -> ``http://127.0.0.1:PORT``, served from a thread.

    ``server`` is bound to ``("127.0.0.1", 0)`` by the caller: the system picks a free port.
    """

    def __init__(self, server: ThreadingHTTPServer) -> None:
        server.daemon_threads = True
        self._server = server
        # shutdown() waits for the loop's next poll: 0.5 s by default, at the end of every test that serves
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


class StaticServer(LoopbackServer):
    """``with StaticServer(root) as server: server.url`` -> ``http://127.0.0.1:PORT/``."""

    _server: _Server

    def __init__(self, root: Path) -> None:
        self.root = root
        super().__init__(_Server(root))

    @property
    def url(self) -> str:
        return self.base_url + "/"

    @property
    def log(self) -> list[Request]:
        return list(self._server.log)

    def clear(self) -> None:
        self._server.log.clear()

    def paths(self, status: int | None = None) -> list[str]:
        return [r.path for r in self.log if status is None or r.status == status]

    def sent(self) -> int:
        return sum(r.sent for r in self.log)

    def __iter__(self) -> Iterator[Request]:
        return iter(self.log)
