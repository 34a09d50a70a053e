"""Numbers written as text, read the one way every reader of dswheels' inputs reads them: ASCII digits.

Python is generous with numbers in text: ``int()`` and ``float()`` take any Unicode decimal digit
(``int("١٩") == 19``), surrounding whitespace, a sign and ``_`` between digits; ``str.isdigit()``
is true for ``"²"``, which ``int()`` then refuses; a regex's ``\\d`` matches every script's digits.
A version, count or id typed as ``0.١٩.8`` would be read as ``0.19.8`` by one reader and be a
different string to the next (a wheel name, a URL, a cache key). So every number that comes from
a flag, a file, the environment or a server is ASCII digits or it is refused, through these
functions (``tests/unit/test_hostile_digits.py`` checks no other reading is left in the package).
"""

from __future__ import annotations

import re

__all__ = ["DECIMAL", "DIGITS", "SPACE", "ascii_decimal", "ascii_int", "is_ascii_digits"]

DIGITS = re.compile(r"[0-9]+")
DECIMAL = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?")
SPACE = " \t\r\n"  # what a typed number may be padded with: str.strip() also drops U+2003, U+0085, U+001C...
_MAX_DIGITS = 30  # far past any count, size or id dswheels reads; int() of 4,301 digits raises


def is_ascii_digits(text: str) -> bool:
    """Whether ``text`` is one or more ASCII digits and nothing else.

    >>> is_ascii_digits("19"), is_ascii_digits("١٩"), is_ascii_digits("²"), is_ascii_digits(" 1"), is_ascii_digits("")
    (True, False, False, False, False)
    """
    return DIGITS.fullmatch(text) is not None


def ascii_int(text: str, *, what: str = "a number") -> int:
    """``text`` as a non-negative integer: ASCII digits only (no sign, space, ``_`` or other script's digits).

    >>> ascii_int("042")
    42
    >>> ascii_int("٣")
    Traceback (most recent call last):
    ValueError: '٣' is not a number (ASCII digits 0-9)
    >>> ascii_int("1_000", what="a count")
    Traceback (most recent call last):
    ValueError: '1_000' is not a count (ASCII digits 0-9)
    """
    if not is_ascii_digits(text) or len(text) > _MAX_DIGITS:
        msg = f"{text[:40]!r} is not {what} (ASCII digits 0-9)"
        raise ValueError(msg)
    return int(text)


def ascii_decimal(text: str, *, what: str = "a number") -> float:
    """``text`` as a non-negative decimal number in ASCII: digits, at most one ``.``, an exponent
    (``1e-4``); not ``inf``, ``nan``, ``1_0`` or another script's digits, which ``float()`` also reads.

    >>> ascii_decimal("0.05"), ascii_decimal("3"), ascii_decimal("1e-4")
    (0.05, 3.0, 0.0001)
    >>> ascii_decimal("nan")
    Traceback (most recent call last):
    ValueError: 'nan' is not a number (ASCII digits 0-9, '.', an exponent)
    """
    if DECIMAL.fullmatch(text) is None or len(text) > _MAX_DIGITS:
        msg = f"{text[:40]!r} is not {what} (ASCII digits 0-9, '.', an exponent)"
        raise ValueError(msg)
    return float(text)
