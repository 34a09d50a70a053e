"""URLs as dswheels shows them, trusts them with credentials, and prints them into shell lines.

Three rules, each in one place:

- **origin** (:func:`origin`): scheme, host and port. Credentials given for a URL (upload
  passwords, GitHub tokens, a ``user:password@`` in ``--index``) go only to that origin.
- **redaction** (:func:`redact_url`, :func:`redact_text`): a URL's userinfo is never shown or
  written; ``alice:s3cret@`` becomes ``alice:****@`` and a lone ``token@`` becomes ``****@``
  (pip's convention). The command line applies it to everything it prints.
- **shell-safe** (:func:`shell_url_problem`, :func:`page_url_problem`): a URL that goes into
  an install line a user pastes into a shell holds none of the characters a shell reads; and
  every URL printed into a shell line goes through :func:`shell_word` all the same.
"""

from __future__ import annotations

import re
import shlex
import string
from urllib.parse import quote, urlsplit

__all__ = ["origin", "page_url_problem", "redact_text", "redact_url", "shell_url_problem", "shell_word"]

_DEFAULT_PORTS = {"http": 80, "https": 443}
# scheme://userinfo@host: the userinfo ends at the authority's last "@" (a password may hold an
# unencoded one), before any "/", "?", "#", space or quote (RFC 3986 3.2.1)
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#\s\"'<>]+)@")
_UNSAFE_URL = re.compile(r"[^A-Za-z0-9._~:/@%+=,-]")


def origin(url: str) -> tuple[str, str, int | None]:
    """``(scheme, host, port)`` with the scheme's default port filled in; ``("", "", None)`` for no URL.

    >>> origin("https://Example.org/simple/") == origin("https://example.org:443/files/x.whl")
    True
    >>> origin("http://example.org/") == origin("https://example.org/")
    False
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:  # an unclosed IPv6 bracket, a port that is not a number
        return ("", "", None)
    scheme = parts.scheme.lower()
    return (scheme, (parts.hostname or "").lower(), port if port is not None else _DEFAULT_PORTS.get(scheme))


def _redacted(match: re.Match[str]) -> str:
    user, colon, _password = match["userinfo"].partition(":")
    return match["scheme"] + (f"{user}:****@" if colon else "****@")


def redact_text(text: str) -> str:
    """``text`` with the userinfo of every URL in it masked (the password, or a lone user that is a token).

    >>> redact_text("reading http://alice:s3cret@127.0.0.1:8000/simple/ and https://ghp_x@github.com/o/r")
    'reading http://alice:****@127.0.0.1:8000/simple/ and https://****@github.com/o/r'
    >>> redact_text("git@github.com:o/r and https://example.org/a@b")
    'git@github.com:o/r and https://example.org/a@b'
    """
    return _USERINFO.sub(_redacted, text) if "@" in text else text


def redact_url(url: str) -> str:
    """One URL as it may be shown.

    >>> redact_url("https://user:pw@host/x")
    'https://user:****@host/x'
    """
    return redact_text(url)


def shell_url_problem(url: str) -> str:
    """Why ``url`` may not go into a shell line ("" when it may): its scheme, and the characters
    a shell would read (``$``, backticks, quotes, spaces, ``;``, ``&``, ``|``, globs ...).

    >>> shell_url_problem("https://download.pytorch.org/whl/cu128")
    ''
    >>> shell_url_problem("http://x.example/$(touch${IFS}/tmp/pwn)/")
    "'$', '(', ')', '{', '}' in a URL: characters a shell would read (percent-encode them)"
    """
    if not url.lower().startswith(("https://", "http://", "file://")):
        return "it must be an http(s):// or file:// URL"
    if bad := sorted(set(_UNSAFE_URL.findall(url))):
        return f"{', '.join(map(repr, bad))} in a URL: characters a shell would read (percent-encode them)"
    return ""


def page_url_problem(url: str) -> str:
    """Why ``url`` may not be printed on a published page's install lines ("" when it may): the
    shell rule, a host, and no credentials (the page is public).

    >>> page_url_problem("https://alice:s3cret@wheels.example.org/")
    'it carries credentials (alice:****@): the page that shows it is public'
    """
    if problem := shell_url_problem(url):
        return problem
    parts = urlsplit(url)
    if parts.scheme.lower() in ("http", "https") and not parts.hostname:
        return "it names no host"
    if "@" in parts.netloc:
        shown = redact_url(f"{parts.scheme}://{parts.netloc}").partition("://")[2].rpartition("@")[0]
        return f"it carries credentials ({shown}@): the page that shows it is public"
    return ""


def shell_word(url: str) -> str:
    """``url`` as one word of a shell line: whitespace, control and non-ASCII characters
    percent-encoded (a newline would end the line), then quoted where a shell would read it.

    >>> shell_word("https://download.pytorch.org/whl/cu128")
    'https://download.pytorch.org/whl/cu128'
    >>> shell_word("http://x/$(id)/a b\\nrm -rf ~")
    "'http://x/$(id)/a%20b%0Arm%20-rf%20~'"
    """
    return shlex.quote(quote(url, safe=string.punctuation))
