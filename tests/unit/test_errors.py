"""Exit codes: one per error class, and the README's table says the same."""

from __future__ import annotations

import ast
import re

import pytest

from dswheels.cli import EPILOG
from dswheels.host.github import GitHubAPIError
from dswheels.kernel import errors
from tests.conftest import ROOT


def _classes() -> list[type[errors.DswheelsError]]:
    return [getattr(errors, name) for name in errors.__all__]


def test_exit_codes_are_unique() -> None:
    # a subclass that keeps its family's code (GitHubAPIError: GitHubError's) sets none of its own
    codes = [cls.exit_code for cls in _classes() if "exit_code" in vars(cls)]
    assert len(codes) == len(set(codes)), codes


def test_readme_lists_every_exit_code() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = dict(re.findall(r"^\| (\d+) \| (.+?) \|$", readme, flags=re.MULTILINE))
    for cls in _classes():
        assert str(cls.exit_code) in table, cls.__name__
    assert set(table) == {str(c.exit_code) for c in _classes()} | {"0", "130", "143"}


def test_help_lists_every_exit_code() -> None:
    listed = {int(code) for code in re.findall(r"\b(\d+) [A-Za-z]", EPILOG.split("exit codes:", 1)[1].split("\n\n")[0])}
    assert listed == {c.exit_code for c in _classes()} | {0, 1, 130, 143}


def test_render_says_what_why_and_what_to_do() -> None:
    exc = errors.BuildError("cpu_adam did not compile", details="line 1\nline 2", hint="see build.log")
    assert exc.render() == "build failed: cpu_adam did not compile\n  line 1\n  line 2\nhint: see build.log"


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quick = readme.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0].strip().splitlines()
    assert len(quick) == 2, "the quick start is two commands"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    install, _, _main = quick[0].partition(" && ")
    assert install in ci
    assert quick[1] in ci.splitlines()


def test_a_hint_is_given_when_the_error_is_made() -> None:
    """An error never changes after it is raised: its hint has no setter; a caller that knows more raises a copy."""
    exc = errors.BuildError("cpu_adam did not compile", hint="see the log")
    with pytest.raises(AttributeError):
        exc.hint = "changed"  # type: ignore[misc]
    noted = exc.with_hint("full log: x.log")
    assert (type(noted), noted.message, noted.hint) == (errors.BuildError, exc.message, "see the log; full log: x.log")
    assert exc.hint == "see the log"
    assert errors.ConfigError("bad").with_hint("a note").render() == "bad input: bad\nhint: a note"


def test_a_copy_with_a_hint_keeps_a_subclass_s_own_fields() -> None:
    api = GitHubAPIError("not found", status=404, body={"errors": [{"code": "already_exists"}]})
    noted = api.with_hint("check --repo")
    assert (noted.status, noted.has_error_code("already_exists"), noted.hint) == (404, True, "check --repo")
    assert noted.exit_code == errors.GitHubError.exit_code  # exit 10: its own, not publish's


def test_no_module_sets_a_hint_after_raising() -> None:
    assigned = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in sorted((ROOT / "dswheels").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, (ast.Assign, ast.AugAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Attribute) and target.attr == "hint"
    ]
    assert assigned == []
