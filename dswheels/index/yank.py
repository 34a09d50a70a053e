"""Yanking published wheels: ``yanked`` file rules (a filename or glob, and the reason) applied to the index.

A yanked file stays on the site with ``data-yanked`` (PEP 592): installers skip it unless it
is pinned, and the human page strikes it out.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, replace

from dswheels.kernel.index_files import IndexFile

__all__ = ["YankRule", "apply_yanked", "parse_yanked"]


@dataclass(frozen=True, slots=True)
class YankRule:
    pattern: str  # a filename or glob
    reason: str
    line: int


def parse_yanked(text: str, source: str = "yanked") -> tuple[YankRule, ...]:
    """``<filename or glob> <reason...>`` per line; ``#`` starts a comment.

    >>> parse_yanked("deepspeed-0.19.7+cu128* crashes in FusedAdam (#123)")[0].reason
    'crashes in FusedAdam (#123)'
    """
    rules: list[YankRule] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pattern, _sep, reason = line.partition(" ")
        if not pattern.endswith((".whl", "*")):
            msg = f"{source}:{number}: {pattern!r} names no wheel (give a filename or a glob ending in '*' or '.whl')"
            raise ValueError(msg)
        rules.append(YankRule(pattern=pattern, reason=reason.strip(), line=number))
    return tuple(rules)


def apply_yanked(files: Sequence[IndexFile], rules: Sequence[YankRule]) -> tuple[list[IndexFile], list[YankRule]]:
    """Mark yanked files (the first matching rule gives the reason); also return the rules that matched nothing."""
    used: set[int] = set()
    result: list[IndexFile] = []
    for item in files:
        hit = next((i for i, rule in enumerate(rules) if fnmatch.fnmatchcase(item.filename, rule.pattern)), None)
        if hit is not None:
            used.add(hit)
            item = replace(item, yanked=rules[hit].reason)  # noqa: PLW2901
        result.append(item)
    return result, [rule for i, rule in enumerate(rules) if i not in used]
