"""Edit a YAML file in place: change a few values, keep every other byte (comments, notes, layout).

``dswheels facts check --write`` changes compat.yml the way a person would: a value here, a
key there, nothing else moved. PyYAML's parser events carry the source position of every
node, so each edit is a splice of the original text at those positions. Anchored values
shared through aliases (``&py_2_12`` / ``*py_2_12``) are handled: an alias being edited
becomes a literal, and an anchored value being edited first turns its aliases into literal
copies of the old value, so no other entry changes by accident.

Edits are limited to what keeps the file readable: scalars and flow collections
(``[a, b]``, ``{k: v}``) are replaced; keys are added to or removed from block and flow
mappings; items are appended to flow sequences; blocks are added to block mappings.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import yaml

__all__ = ["Edit", "EditError", "Span", "apply_edits", "parse_spans", "render_flow", "render_scalar"]

PathKey = str | int
Path = tuple[PathKey, ...]


class EditError(ValueError):
    """The edit cannot be made (no such path, or a layout this module does not rewrite)."""


@dataclass(eq=False)
class Span:
    """One node of the document: where it is and what it holds."""

    kind: str  # "scalar" | "map" | "seq" | "alias"
    start: int
    end: int
    flow: bool = False  # a flow collection ([...] / {...}) or a scalar
    anchor: str | None = None
    alias: str | None = None  # the anchor an alias refers to
    value: str = ""  # a scalar's value
    keys: list[tuple[str, Span, Span]] = field(default_factory=list)  # (key text, key span, value span)
    items: list[Span] = field(default_factory=list)

    def get(self, key: str) -> Span | None:
        return next((value for name, _k, value in self.keys if name == key), None)


def parse_spans(text: str) -> Span:
    """The document's root node with the source span of every node below it."""
    tree = _SpanTree(text)
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        tree.read(event)
    if tree.root is None:
        raise EditError("the document is empty")
    return tree.root


class _SpanTree:
    """Builds the :class:`Span` tree from PyYAML's parser events, one event at a time."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.root: Span | None = None
        self.stack: list[Span] = []
        self.pending_key: list[Span | None] = []  # per open mapping: the key waiting for its value

    def read(self, event: yaml.Event) -> None:
        if event.start_mark is None or event.end_mark is None:  # pragma: no cover - the parser always marks
            return
        start, end = event.start_mark.index, event.end_mark.index
        if isinstance(event, yaml.ScalarEvent):
            while event.style in ("|", ">") and self.text[end - 2 : end] == "\n\n":
                end -= 1  # a block scalar's span takes the blank lines after it: leave them out
            self.attach(Span("scalar", start, end, flow=True, anchor=event.anchor, value=event.value))
        elif isinstance(event, yaml.AliasEvent):
            self.attach(Span("alias", start, end, flow=True, alias=event.anchor))
        elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            kind = "map" if isinstance(event, yaml.MappingStartEvent) else "seq"
            node = Span(kind, start, end, flow=bool(event.flow_style), anchor=event.anchor)
            self.attach(node)
            self.stack.append(node)
            self.pending_key.append(None)
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            self.close(end)

    def attach(self, node: Span) -> None:
        if not self.stack:
            self.root = node
            return
        parent = self.stack[-1]
        if parent.kind == "seq":
            parent.items.append(node)
        elif self.pending_key[-1] is None:
            if node.kind != "scalar":
                raise EditError("mapping keys must be plain scalars")
            self.pending_key[-1] = node
        else:
            key = self.pending_key[-1]
            parent.keys.append((key.value, key, node))
            self.pending_key[-1] = None

    def close(self, end: int) -> None:
        node = self.stack.pop()
        self.pending_key.pop()
        if node.flow:
            node.end = end
        else:  # a block collection ends where its last child ends
            children = [v for _n, _k, v in node.keys] or node.items
            node.end = children[-1].end if children else node.start


def render_scalar(value: str) -> str:
    """A YAML double-quoted scalar (JSON's string syntax is a subset of it)."""
    return json.dumps(value, ensure_ascii=False)


def render_flow(values: Sequence[str], *, quote: bool = True) -> str:
    """``["a", "b"]`` (or ``[a, b]`` unquoted, for names that are plain YAML words)."""
    return "[" + ", ".join(render_scalar(v) if quote else v for v in values) + "]"


@dataclass(frozen=True, slots=True)
class Edit:
    """One change, at ``path`` (mapping keys and list indexes from the root).

    ``op``:
    - ``set``: replace the value at ``path`` with ``text`` (YAML source of a scalar or flow value);
    - ``remove``: delete the key ``path[-1]`` from its mapping;
    - ``add``: add key ``key`` with value ``text`` to the mapping at ``path``; a ``text`` that
      starts with a newline is a block value, its lines indented relative to the key;
    - ``append``: add ``text`` as the last item of the flow sequence at ``path``.
    """

    op: str
    path: Path
    text: str = ""
    key: str = ""


def _find(root: Span, path: Path) -> Span:
    node = root
    for step in path:
        if isinstance(step, int):
            if node.kind != "seq" or step >= len(node.items):
                raise EditError(f"no item {step} at {_show(path)}")
            node = node.items[step]
        else:
            found = node.get(step) if node.kind == "map" else None
            if found is None:
                raise EditError(f"no key {step!r} at {_show(path)}")
            node = found
    return node


def _show(path: Path) -> str:
    return ".".join(str(p) for p in path) or "(root)"


def _line_start(text: str, index: int) -> int:
    return text.rfind("\n", 0, index) + 1


def _line_end(text: str, index: int) -> int:
    """The index of the newline ending the line of ``index`` (or the end of the text)."""
    found = text.find("\n", index)
    return len(text) if found < 0 else found


def _anchored(root: Span) -> dict[str, tuple[Span, list[Span]]]:
    """Every anchor: its node and the aliases pointing at it."""
    table: dict[str, tuple[Span, list[Span]]] = {}

    def walk(node: Span) -> None:
        if node.anchor:
            table[node.anchor] = (node, [])
        if node.alias and node.alias in table:
            table[node.alias][1].append(node)
        for _name, _key, value in node.keys:
            walk(value)
        for item in node.items:
            walk(item)

    walk(root)
    return table


Splice = tuple[int, int, str]  # replace text[start:end] with the string


def _set(text: str, root: Span, edit: Edit, edited: set[int]) -> list[Splice]:
    node = _find(root, edit.path)
    if not node.flow:
        raise EditError(f"{_show(edit.path)} is a block {node.kind}: only scalars and [..]/{{..}} values are rewritten")
    splices: list[Splice] = []
    new = edit.text
    if node.anchor:
        # keep other entries as they were: aliases not edited themselves become copies of the old value
        old = text[node.start : node.end]
        literal = old.split(None, 1)[1] if old.startswith("&") else old
        splices += [(a.start, a.end, literal) for a in _anchored(root)[node.anchor][1] if id(a) not in edited]
        new = f"&{node.anchor} {new}"
    if node.kind == "scalar" and text[node.start : node.end].endswith("\n"):
        new += "\n"  # a block scalar's span ends after its last line
    splices.append((node.start, node.end, new))
    return splices


def _remove(text: str, root: Span, edit: Edit) -> list[Splice]:
    parent = _find(root, edit.path[:-1])
    name = edit.path[-1]
    entries = parent.keys
    index = next((i for i, (n, _k, _v) in enumerate(entries) if n == name), None)
    if index is None:
        raise EditError(f"no key {name!r} at {_show(edit.path[:-1])}")
    _name, key, value = entries[index]
    if parent.flow:
        if index > 0:  # from the end of the previous value: ", key: value"
            return [(entries[index - 1][2].end, value.end, "")]
        after = entries[1][1].start if len(entries) > 1 else value.end
        return [(key.start, after, "")]
    if not value.flow or "\n" in text[key.start : value.end].rstrip("\n"):
        raise EditError(f"{_show(edit.path)} spans several lines: remove it by hand")
    start = _line_start(text, key.start)
    if text[start : key.start].strip():
        raise EditError(f"{_show(edit.path)} shares its line with another key")
    return [(start, _line_end(text, value.end) + 1, "")]


def _add(text: str, root: Span, edit: Edit) -> list[Splice]:
    parent = _find(root, edit.path)
    if parent.kind != "map":
        raise EditError(f"{_show(edit.path)} is not a mapping")
    if parent.get(edit.key) is not None:
        raise EditError(f"{_show(edit.path)} already has the key {edit.key!r}")
    if parent.flow:
        if "\n" in edit.text:
            raise EditError("a flow mapping takes one-line values only")
        close = parent.end - 1
        sep = ", " if parent.keys else ""
        return [(close, close, f"{sep}{edit.key}: {edit.text}")]
    if not parent.keys:
        raise EditError(f"{_show(edit.path)} is an empty block mapping")
    first_key = parent.keys[0][1]
    indent = " " * (first_key.start - _line_start(text, first_key.start))
    lines = edit.text.split("\n")
    if len(lines) > 1 and lines[0]:
        raise EditError("a block value starts with a newline")
    body = f"{indent}{edit.key}: {lines[0]}" if lines[0] else f"{indent}{edit.key}:"
    body += "".join(f"\n{indent}  {line}" if line else "\n" for line in lines[1:])
    end = parent.keys[-1][2].end
    if text[end - 1 : end] == "\n":  # after a block value: at the start of the next line
        return [(end, end, body + "\n")]
    stop = _line_end(text, end)
    if text[stop : stop + 1] == "\n":  # at the start of the next line: the last line may be removed meanwhile
        return [(stop + 1, stop + 1, body + "\n")]
    return [(stop, stop, "\n" + body)]


def _append(root: Span, edit: Edit) -> list[Splice]:
    node = _find(root, edit.path)
    if node.kind != "seq" or not node.flow:
        raise EditError(f"{_show(edit.path)} is not a [..] list")
    if not node.items:
        return [(node.end - 1, node.end - 1, edit.text)]
    last = node.items[-1].end
    return [(last, last, f", {edit.text}")]


def apply_edits(text: str, edits: Sequence[Edit], *, spans: Span | None = None) -> str:
    """``text`` with every edit made; all positions refer to the original text.

    ``spans``: ``parse_spans(text)`` when the caller has it already (it is only read).
    """
    root = spans if spans is not None else parse_spans(text)
    edited = {id(_find(root, e.path)) for e in edits if e.op == "set"}
    splices: list[Splice] = []
    # insertions at one place: the deeper mapping's first (its keys end where its parent's value ends)
    for edit in sorted(edits, key=lambda e: -len(e.path)):
        if edit.op == "set":
            splices += _set(text, root, edit, edited)
        elif edit.op == "remove":
            splices += _remove(text, root, edit)
        elif edit.op == "add":
            splices += _add(text, root, edit)
        elif edit.op == "append":
            splices += _append(root, edit)
        else:
            raise EditError(f"unknown edit {edit.op!r}")
    return _splice(text, splices)


def _splice(text: str, splices: Sequence[Splice]) -> str:
    """Make every splice; identical ones once, insertions at one place joined in order, overlaps refused."""
    merged: dict[tuple[int, int], str] = {}
    for start, end, new in dict.fromkeys(splices):
        key = (start, end)
        if key in merged and start != end:
            raise EditError("two edits change the same value; make them one")
        merged[key] = merged.get(key, "") + new
    ordered = sorted(merged.items())
    for ((_s, end), _n), ((next_start, _e), _m) in itertools.pairwise(ordered):
        if end > next_start:
            raise EditError("two edits overlap; make them one")
    for (start, end), new in reversed(ordered):  # from the end, so earlier positions stay valid
        text = text[:start] + new + text[end:]
    return text
