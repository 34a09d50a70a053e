"""The one rule of what a stage is handed (issue 29, point 3; docs/architecture.md, "host/"):

- processes go only through ``host/proc.py`` and HTTP only through ``host/http.py``: module seams, not
  fields of an object; every caller reaches the runner as ``proc.run``/``proc.capture``, so replacing
  the seam (a test) or bounding it (issue 30) holds for every caller;
- a stage's entry takes its options (and the wheels it judges), the ``CacheLayout`` when it works
  under the cache, and keyword-only callbacks; never a runner, a session, the environment or a clock;
- the layout is made only by a command, so a stage has the cache only through its entry; and no module
  but ``host/cache.py`` spells the name of an area of the cache.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dswheels.host.cache import CacheLayout
from tests.conftest import ROOT

PACKAGE = ROOT / "dswheels"
RUNNER = PACKAGE / "host" / "proc.py"
HTTP = PACKAGE / "host" / "http.py"
LAYOUT = PACKAGE / "host" / "cache.py"
PROBES = PACKAGE / "probes"  # run by path in another interpreter, stdlib only: they never import dswheels


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        if PROBES not in path.parents:
            yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(ROOT).as_posix()}:{getattr(node, 'lineno', 0)}"


def _imports(tree: ast.Module) -> Iterator[tuple[ast.AST, str, str]]:
    """(node, module, name) for each imported name; name '' for ``import module``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node, alias.name, ""
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                yield node, node.module, alias.name


_PROCESS_MODULES = ("subprocess", "pty", "multiprocessing", "concurrent.futures.process")
_PROCESS_CALLS = {"system", "popen", "posix_spawn", "posix_spawnp", "fork", "forkpty"}
_PROCESS_PREFIXES = ("spawn", "exec")


def _process_starts(tree: ast.Module) -> Iterator[tuple[ast.AST, str]]:
    for node, module, name in _imports(tree):
        if (
            module in _PROCESS_MODULES
            or module.startswith("subprocess.")
            or (module == "asyncio" and "subprocess" in name)
        ):
            yield node, f"imports {module}{'.' + name if name else ''}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            attr, owner = node.attr, node.value.id
            if owner == "os" and (attr in _PROCESS_CALLS or attr.startswith(_PROCESS_PREFIXES)):
                yield node, f"os.{attr}"
            if owner == "asyncio" and attr.startswith("create_subprocess"):
                yield node, f"asyncio.{attr}"


def test_only_the_runner_starts_a_process() -> None:
    found = [
        f"{_where(path, node)}: {what}"
        for path, tree in _modules()
        if path != RUNNER
        for node, what in _process_starts(tree)
    ]
    assert found == [], "processes go through dswheels/host/proc.py:\n" + "\n".join(found)


def test_every_caller_reaches_the_runner_through_its_module() -> None:
    """``from dswheels.host.proc import run`` binds the function at import: a replaced or bounded seam would
    miss that caller."""
    found = [
        f"{_where(path, node)}: from dswheels.host.proc import {name}"
        for path, tree in _modules()
        for node, module, name in _imports(tree)
        if module == "dswheels.host.proc" and name in {"run", "capture", "_Pump", "*"}
    ]
    assert found == [], "call proc.run / proc.capture:\n" + "\n".join(found)


_HTTP_NAMES = {"Session", "session", "get", "post", "put", "patch", "delete", "head", "options", "request"}


def _http_clients(tree: ast.Module) -> Iterator[tuple[ast.AST, str]]:
    for node, module, name in _imports(tree):
        if module in {"http.client", "httpx", "aiohttp", "urllib3.poolmanager"} or (
            module == "urllib.request" and name != "url2pathname"  # a file: URL's path, not a request
        ):
            yield node, f"imports {module}{'.' + name if name else ''}"
        if module == "requests" and name in _HTTP_NAMES:
            yield node, f"from requests import {name}"
        if module.startswith("urllib3") and name in {"PoolManager", "request", "HTTPConnectionPool"}:
            yield node, f"from {module} import {name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "requests" and node.attr in _HTTP_NAMES:  # a client or a request outside the policy
                yield node, f"requests.{node.attr}"
            if node.value.id == "urllib3" and node.attr in {"PoolManager", "request"}:
                yield node, f"urllib3.{node.attr}"


def test_only_the_http_module_makes_a_client_or_a_request() -> None:
    found = [
        f"{_where(path, node)}: {what}"
        for path, tree in _modules()
        if path != HTTP
        for node, what in _http_clients(tree)
        if not _is_annotation_only(tree, node)
    ]
    assert found == [], "HTTP goes through dswheels.host.http.session (one timeout policy):\n" + "\n".join(found)


def _is_annotation_only(tree: ast.Module, target: ast.AST) -> bool:
    """``requests.Session`` as a type (a parameter's, a return's) makes nothing."""
    for node in ast.walk(tree):
        annotations: list[ast.expr | None] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            annotations += [a.annotation for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
            annotations += [
                args.vararg.annotation if args.vararg else None,
                args.kwarg.annotation if args.kwarg else None,
            ]
            annotations.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            annotations.append(node.annotation)
        if any(a is not None and any(sub is target for sub in ast.walk(a)) for a in annotations):
            return True
    return False


# --- the entries --------------------------------------------------------------------------------------


def _entries() -> list[tuple[str, Callable[..., object]]]:
    """Each stage's entry: the public functions of its step module that take the stage's options."""
    import importlib

    found: list[tuple[str, Callable[..., object]]] = []
    for path in sorted([*PACKAGE.glob("*/step.py"), *PACKAGE.glob("*/*_step.py")]):
        module = importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if function.__module__ != module.__name__ or name.startswith("_"):
                continue
            if any("Options" in str(p.annotation) for p in inspect.signature(function).parameters.values()):
                found.append((f"{module.__name__}.{name}", function))
    return found


def test_the_entries_that_take_the_cache_are_the_stages_that_work_under_it() -> None:
    taking = {
        name.rsplit(".", 2)[-2] + "." + name.rsplit(".", 1)[-1]
        for name, function in _entries()
        if any(p.annotation == "CacheLayout" for p in inspect.signature(function).parameters.values())
    }
    assert len(_entries()) >= 14  # every stage's
    assert taking == {  # downloads, venvs, work trees, a CUDA root: the others keep nothing between runs
        "step.build_cells",
        "step.install_toolkit",
        "step.check_compat",
        "step.smoke_wheel",
        "step.verify_wheel",
        "step.verify_wheels",
    }


_TAKEN = {"Path", "Sequence[Path]", "CacheLayout"}  # beside the options: the wheels, the cache
_NEVER = ("Runner", "Capturer", "Session", "Mapping", "Clock", "Host", "environ")


@pytest.mark.parametrize(("name", "function"), _entries(), ids=[name for name, _ in _entries()])
def test_an_entry_takes_its_options_the_wheels_and_the_cache_it_works_under(
    name: str, function: Callable[..., object]
) -> None:
    signature = inspect.signature(function)
    for parameter in signature.parameters.values():
        annotation = str(parameter.annotation)
        assert not any(word in annotation for word in _NEVER), f"{name}({parameter.name}: {annotation})"
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY:
            continue  # callbacks and the test stand-ins of build: the caller's choice
        assert annotation.endswith("Options") or annotation in _TAKEN, f"{name}({parameter.name}: {annotation})"
    cache = [p for p in signature.parameters.values() if p.annotation == "CacheLayout"]
    if cache:  # taken, then used: a parameter nothing reads is a promise the code does not keep
        tree = ast.parse(inspect.getsource(function))
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        assert cache[0].name in used, f"{name} takes {cache[0].name} and never reads it"


def _is_command(path: Path) -> bool:
    return path.relative_to(PACKAGE).parts[0] == "cli"


def test_only_a_command_makes_the_cache_layout() -> None:
    """A stage cannot find the cache behind its caller's back: it has the one its entry was handed."""
    found = []
    for path, tree in _modules():
        if path == LAYOUT or _is_command(path):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
            if called in {"CacheLayout", "env_cache_dir"} or (owner == "CacheLayout" and called == "here"):
                found.append(f"{_where(path, node)}: {ast.unparse(node)}")
    assert found == [], "\n".join(found)


# --- the cache's layout ---------------------------------------------------------------------------------

_AREAS = {"sources", "downloads", "venvs", "w", "verify", "smoke", "cuda", "wine", "prefix"}


def _spelled_areas(tree: ast.Module) -> Iterator[tuple[ast.AST, str]]:
    """A folder joined onto the cache (``cache_dir / "venvs"``, ``options.cache / "cuda"``), or anything onto
    its root (a new area); a folder of that name elsewhere (``staged / "cuda"``) is no area of the cache."""
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            left, right = ast.unparse(node.left), node.right
            named = isinstance(right, ast.Constant | ast.JoinedStr)
            if named and (("cache" in left.lower() and _area(right)) or left.endswith("cache.root")):
                yield node, ast.unparse(node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "joinpath":
            onto = ast.unparse(node.func.value).lower()
            if "cache" in onto and any(_area(a) for a in node.args):
                yield node, ast.unparse(node)


def _area(node: ast.expr) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and node.value in _AREAS)


def test_no_module_but_the_layout_spells_an_area_of_the_cache() -> None:
    found = [
        f"{_where(path, node)}: {text}"
        for path, tree in _modules()
        if path != LAYOUT
        for node, text in _spelled_areas(tree)
    ]
    assert found == [], "name the area with dswheels.host.cache.CacheLayout:\n" + "\n".join(found)


def test_the_layout_names_each_area_once_under_its_root(tmp_path: Path) -> None:
    cache = CacheLayout(tmp_path)
    areas = [
        cache.sources,
        cache.downloads,
        cache.venvs,
        cache.work,
        cache.verify,
        cache.smoke,
        cache.cuda_downloads,
        cache.cuda_root("13.0.2-linux-x86_64-abc"),
        cache.wine_prefix,
        cache.wine_cuda("13.0.2-abc"),
        cache.wine_torch("2.9.1-cp312-abc"),
        cache.wine_python("3.12.10-abc"),
    ]
    assert len(set(areas)) == len(areas)
    assert all(tmp_path in area.parents for area in areas)
    assert cache.work == tmp_path / "w"  # one letter: Windows' paths are short
    assert cache.wine_prefix.parent == cache.wine_torch("x").parent == cache.wine_cuda("x").parent


def test_the_rules_see_what_they_forbid() -> None:
    """Each rule above, fed the thing it forbids, finds it (a rule that finds nothing proves nothing)."""
    planted = ast.parse(
        "import subprocess\nfrom dswheels.host.proc import run\nimport os\nos.system('x')\n"
        "import requests\ns = requests.Session()\nx = cache_dir / 'venvs'\ny = options.cache / 'wine' / f'torch-{k}'\n"
        "z = cache.root / 'new'\nfine = staged / 'wheels' / 'cuda'\n"
    )
    assert [what for _, what in _process_starts(planted)] == ["imports subprocess", "os.system"]
    assert [name for _, module, name in _imports(planted) if module == "dswheels.host.proc"] == ["run"]
    assert [what for _, what in _http_clients(planted)] == ["requests.Session"]
    assert sorted(text for _, text in _spelled_areas(planted)) == [
        "cache.root / 'new'",
        "cache_dir / 'venvs'",
        "options.cache / 'wine'",
        "options.cache / 'wine' / f'torch-{k}'",
    ]
    annotated = ast.parse("import requests\ndef f(s: requests.Session) -> requests.Session: ...\n")
    assert all(_is_annotation_only(annotated, node) for node, _ in _http_clients(annotated))
