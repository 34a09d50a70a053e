"""Exit codes: one per error class, and the README's table says the same."""

from __future__ import annotations

import re

from dswheels import errors
from dswheels.cli import EPILOG
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
