"""JSON from outside (PyPI, lock files, manifests, saved facts): any text gives a value or a ValueError.

``json.loads`` raises ``RecursionError`` for deeply nested input, ``UnicodeDecodeError``
for bytes that are not UTF-8 and a bare ``ValueError`` for a number of more than 4,300
digits; each becomes the one ``ValueError`` every reader already turns into its own error,
with the document's name.
"""

from __future__ import annotations

import json

__all__ = ["parse_json"]


def parse_json(data: str | bytes, *, what: str) -> object:
    """Parse JSON text; ``ValueError`` naming ``what`` for anything that is not a JSON document.

    >>> parse_json('{"a": [1, 2]}', what="x")
    {'a': [1, 2]}
    >>> parse_json("[" * 100000, what="x.json")
    Traceback (most recent call last):
    ...
    ValueError: x.json: not JSON (nested too deeply)
    """
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            msg = f"{what}: not JSON (not UTF-8: {exc.reason} at byte {exc.start})"
            raise ValueError(msg) from None
    try:
        return json.loads(data)
    except ValueError as exc:  # JSONDecodeError, or int()'s limit on digits
        msg = f"{what}: not JSON ({exc})"
        raise ValueError(msg) from None
    except RecursionError:
        msg = f"{what}: not JSON (nested too deeply)"
        raise ValueError(msg) from None
