"""YAML with line numbers, so every matrix problem can be reported as ``file:line``.

PyYAML's node graph keeps the source position of every value and the *text* of every
scalar. Keeping the text matters here: an unquoted ``2.10`` is the float ``2.1`` to YAML,
but to a user it is torch 2.10, so versions are always read from the original text.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import yaml

__all__ = ["Doc", "Node", "Problems", "parse_yaml"]


@dataclass(frozen=True, slots=True)
class Node:
    """One YAML value: ``kind`` is ``map``, ``seq`` or ``scalar``; ``text`` is a scalar's source."""

    kind: str
    line: int
    path: str
    text: str = ""
    tag: str = ""
    items: tuple[Node, ...] = ()
    keys: tuple[tuple[str, Node, Node], ...] = ()  # (key text, key node, value node)

    def get(self, key: str) -> Node | None:
        for name, _key_node, value in self.keys:
            if name == key:
                return value
        return None

    @property
    def is_null(self) -> bool:
        return self.kind == "scalar" and self.tag.endswith(":null")

    @property
    def is_bool(self) -> bool:
        return self.kind == "scalar" and self.tag.endswith(":bool")

    def describe(self) -> str:
        """How the value looks to a person, for error messages."""
        if self.kind == "map":
            return "a mapping"
        if self.kind == "seq":
            return "a list"
        if self.is_null:
            return "nothing (null)"
        return repr(self.text)


@dataclass(frozen=True, slots=True)
class Problem:
    line: int
    path: str
    message: str


@dataclass
class Problems:
    """Collects every problem in a document before anything is reported (all at once)."""

    filename: str
    found: list[Problem] = field(default_factory=list)

    def add(self, node: Node | None, message: str, *, line: int = 0, path: str = "") -> None:
        if node is not None:
            line, path = node.line, node.path
        self.found.append(Problem(line=line, path=path, message=message))

    def __bool__(self) -> bool:
        return bool(self.found)

    def __len__(self) -> int:
        return len(self.found)

    def render(self) -> str:
        ordered = sorted(self.found, key=lambda p: (p.line, p.path))
        lines = []
        for problem in ordered:
            where = f"{self.filename}:{problem.line}" if problem.line else self.filename
            prefix = f"{where}: {problem.path}: " if problem.path else f"{where}: "
            lines.append(prefix + problem.message)
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Doc:
    filename: str
    root: Node


# YAML a matrix never needs, refused before it costs memory or time: a matrix is a few KB
# deep a handful of levels; aliases are kept (anchors are handy for runners) but what they
# expand to is counted, so an alias bomb stops at MAX_NODES instead of filling memory.
MAX_BYTES = 1024**2
MAX_DEPTH = 40
MAX_NODES = 100_000
MAX_ALIASES = 1_000


class _Limit(yaml.MarkedYAMLError):
    """A limit of :func:`parse_yaml` was passed (reported with its line, like a syntax error)."""


class _LimitedLoader(yaml.SafeLoader):
    """PyYAML's safe composer, stopped at :data:`MAX_DEPTH` levels, :data:`MAX_NODES` nodes and
    :data:`MAX_ALIASES` aliases (its recursion would otherwise end in ``RecursionError``)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = self._nodes = self._aliases = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise _Limit(problem=f"more than {MAX_ALIASES} aliases", problem_mark=mark)
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise _Limit(problem=f"more than {MAX_NODES} values", problem_mark=mark)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Limit(problem=f"nested deeper than {MAX_DEPTH} levels", problem_mark=mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _Expansion:
    """Counts what :func:`_convert` builds: aliases share nodes, and each use is built again."""

    def __init__(self) -> None:
        self.nodes = 0
        self.path: set[int] = set()  # ids of the nodes being converted: an alias to one of them loops

    def enter(self, node: yaml.Node, depth: int) -> None:
        self.nodes += 1
        line = node.start_mark.line + 1
        if id(node) in self.path:
            raise _Stop(line, "a recursive alias (a value that contains itself)")
        if self.nodes > MAX_NODES:
            raise _Stop(line, f"the aliases expand to more than {MAX_NODES} values")
        if depth > MAX_DEPTH:
            raise _Stop(line, f"the aliases nest deeper than {MAX_DEPTH} levels")


class _Stop(Exception):  # noqa: N818 - an internal signal, not an error users see
    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _convert(node: yaml.Node, path: str, problems: Problems, budget: _Expansion, depth: int = 0) -> Node:
    budget.enter(node, depth)
    budget.path.add(id(node))
    try:
        return _convert_node(node, path, problems, budget, depth)
    finally:
        budget.path.discard(id(node))


def _convert_node(node: yaml.Node, path: str, problems: Problems, budget: _Expansion, depth: int) -> Node:
    line = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        keys: list[tuple[str, Node, Node]] = []
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                problems.add(None, "mapping keys must be plain names", line=key_node.start_mark.line + 1, path=path)
                continue
            name = str(key_node.value)
            key_line = key_node.start_mark.line + 1
            if name in seen:
                problems.add(
                    None,
                    f"key {name!r} appears twice (first on line {seen[name]}); YAML would keep only the last",
                    line=key_line,
                    path=path,
                )
                continue
            seen[name] = key_line
            child_path = _join(path, name)
            key = Node(kind="scalar", line=key_line, path=child_path, text=name, tag=str(key_node.tag))
            keys.append((name, key, _convert(value_node, child_path, problems, budget, depth + 1)))
        return Node(kind="map", line=line, path=path, keys=tuple(keys))
    if isinstance(node, yaml.SequenceNode):
        items = tuple(_convert(item, _join(path, i), problems, budget, depth + 1) for i, item in enumerate(node.value))
        return Node(kind="seq", line=line, path=path, items=items)
    if not isinstance(node, yaml.ScalarNode):  # pragma: no cover - PyYAML has three node kinds
        msg = f"unexpected YAML node {node!r}"
        raise TypeError(msg)
    return Node(kind="scalar", line=line, path=path, text=str(node.value), tag=str(node.tag))


def parse_yaml(text: str, filename: str, problems: Problems) -> Doc | None:
    """Parse ``text``; on a syntax error record it (with its line) and return ``None``.

    Input past the limits above (size, depth, values, aliases and what they expand to) is
    a problem like a syntax error, found before it costs more than a moment.
    """
    if len(text) > MAX_BYTES:
        problems.add(None, f"larger than {MAX_BYTES >> 20} MiB: not a matrix file")
        return None
    try:
        root = yaml.compose(text, Loader=_LimitedLoader)
    except _Limit as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else 0
        problems.add(None, f"refused: {exc.problem}; a matrix file needs far less", line=line)
        return None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 0
        problems.add(None, f"not valid YAML: {exc.problem or exc}", line=line)
        return None
    except yaml.YAMLError as exc:
        problems.add(None, f"not valid YAML: {exc}")
        return None
    if root is None:
        problems.add(None, "the file is empty", line=1)
        return None
    try:
        return Doc(filename=filename, root=_convert(root, "", problems, _Expansion()))
    except _Stop as stop:
        problems.add(None, stop.message, line=stop.line)
        return None


def iter_scalars(node: Node) -> Iterator[Node]:
    """A scalar, or each scalar of a list of scalars (``x: a`` and ``x: [a, b]`` alike)."""
    if node.kind == "seq":
        yield from node.items
    else:
        yield node
