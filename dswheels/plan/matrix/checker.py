"""The typed getters a matrix file is read with: every problem goes to one list, with its line.

:class:`Checker` narrows YAML nodes (a mapping, a list, a string, a parsed value) and reads
the values of the five axes against compat.yml, so a bad value is reported once, where it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from dswheels.kernel.compat import Compat
from dswheels.kernel.model import Platform, Python, Variant, parse_platform, suggest
from dswheels.kernel.versions import TorchMinor, VersionTuple, format_version, parse_version
from dswheels.plan.matrix.yamldoc import Node, Problems

__all__ = ["Checker"]

T = TypeVar("T")


class Checker:
    """Walks the document with typed getters; every problem goes to ``problems``."""

    def __init__(self, compat: Compat, problems: Problems) -> None:
        self.compat = compat
        self.problems = problems
        self.resolved: list[str] = []

    def keys(self, node: Node, allowed: tuple[str, ...], *, what: str) -> None:
        for name, key_node, _value in node.keys:
            if name not in allowed:
                self.problems.add(
                    key_node,
                    f"unknown key {name!r} in {what}{suggest(name, allowed)}; allowed: {', '.join(allowed)}",
                )

    def is_map(self, node: Node, what: str) -> bool:
        if node.kind != "map":
            self.problems.add(node, f"{what} must be a mapping, got {node.describe()}")
            return False
        return True

    def seq(self, node: Node, what: str, *, allow_empty: bool = False) -> tuple[Node, ...]:
        if node.kind != "seq":
            self.problems.add(node, f"{what} must be a list, got {node.describe()}")
            return ()
        if not node.items and not allow_empty:
            self.problems.add(node, f"{what} is empty")
        return node.items

    def scalar(self, node: Node, what: str) -> str | None:
        if node.kind != "scalar" or node.is_null or node.is_bool:
            self.problems.add(node, f"{what} must be a string, got {node.describe()}")
            return None
        return node.text

    def parsed(self, node: Node, what: str, parse: Callable[[str], T]) -> T | None:
        text = self.scalar(node, what)
        if text is None:
            return None
        try:
            return parse(text)
        except ValueError as exc:
            self.problems.add(node, str(exc))
            return None

    # --- axis values ---------------------------------------------------------------------

    def deepspeed_version(self, node: Node) -> VersionTuple | None:
        version = self.parsed(node, "a DeepSpeed version", parse_version)
        if version is None:
            return None
        if len(version) != 3:
            self.problems.add(node, f"DeepSpeed versions have three parts (e.g. '0.19.8'), got {node.text!r}")
            return None
        known = self.compat.deepspeed_releases
        if version not in known:
            names = [format_version(v) for v in known]
            self.problems.add(
                node,
                f"unknown DeepSpeed version {node.text!r}{suggest(node.text, names)}; compat.yml knows "
                f"{names[0]} to {names[-1]} (collected {self.compat.collected}); add newer releases there",
            )
            return None
        return version

    def torch_version(self, node: Node) -> TorchMinor | None:
        version = self.parsed(node, "a torch version", parse_version)
        if version is None:
            return None
        if len(version) != 2:
            minor = version[:2]
            self.problems.add(
                node,
                f"torch is given as MAJOR.MINOR ({format_version(minor)!r}), not {node.text!r}: a DeepSpeed "
                "wheel is tied to the torch minor and the builder installs that minor's newest patch",
            )
            return None
        if version not in self.compat.torch:
            names = [format_version(v) for v in self.compat.torch_minors]
            self.problems.add(
                node,
                f"unknown torch version {node.text!r}{suggest(node.text, names)}; known: {', '.join(names)}",
            )
            return None
        return TorchMinor(version)

    def variant(self, node: Node, torch: VersionTuple | None) -> Variant | None:
        variant = self.parsed(node, "a torch variant", Variant.parse)
        if variant is None or torch is None or torch not in self.compat.torch:
            return variant
        release = self.compat.torch[torch]
        everywhere = {v.name for os in release.variants for v in release.variants_for(os)}
        if variant.name not in everywhere:
            self.problems.add(
                node,
                f"torch {format_version(torch)} has no {variant.name} build on any platform"
                f"{suggest(variant.name, sorted(everywhere))}; it has {', '.join(sorted(everywhere))}",
            )
            return None
        return variant

    def python(self, node: Node) -> Python | None:
        py = self.parsed(node, "a Python version", Python.parse)
        if py is None:
            return None
        known = {p for release in self.compat.torch.values() for pys in release.python.values() for p in pys}
        if py not in known:
            names = sorted(str(p) for p in known)
            self.problems.add(node, f"no torch release has wheels for Python {node.text!r}; known: {', '.join(names)}")
            return None
        return py

    def platform(self, node: Node) -> Platform | None:
        return self.parsed(node, "a platform", parse_platform)
