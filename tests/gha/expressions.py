"""GitHub Actions expressions: the part of the language dswheels' workflows use.

Parses and evaluates ``${{ ... }}`` the way the Actions runner does (docs: "Evaluate
expressions in workflows and actions"): literals (``null``, booleans, numbers, single-quoted
strings with ``''`` escapes), context access (``a.b``, ``a['b']``, ``a[0]``; a missing
property is ``null``), ``!``, ``< <= > >=``, ``== !=`` (strings compare case-insensitively;
values of different types are compared as numbers), ``&&`` and ``||`` (which return an
operand, not a boolean), and the functions ``contains startsWith endsWith format join
toJSON fromJSON`` plus the status functions ``success always failure cancelled``.

Anything else (``hashFiles``, the ``.*`` object filter) is a clear :class:`ExpressionError`,
so a workflow that starts using it fails its tests instead of being evaluated wrongly. The text
is read by :mod:`tests.gha.expression_syntax`; this module evaluates it.

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

from tests.gha.expression_syntax import (
    Binary,
    Call,
    Ctx,
    ExpressionError,
    Index,
    Lit,
    Node,
    Not,
    Parser,
    Value,
    tokenize,
)

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

Contexts: TypeAlias = Mapping[str, Value]


@dataclass(frozen=True, slots=True)
class Status:
    """What the status functions return: for a step, how the earlier steps went; for a job, its needs."""

    success: bool = True
    failure: bool = False
    cancelled: bool = False


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


def _call(node: Call, contexts: Contexts, status: Status) -> Value:
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
        case Lit(value):
            return value
        case Ctx(name):
            return _context(name, contexts)
        case Index(obj, key):
            return _lookup(_eval(obj, contexts, status), _eval(key, contexts, status))
        case Not(operand):
            return not truthy(_eval(operand, contexts, status))
        case Binary(op, left, right):
            return _binary(op, left, right, contexts, status)
        case Call():
            return _call(node, contexts, status)
    raise ExpressionError(f"internal: unknown node {node!r}")  # pragma: no cover


def _context(name: str, contexts: Contexts) -> Value:
    """A context by name; GitHub's names are case-insensitive."""
    for key, value in contexts.items():
        if key.casefold() == name.casefold():
            return value
    raise ExpressionError(f"unknown context {name!r} (available here: {', '.join(sorted(contexts))})")


def _binary(op: str, left: Node, right: Node, contexts: Contexts, status: Status) -> Value:
    """``&&`` and ``||`` short-circuit and give an operand's value; the comparisons give a bool."""
    value = _eval(left, contexts, status)
    if op == "&&":
        return _eval(right, contexts, status) if truthy(value) else value
    if op == "||":
        return value if truthy(value) else _eval(right, contexts, status)
    other = _eval(right, contexts, status)
    if op == "==":
        return _equal(value, other)
    if op == "!=":
        return not _equal(value, other)
    return _compare(op, value, other)


def evaluate(text: str, contexts: Contexts, status: Status | None = None) -> Value:
    """The value of one expression (the text between ``${{`` and ``}}``)."""
    try:
        return _eval(Parser(text).parse(), contexts, status or Status())
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
    return any(t.kind == "name" and t.text.lower() in _STATUS for t in tokenize(text))


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
