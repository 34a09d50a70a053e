"""Issue 16: the README's main job (`nox -s main`) leaves the wheel where the README's next commands look.

The job once built into nox's temporary folder (``.nox/main/tmp/...``) without saying so, and the
README's next command (``dswheels verify``) found nothing. The job itself cannot run here in a
unit test (a real DeepSpeed build), so its dswheels commands are read from noxfile.py: they run
with no path flags, so they chain through dswheels' default locations
(tests/unit/test_locations.py and tests/integration/test_chain.py prove those chain).
"""

from __future__ import annotations

import ast

from tests.conftest import ROOT

# every flag that moves what build writes or what verify/publish/index read or write
PATH_FLAGS = {"--out", "--dir", "--from", "--work-dir", "--site-url"}


def _main_session() -> ast.FunctionDef:
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    (main,) = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "main"]
    return main


def _is_dswheels_run(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "run"
        and bool(node.args)
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value == "dswheels"
    )


def _dswheels_runs(func: ast.FunctionDef) -> list[list[str]]:
    """The arguments of each ``session.run("dswheels", ...)``: string constants as written, others as ``?``."""
    return [
        [str(a.value) if isinstance(a, ast.Constant) else "?" for a in node.args[1:]]
        for node in ast.walk(func)
        if isinstance(node, ast.Call) and _is_dswheels_run(node)
    ]


def test_the_main_job_runs_build_publish_and_index_with_no_path_flags() -> None:
    runs = _dswheels_runs(_main_session())
    assert [run[0] for run in runs] == ["build", "publish", "index"]
    for run in runs:
        assert not PATH_FLAGS & set(run), f"dswheels {' '.join(run)}: a path flag breaks the default chain"
        assert not [arg for arg in run if arg.startswith(("/", ".nox"))], run


def test_the_main_job_says_where_the_wheel_is() -> None:
    logged = [
        ast.unparse(node)
        for node in ast.walk(_main_session())
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "log"
    ]
    assert any("the wheel" in text for text in logged), logged
    assert any("serve_command" in text for text in logged), logged  # and how to serve the site it indexed
