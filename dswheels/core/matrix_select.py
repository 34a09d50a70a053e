"""Matrix values that follow the facts: ``{newest: N}`` and ``variants: all`` (docs/matrix.md).

A maintainer rarely means "0.19.8 and 0.19.7"; they mean "the two newest DeepSpeed
releases". These selectors say that, and resolve against compat.yml when the plan is made,
so a new release in compat.yml (``dswheels facts check --write``) changes the plan without
touching the matrix. Every resolution is recorded as a sentence the plan prints.
"""

from __future__ import annotations

from collections.abc import Sequence

from dswheels.core.compat import Compat
from dswheels.core.model import Variant
from dswheels.core.versions import VersionTuple, format_version
from dswheels.core.yamldoc import Node, Problems

__all__ = ["ALL", "all_variants", "newest", "show_versions"]

ALL = "all"


def show_versions(versions: Sequence[VersionTuple]) -> str:
    return ", ".join(format_version(v) for v in versions) or "nothing"


def newest(node: Node, problems: Problems, known: Sequence[VersionTuple], what: str) -> tuple[VersionTuple, ...]:
    """``newest: N`` -> the N newest of ``known`` (newest first); a bad N is a problem on its line."""
    count_node = node.get("newest")
    if count_node is None:
        return ()
    text = count_node.text if count_node.kind == "scalar" else ""
    if not text.isdigit() or int(text) < 1:
        problems.add(count_node, f"newest: expected a whole number of {what} (1 or more), got {count_node.describe()}")
        return ()
    count = int(text)
    chosen = tuple(sorted(known, reverse=True)[:count])
    if count > len(known):
        problems.add(count_node, f"newest: {count} asks for more {what} than compat.yml knows ({len(known)})")
    return chosen


def all_variants(compat: Compat, torch: VersionTuple) -> tuple[Variant, ...]:
    """Every variant torch ``torch`` has on any platform (CUDA ones by CUDA version, then cpu)."""
    release = compat.torch[torch]
    cuda = {v for os in release.variants for v in release.variants[os]}
    return (*sorted(cuda, key=lambda v: v.cuda or (0,)), Variant(name="cpu", cuda=None))


def kept_variants(
    compat: Compat, torch: VersionTuple, wanted: Sequence[Variant]
) -> tuple[tuple[Variant, ...], tuple[str, ...]]:
    """Of a variant list given with ``newest``, the ones this torch has; and the names it lacks."""
    available = set(all_variants(compat, torch))
    kept = tuple(v for v in wanted if v in available)
    return kept, tuple(v.name for v in wanted if v not in available)
