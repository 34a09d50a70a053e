"""Python source read from a wheel (``git_version_info_installed.py``, the op builders), never run:
every shape of deep nesting is a malformed-input judgement, never a RecursionError, MemoryError or crash.

CPython's parser recurses with an expression's depth. 200,000 attributes, unary minuses, ``not``,
operators, calls, subscripts, lambdas or conditional expressions made ``inspect`` and ``verify
--static`` end in RecursionError/MemoryError (Python 3.11); Python 3.10's parser dies with
SIGSEGV on the chains. :mod:`dswheels.kernel.pysource` counts what can nest before it parses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dswheels.cli import main
from dswheels.kernel.pysource import MAX_LINE_DEPTH, MAX_SOURCE_CHARS, PythonSourceError, parse_source
from dswheels.kernel.wheel_contents import INSTALLED_INFO, WheelContentError, builder_modules, parse_installed_info
from dswheels.probes.environment import MARK
from tests.conftest import DATA, ROOT, require
from tests.support.pythons import python_on_path
from tests.support.wheels import write_manifest, write_wheel

N = 100_000  # deep enough to crash every parser tried, small enough to stay under the 1 MiB bound


def _chain(unit: str, *, head: str = "", tail: str = "", n: int = N) -> str:
    return head + unit * n + tail


# each: what follows "installed_ops = " (a whole module where it starts with "\n")
DEEP = {
    "parentheses": _chain("(", tail="1" + ")" * N),
    "lists": _chain("[", tail="]" * N),
    "dicts": _chain("{1: ", tail="1" + "}" * N),
    "sets": _chain("{", tail="1" + "}" * N),
    "tuples": _chain("(1, ", tail=")" * N),
    "attribute chain": _chain(".b", head="a"),
    "unary minus": _chain("-", tail="1"),
    "unary minus, spaced": _chain("- ", tail="1"),
    "bitwise not": _chain("~", tail="1"),
    "not": _chain("not ", tail="1"),
    "binary operators": "+".join(["1"] * N),
    "power": "**".join(["2"] * N),
    "matmul": "@".join(["a"] * N),
    "shifts": "<<".join(["1"] * N),
    "hex operands": "-".join(["0xE"] * N),
    "lambdas": _chain("lambda: ", tail="1"),
    "lambdas with parameters": _chain("lambda a, b: ", tail="1", n=N // 2),
    "conditional expressions": _chain("1 if 1 else ", tail="1", n=N // 2),
    "calls": _chain("()", head="f"),
    "subscripts": _chain("[0]", head="a"),
    "f-string expression": "f'{a" + ".b" * N + "}'",
    "starred": "[" + "*" * N + "a]",
    "a chain over many lines": "(a\n" + ".b\n" * N + ")",
    "a chain over continued lines": "a\\\n" + ".b\\\n" * N,
    "a chain after a string with an escaped newline": "'a\\\n'\nx = a" + ".b" * N,
    "await": "\nasync def f():\n    x = " + "await " * N + "1\n",
    "yield": "\ndef f():\n    x = " + "(yield " * 150 + "a" + ".b" * N + ")" * 150 + "\n",
}
FLAT = {
    "string concatenation": " ".join(["'a'"] * N),
    "a chained comparison": "==".join(["1"] * N),
    "and": " and ".join(["1"] * (N // 2)),
    "or, is, in": " or ".join(["a is b in c"] * (N // 8)),
    "comprehension clauses": "[a " + "for a in b " * (N // 2) + "]",
    "a long dict": "{" + ", ".join(f"'op{i}': True" for i in range(N // 4)) + "}",
    "a long list of tuples": "[" + ", ".join("(1, 2)" for _ in range(N // 2)) + "]",
}


def _module(construct: str) -> str:
    return construct if construct.startswith("\n") else "installed_ops = " + construct + "\n"


@pytest.mark.parametrize("name", list(DEEP))
def test_deep_nesting_is_malformed_not_a_crash(name: str) -> None:
    text = _module(DEEP[name])
    assert len(text) <= MAX_SOURCE_CHARS
    start = time.monotonic()
    with pytest.raises(WheelContentError, match=rf"{INSTALLED_INFO}: line \d+ nests an expression deeper than 200"):
        parse_installed_info(text)
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("name", list(FLAT))
def test_long_flat_expressions_are_read(name: str) -> None:
    """Length is not depth: a flat expression of the same size parses (then is judged as data)."""
    text = _module(FLAT[name])
    if name == "a long dict":
        assert len(parse_installed_info(text).installed_ops) == N // 4
        return
    with pytest.raises(WheelContentError, match="has no installed_ops dict"):  # parsed, and not a dict
        parse_installed_info(text)


def test_what_the_parser_itself_refuses_is_the_same_judgement() -> None:
    for text, words in [
        ("installed_ops = {'a': 1\n", "is not Python dswheels can read: '{' was never closed"),
        ("installed_ops = {}\0\n", "is not Python dswheels can read: source code string cannot contain null bytes"),
        ("".join(" " * i + "if 1:\n" for i in range(120)) + " " * 120 + "pass\n", "too many levels of indentation"),
        ("x = 1\n" * (MAX_SOURCE_CHARS // 6 + 1), "more than the 1,048,576 dswheels reads of a Python file"),
    ]:
        with pytest.raises(WheelContentError, match=words):
            parse_installed_info(text)


def test_a_literal_too_deep_to_build_is_no_value() -> None:
    """Nesting the parser accepts (199 brackets) and ``literal_eval`` then builds: a value, or none."""
    text = "installed_ops = {'cpu_adam': 1}\ntorch_info = " + "[" * 199 + "]" * 199 + "\n"
    assert parse_installed_info(text).torch_info == {}


def test_builders_too_deep_to_read_name_no_module() -> None:
    good = (
        "class FusedAdamBuilder(CUDAOpBuilder):\n    NAME = 'fused_adam'\n"
        "    def absolute_name(self):\n        return f'deepspeed.ops.adam.{self.NAME}_op'\n"
    )
    sources = {
        "deepspeed/ops/op_builder/fused_adam.py": good,
        "deepspeed/ops/op_builder/deep.py": "class B:\n    NAME = 'x'\n    y = a" + ".b" * N + "\n",
    }
    assert builder_modules(sources) == {"fused_adam": ("deepspeed.ops.adam.fused_adam_op",)}


def test_deepspeeds_own_sources_are_far_from_the_bound() -> None:
    for name in ("ds0198_cpu_builder.py.txt", "ds0140_cpu_builder.py.txt", "ds0198_builder_excerpt.txt"):
        parse_source((DATA / name).read_text(encoding="utf-8"), what=name)
    deepest = "x = " + "(" * (MAX_LINE_DEPTH - 1) + "1" + ")" * (MAX_LINE_DEPTH - 1)
    parse_source(deepest, what="deepest.py")  # 199 brackets plus nothing else: at the bound, still read
    with pytest.raises(PythonSourceError):
        parse_source("x = a." + deepest[4:], what="one more")


@pytest.mark.parametrize("version", ["3.10", "3.11", "3.12", "3.13"])
def test_every_python_refuses_the_chains_instead_of_crashing(version: str, tmp_path: Path) -> None:
    """The module runs on its own (stdlib only) under each Python: 3.10's ast.parse dies with SIGSEGV on
    these; through parse_source every interpreter prints a refusal and exits 0."""
    folder = python_on_path(version, tmp_path)
    require(folder is not None, f"python{version} is needed to check its parser")
    script = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('pysource', {str(ROOT / 'dswheels/kernel/pysource.py')!r})\n"
        "m = importlib.util.module_from_spec(spec); sys.modules['pysource'] = m; spec.loader.exec_module(m)\n"
        f"for unit in ('.b', '+1', '()', '[0]', '-', 'not '):\n"
        f"    text = 'x = a' + unit * {N} if unit[0] in '.+([' else 'x = ' + unit * {N} + '1'\n"
        "    try:\n        m.parse_source(text, what='t')\n"
        "    except m.PythonSourceError as exc:\n        print('refused', exc)\n"
    )
    result = subprocess.run(
        [f"{folder}/python{version}", "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    assert result.stdout.count("refused t: line 1 nests an expression deeper than 200") == 6


def _wheel_with_info(tmp_path: Path, info: str) -> Path:
    wheel = write_wheel(
        tmp_path,
        name="deepspeed",
        version="0.19.8+cu128torch2.9",
        tag="cp311-cp311-linux_x86_64",
        files={INSTALLED_INFO: info.encode()},
        requires_dist=["torch==2.9.*"],
    )
    write_manifest(wheel)
    return wheel


@pytest.mark.parametrize("name", ["attribute chain", "unary minus", "not", "calls", "lambdas"])
def test_inspect_and_verify_judge_the_wheel(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wheel = _wheel_with_info(tmp_path, _module(DEEP[name]))
    assert main(["inspect", str(wheel)]) == 2
    err = capsys.readouterr().err
    assert f"{INSTALLED_INFO}: line 1 nests an expression deeper than 200 levels" in err
    assert main(["verify", "--static", str(wheel)]) == 6
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    assert f"{INSTALLED_INFO}: line 1 nests an expression deeper" in out.out + out.err


@pytest.mark.parametrize(
    ("construct", "words"),
    [
        ("a" + ".b" * N, "ValueError: git_version_info_installed.py is larger than 64 KiB"),
        ("-" * 60_000 + "1", "ValueError: git_version_info_installed.py nests an expression too deeply to parse"),
        ("not " * 16_000 + "1", "ValueError: git_version_info_installed.py nests an expression too deeply to parse"),
    ],
)
def test_the_environment_probe_reads_an_installed_deepspeed_within_bounds(
    construct: str, words: str, tmp_path: Path
) -> None:
    """doctor and install read the installed DeepSpeed's build info in the target interpreter (the
    probe, stdlib only): a hostile one is a fact with its reason, not a crash of the interpreter."""
    package = tmp_path / "site" / "deepspeed"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "git_version_info_installed.py").write_text(f"installed_ops = {construct}\n", encoding="utf-8")
    probe = ROOT / "dswheels" / "probes" / "environment.py"
    result = subprocess.run(
        [sys.executable, str(probe), "--light"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "site")},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    facts = json.loads(result.stdout.split(MARK, 1)[1])
    assert facts["deepspeed"]["error"].startswith(words)
