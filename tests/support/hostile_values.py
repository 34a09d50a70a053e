# ruff: noqa: RUF001 - other scripts' digits beside ASCII ones are among the hostile values
"""Values a hostile server puts into a JSON document, and what must never come out of dswheels' readers.

Shared by the readers' own tests (tests/unit/test_hostile_remote.py) and the command line's
(tests/integration/test_hostile_remote.py): each field of each remote document gets each of these.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import asdict

__all__ = ["ABSENT", "HOSTILE_TEXT", "MARKS", "VARIANTS", "WRONG_TYPES", "clean", "hostile_in"]

ABSENT = object()
WRONG_TYPES: dict[str, object] = {
    "absent": ABSENT,
    "null": None,
    "true": True,
    "integer": 7,
    "float": 1.5,
    "huge number": 10**400,
    "negative": -1,
    "list": ["x"],
    "object": {"a": 1},
    "digits as text": "12",
}
HOSTILE_TEXT: dict[str, str] = {
    "javascript URL": "javascript:alert(document.cookie)",
    "data URL": "data:text/html,<script>alert(1)</script>",
    "markup": '"><img src=x onerror=alert(1)>',
    "control": "a\x1b[2J\x07b",
    "newline": "a\nb",
    "bidi": "x\u202egnp.exe",
    "zero width": "a\u200bb",
    "huge": "a" * 1_000_000,
    "arabic digits": "٠.١٩.٨",
    "fullwidth digits": "１２",
    "empty": "",
    "path": "../../etc/passwd",
}
VARIANTS = {**WRONG_TYPES, **HOSTILE_TEXT}
# what of HOSTILE_TEXT shows that it survived, wherever it went
MARKS = ["javascript:", "data:text", "<script", "onerror", "\x1b", "\u202e", "\u200b", "٠.١٩", "１２", "../"]
INVISIBLE = {"Cc", "Cf", "Zl", "Zp"}


def clean(text: str) -> bool:
    """No control, bidi, zero-width or line-separator character: what may reach a terminal or a page."""
    return not any(unicodedata.category(c) in INVISIBLE for c in text)


def hostile_in(values: object) -> list[str]:
    """The hostile texts that survive in a reader's result (its dataclasses as plain values)."""
    text = json.dumps(values, default=lambda o: asdict(o) if hasattr(o, "__dataclass_fields__") else str(o))
    return [m for m in MARKS if m in text] + (["huge"] if "a" * 10_000 in text else [])
