"""The shape of the package is checked, not hoped for: import-linter's contracts (pyproject's
``[tool.importlinter]``) and ruff's banned-API rule (pure modules import no effect) run on the real tree,
and each fails on a copy of it with one import the wrong way."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tool(name: str) -> str:
    path = shutil.which(name, path=str(Path(sys.executable).parent))
    if path is None:
        pytest.fail(f"{name} is not installed next to {sys.executable} (the test dependency group has it)")
    return path


def _copy(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "dswheels", tree / "dswheels", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def _lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_tool("lint-imports"), "--no-cache"],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin", "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def _append(path: Path, line: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")


def test_the_tree_keeps_every_contract(tmp_path: Path) -> None:
    result = _lint_imports(_copy(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "broken" not in result.stdout.lower().replace("0 broken", "")


@pytest.mark.parametrize(
    ("module", "line", "says"),
    [
        # the kernel reaching up into a stage
        ("dswheels/kernel/naming.py", "import dswheels.building.step", "dswheels.kernel is not allowed to import"),
        # publish reading the index (they share the stores instead)
        ("dswheels/publish/step.py", "import dswheels.index.step", "dswheels.publish is not allowed to import"),
        # a step reaching for a command
        (
            "dswheels/smoke/step.py",
            "import dswheels.cli.verify",
            "dswheels.smoke is not allowed to import dswheels.cli",
        ),
        # a platform reaching up into the build it serves (the seam points one way)
        ("dswheels/platforms/linux.py", "import dswheels.building.effects.cell", "dswheels.platforms is not allowed"),
        # the build reaching past the seam into the Windows platform's Wine host
        (
            "dswheels/building/effects/cell.py",
            "import dswheels.platforms.wine.assembly",
            "dswheels.building is not allowed to import dswheels.platforms.wine",
        ),
        # a stage reaching a platform's module instead of the table
        ("dswheels/verify/step.py", "import dswheels.platforms.windows", "dswheels.verify is not allowed to import"),
        # a stage parsing flags of its own: the command line is in one place
        ("dswheels/plan/rules.py", "import argparse", "dswheels.plan is not allowed to import argparse"),
        # one command borrowing another's
        ("dswheels/cli/build.py", "import dswheels.cli.plan", "dswheels.cli.build is not allowed to import"),
        # verify reaching past the seam into the aarch64 platform's qemu host (it asks the host for its machine)
        (
            "dswheels/verify/effects/prove.py",
            "import dswheels.platforms.qemu.machine",
            "dswheels.verify is not allowed to import dswheels.platforms.qemu",
        ),
    ],
)
def test_a_wrong_way_import_breaks_a_contract(tmp_path: Path, module: str, line: str, says: str) -> None:
    tree = _copy(tmp_path)
    _append(tree / module, line)
    result = _lint_imports(tree)
    assert result.returncode == 1, result.stdout + result.stderr
    assert says in " ".join(result.stdout.split()), result.stdout


def test_a_pure_module_importing_an_effect_is_refused_by_ruff(tmp_path: Path) -> None:
    tree = _copy(tmp_path)
    pure = tree / "dswheels" / "building" / "patches.py"
    _append(pure, "from dswheels.building.effects import compile as _compile  # noqa: F401")
    ruff = [_tool("ruff"), "check", "--no-cache", "--select", "TID251", "--output-format", "concise"]
    result = subprocess.run([*ruff, "dswheels"], cwd=tree, capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 1, result.stdout
    assert "dswheels/building/patches.py" in result.stdout
    assert "`dswheels.building.effects` is banned" in result.stdout
    # the same import in the stage's effects is allowed
    effectful = tree / "dswheels" / "building" / "effects" / "postprocess.py"
    pure.write_text((ROOT / "dswheels" / "building" / "patches.py").read_text(encoding="utf-8"), encoding="utf-8")
    _append(effectful, "from dswheels.building.effects import compile as _compile  # noqa: F401")
    result = subprocess.run([*ruff, "dswheels"], cwd=tree, capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 0, result.stdout


def _cycles_through(graph: grimp.ImportGraph, package: str) -> list[tuple[str, ...]]:
    """Every import of a module of ``package`` that leads back to it: the circles the package is part of."""
    inside = sorted(m for m in graph.modules if m == package or m.startswith(f"{package}."))
    cycles: list[tuple[str, ...]] = []
    for module in inside:
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            chain = graph.find_shortest_chain(importer=imported, imported=module)
            if chain is not None:
                cycles.append((module, *chain))
    return cycles


def test_no_import_circle_passes_through_the_platform_seam() -> None:
    """The table imports the platform modules plainly; none of them, their hosts or the tool finders import it back
    (or the build, which imports the table): import-linter's layers see packages, not this."""
    graph = grimp.build_graph("dswheels", cache_dir=None)
    assert "dswheels.platforms.linux" in graph.find_modules_directly_imported_by("dswheels.platforms")
    assert _cycles_through(graph, "dswheels.platforms") == []


def test_a_circle_through_the_seam_is_found() -> None:
    graph = grimp.ImportGraph()
    for module in ("dswheels.platforms", "dswheels.platforms.linux", "dswheels.platforms.find_tools", "dswheels.x"):
        graph.add_module(module)
    graph.add_import(importer="dswheels.platforms", imported="dswheels.platforms.linux")
    graph.add_import(importer="dswheels.platforms.linux", imported="dswheels.platforms.find_tools")
    graph.add_import(importer="dswheels.x", imported="dswheels.platforms")
    assert _cycles_through(graph, "dswheels.platforms") == []
    # find_tools asking the table for the machine's module (what it did before the seam was turned around)
    graph.add_import(importer="dswheels.platforms.find_tools", imported="dswheels.platforms")
    assert (
        "dswheels.platforms.find_tools",
        "dswheels.platforms",
        "dswheels.platforms.linux",
        "dswheels.platforms.find_tools",
    ) in _cycles_through(graph, "dswheels.platforms")
