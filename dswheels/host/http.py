"""Every HTTP request dswheels makes: bounded in size and in time, credentials kept to their origin.

:func:`session` is the one way to get a ``requests.Session`` here. Its requests:

- **end by a deadline** when they download (GET, HEAD: :class:`Pace`): from the moment the
  request is sent, the response must arrive at :data:`MIN_RATE` bytes per second on average
  after a floor of :data:`FLOOR_SECONDS` (headers included), so one sent at a byte per second
  stops after the floor, and any download stops by the floor plus its size at that rate
  (an upload's answer is left to the server and the per-read timeout). requests' ``timeout``
  bounds each read, not the whole; here a watchdog thread shuts the socket down when the
  deadline passes, which ends a blocked read at once, and the reader raises :class:`TooSlow`
  (a ``requests.ConnectionError``) saying what was slow. Inside :func:`attempt_limit`, a
  download also ends when it has taken that many seconds, however steadily it trickles
  (:class:`AttemptCut`, retried: a caller that keeps what arrived resumes from there).
- **carry credentials only to their origin** (scheme, host and port: :func:`dswheels.kernel.urls.origin`):
  :class:`OriginAuth` signs only requests to the origin it was given for, and a redirect to
  any other origin drops the ``Authorization`` header (requests alone keeps it on an
  http -> https redirect of the same host).

:func:`read_limited` and :func:`iter_body` read a streamed body: at most ``limit`` bytes, and
they notice a deadline that ended the body early.
"""

from __future__ import annotations

import contextlib
import contextvars
import socket
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from requests.auth import AuthBase, HTTPBasicAuth
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import DecodeError, ProtocolError, ReadTimeoutError, SSLError
from urllib3.response import HTTPResponse
from urllib3.util.retry import Retry

from dswheels import __version__
from dswheels.host.clock import monotonic
from dswheels.kernel.errors import DswheelsError
from dswheels.kernel.urls import origin

__all__ = [
    "FLOOR_SECONDS",
    "MAX_PAGE_BYTES",
    "MIN_RATE",
    "READ_CHUNK",
    "TIMEOUTS",
    "AttemptCut",
    "OriginAuth",
    "Pace",
    "Timeouts",
    "TooSlow",
    "attempt_limit",
    "check_redirects",
    "iter_body",
    "read_limited",
    "session",
]

MAX_PAGE_BYTES = 64 * 1024**2  # an index page of 100,000 wheels is ~40 MB
FLOOR_SECONDS = 60.0  # any response may take this long, whatever its size (a slow start, a busy server)
MIN_RATE = 32 * 1024  # bytes per second on average after that: 256 kbit/s, far below any link that fetches wheels
# a read returns when this much has arrived: the deadline sees progress this often (half a second at MIN_RATE)
READ_CHUNK = 16 * 1024


@dataclass(frozen=True, slots=True)
class Timeouts:
    """requests' ``timeout`` (connect, read) for every request: ``connect`` seconds to connect, then how long
    one read may wait: ``read`` for a response (its whole download is bounded by :class:`Pace`), ``upload``
    for the answer to an upload (the server stores and hashes the file before it answers)."""

    connect: float
    read: float
    upload: float

    @property
    def for_request(self) -> tuple[float, float]:
        return (self.connect, self.read)

    @property
    def for_upload(self) -> tuple[float, float]:
        return (self.connect, self.upload)


TIMEOUTS = Timeouts(connect=15.0, read=120.0, upload=600.0)  # the one policy: every module that talks HTTP takes it


@dataclass(frozen=True, slots=True)
class Pace:
    """How long a response may take: ``floor`` seconds plus one second per ``rate`` bytes received."""

    floor: float
    rate: float

    def allowed(self, received: int) -> float:
        return self.floor + received / self.rate

    def describe(self) -> str:
        return f"{self.floor:.0f} s plus 1 s per {self.rate / 1024:.0f} KiB"


def current_pace() -> Pace:
    """The pace of the module's constants, read when a request starts (tests lower them)."""
    return Pace(FLOOR_SECONDS, MIN_RATE)


class TooSlow(requests.ConnectionError):
    """A response did not keep the pace: its socket was shut down."""


class AttemptCut(requests.ConnectionError):
    """A response was still arriving at the end of its :func:`attempt_limit`: its socket was shut down."""


_ATTEMPT: contextvars.ContextVar[float | None] = contextvars.ContextVar("dswheels_http_attempt", default=None)


@contextlib.contextmanager
def attempt_limit(seconds: float | None) -> Iterator[None]:
    """Downloads started inside end after ``seconds`` (None: only the pace bounds them).

    A body read a 16 KiB chunk at a time sees no clock between chunks, so a server sending a byte
    every few ms would hold one read for minutes: the watchdog's shutdown is what ends it."""
    token = _ATTEMPT.set(seconds)
    try:
        yield
    finally:
        _ATTEMPT.reset(token)


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed
        sock.shutdown(socket.SHUT_RDWR)  # ends a blocked recv at once (close would not)


class _Watchdog:
    """Shuts down the sockets of one request (its redirects included) once its response falls behind
    its pace. The clock starts when the request has been sent (the first wait for a response)."""

    def __init__(self, pace: Pace, limit: float | None = None) -> None:
        self.pace = pace
        self.limit = limit
        self.start = 0.0
        self.fired = False
        self.cut = False  # fired by the attempt limit, not the pace
        self.received = 0
        self._sockets: list[socket.socket] = []
        self._response: requests.Response | None = None
        self._lock = threading.Lock()
        self._done = threading.Event()

    def attach(self, sock: socket.socket) -> None:
        with self._lock:
            if self.fired:  # a retry (urllib3's) or a redirect after the deadline: it ends at once
                _shutdown(sock)
                return
            self._sockets.append(sock)
            if len(self._sockets) == 1:
                self.start = monotonic()
                threading.Thread(target=self._run, name="dswheels-http-deadline", daemon=True).start()

    def bind(self, response: requests.Response) -> None:
        """The response whose body is still to be read: its bytes count as progress."""
        self._response = response

    def _progress(self) -> int:
        raw = self._response.raw if self._response is not None else None
        if isinstance(raw, HTTPResponse):
            self.received = max(self.received, raw.tell())
        return self.received

    def _finished(self) -> bool:
        raw = self._response.raw if self._response is not None else None
        return isinstance(raw, HTTPResponse) and raw.closed  # the whole body is in: the socket went back

    def _run(self) -> None:
        while True:
            allowed = self.pace.allowed(self._progress())
            if self.limit is not None and self.limit < allowed:
                allowed = self.limit
            left = self.start + allowed - monotonic()
            if left <= 0:
                break
            if self._done.wait(left):  # stopped; else look at the progress again
                return
        with self._lock:
            if self._done.is_set() or self._finished():
                return
            self.fired = True
            self.cut = self.limit is not None and monotonic() - self.start >= self.limit
            for sock in self._sockets:
                _shutdown(sock)

    def stop(self) -> None:
        with self._lock:
            self._done.set()

    def error(self) -> requests.ConnectionError:
        seconds = monotonic() - self.start
        if self.cut:
            return AttemptCut(f"still arriving after {seconds:.0f} s ({self._progress()} bytes): this attempt ends")
        return TooSlow(  # the caller names the URL
            f"too slow: {self._progress()} bytes in {seconds:.0f} s (a download may take {self.pace.describe()} "
            "received); the server is stalling, or the network is that slow"
        )


_CURRENT: contextvars.ContextVar[_Watchdog | None] = contextvars.ContextVar("dswheels_http_watchdog", default=None)
_BODIES: weakref.WeakKeyDictionary[requests.Response, _Watchdog] = weakref.WeakKeyDictionary()


def _watch(sock: socket.socket | None) -> None:
    watchdog = _CURRENT.get()
    if watchdog is not None and sock is not None:
        watchdog.attach(sock)


class _WatchedHTTPConnection(HTTPConnection):
    def getresponse(self) -> HTTPResponse:  # type: ignore[override] # urllib3's own override
        _watch(self.sock)  # before the status line: headers sent slowly count too
        return super().getresponse()


class _WatchedHTTPSConnection(HTTPSConnection):
    def getresponse(self) -> HTTPResponse:  # type: ignore[override] # urllib3's own override
        _watch(self.sock)
        return super().getresponse()


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


_POOLS = {"http": _HTTPPool, "https": _HTTPSPool}
_DOWNLOADS = frozenset({"GET", "HEAD"})  # the methods whose answers have a deadline


class _Adapter(HTTPAdapter):
    """requests' adapter with connections a watchdog can reach."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:  # noqa: ANN401
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _POOLS

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:  # noqa: ANN401
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        manager.pool_classes_by_scheme = _POOLS
        return manager

    def build_response(self, req: requests.PreparedRequest, resp: Any) -> requests.Response:  # noqa: ANN401
        response = super().build_response(req, resp)
        watchdog = _CURRENT.get()
        if watchdog is not None:  # its body's bytes are the progress (read here, or later when streamed)
            watchdog.bind(response)
        return response


class _Session(requests.Session):
    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any) -> requests.Response:  # noqa: ANN401
        if str(method).upper() not in _DOWNLOADS:  # an upload's answer may take as long as the server needs
            return super().request(method, url, *args, **kwargs)
        watchdog = _Watchdog(current_pace(), _ATTEMPT.get())
        token = _CURRENT.set(watchdog)
        try:
            response = super().request(method, url, *args, **kwargs)
        except requests.RequestException:
            watchdog.stop()
            if watchdog.fired:
                raise watchdog.error() from None
            raise
        except BaseException:
            watchdog.stop()
            raise
        finally:
            _CURRENT.reset(token)
        if not kwargs.get("stream"):
            watchdog.stop()
            if watchdog.fired:  # the body was cut short: it is not the answer
                response.close()
                raise watchdog.error()
            return response
        _BODIES[response] = watchdog
        return response

    def should_strip_auth(self, old_url: str, new_url: str) -> bool:
        """Drop ``Authorization`` on a redirect to any other origin (requests keeps it on http -> https)."""
        return origin(old_url) != origin(new_url)


class OriginAuth(AuthBase):
    """HTTP Basic credentials for the origin of ``url`` only: a request anywhere else goes unsigned."""

    def __init__(self, url: str, username: str, password: str) -> None:
        self.origin = origin(url)
        self._basic = HTTPBasicAuth(username, password)

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        if request.url is not None and origin(request.url) == self.origin:
            self._basic(request)
        return request

    def __repr__(self) -> str:
        return f"OriginAuth({self.origin!r}, username=..., password=...)"


def session(*, retries: Retry | int = 0) -> requests.Session:
    """A session whose every download has a deadline (:class:`Pace`) and that keeps credentials to their origin."""
    http = _Session()
    adapter = _Adapter(max_retries=retries)
    http.mount("http://", adapter)
    http.mount("https://", adapter)
    http.headers["User-Agent"] = f"dswheels/{__version__}"
    return http


def _chunks(response: requests.Response) -> Iterator[bytes]:
    """What has arrived, as it arrives (``read1``): a read cut by the watchdog loses nothing already
    received, so a download cut mid-way resumes after its last byte (``iter_content`` waits for whole
    chunks and drops a partial one). urllib3's errors become requests', as ``iter_content``'s do."""
    raw = response.raw
    if not isinstance(raw, HTTPResponse):  # not a live answer (a test's, a cached one)
        yield from response.iter_content(READ_CHUNK)
        return
    try:
        while chunk := raw.read1(READ_CHUNK, decode_content=True):
            yield chunk
    except ProtocolError as exc:
        raise requests.exceptions.ChunkedEncodingError(exc) from exc
    except DecodeError as exc:
        raise requests.exceptions.ContentDecodingError(exc) from exc
    except ReadTimeoutError as exc:
        raise requests.exceptions.ConnectionError(exc) from exc
    except SSLError as exc:
        raise requests.exceptions.SSLError(exc) from exc


def iter_body(response: requests.Response) -> Iterator[bytes]:
    """The body of a ``stream=True`` response in chunks of at most :data:`READ_CHUNK`; :class:`TooSlow`
    when its deadline ended it."""
    watchdog = _BODIES.get(response)
    try:
        yield from _chunks(response)
    except requests.RequestException:
        if watchdog is not None and watchdog.fired:
            raise watchdog.error() from None
        raise
    finally:
        if watchdog is not None:
            watchdog.stop()
    if watchdog is not None and watchdog.fired:  # a shut-down socket can look like the body's end
        raise watchdog.error()


def read_limited(response: requests.Response, *, limit: int, what: str, error: type[DswheelsError]) -> bytes:
    """The body of a ``stream=True`` response, or ``error`` once it passes ``limit`` bytes or its deadline."""
    body = bytearray()
    try:
        for chunk in iter_body(response):
            body += chunk
            if len(body) > limit:
                raise error(
                    f"{what} is larger than {limit >> 20} MiB; refusing to read further",
                    hint="check that the URL is the right one: no page dswheels reads is that large",
                )
    except requests.RequestException as exc:
        raise error(f"reading {what} failed: {exc}") from None
    return bytes(body)


def check_redirects(url: str, response: requests.Response, *, error: type[DswheelsError]) -> None:
    """A redirect may not turn an https request into a plain http one (requests follows only
    http(s) redirects, so no other scheme can be reached this way)."""
    if urlsplit(url).scheme == "https" and urlsplit(response.url).scheme != "https":
        raise error(f"{url} redirected to {response.url}: refusing to read it over plain http")
