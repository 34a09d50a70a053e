"""Typed reads of the JSON documents other servers send: GitHub's API, PyPI's JSON API, NVIDIA's redistrib JSON.

A server dswheels does not control (and ``GITHUB_API_URL``, ``--pypi``, ``--redist-url`` may
name any) can send any value in any field. Each such document has one reader that turns it into
frozen dataclasses at the moment it arrives (:mod:`dswheels.kernel.github_api`,
:mod:`dswheels.kernel.pypi_project`, :mod:`dswheels.cuda.redist`); nothing past the reader sees the
parsed JSON. The reader is built from the getters here: each checks the type *and* the text of
one value, and anything else raises :class:`RemoteDocumentError` naming the document and the
path of the value (``assets[3].digest``), showing the value only escaped and short.

The same rules as packaging's ``pylock.py`` (typed getters, path-aware errors), on
:class:`~dswheels.kernel.untyped.Untyped`'s paths.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from dswheels.kernel.digests import is_sha256
from dswheels.kernel.untyped import Untyped

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

__all__ = ["MAX_TEXT", "RemoteDocumentError", "RemoteJson", "shown"]

MAX_TEXT = 1024  # a name, a version, a URL, a state: far longer than any the servers send
_PLAIN = re.compile(r"[A-Za-z0-9 ._:/+=,@-]{0,80}")  # what an error shows of a value: no markup, no escapes
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_TIMESTAMP = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?(?:Z|[+-][0-9]{2}:[0-9]{2})"
)
_WORD = re.compile(r"[a-z][a-z0-9_]{0,31}")


def shown(value: object) -> str:
    """A value as an error may show it: plain text as it is, anything else described, never reproduced.

    The error reaches a terminal, a log, the facts report and from it a GitHub issue: text with
    markup, shell or control characters, another script's digits or more than 80 characters is
    said to be one, not shown; a number too long to print is said to be one (``str(10**5000)``
    raises).

    >>> shown("sha256:XYZ")
    "'sha256:XYZ'"
    >>> shown("javascript:alert(1)")
    'a string of 19 characters (not plain text: not shown)'
    >>> shown("a\u202eb")
    'a string of 3 characters (not plain text: not shown)'
    >>> shown(10**5000), shown([1]), shown(None), shown(1.5)
    ('a number of 16610 bits', 'a list', 'null', '1.5')
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and value.bit_length() > 64:
        return f"a number of {value.bit_length()} bits"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, str) and not _PLAIN.fullmatch(value):
        return f"a string of {len(value)} characters (not plain text: not shown)"
    return repr(value)


class RemoteDocumentError(ValueError):
    """A remote document whose value at ``path`` is not what its server sends."""

    def __init__(self, document: str, path: str, expected: str, value: object) -> None:
        self.document = document
        self.path = path
        self.expected = expected
        got = "it is absent" if value is _ABSENT else f"got {shown(value)}"
        super().__init__(f"{document}: {path or 'the document'}: expected {expected}, {got}")


_ABSENT = object()  # a key the mapping does not have (``None`` is JSON's null)


class RemoteJson(Untyped):
    """One value of a remote document, where it is (``assets[3].digest``) and which document it is in."""

    mapping_word = "an object"

    __slots__ = ("document",)

    def __init__(self, data: object, path: str = "", *, document: str = "the document") -> None:
        super().__init__(data, path)
        self.document = document

    def _child(self, key: str | int, data: object) -> Self:
        if isinstance(key, str) and not _PLAIN.fullmatch(key):  # a key is the server's text too
            key = f"<a key of {len(key)} characters>"
        path = f"{self.path}[{key}]" if isinstance(key, int) else f"{self.path}.{key}" if self.path else key
        return type(self)(data, path, document=self.document)

    def fail(self, expected: str) -> RemoteDocumentError:
        return RemoteDocumentError(self.document, self.path, expected, self.data)

    # --- presence -------------------------------------------------------------------------------------

    def need(self, key: str) -> Self:
        """The value under ``key``, which must be there (null is a value here: the getter judges it)."""
        mapping = self.map()
        if key not in mapping:
            raise RemoteDocumentError(self.document, self._child(key, None).path, "a value", _ABSENT)
        return self._child(key, mapping[key])

    def maybe(self, key: str) -> Self | None:
        """The value under ``key``; None when it is absent or null."""
        mapping = self.map()
        value = mapping.get(key)
        return None if value is None else self._child(key, value)

    def items_limited(self, limit: int) -> list[tuple[str, Self]]:
        """The keys and values of a mapping of at most ``limit`` entries."""
        if isinstance(self.data, dict) and len(self.data) > limit:
            raise self.fail(f"at most {limit} entries")
        return self.items()

    def seq_limited(self, limit: int) -> list[Self]:
        """The elements of a list of at most ``limit`` elements."""
        if isinstance(self.data, list) and len(self.data) > limit:
            raise self.fail(f"at most {limit} elements")
        return self.seq()

    # --- scalars --------------------------------------------------------------------------------------

    def printable(self, *, limit: int = MAX_TEXT, what: str = "text") -> str:
        """A string of 1 to ``limit`` printable characters: no control, bidi or other invisible one."""
        if not isinstance(self.data, str) or not 0 < len(self.data) <= limit or not self.data.isprintable():
            raise self.fail(f"{what} (1 to {limit} printable characters)")
        return self.data

    def ascii_text(self, *, limit: int = MAX_TEXT, what: str = "text") -> str:
        """A string of 1 to ``limit`` printable ASCII characters (names, versions, URLs a server makes)."""
        text = self.printable(limit=limit, what=what)
        if not text.isascii():
            raise self.fail(f"{what} (printable ASCII)")
        return text

    def word(self, *, what: str) -> str:
        """One lowercase word of an enumeration a server sends (``uploaded``, ``sdist``, ``in_progress``)."""
        if not isinstance(self.data, str) or not _WORD.fullmatch(self.data):
            raise self.fail(f"{what} (a lowercase word: a-z, 0-9, _)")
        return self.data

    def any_text(self, *, limit: int) -> str:
        """Any string (a body of text: compared, never shown or used as a name), at most ``limit`` characters."""
        if not isinstance(self.data, str) or len(self.data) > limit:
            raise self.fail(f"a string of at most {limit} characters")
        return self.data

    def count(self, *, low: int = 0, high: int) -> int:
        """A JSON integer from ``low`` to ``high`` (never a float, a string of digits or a boolean)."""
        data = self.data
        if isinstance(data, bool) or not isinstance(data, int) or not low <= data <= high:
            raise self.fail(f"an integer from {low} to {high}")
        return data

    def sha256_hex(self) -> str:
        """A SHA-256 digest: 64 lowercase hex digits."""
        if not isinstance(self.data, str) or not is_sha256(self.data):
            raise self.fail("a sha256 (64 lowercase hex digits)")
        return self.data

    def timestamp(self) -> str:
        """An ISO 8601 time as GitHub writes it (``2026-11-23T04:23:00Z``), compared as text."""
        if not isinstance(self.data, str) or not _TIMESTAMP.fullmatch(self.data):
            raise self.fail("an ISO 8601 time (YYYY-MM-DDThh:mm:ssZ)")
        return self.data

    def day(self) -> str:
        """The ``YYYY-MM-DD`` an ISO 8601 time (``2026-10-20T15:27:54Z``) begins with."""
        if not isinstance(self.data, str) or len(self.data) > 64 or not _DATE.match(self.data):
            raise self.fail("an ISO 8601 time (YYYY-MM-DD...)")
        return self.data[:10]
