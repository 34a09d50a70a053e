"""GitHub Actions expressions: the part of the language dswheels' workflows use.

Parses and evaluates ``${{ ... }}`` the way the Actions runner does (docs: "Evaluate
expressions in workflows and actions"): literals (``null``, booleans, numbers, single-quoted
strings with ``''`` escapes), context access (``a.b``, ``a['b']``, ``a[0]``; a missing
property is ``null``), ``!``, ``< <= > >=``, ``== !=`` (strings compare case-insensitively;
values of different types are compared as numbers), ``&&`` and ``||`` (which return an
operand, not a boolean), and the functions ``contains startsWith endsWith format join
toJSON fromJSON`` plus the status functions ``success always failure cancelled``.

Anything else (``hashFiles``, the ``.*`` object filter) is a clear :class:`ExpressionError`,
so a workflow that starts using it fails its tests instead of being evaluated wrongly.

>>> evaluate("github.ref_type == 'TAG' && inputs.x || 'none'", {"github": {"ref_type": "tag"}, "inputs": {}})
'none'
>>> interpolate("wheels-${{ matrix.name }}", {"matrix": {"name": "a"}})
'wheels-a'
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeAlias

__all__ = [
    "ExpressionError",
    "Status",
    "Value",
    "condition",
    "evaluate",
    "interpolate",
    "to_string",
    "truthy",
]

Value: TypeAlias = "bool | int | float | str | list[Value] | dict[str, Value] | None"
Contexts: TypeAlias = Mapping[str, Value]


class ExpressionError(ValueError):
    """An expression this evaluator cannot parse or evaluate (with the expression in the message)."""


@dataclass(frozen=True, slots=True)
class Status:
    """What the status functions return: for a step, how the earlier steps went; for a job, its needs."""

    success: bool = True
    failure: bool = False
    cancelled: bool = False


# --- tokens ---------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<string>'(?:[^']|'')*')
  | (?P<number>-?(?:0x[0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?))
  | (?P<op>==|!=|<=|>=|&&|\|\||[<>!()\[\].,*])
  | (?P<name>[A-Za-z_][A-Za-z0-9_-]*)
    """,
    re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # string number op name end
    text: str
    pos: int


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise ExpressionError(f"unexpected character {text[pos]!r} at {pos} in: {text}")
        kind = match.lastgroup
        assert kind is not None
        if kind != "ws":
            tokens.append(_Token(kind, match.group(), pos))
        pos = match.end()
    tokens.append(_Token("end", "", len(text)))
    return tokens


# --- syntax tree ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Lit:
    value: Value


@dataclass(frozen=True, slots=True)
class _Ctx:
    name: str


@dataclass(frozen=True, slots=True)
class _Index:
    obj: Node
    key: Node  # ``a.b`` is ``a['b']``


@dataclass(frozen=True, slots=True)
class _Not:
    operand: Node


@dataclass(frozen=True, slots=True)
class _Binary:
    op: str
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class _Call:
    name: str  # lower-case
    args: tuple[Node, ...]


Node: TypeAlias = "_Lit | _Ctx | _Index | _Not | _Binary | _Call"

_BINARY = {"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 4, "<=": 4, ">": 4, ">=": 4}


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.i = 0

    def fail(self, what: str) -> ExpressionError:
        token = self.tokens[self.i]
        return ExpressionError(f"{what} at {token.pos} in: {self.text}")

    def peek(self) -> _Token:
        return self.tokens[self.i]

    def take(self, text: str | None = None) -> _Token:
        token = self.tokens[self.i]
        if text is not None and token.text != text:
            raise self.fail(f"expected {text!r}, found {token.text or 'the end'!r}")
        self.i += 1
        return token

    def parse(self) -> Node:
        node = self.binary(1)
        if self.peek().kind != "end":
            raise self.fail(f"unexpected {self.peek().text!r}")
        return node

    def binary(self, level: int) -> Node:
        left = self.unary()
        while True:
            token = self.peek()
            prec = _BINARY.get(token.text) if token.kind == "op" else None
            if prec is None or prec < level:
                return left
            self.take()
            right = self.binary(prec + 1)
            left = _Binary(token.text, left, right)

    def unary(self) -> Node:
        if self.peek().text == "!":
            self.take()
            return _Not(self.unary())
        return self.postfix(self.primary())

    def primary(self) -> Node:
        token = self.take()
        if token.kind == "string":
            return _Lit(token.text[1:-1].replace("''", "'"))
        if token.kind == "number":
            return _Lit(_number(token.text))
        if token.text == "(":
            node = self.binary(1)
            self.take(")")
            return node
        if token.kind == "name":
            lowered = token.text.lower()
            if lowered in ("true", "false"):
                return _Lit(lowered == "true")
            if lowered == "null":
                return _Lit(None)
            if self.peek().text == "(":
                self.take("(")
                args: list[Node] = []
                if self.peek().text != ")":
                    args.append(self.binary(1))
                    while self.peek().text == ",":
                        self.take(",")
                        args.append(self.binary(1))
                self.take(")")
                return _Call(lowered, tuple(args))
            return _Ctx(token.text)
        self.i -= 1
        raise self.fail(f"unexpected {token.text or 'end'!r}")

    def postfix(self, node: Node) -> Node:
        while True:
            token = self.peek()
            if token.text == ".":
                self.take()
                name = self.take()
                if name.text == "*":
                    raise self.fail("the '.*' object filter is not supported here")
                if name.kind != "name":
                    raise self.fail("expected a property name")
                node = _Index(node, _Lit(name.text))
            elif token.text == "[":
                self.take()
                key = self.binary(1)
                self.take("]")
                node = _Index(node, key)
            else:
                return node


def _number(text: str) -> int | float:
    if text.lower().lstrip("-").startswith("0x"):
        return int(text, 16)
    value = float(text)
    return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value


# --- semantics ------------------------------------------------------------------------------------


def truthy(value: Value) -> bool:
    """``null``, ``false``, ``0``, ``NaN`` and ``''`` are false; everything else is true."""
    if value is None or value is False:
        return False
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value != 0 and not math.isnan(value)
    if isinstance(value, str):
        return value != ""
    return True


def _to_number(value: Value) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if text == "":
            return 0.0
        try:
            return float(int(text, 16)) if text.lower().startswith("0x") else float(text)
        except ValueError:
            return math.nan
    return math.nan  # objects and arrays


def _kind(value: Value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object"


def _equal(a: Value, b: Value) -> bool:
    ka, kb = _kind(a), _kind(b)
    if ka == kb == "string":
        assert isinstance(a, str)
        assert isinstance(b, str)
        return a.casefold() == b.casefold()
    if ka == kb == "object":
        return a is b
    if ka == kb:
        return a == b
    if "object" in (ka, kb):
        return False
    return _to_number(a) == _to_number(b)


def _compare(op: str, a: Value, b: Value) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        x, y = a.casefold(), b.casefold()
        ordered = {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}
    else:
        m, n = _to_number(a), _to_number(b)
        ordered = {"<": m < n, "<=": m <= n, ">": m > n, ">=": m >= n}
    return ordered[op]


def to_string(value: Value) -> str:
    """How a value reads inside a string (``${{ }}`` in text): null is empty, booleans lower-case."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value
    return "Array" if isinstance(value, list) else "Object"


def _lookup(obj: Value, key: Value) -> Value:
    if isinstance(obj, dict):
        if not isinstance(key, str):
            key = to_string(key)
        if key in obj:
            return obj[key]
        folded = key.casefold()
        for name, value in obj.items():
            if name.casefold() == folded:
                return value
        return None
    if isinstance(obj, list):
        number = _to_number(key)
        if math.isnan(number) or not number.is_integer():
            return None
        index = int(number)
        return obj[index] if 0 <= index < len(obj) else None
    return None


def _format(template: str, args: Sequence[Value]) -> str:
    out: list[str] = []
    i = 0
    while i < len(template):
        char = template[i]
        if template.startswith("{{", i) or template.startswith("}}", i):
            out.append(char)
            i += 2
        elif char == "{":
            end = template.find("}", i)
            index = template[i + 1 : end] if end > 0 else ""
            if not index.isdigit() or int(index) >= len(args):
                raise ExpressionError(f"format(): bad placeholder in {template!r}")
            out.append(to_string(args[int(index)]))
            i = end + 1
        elif char == "}":
            raise ExpressionError(f"format(): unbalanced '}}' in {template!r}")
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _from_json(text: Value) -> Value:
    if not isinstance(text, str) or not text.strip():
        raise ExpressionError(f"fromJSON() needs a JSON string, got {text!r}")
    try:
        value: Value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ExpressionError(f"fromJSON(): {exc} in {text[:200]!r}") from None
    return value


def _contains(haystack: Value, needle: Value) -> bool:
    if isinstance(haystack, list):
        return any(_equal(item, needle) for item in haystack)
    return to_string(needle).casefold() in to_string(haystack).casefold()


_FUNCTIONS: dict[str, tuple[int, int, Callable[[Sequence[Value]], Value]]] = {
    "contains": (2, 2, lambda a: _contains(a[0], a[1])),
    "startswith": (2, 2, lambda a: to_string(a[0]).casefold().startswith(to_string(a[1]).casefold())),
    "endswith": (2, 2, lambda a: to_string(a[0]).casefold().endswith(to_string(a[1]).casefold())),
    "format": (1, 99, lambda a: _format(to_string(a[0]), a[1:])),
    "join": (
        1,
        2,
        lambda a: (
            (to_string(a[1]) if len(a) > 1 else ",").join(to_string(x) for x in a[0])
            if isinstance(a[0], list)
            else to_string(a[0])
        ),
    ),
    "tojson": (1, 1, lambda a: json.dumps(a[0], indent=2)),
    "fromjson": (1, 1, lambda a: _from_json(a[0])),
}
_STATUS = ("success", "always", "failure", "cancelled")


def _call(node: _Call, contexts: Contexts, status: Status) -> Value:
    if node.name in _STATUS:
        if node.args:
            raise ExpressionError(f"{node.name}() takes no arguments")
        return {
            "success": status.success,
            "always": True,
            "failure": status.failure,
            "cancelled": status.cancelled,
        }[node.name]
    if node.name not in _FUNCTIONS:
        raise ExpressionError(f"function {node.name}() is not supported here")
    low, high, fn = _FUNCTIONS[node.name]
    if not low <= len(node.args) <= high:
        raise ExpressionError(f"{node.name}() takes {low}..{high} arguments, got {len(node.args)}")
    return fn([_eval(arg, contexts, status) for arg in node.args])


def _eval(node: Node, contexts: Contexts, status: Status) -> Value:
    match node:
        case _Lit(value):
            return value
        case _Ctx(name):
            for key, value in contexts.items():
                if key.casefold() == name.casefold():
                    return value
            raise ExpressionError(f"unknown context {name!r} (available here: {', '.join(sorted(contexts))})")
        case _Index(obj, key):
            return _lookup(_eval(obj, contexts, status), _eval(key, contexts, status))
        case _Not(operand):
            return not truthy(_eval(operand, contexts, status))
        case _Binary("&&", left, right):
            value = _eval(left, contexts, status)
            return _eval(right, contexts, status) if truthy(value) else value
        case _Binary("||", left, right):
            value = _eval(left, contexts, status)
            return value if truthy(value) else _eval(right, contexts, status)
        case _Binary(op, left, right):
            a, b = _eval(left, contexts, status), _eval(right, contexts, status)
            if op == "==":
                return _equal(a, b)
            if op == "!=":
                return not _equal(a, b)
            return _compare(op, a, b)
        case _Call():
            return _call(node, contexts, status)
    raise ExpressionError(f"internal: unknown node {node!r}")  # pragma: no cover


def evaluate(text: str, contexts: Contexts, status: Status | None = None) -> Value:
    """The value of one expression (the text between ``${{`` and ``}}``)."""
    try:
        return _eval(_Parser(text).parse(), contexts, status or Status())
    except ExpressionError as exc:
        if text in str(exc):
            raise
        raise ExpressionError(f"{exc} (in: {text})") from None


_TEMPLATE = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)


def interpolate(text: str, contexts: Contexts, status: Status | None = None) -> Value:
    """A workflow value with ``${{ }}`` templates.

    A value that is exactly one template keeps the expression's type (``runs-on: ${{
    matrix.runs_on }}`` is a list); otherwise every template is replaced by its string form.
    """
    match = _TEMPLATE.fullmatch(text.strip())
    if match is not None and "${{" not in match.group(1):
        return evaluate(match.group(1), contexts, status)
    return _TEMPLATE.sub(lambda m: to_string(evaluate(m.group(1), contexts, status)), text)


def _uses_status_function(text: str) -> bool:
    return any(t.kind == "name" and t.text.lower() in _STATUS for t in _tokenize(text))


def condition(text: str | bool | None, contexts: Contexts, status: Status) -> bool:
    """An ``if:`` value: bare or in ``${{ }}``; without a status function it means ``success() && (...)``."""
    if text is None:
        return status.success
    if isinstance(text, bool):
        return text and status.success
    expression = text.strip()
    match = _TEMPLATE.fullmatch(expression)
    if match is not None:
        expression = match.group(1).strip()
    elif "${{" in expression:
        return truthy(interpolate(expression, contexts, status))
    if not _uses_status_function(expression):
        expression = f"success() && ({expression})"
    return truthy(evaluate(expression, contexts, status))
