"""SHA-256 digests as the text every source writes them in: 64 lowercase hex digits.

One check for every place a digest comes from outside (PyPI's JSON, an index page's
``#sha256=`` fragment, a matrix ``source`` override), so none of them accepts what another
would refuse.
"""

from __future__ import annotations

import re

__all__ = ["is_sha256"]

_SHA256 = re.compile(r"[0-9a-f]{64}")


def is_sha256(text: str) -> bool:
    """Whether ``text`` is a SHA-256 digest in lowercase hex, nothing before or after it.

    >>> is_sha256("ab" * 32), is_sha256("AB" * 32), is_sha256("ab" * 32 + "\\n"), is_sha256("ab" * 31)
    (True, False, False, False)
    """
    return _SHA256.fullmatch(text) is not None
