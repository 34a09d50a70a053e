"""Where each command writes and the next one reads when no path is given: one chain, defined here.

Relative to the directory the commands run in (a clone's root for the README's quick start)::

    dswheels build    writes  wheelhouse/<variant>/*.whl   (with <wheel>.manifest.json, logs/)
    dswheels verify   reads   wheelhouse/<variant>/*.whl
    dswheels publish  reads   wheelhouse/<variant>/*.whl,  writes published/
    dswheels index    reads   published/,                  writes site/
    site/ served by   python3 -m http.server --bind 127.0.0.1 --directory site 8000

so ``build``, ``verify``, ``publish`` and ``index`` with no path flags pick up each other's
outputs, and the install lines of a site indexed from a directory are those of the site as
that command serves it (:data:`LOCAL_SITE_URL`).
"""

from __future__ import annotations

import shlex
from pathlib import Path, PurePath
from urllib.parse import urlsplit

__all__ = [
    "LOCAL_SITE_URL",
    "MATRIX",
    "PUBLISHED",
    "SITE",
    "WHEELHOUSE",
    "serve_command",
]

MATRIX = Path("matrix") / "matrix.yml"
WHEELHOUSE = Path("wheelhouse")
PUBLISHED = Path("published")
SITE = Path("site")

# 127.0.0.1 rather than localhost: the server binds one address, and the URL must name that one.
LOCAL_SITE_URL = "http://127.0.0.1:8000/"

_LOOPBACK = ("127.0.0.1", "localhost")


def serve_command(site: PurePath, site_url: str, *, python: str = "python3") -> str | None:
    """The command that serves ``site`` where ``site_url`` says it is, when that is this machine's loopback.

    None for any other URL (GitHub Pages, a custom domain, a sub-path): the site is deployed there.

    >>> serve_command(Path("site"), "http://127.0.0.1:8000/")
    'python3 -m http.server --bind 127.0.0.1 --directory site 8000'
    >>> serve_command(Path("my site"), "http://localhost:8123", python="python")
    "python -m http.server --bind localhost --directory 'my site' 8123"
    >>> serve_command(Path("site"), "https://octo.github.io/dswheels/") is None
    True
    """
    parts = urlsplit(site_url)
    if parts.scheme != "http" or parts.hostname not in _LOOPBACK or parts.path not in ("", "/"):
        return None
    port = parts.port or 80
    return shlex.join([python, "-m", "http.server", "--bind", str(parts.hostname), "--directory", str(site), str(port)])
