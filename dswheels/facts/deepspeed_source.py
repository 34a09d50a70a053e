"""Read a DeepSpeed sdist's op builders statically (``ast``, nothing imported or run).

What compat.yml takes from DeepSpeed's own sources, per release:

- the ops each accelerator's builders define (``NAME`` and ``BUILD_VAR`` of the builder
  classes the CUDA and CPU accelerators register);
- the ops whose ``is_compatible()`` says no under ``sys.platform == "win32"``;
- ``cuda_minor_mismatch_ok`` in ``op_builder/builder.py``;
- the C++ standard ``CUDAOpBuilder`` passes to nvcc for each CUDA version and to the host
  compiler for each torch version (Linux), found by evaluating ``nvcc_args``/``cxx_args``
  for those versions over the small subset of Python they use (constants, comparisons,
  tuples, ``if``/``else``, conditional expressions).

Evaluating real builders for flags on Windows is the job of the flags evaluator
(``dswheels`` branch ``flags``); this module only reads what is written down.
"""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from dswheels.facts.seen import DeepSpeedSourceSeen
from dswheels.kernel.numbers import is_ascii_digits
from dswheels.kernel.versions import VersionTuple, format_version, parse_version

__all__ = ["WANTED", "read_deepspeed_source", "wanted_member"]

# the members of the sdist this module reads (paths below the sdist's top directory)
WANTED = ("op_builder/", "accelerator/cuda_accelerator.py", "accelerator/cpu_accelerator.py")
_SKIP_MODULES = {"__init__.py", "all_ops.py", "builder.py"}


def wanted_member(path: str) -> bool:
    """Whether ``path`` (without the sdist's top directory) is one this module reads."""
    if not path.endswith(".py"):
        return False
    if path.startswith("op_builder/"):
        parts = path.split("/")
        return len(parts) == 2 or (len(parts) == 3 and parts[1] == "cpu")
    return path in WANTED


@dataclass(frozen=True, slots=True)
class _Builder:
    cls: str
    name: str
    var: str
    not_win32: bool


def _const_str(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _says_no_on_win32(func: ast.FunctionDef) -> bool:
    """``if sys.platform == "win32": ... return False`` somewhere in ``is_compatible``."""
    for node in ast.walk(func):
        if not isinstance(node, ast.If):
            continue
        test = ast.unparse(node.test).replace("'", '"')
        if "sys.platform" in test and '"win32"' in test and "!=" not in test:
            returns = [n for stmt in node.body for n in ast.walk(stmt) if isinstance(n, ast.Return)]
            if any(isinstance(r.value, ast.Constant) and r.value.value is False for r in returns):
                return True
    return False


def _builders(source: str) -> list[_Builder]:
    found = []
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef):
            continue
        values: dict[str, str] = {}
        for stmt in node.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                text = _const_str(stmt.value)
                if text is not None:
                    values[stmt.targets[0].id] = text
        compat = next(
            (s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "is_compatible"),
            None,
        )
        if "NAME" in values and values.get("BUILD_VAR", "").startswith("DS_BUILD_"):
            var = values["BUILD_VAR"].removeprefix("DS_BUILD_")
            found.append(_Builder(node.name, values["NAME"], var, compat is not None and _says_no_on_win32(compat)))
    return found


def _strings(source: str) -> set[str]:
    return {n.value for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def _imported(source: str) -> set[str]:
    return {
        alias.name for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ImportFrom) for alias in node.names
    }


def _names(source: str) -> set[str]:
    """Class names an accelerator mentions: string constants and imported names."""
    return _strings(source) | _imported(source)


# --- a tiny evaluator for the flag code of CUDAOpBuilder ---------------------------------------------


class _UnknownError(Exception):
    """The code depends on something this evaluator does not model."""


class _Returned(Exception):  # noqa: N818 - control flow, not an error
    def __init__(self, value: object) -> None:
        self.value = value


_COMPARE = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
}


def _eval(node: ast.expr, env: Mapping[str, object]) -> object:
    key = ast.unparse(node)
    if key in env:
        return env[key]
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List)):
        return [_eval(e, env) for e in node.elts]
    if isinstance(node, ast.IfExp):
        return _eval(node.body if _truth(node.test, env) else node.orelse, env)
    if isinstance(node, ast.BoolOp):
        values = (_truth(v, env) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _truth(node.operand, env)
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
        left, right = _eval(node.left, env), _eval(node.comparators[0], env)
        try:
            return bool(_COMPARE[type(node.ops[0])](left, right))  # type: ignore[no-untyped-call]
        except TypeError:
            raise _UnknownError(key) from None
    raise _UnknownError(key)


def _truth(node: ast.expr, env: Mapping[str, object]) -> bool:
    return bool(_eval(node, env))


def _run(body: Iterable[ast.stmt], env: dict[str, object], fixed: frozenset[str]) -> None:
    for stmt in body:
        if isinstance(stmt, ast.Return):
            try:
                value = _eval(stmt.value, env) if stmt.value is not None else None
            except _UnknownError:
                value = None
            raise _Returned(value)
        if isinstance(stmt, ast.If):
            try:
                branch = stmt.body if _truth(stmt.test, env) else stmt.orelse
            except _UnknownError:
                _either(stmt, env, fixed)  # e.g. a debug switch read from the environment
                continue
            _run(branch, env, fixed)
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            name = stmt.targets[0].id
            if name not in fixed:
                try:
                    env[name] = _eval(stmt.value, env)
                except _UnknownError:
                    env.pop(name, None)
        elif isinstance(stmt, ast.Try):
            continue  # thread-count guessing and the like: nothing about flags
        # other statements (calls, augmented assignments, tuple unpacking) do not choose a -std


def _either(stmt: ast.If, env: dict[str, object], fixed: frozenset[str]) -> None:
    """An ``if`` this evaluator cannot decide: keep what both branches leave alike, forget the rest."""
    scopes = []
    for branch in (stmt.body, stmt.orelse):
        scope = dict(env)
        with contextlib.suppress(_Returned):
            _run(branch, scope, fixed)
        scopes.append(scope)
    for name in set(scopes[0]) | set(scopes[1]) | set(env):
        if name in scopes[0] and name in scopes[1] and scopes[0][name] == scopes[1][name]:
            env[name] = scopes[0][name]
        else:
            env.pop(name, None)


def _std(value: object) -> int | None:
    texts = value if isinstance(value, list) else [value]
    for text in texts:
        if isinstance(text, str) and is_ascii_digits(std := text.removeprefix("-std=c++")) and len(std) <= 3:
            return int(std)
    return None


def _method(tree: ast.Module, cls: str, name: str) -> ast.FunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == name:
                    return item
    return None


_CUDA_BUILD = {"sys.platform": "linux", "self.build_for_cpu": False, "self.is_rocm_pytorch()": False}


def _flag_std(func: ast.FunctionDef | None, env: dict[str, object], local: str) -> int | None:
    """The -std of a run of ``func`` (from the returned list, or the local ``local`` when it returns)."""
    if func is None:
        return None
    scope = dict(env)
    try:
        _run(func.body, scope, frozenset(env))
    except _Returned as done:
        return _std(scope.get(local)) if local else _std(done.value)
    except _UnknownError:
        return None
    return _std(scope.get(local)) if local else None


def _mismatch(tree: ast.Module) -> dict[int, tuple[VersionTuple, ...]] | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "cuda_minor_mismatch_ok" for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            return {k: tuple(parse_version(str(v)) for v in vs) for k, vs in value.items() if isinstance(k, int)}
    return None


def read_deepspeed_source(
    version: VersionTuple,
    files: Mapping[str, str],
    *,
    cuda_versions: Iterable[VersionTuple],
    torch_versions: Iterable[VersionTuple],
) -> DeepSpeedSourceSeen:
    """``files``: path below the sdist's top directory -> text, for every :func:`wanted_member`."""
    notes: list[str] = []
    top, cpu = _op_builders(files, notes)
    cuda_names = _names(files.get("accelerator/cuda_accelerator.py", ""))
    cpu_names = _names(files.get("accelerator/cpu_accelerator.py", ""))
    cuda_ops = {b.name: b.var for b in top}
    cuda_ops.update({b.name: b.var for b in cpu if b.cls in cuda_names})  # host optimizers (0.19.8)
    listed = [b for b in cpu if b.cls in cpu_names] or cpu
    builder_text = files.get("op_builder/builder.py")
    mismatch: dict[int, tuple[VersionTuple, ...]] | None = None
    nvcc_std: dict[VersionTuple, int] = {}
    host_std: dict[VersionTuple, int] = {}
    if builder_text is None:
        notes.append("op_builder/builder.py is missing")
    else:
        tree = ast.parse(builder_text)
        mismatch = _mismatch(tree)
        nvcc_std, host_std = _language_standards(tree, cuda_versions=cuda_versions, torch_versions=torch_versions)
        if not nvcc_std:
            notes.append("the nvcc -std of CUDAOpBuilder.nvcc_args could not be evaluated")
        if not host_std:
            notes.append("the host -std of CUDAOpBuilder.cxx_args could not be evaluated")
    if mismatch is None:
        notes.append("no cuda_minor_mismatch_ok in op_builder/builder.py")
    return DeepSpeedSourceSeen(
        version=version,
        ops={"cuda": cuda_ops, "cpu": {b.name: b.var for b in listed}},
        not_win32=frozenset(b.name for b in [*top, *cpu] if b.not_win32),
        mismatch_ok=mismatch,
        nvcc_std=nvcc_std,
        host_std=host_std,
        notes=tuple(f"DeepSpeed {format_version(version)}: {n}" for n in notes),
    )


def _op_builders(files: Mapping[str, str], notes: list[str]) -> tuple[list[_Builder], list[_Builder]]:
    """The builders of ``op_builder/*.py`` and of ``op_builder/cpu/*.py`` (with the top-level ones it re-exports)."""
    top: list[_Builder] = []
    cpu: list[_Builder] = []
    reexported: set[str] = set()
    for path, text in sorted(files.items()):
        parts = path.split("/")
        if parts[0] != "op_builder" or parts[-1] in _SKIP_MODULES:
            continue
        try:
            builders = _builders(text)
        except SyntaxError as exc:
            notes.append(f"{path}: cannot parse ({exc.msg})")
            continue
        (cpu if len(parts) == 3 else top).extend(builders)
        if len(parts) == 3:  # op_builder/cpu/pin_memory.py re-exports the top-level builder
            reexported.update(_imported(text))
    cpu += [b for b in top if b.cls in reexported and b not in cpu]
    return top, cpu


def _language_standards(
    tree: ast.Module, *, cuda_versions: Iterable[VersionTuple], torch_versions: Iterable[VersionTuple]
) -> tuple[dict[VersionTuple, int], dict[VersionTuple, int]]:
    """The ``-std`` CUDAOpBuilder gives nvcc per CUDA version, and the host compiler per torch version."""
    nvcc, cxx = _method(tree, "CUDAOpBuilder", "nvcc_args"), _method(tree, "CUDAOpBuilder", "cxx_args")
    nvcc_std: dict[VersionTuple, int] = {}
    host_std: dict[VersionTuple, int] = {}
    for cuda in cuda_versions:
        env = {**_CUDA_BUILD, "cuda_major": cuda[0], "cuda_minor": cuda[1]}
        if (std := _flag_std(nvcc, env, "std_lib")) is not None:
            nvcc_std[cuda] = std
    for torch in torch_versions:
        env = {**_CUDA_BUILD, "TORCH_MAJOR": torch[0], "TORCH_MINOR": torch[1]}
        if (std := _flag_std(cxx, env, "")) is not None:
            host_std[torch] = std
    return nvcc_std, host_std
