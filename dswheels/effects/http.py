"""Reading HTTP answers with a bound: an endless or huge response is an error, not a MemoryError."""

from __future__ import annotations

from urllib.parse import urlsplit

import requests

from dswheels.errors import DswheelsError

__all__ = ["MAX_PAGE_BYTES", "check_redirects", "read_limited"]

MAX_PAGE_BYTES = 64 * 1024**2  # an index page of 100,000 wheels is ~40 MB


def read_limited(response: requests.Response, *, limit: int, what: str, error: type[DswheelsError]) -> bytes:
    """The body of a ``stream=True`` response, or ``error`` once it passes ``limit`` bytes."""
    body = bytearray()
    try:
        for chunk in response.iter_content(1 << 16):
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
