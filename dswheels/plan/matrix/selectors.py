"""Matrix values that follow the facts: ``{newest: N}`` and ``variants: all`` (docs/matrix.md).

A maintainer rarely means "0.19.8 and 0.19.7"; they mean "the two newest DeepSpeed
releases". These selectors say that, and resolve against compat.yml when the plan is made,
so a new release in compat.yml (``dswheels facts check --write``) changes the plan without
touching the matrix. Every resolution is recorded as a sentence the plan prints.
"""

from __future__ import annotations

from collections.abc import Sequence

from dswheels.kernel.compat import Compat
from dswheels.kernel.model import Variant
from dswheels.kernel.numbers import is_ascii_digits
from dswheels.kernel.versions import TorchMinor, VersionTuple, format_version
from dswheels.plan.matrix.yamldoc import Node, Problems

__all__ = ["ALL", "all_variants", "deepspeed_newest", "newest", "show_versions", "torch_newest"]

ALL = "all"


def show_versions(versions: Sequence[VersionTuple]) -> str:
    return ", ".join(format_version(v) for v in versions) or "nothing"


def newest(node: Node, problems: Problems, known: Sequence[VersionTuple], what: str) -> tuple[VersionTuple, ...]:
    """``newest: N`` -> the N newest of ``known`` (newest first); a bad N is a problem on its line."""
    count_node = node.get("newest")
    if count_node is None:
        return ()
    text = count_node.text if count_node.kind == "scalar" else ""
    if not is_ascii_digits(text) or len(text) > 9 or int(text) < 1:
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


def deepspeed_newest(compat: Compat, item: Node, problems: Problems, resolved: list[str]) -> tuple[VersionTuple, ...]:
    """``deepspeed: {newest: N}``, with the sentence the plan prints."""
    chosen = newest(item, problems, compat.deepspeed_releases, "DeepSpeed releases")
    count = item.get("newest")
    resolved.append(
        f"deepspeed {{newest: {count.text if count else ''}}} -> {show_versions(chosen)}: the newest of "
        f"compat.yml deepspeed.releases (collected {compat.collected})"
    )
    return chosen


def _variant_list(node: Node, problems: Problems) -> tuple[Variant, ...]:
    if node.kind != "seq":
        problems.add(node, f"variants must be a list or all, got {node.describe()}")
        return ()
    return tuple(v for item in node.items if (v := _variant(item, problems)) is not None)


def _variant(node: Node, problems: Problems) -> Variant | None:
    try:
        return Variant.parse(node.text)
    except ValueError as exc:
        problems.add(node, str(exc))
        return None


def torch_newest(
    compat: Compat, item: Node, variants_node: Node, problems: Problems, resolved: list[str]
) -> list[tuple[TorchMinor, tuple[Variant, ...]]]:
    """``{newest: N, variants: all | [...]}``: each chosen minor with the listed variants it has."""
    minors = newest(item, problems, compat.torch_minors, "torch minors")
    every = variants_node.kind == "scalar" and variants_node.text == ALL
    wanted = () if every else _variant_list(variants_node, problems)
    count = item.get("newest")
    resolved.append(
        f"torch {{newest: {count.text if count else ''}, variants: {ALL if every else 'a list'}}} -> "
        f"{show_versions(minors)}: the newest of compat.yml torch; variants on any platform (the plan drops a "
        "variant a platform lacks, --explain says which)"
    )
    result = []
    for torch in minors:
        chosen, lacking = (all_variants(compat, torch), ()) if every else kept_variants(compat, torch, wanted)
        note = f" (it has no {', '.join(lacking)})" if lacking else ""
        resolved.append(f"torch {format_version(torch)} -> {', '.join(v.name for v in chosen)}{note}")
        result.append((TorchMinor(torch), tuple(dict.fromkeys(chosen))))
    return result
