"""What the environment variables dswheels reads must be: each is checked as a flag is.

A variable that stands for a flag (``DSWHEELS_MATRIX``, ``DSWHEELS_INDEX``, ``GITHUB_REF_NAME``,
..., each named in its command's ``--help``) is parsed by that flag's own parser
(:func:`dswheels.cli.flags.settle`). The others are parsed here, by what they
mean; :mod:`dswheels.host.environ` reads them and turns a ``ValueError`` into bad input
(exit 2) that names the variable. Unset and empty are the same: not given.

Read as they come, with no rule to break: ``NO_COLOR`` and ``FORCE_COLOR`` (any non-empty value
turns colour off, on: no-color.org), ``GITHUB_ACTIONS`` (``true`` or not), and the variables a
machine's tools define, which ``doctor`` reports as facts and the build checks as tools
(``CUDA_HOME``, ``CUDA_PATH``, ``CONDA_PREFIX``, ``PATH``, ``CXX``, the MSVC developer
environment's). Pure: the caller passes the text.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from dswheels.kernel.numbers import is_ascii_digits

__all__ = [
    "MAX_EPOCH",
    "SECRET",
    "api_url",
    "credential",
    "header_token",
    "plain_path",
    "source_date_epoch",
    "switch",
    "username",
]

MAX_EPOCH = 253_402_300_799  # 9999-12-31T23:59:59Z: the last second a date can be written for
SECRET = frozenset({"GITHUB_TOKEN", "GH_TOKEN", "DSWHEELS_UPLOAD_PASSWORD", "TWINE_PASSWORD"})  # never echoed


def source_date_epoch(text: str) -> int:
    """``SOURCE_DATE_EPOCH`` (reproducible-builds.org): seconds since 1970, ASCII digits only.

    >>> source_date_epoch("1700000000")
    1700000000
    >>> source_date_epoch("\\u0661\\u0662")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ValueError: not a whole number of seconds since 1970 in ASCII digits
    """
    if not is_ascii_digits(text):
        msg = "not a whole number of seconds since 1970 in ASCII digits (reproducible-builds.org's SOURCE_DATE_EPOCH)"
        raise ValueError(msg)
    if len(text) > len(str(MAX_EPOCH)) or int(text) > MAX_EPOCH:
        msg = f"a date after the year 9999 (at most {MAX_EPOCH})"
        raise ValueError(msg)
    return int(text)


def switch(text: str) -> bool:
    """An on/off variable (``DSWHEELS_DEBUG``): ``1`` or ``0`` (``true``/``false`` too).

    >>> switch("1"), switch("false")
    (True, False)
    """
    value = text.strip().lower()
    if value not in ("0", "1", "true", "false"):
        msg = "expected 1 or 0"
        raise ValueError(msg)
    return value in ("1", "true")


def header_token(text: str) -> str:
    """A bearer token (``GITHUB_TOKEN``, ``GH_TOKEN``): it goes into an HTTP header, so printable ASCII
    without spaces (GitHub's are letters, digits and ``_``)."""
    if not all("!" <= c <= "~" for c in text):
        msg = "not a token: it has a space, a control or a non-ASCII character (it goes into an HTTP header)"
        raise ValueError(msg)
    return text


def credential(text: str) -> str:
    """A password for HTTP basic authentication (``DSWHEELS_UPLOAD_PASSWORD``, ``TWINE_PASSWORD``):
    what requests can send, Latin-1 without control characters."""
    if not all(" " <= c <= "~" or "\xa0" <= c <= "\xff" for c in text):
        msg = "has a control character, or one HTTP basic authentication cannot carry (outside Latin-1)"
        raise ValueError(msg)
    return text


def username(text: str) -> str:
    """A user name for HTTP basic authentication: a :func:`credential` without ``:`` (RFC 7617)."""
    if ":" in text:
        msg = "has a ':', which ends a user name in HTTP basic authentication (RFC 7617)"
        raise ValueError(msg)
    return credential(text)


def api_url(text: str) -> str:
    """``GITHUB_API_URL``: an http(s) URL with a host (GitHub's, or a GitHub Enterprise server's).

    >>> api_url("https://api.github.com/")
    'https://api.github.com'
    """
    try:
        parts = urlsplit(text)
        host = parts.hostname
    except ValueError as exc:
        msg = f"not a URL ({exc})"
        raise ValueError(msg) from None
    if parts.scheme not in ("http", "https") or not host:
        msg = "expected an http(s) URL with a host, like https://api.github.com"
        raise ValueError(msg)
    if not all("!" <= c <= "~" for c in text):  # it goes into every request line
        msg = "has a space, a control or a non-ASCII character"
        raise ValueError(msg)
    return text.rstrip("/")


def plain_path(text: str) -> str:
    """A path (``DSWHEELS_CACHE``, ``GITHUB_OUTPUT``): anything but control characters, which no
    tool writes into one and which would show as a different path than the one used."""
    if any(c < " " or c == "\x7f" for c in text):
        msg = "has a control character"
        raise ValueError(msg)
    return text
