"""dswheels type-checked as Windows sees it (issue 25): Python that cannot run there fails the lint.

The Windows build job runs dswheels on windows-2022, where ``fcntl``, ``os.getuid`` and the other
POSIX-only calls do not exist. ``mypy --platform win32`` knows which names each platform has
(typeshed's ``sys.platform`` branches), so the lint session (``nox -s lint``, part of ``nox -s
tests``) checks dswheels a second time as win32. Here that command, read from noxfile.py, runs
over a copy of dswheels with two such calls planted in modules every Windows build imports: it
must name exactly those lines, so the real tree passes it and a planted call fails it.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, require

pytestmark = pytest.mark.integration

# (module, code appended to it): POSIX-only names used in modules every Windows build imports
PLANTS = (
    ("dswheels/host/proc.py", "import fcntl\n\n\ndef _planted(fd: int) -> None:\n    fcntl.flock(fd, 2)"),
    ("dswheels/host/files.py", "def _planted_owner() -> int:\n    return os.getuid()"),
)
ERROR = re.compile(r"^(?P<path>[\w/.]+\.py):(?P<line>\d+): error: ", re.MULTILINE)


def _lint_mypy_runs() -> list[list[str]]:
    """The arguments of every ``session.run("mypy", ...)`` in noxfile.py's ``_lint`` (constants as written)."""
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    (lint,) = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "_lint"]
    return [
        [str(a.value) if isinstance(a, ast.Constant) else "?" for a in node.args[1:]]
        for node in ast.walk(lint)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "run"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value == "mypy"
    ]


def _windows_run() -> list[str]:
    runs = [args for args in _lint_mypy_runs() if "--platform" in args and "win32" in args]
    assert len(runs) == 1, f"the lint session type-checks dswheels as win32 once: {_lint_mypy_runs()}"
    (args,) = runs
    assert "dswheels" in args
    return args


def test_the_windows_type_check_names_each_posix_only_call_and_nothing_else(tmp_path: Path) -> None:
    args = _windows_run()
    require(_has_mypy(), "mypy (the lint dependency group)")
    shutil.copytree(ROOT / "dswheels", tmp_path / "dswheels", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")  # mypy's configuration (strict)
    expected = set()
    for module, code in PLANTS:
        path = tmp_path / module
        text = path.read_text(encoding="utf-8").rstrip("\n") + "\n\n\n" + code
        path.write_text(text, encoding="utf-8")
        expected.add((module, len(text.splitlines())))  # each plant's last line holds the call
    done = subprocess.run(
        [sys.executable, "-m", "mypy", *args], cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False
    )
    found = {(m["path"], int(m["line"])) for m in ERROR.finditer(done.stdout)}
    assert done.returncode == 1, done.stdout + done.stderr
    assert found == expected, done.stdout  # the planted calls, and nothing in the real tree
    assert 'Module has no attribute "flock"' in done.stdout
    assert 'Module has no attribute "getuid"' in done.stdout


def _has_mypy() -> bool:
    return subprocess.run([sys.executable, "-m", "mypy", "--version"], capture_output=True, check=False).returncode == 0
