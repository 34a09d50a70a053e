"""Every dswheels name the package's own docstrings and comments cite exists.

A docstring that cites ``dswheels.kernel.config.parse_matrix`` after the function moved sends a
reader to nothing. The names are read generically (every ``dswheels.a.b`` in a docstring or a
comment of ``dswheels/``) and resolved as Python would: the longest importable module, then
attributes (a dataclass field or an annotated attribute counts). So the check follows any move of
modules: rerun it and it lists what still cites the old place.
"""

from __future__ import annotations

import ast
import importlib
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "dswheels"
# not a schema's name (``dswheels.doctor/1``, ``dswheels.facts-report/1``); a sentence's full stop may follow
DOTTED = re.compile(r"(?<![\w./-])dswheels(?:\.[A-Za-z_]\w*)+(?![\w/-]|\.\w)")


def _texts(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every docstring and comment of one source file."""
    source = path.read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            docstring = ast.get_docstring(node, clean=False)
            if docstring is not None:
                yield node.body[0].lineno, docstring
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


def cited_names(root: Path = PACKAGE) -> dict[str, list[str]]:
    """Each dotted dswheels name cited in docstrings or comments under ``root`` -> where (file:line)."""
    cited: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        for line, text in _texts(path):
            for match in DOTTED.finditer(text):
                at = line + text.count("\n", 0, match.start())
                cited.setdefault(match.group(), []).append(f"{path.relative_to(root.parent)}:{at}")
    return cited


def _has(owner: object, name: str) -> bool:
    if hasattr(owner, name):
        return True
    fields = getattr(owner, "__dataclass_fields__", {})
    annotations = getattr(owner, "__annotations__", {}) if isinstance(owner, type) else {}
    return name in fields or name in annotations


def resolves(name: str) -> bool:
    """Whether ``name`` is a module, or an attribute path under the longest module it starts with."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            owner: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            if not _has(owner, attr):
                return False
            owner = getattr(owner, attr, None)
        return True
    return False


def test_every_cited_name_resolves() -> None:
    cited = cited_names()
    assert len(cited) > 50  # the reader finds the package's citations at all
    missing = {name: where for name, where in cited.items() if not resolves(name)}
    assert not missing, "docstrings/comments cite dswheels names that do not exist:\n" + "\n".join(
        f"  {name}  ({', '.join(where)})" for name, where in sorted(missing.items())
    )


@pytest.mark.parametrize(
    ("name", "exists"),
    [
        ("dswheels.plan.matrix.parse.parse_matrix", True),  # a function
        ("dswheels.host", True),  # a package
        ("dswheels.kernel.errors.DswheelsError.exit_code", True),  # a class attribute
        ("dswheels.kernel.config.parse_matrix", False),  # no such module
        ("dswheels.plan.matrix.parse.no_such_function", False),  # no such attribute
    ],
)
def test_resolves(name: str, *, exists: bool) -> None:
    assert resolves(name) is exists


def test_reads_docstrings_and_comments_only(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        '"""Cites :func:`dswheels.a.b`.\n\nNot the schema dswheels.doctor/1; dswheels.e.f."""\n\n'
        'X = "dswheels.not.cited"  # but dswheels.c.d is\n',
        encoding="utf-8",
    )
    assert cited_names(tmp_path) == {
        "dswheels.a.b": [f"{tmp_path.name}/m.py:1"],
        "dswheels.e.f": [f"{tmp_path.name}/m.py:3"],
        "dswheels.c.d": [f"{tmp_path.name}/m.py:5"],
    }


def test_every_path_of_dswheels_the_docs_name_exists() -> None:
    """A page that names ``dswheels/host/build.py`` after the move sends a reader to nothing, as a docstring would."""
    named = {
        match.group(1): page.name
        for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
        for match in re.finditer(r"`(dswheels/[\w/.]*[\w/])`", page.read_text(encoding="utf-8"))
    }
    assert len(named) > 20  # the pages do name the package's files: the check is not vacuous
    assert {path: page for path, page in named.items() if not (ROOT / path).exists()} == {}
