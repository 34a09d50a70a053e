# ruff: noqa: RUF001, RUF002 - other scripts' digits beside ASCII ones are what this file tests
"""Digits that are not ASCII: every version, number and id from a flag, a file or the environment is
ASCII digits, or it is refused (exit 2; a manifest: its reader's error).

Python reads ``int("١٩")`` as 19, ``str.isdigit()`` is true for ``"²"`` and a regex's ``\\d`` matches
every script's digits, so ``--deepspeed 0.١٩.8``, ``--torch ٢.9``, a matrix ``"3.1١"`` and
``install --deepspeed ٠.١٩.٨`` were read as 0.19.8 / 2.9 / 3.11 (issue 30). Round two fixed one
variable. Here: the source holds no reading of numbers but :mod:`dswheels.kernel.numbers`' (so
a new one fails this test), and each entry point is walked: the flags of every command, matrix
values, compat.yml, the environment, the plan and the manifest.
"""

from __future__ import annotations

import ast
import itertools
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dswheels.cli import main
from dswheels.kernel.manifest import ManifestError, parse_manifest
from dswheels.kernel.model import Python, Variant
from dswheels.kernel.naming import parse_cell_id
from dswheels.kernel.numbers import ascii_decimal, ascii_int, is_ascii_digits
from dswheels.kernel.versions import parse_range, parse_torch_minor, parse_torch_release, parse_version
from tests.conftest import DATA, ROOT
from tests.support.fuzz import examples

MATRIX = DATA / "matrix-cpu.yml"
CELL = "ds0.19.8-torch2.13-cpu-cp311-linux_x86_64"
# a digit of every script that has them, and look-alikes of other kinds that isdigit() or int() take
FOREIGN = ["٩", "۹", "९", "৯", "๙", "９", "𝟗", "߉", "᠙", "²", "¹", "①"]


def _arabic(text: str) -> str:
    return text.translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩"))


def _refused(capsys: pytest.CaptureFixture[str], args: list[str]) -> str:
    with pytest.raises(SystemExit) as caught:  # argparse's own refusal: exit 2 too
        raise SystemExit(main(args))
    err = capsys.readouterr().err
    assert caught.value.code == 2, err
    assert "Traceback" not in err
    return err


# --- the source: one way to read a number -------------------------------------------------------------------------


def _code_strings(tree: ast.AST) -> list[tuple[int, str]]:
    """The string constants of a module that are not docstrings, with their lines."""
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return [
        (n.lineno, n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
    ]


def _readings() -> list[str]:
    found = []
    for path in sorted((ROOT / "dswheels").rglob("*.py")):
        if path.name == "numbers.py" and path.parent.name == "kernel":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(ROOT)
        found += [f"{where}:{line}: \\d in {text!r:.60}" for line, text in _code_strings(tree) if "\\d" in text]
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("isdigit", "isdecimal", "isnumeric"):
                found.append(f"{where}:{node.lineno}: .{node.attr}")
            builtin = getattr(node, "value", None)
            if isinstance(node, ast.keyword) and node.arg == "type" and getattr(builtin, "id", "") in ("int", "float"):
                found.append(f"{where}:{node.lineno}: type=int/float (an argparse flag)")
    return found


def test_numbers_are_read_only_through_kernel_numbers() -> None:
    """``\\d``, ``isdigit``/``isdecimal``/``isnumeric`` and argparse's ``type=int``/``float`` take any
    script's digits: the package reads numbers with ``is_ascii_digits``/``ascii_int``/``ascii_decimal``
    and ``[0-9]`` (``re.ASCII`` where ``\\s`` or ``\\w`` is wanted)."""
    assert _readings() == []


@pytest.mark.parametrize("digit", FOREIGN)
def test_the_readers_take_ascii_digits_only(digit: str) -> None:
    assert int(digit) if digit.isdecimal() else True  # what Python itself would do with it
    readers: list[Callable[[], object]] = [
        lambda: parse_version(f"0.1{digit}.8"),
        lambda: parse_torch_minor(f"2.{digit}"),
        lambda: parse_torch_release(f"2.9.{digit}"),
        lambda: parse_range(f">=0.1{digit}"),
        lambda: Python.parse(f"3.1{digit}"),
        lambda: Variant.parse(f"cu12{digit}"),
        lambda: Variant.parse(f"1{digit}.8"),
        lambda: parse_cell_id(CELL.replace("0.19.8", f"0.1{digit}.8")),
        lambda: ascii_int(f"1{digit}"),
        lambda: ascii_decimal(f"0.{digit}"),
    ]
    for read in readers:
        with pytest.raises(ValueError, match=r"."):
            read()
    assert not is_ascii_digits(digit)


@pytest.mark.parametrize("text", ["\u20030.19.8", "0.19.8\u0085", "\x1c0.19.8", "0.19.8\u00a0"])
def test_versions_are_padded_with_ascii_space_only(text: str) -> None:
    """``str.strip()`` drops U+2003, U+0085 and the separators \\x1c-\\x1f: a version is never read
    out of other text."""
    with pytest.raises(ValueError, match="not a plain dotted version"):
        parse_version(text)
    assert parse_version(" 0.19.8\n") == (0, 19, 8)


@settings(max_examples=examples(300), deadline=None)
@given(st.text(alphabet=st.characters(categories=["Nd", "No", "Nl"]), min_size=1, max_size=4))
def test_any_digits_but_ascii_are_refused(digits: str) -> None:
    if digits.isascii():
        return
    for read in (parse_version, parse_torch_minor, Python.parse, Variant.parse, ascii_int, ascii_decimal):
        with pytest.raises(ValueError, match=r"."):
            read(f"{digits}.{digits}")


# --- the entry points -----------------------------------------------------------------------------------------------

FLAGS = [
    ["plan", "--matrix", str(MATRIX), "--deepspeed", "0.١٩.8"],
    ["plan", "--matrix", str(MATRIX), "--torch", "٢.9"],
    ["plan", "--matrix", str(MATRIX), "--python", "3.1١"],
    ["plan", "--matrix", str(MATRIX), "--cuda", "١٢.8"],
    ["plan", "--matrix", str(MATRIX), "--cuda", "cu١٢٨"],
    ["plan", "--matrix", str(MATRIX), "--nvcc", "١٢.8"],
    ["plan", "--matrix", str(MATRIX), "--only", CELL.replace("0.19.8", "0.1٩.8")],
    ["build", "--matrix", str(MATRIX), "--cell", CELL.replace("2.13", "2.1٣"), "--prepare-only"],
    ["build", "--matrix", str(MATRIX), "--deepspeed", "٠.١٩.٨", "--prepare-only"],
    ["build", "--matrix", str(MATRIX), "--jobs", "٤", "--prepare-only"],
    ["build", "--matrix", str(MATRIX), "--parallel-ops", "٢", "--prepare-only"],
    ["verify", "--torch-version", "2.9.١", "x.whl"],
    ["smoke", "--steps", "٣", "x.whl"],
    ["smoke", "--adam-tolerance", "١e-4", "x.whl"],
    ["doctor", "--deepspeed", "٠.١٩.٨"],
    ["facts", "check", "--torch-minors", "٣"],
    ["facts", "check", "--sdists", "٣"],
    ["facts", "dispatch", "--versions-json", '["0.١٩.8"]', "--repo", "o/r"],
    ["cuda", "install", "--toolkit", "١٣.0.3", "--dest", "cuda"],
    ["cuda", "install", "--toolkit", "13.0.3", "--redist-sha256", _arabic("1" * 64), "--dest", "cuda"],
    ["ci", "plan", "--matrix", str(MATRIX), "--event", "push", "--ref-name", "v0.١٩.8"],
    ["ci", "plan", "--matrix", str(MATRIX), "--event", "workflow_dispatch", "--deepspeed", "0.١٩.8"],
]


@pytest.mark.parametrize("args", FLAGS, ids=lambda a: " ".join(a[:2] + a[-2:]))
def test_flags_of_every_command(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    err = _refused(capsys, args)
    (flag, value), *_others = [(f, v) for f, v in itertools.pairwise(args) if not v.isascii()]
    assert flag in err or value in err, err  # refused for that value, not for something else
    assert list(tmp_path.iterdir()) == []  # refused before anything was written


def test_install_deepspeed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's example: ``install --deepspeed ٠.١٩.٨`` was read as 0.19.8."""
    err = _refused(capsys, ["install", "--deepspeed", "٠.١٩.٨", "--index", str(tmp_path), "--dry-run"])
    assert "--deepspeed" in err


MATRIX_VALUES = [
    ('deepspeed: ["0.19.8"]', 'deepspeed: ["0.1٩.8"]'),
    ('version: "2.13"', 'version: "2.1٣"'),
    ('python: ["3.11"]', 'python: ["3.1١"]'),
    ("variants: [cpu]", "variants: [cu١٣٠]"),
    ('deepspeed: ["0.19.8"]', "deepspeed: {newest: ٢}"),
    ('glibc: "2.36"', 'glibc: "2.٣6"'),
    ('glibcxx: "3.4.30"', 'glibcxx: "3.4.٣0"'),
    ("platforms: [linux_x86_64]", "platforms: [linux_x86_64]\nexclude: [{python: '3.1١'}]"),
    ("platforms: [linux_x86_64]", "platforms: [linux_x86_64]\nbuild: {TORCH_CUDA_ARCH_LIST: '٨.0'}"),
]


@pytest.mark.parametrize(("before", "after"), MATRIX_VALUES, ids=[a for _b, a in MATRIX_VALUES])
def test_matrix_values(before: str, after: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = MATRIX.read_text(encoding="utf-8")
    assert before in text
    matrix = tmp_path / "matrix.yml"
    matrix.write_text(text.replace(before, after), encoding="utf-8")
    err = _refused(capsys, ["plan", "--matrix", str(matrix)])
    assert re.search(r"matrix\.yml:[0-9]+", err), err  # the line of the value


COMPAT_VALUES = [
    ('"2.13":\n    latest', '"2.1٣":\n    latest'),
    ('latest: "2.13.0"', 'latest: "2.13.٠"'),
    ('install: "12.6.3"', 'install: "12.6.٣"'),
    ('["3.10", "3.11", "3.12"', '["3.10", "3.1١", "3.12"'),
    ('"0.19.7", "0.19.8",', '"0.19.7", "0.1٩.8",'),
    ("sm: [", "sm: ['٨٠', "),
]


@pytest.mark.parametrize(("before", "after"), COMPAT_VALUES, ids=[a.strip() for _b, a in COMPAT_VALUES])
def test_compat_values(before: str, after: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (ROOT / "dswheels" / "compat.yml").read_text(encoding="utf-8")
    assert before in text, before
    compat = tmp_path / "compat.yml"
    compat.write_text(text.replace(before, after, 1), encoding="utf-8")
    sources = [
        "pypi-deepspeed",
        "pypi-torch",
        "pypi-cuda-toolkit",
        "torch-index",
        "cuda-action",
        "deepspeed-sdists",
        "runner-images",
    ]
    err = _refused(capsys, ["facts", "check", "--compat", str(compat), *(f"--skip={s}" for s in sources)])
    assert "not a valid facts file" in err, err


@pytest.mark.parametrize(
    ("name", "value", "args"),
    [
        ("SOURCE_DATE_EPOCH", "١٧٠٠٠٠٠٠٠٠", ["plan", "--matrix", str(MATRIX)]),
        ("GITHUB_REF_NAME", "v0.١٩.8", ["ci", "plan", "--matrix", str(MATRIX), "--event", "push"]),
        ("DSWHEELS_CUDA_REDIST_SHA256", _arabic("1" * 64), ["cuda", "install", "--toolkit", "13.0.3"]),
    ],
)
def test_environment(
    name: str,
    value: str,
    args: list[str],
    *,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(name, value)
    err = _refused(capsys, args)
    assert f"${name}" in err, err


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("deepspeed", "0.1٩.8"),
        ("torch", "2.1٤"),
        ("torch_version", "2.14.١"),
        ("python", "3.1١"),
        ("cuda", "1٣.0"),
        ("variant", "cu١٣٠"),
        ("id", "ds0.1٩.8-torch2.14-cu130-cp311-linux_x86_64"),
    ],
)
def test_the_manifest_and_the_plan(key: str, value: str) -> None:
    """A manifest's plan (the reader ``build --plan`` uses too) with another script's digits in one value
    was read as the ASCII cell."""
    data = json.loads((DATA / "manifest-sbs-linux.json").read_text(encoding="utf-8"))
    parse_manifest(json.dumps(data))
    assert key in data["plan"], data["plan"]
    data["plan"][key] = value
    with pytest.raises(ManifestError, match=r"."):
        parse_manifest(json.dumps(data))


@pytest.mark.parametrize(
    "value",
    ["²", "١٢٣", "1_000", " 12", "9" * 30, 10**5000, -1, True, 1.5],
    ids=["superscript", "arabic", "underscore", "space", "30 digits", "5000 digits", "negative", "bool", "float"],
)
def test_an_attestations_log_time_is_ascii_digits(value: object) -> None:
    """Rekor's ``integratedTime`` in a provenance file (the guard above found it read with ``isdigit``: ``"²"``
    passed, then ``int()`` raised in ``inspect``; ``str()`` of 5,000 digits raises too): not a time, no error."""
    from dswheels.kernel.attestations import _logged_at

    assert _logged_at(value) is None
    assert _logged_at("1700000000") == _logged_at(1700000000) == 1700000000
