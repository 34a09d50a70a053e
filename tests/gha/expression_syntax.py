"""GitHub Actions expressions, read: tokens and the syntax tree of the text between ``${{`` and ``}}``.

:mod:`tests.gha.expressions` evaluates the tree; this module only says what the text is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TypeAlias

__all__ = [
    "Binary",
    "Call",
    "Ctx",
    "ExpressionError",
    "Index",
    "Lit",
    "Node",
    "Not",
    "Parser",
    "Token",
    "Value",
    "tokenize",
]

Value: TypeAlias = "bool | int | float | str | list[Value] | dict[str, Value] | None"


class ExpressionError(ValueError):
    """An expression this evaluator cannot parse or evaluate (with the expression in the message)."""


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
class Token:
    kind: str  # string number op name end
    text: str
    pos: int


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise ExpressionError(f"unexpected character {text[pos]!r} at {pos} in: {text}")
        kind = match.lastgroup
        assert kind is not None
        if kind != "ws":
            tokens.append(Token(kind, match.group(), pos))
        pos = match.end()
    tokens.append(Token("end", "", len(text)))
    return tokens


# --- syntax tree ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Lit:
    value: Value


@dataclass(frozen=True, slots=True)
class Ctx:
    name: str


@dataclass(frozen=True, slots=True)
class Index:
    obj: Node
    key: Node  # ``a.b`` is ``a['b']``


@dataclass(frozen=True, slots=True)
class Not:
    operand: Node


@dataclass(frozen=True, slots=True)
class Binary:
    op: str
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Call:
    name: str  # lower-case
    args: tuple[Node, ...]


Node: TypeAlias = "Lit | Ctx | Index | Not | Binary | Call"

_BINARY = {"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 4, "<=": 4, ">": 4, ">=": 4}


class Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0

    def fail(self, what: str) -> ExpressionError:
        token = self.tokens[self.i]
        return ExpressionError(f"{what} at {token.pos} in: {self.text}")

    def peek(self) -> Token:
        return self.tokens[self.i]

    def take(self, text: str | None = None) -> Token:
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
            left = Binary(token.text, left, right)

    def unary(self) -> Node:
        if self.peek().text == "!":
            self.take()
            return Not(self.unary())
        return self.postfix(self.primary())

    def primary(self) -> Node:
        token = self.take()
        if token.kind == "string":
            return Lit(token.text[1:-1].replace("''", "'"))
        if token.kind == "number":
            return Lit(_number(token.text))
        if token.text == "(":
            node = self.binary(1)
            self.take(")")
            return node
        if token.kind == "name":
            lowered = token.text.lower()
            if lowered in ("true", "false"):
                return Lit(lowered == "true")
            if lowered == "null":
                return Lit(None)
            if self.peek().text == "(":
                self.take("(")
                args: list[Node] = []
                if self.peek().text != ")":
                    args.append(self.binary(1))
                    while self.peek().text == ",":
                        self.take(",")
                        args.append(self.binary(1))
                self.take(")")
                return Call(lowered, tuple(args))
            return Ctx(token.text)
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
                node = Index(node, Lit(name.text))
            elif token.text == "[":
                self.take()
                key = self.binary(1)
                self.take("]")
                node = Index(node, key)
            else:
                return node


def _number(text: str) -> int | float:
    if text.lower().lstrip("-").startswith("0x"):
        return int(text, 16)
    value = float(text)
    return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value
