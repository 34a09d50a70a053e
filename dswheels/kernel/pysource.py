"""Python source that dswheels reads and never runs, parsed within bounds.

A wheel's ``deepspeed/git_version_info_installed.py`` and its op builders are read with
:mod:`ast` (never imported). CPython's parser recurses with the depth of an expression, and
some shapes it does not bound by its own limit on nested brackets (200): an attribute chain
``a.b.b.b...``, a unary-minus run ``- - - 1``, ``not not ...``, a binary-operator chain
``1+1+...``, ``lambda: lambda: ...``, calls ``f()()()...``, subscripts, conditional
expressions. 200,000 of them end in ``RecursionError`` or ``MemoryError`` on Python 3.11-3.13;
Python 3.10's parser overflows the C stack on the chains and the process dies (SIGSEGV).

So before :func:`ast.parse`, the tokens that can nest an expression one level deeper are
counted along each logical line (operators, opening brackets, keywords like ``not`` and
``lambda``; not ``and``/``or``, comparisons or ``=``, which make flat nodes; elements a comma
separates are siblings, each counted from their bracket's start). The count bounds the depth
of the line's tree (within a factor of two: a subscript's tuple is a node of its own); more than
:data:`MAX_LINE_DEPTH` is refused. No DeepSpeed source comes near: the deepest line of DeepSpeed
0.19.8's 869 Python files counts 48 (op_builder/: 16), and of 2,480 files of DeepSpeed and the
standard library none is refused and none is deeper than the bound allows. Whatever the parser still refuses
(``SyntaxError``, ``ValueError`` for NUL bytes, ``RecursionError``, ``MemoryError``) is the
same :class:`PythonSourceError`, a ``ValueError``: one malformed-input judgement.
"""

from __future__ import annotations

import ast
import re

__all__ = ["MAX_LINE_DEPTH", "MAX_SOURCE_CHARS", "PythonSourceError", "parse_source"]

MAX_SOURCE_CHARS = 1024**2  # DeepSpeed's largest op builder (builder.py) is ~40 KB
MAX_LINE_DEPTH = 200  # the same bound CPython puts on nested brackets

# One scan, in C, of what matters for nesting (the tokenize module, pure Python before 3.12, takes
# ~10 s for 1 MiB): strings and comments are skipped whole (a string's extent does not depend on
# its prefix; an escaped newline continues it, as in CPython's tokenizer), numbers too (their
# ``.`` is no attribute; an exponent's sign still counts, which only adds), brackets, runs of
# operator characters (each may nest one level: ``.``, unary and binary operators, ``@``; not
# ``=``, which assigns, compares or names an argument), the keywords that nest, commas (which
# separate siblings), colons (which end a lambda's parameters) and the ends of lines.
_SCAN = re.compile(
    r"""
    (?P<string>(?P<prefix>[A-Za-z]{0,2})
        (?:'''(?:\\[\s\S]|[^\\])*?'''|\"\"\"(?:\\[\s\S]|[^\\])*?\"\"\"|'(?:\\[\s\S]|[^\\'\n])*'|"(?:\\[\s\S]|[^\\"\n])*"))
    |(?P<comment>\#[^\n]*)
    |(?P<joined>\\\r?\n)
    |(?P<newline>\n)
    |(?P<open>[(\[{])
    |(?P<close>[)\]}])
    |(?P<number>\b[0-9]\w*(?:\.\w*)?|\.[0-9]\w*)
    |(?P<ops>[.\-+~*/%@&|^<>!]+)
    |(?P<word>\b(?:not|if|else|lambda|await|yield|from)\b)
    |(?P<comma>,)
    |(?P<colon>:)
    """,
    re.VERBOSE,
)
# ``and``/``or`` chains, comparisons (``in``, ``is``) and a comprehension's ``for`` clauses are flat
_NESTING_WORDS = frozenset({"not", "if", "else", "lambda", "await", "yield", "from"})
_OPERATOR_CHARS = frozenset(".([{-+~*/%@&|^<>!")


class PythonSourceError(ValueError):
    """Text that is not Python dswheels can read (malformed, nested too deep, or too large)."""


def _fstring_depth(token: str) -> int:
    """A bound on how deep the expressions inside an f-string nest (before Python 3.12 they are parsed
    from inside the one string token, and a deep chain there crashes the parser as well)."""
    count = 0
    depth = 0
    word: list[str] = []
    for index, char in enumerate(token):
        if char == "{" and depth == 0 and token[index + 1 : index + 2] == "{":
            continue
        if char == "{":
            depth += 1
        elif char == "}" and depth:
            depth -= 1
        if depth == 0:
            continue
        if char in _OPERATOR_CHARS:
            count += 1
        if char.isalnum() or char == "_":
            word.append(char)
        else:
            count += "".join(word) in _NESTING_WORDS
            word.clear()
    return count


class _Group:
    """One open bracket (or the logical line itself) while the line is scanned."""

    __slots__ = ("base", "deepest", "lambdas")

    def __init__(self, base: int) -> None:
        self.base = base  # the count where the group began
        self.deepest = base  # the largest count inside it so far
        self.lambdas = 0  # ``lambda`` seen, its ``:`` not yet: its parameters' commas separate nothing


class _LineScan:
    """The count of nesting tokens on the current path through the current logical line."""

    def __init__(self) -> None:
        self.line = 1
        self.count = 0
        self.groups = [_Group(0)]

    def end_of_line(self, *, logical: bool) -> None:
        self.line += 1
        if logical and len(self.groups) == 1:
            self.count, self.groups = 0, [_Group(0)]

    def open(self) -> None:
        self.count += 1
        self.groups.append(_Group(self.count))

    def close(self) -> None:
        if len(self.groups) > 1:
            group = self.groups.pop()
            self.count = max(self.count, group.deepest)  # what follows nests over its deepest element

    def comma(self) -> None:
        group = self.groups[-1]
        group.deepest = max(group.deepest, self.count)
        if group.lambdas == 0:
            self.count = group.base

    def word(self, word: str) -> None:
        self.count += 1
        self.groups[-1].lambdas += word == "lambda"

    def colon(self) -> None:
        group = self.groups[-1]
        group.lambdas = max(0, group.lambdas - 1)


def _line_depths(text: str) -> tuple[int, int]:
    """The largest count of nesting tokens on one path through a logical line (a bound on its tree's
    depth), and that line's number. Elements a comma separates are siblings: each starts from its
    group's count (a literal of 10,000 entries is flat), except a lambda's parameters, which its
    body follows. A bracket left open, or a string left unterminated, only makes the count larger."""
    scan = _LineScan()
    worst, where = 0, 1
    text = text.replace("\r\n", "\n").replace("\r", "\n")  # as CPython's tokenizer reads line ends
    for match in _SCAN.finditer(text):
        kind = match.lastgroup
        if kind in {"newline", "joined"}:
            scan.end_of_line(logical=kind == "newline")
        elif kind == "string":
            if "f" in match.group("prefix").lower():
                scan.count += _fstring_depth(match.group())
            scan.line += match.group().count("\n")
        elif kind == "ops":
            scan.count += len(match.group())
        elif kind == "word":
            scan.word(match.group())
        elif kind in ("open", "close", "comma", "colon"):
            getattr(scan, kind)()
        if scan.count > worst:
            worst, where = scan.count, scan.line
            if worst > MAX_LINE_DEPTH:
                break  # refused: no need to read on
    return worst, where


def parse_source(text: str, *, what: str) -> ast.Module:
    """``ast.parse(text)``, or :class:`PythonSourceError` naming ``what`` and why it cannot be read.

    >>> parse_source("x = 1", what="f.py").body[0].__class__.__name__
    'Assign'
    >>> parse_source("x = a" + ".b" * 300, what="f.py")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    dswheels.kernel.pysource.PythonSourceError: f.py: line 1 nests an expression deeper than 200 levels ...
    """
    if len(text) > MAX_SOURCE_CHARS:
        msg = f"{what}: {len(text):,} characters, more than the {MAX_SOURCE_CHARS:,} dswheels reads of a Python file"
        raise PythonSourceError(msg)
    depth, line = _line_depths(text)
    if depth > MAX_LINE_DEPTH:
        msg = (
            f"{what}: line {line} nests an expression deeper than {MAX_LINE_DEPTH} levels "
            "(DeepSpeed's own sources stay under 50)"
        )
        raise PythonSourceError(msg)
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:  # ValueError: NUL bytes (Python < 3.12)
        reason = str(exc) or type(exc).__name__
        raise PythonSourceError(f"{what} is not Python dswheels can read: {reason}") from None
