"""What DeepSpeed's own op builders hand the compilers, computed in the build interpreter.

Run as ``python op_flags.py REQUEST_JSON``. A request lists *jobs*: a DeepSpeed source tree
(default: the working directory), the accelerator (default: ``DS_ACCELERATOR`` as set), the
ops (default: all of ``ALL_OPS``) and contexts; each job imports the tree's ``op_builder`` and
``accelerator`` afresh, exactly as ``setup.py`` does in that tree. For every requested
op it calls ``is_compatible()`` and then ``builder()`` (setup.py's order) and records what
``builder()`` passes to torch's ``CppExtension``/``CUDAExtension``: the extension kind,
``extra_compile_args`` (``cxx`` for the host compiler, ``nvcc``; DeepSpeed's defines are
``-D`` flags there, it passes no ``define_macros`` in 0.14.0-0.19.8), ``extra_link_args``,
``libraries`` and ``include_dirs``. Torch's extension classes are replaced
by recorders, so nothing is compiled and no CUDA toolkit is touched by them.

A request holds one or more *contexts*. An empty context changes nothing: the builders see the
real platform, torch and toolkit (what a build on this machine gets). A context may instead
stand in for another machine, so that one Linux host can evaluate the builders for Windows:

* ``platform``: ``sys.platform`` as the builders read it (``win32``/``linux``); they test it
  at call time (``CUDAOpBuilder.cxx_args``, ``nvcc_args``, ``libraries_args``, fused_adam's
  ``nvcc_args``), never ``os.name`` (checked in 0.14.0-0.19.8);
* ``cuda``: the toolkit's ``X.Y``: DeepSpeed's ``installed_cuda_version()`` (which would run
  ``$CUDA_HOME/bin/nvcc -V``), ``torch.version.cuda`` (its mismatch check) and torch's
  ``CUDA_HOME`` (lib paths, and whether a CUDA op is built at all);
* ``torch``: ``MAJOR.MINOR`` as ``op_builder/builder.py`` keeps it (``TORCH_MAJOR``/``TORCH_MINOR``,
  which choose ``-std=`` and the ``VERSION_GE_*`` macros);
* ``arch_list``: ``TORCH_CUDA_ARCH_LIST``.

``isolate`` resets ``TORCH_CUDA_ARCH_LIST`` before every op: from 0.19.1 on ``builder()``
rewrites it to the op's own filtered list, so in a real build an op's archs depend on the ops
built before it (what ``isolate: false`` reproduces, in setup.py's order).

Standard library only, Python 3.10+: it runs in the cell's interpreter, where dswheels is
not installed.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Protocol, cast

MARK = "DSWHEELS-OPFLAGS "
_EXTENSIONS = ("CppExtension", "CUDAExtension")
_FAKE_CUDA_HOME = "/dswheels-cuda-home"  # the stand-in toolkit root (its nvcc never runs: see _context)


def _quiet() -> contextlib.ExitStack:
    """Builders print warnings on stdout; only the result line may reach it."""
    stack = contextlib.ExitStack()
    sink = io.StringIO()
    stack.enter_context(contextlib.redirect_stdout(sink))
    stack.enter_context(contextlib.redirect_stderr(sink))
    return stack


class _Builder(Protocol):
    """What setup.py calls on each of DeepSpeed's op builders."""

    def is_compatible(self) -> object: ...

    def builder(self) -> object: ...


class _Recorder:
    """Stands in for torch's CppExtension/CUDAExtension: remembers what the builder passed."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, object]]] = []

    def factory(self, kind: str) -> Callable[..., dict[str, object]]:
        def record(*args: object, **kwargs: object) -> dict[str, object]:
            if args:
                kwargs = {"name": args[0], "sources": args[1] if len(args) > 1 else [], **kwargs}
            self.calls.append((kind, kwargs))
            return kwargs

        return record


def _strings(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else []


def _describe(kind: str, kwargs: Mapping[str, object], root: str) -> dict[str, object]:
    compile_args = kwargs.get("extra_compile_args")
    if isinstance(compile_args, dict):
        cxx, nvcc = _strings(compile_args.get("cxx")), compile_args.get("nvcc")
    else:  # a plain list goes to every compiler
        cxx, nvcc = _strings(compile_args), None
    includes = []
    for entry in _strings(kwargs.get("include_dirs")):
        rel = os.path.relpath(entry, root) if Path(entry).is_absolute() and entry.startswith(root) else entry
        includes.append(rel.replace(os.sep, "/"))
    return {
        "extension": kind,
        "cxx": cxx,
        "nvcc": _strings(nvcc) if nvcc is not None else None,
        "link": _strings(kwargs.get("extra_link_args")),
        "libraries": _strings(kwargs.get("libraries")),
        "include_dirs": includes,
    }


@contextlib.contextmanager
def _context(ctx: Mapping[str, object], builder_module: ModuleType, cpp_extension: ModuleType) -> Iterator[None]:
    """Stand in for the machine the context describes; restore everything afterwards."""
    torch = importlib.import_module("torch")  # imported by main() already, before any stand-in
    saved_platform = sys.platform
    saved_env = os.environ.get("TORCH_CUDA_ARCH_LIST")
    saved = {
        "cuda_home": getattr(cpp_extension, "CUDA_HOME", None),
        "torch_cuda": torch.version.cuda,
        "installed": getattr(builder_module, "installed_cuda_version", None),
        "major": getattr(builder_module, "TORCH_MAJOR", None),
        "minor": getattr(builder_module, "TORCH_MINOR", None),
    }
    try:
        platform = ctx.get("platform")
        if isinstance(platform, str):
            sys.platform = platform
        cuda = ctx.get("cuda")
        if isinstance(cuda, str):
            major, minor = (int(p) for p in cuda.split(".")[:2])
            # always the stand-in: paths read the same whatever toolkit this machine has
            setattr(cpp_extension, "CUDA_HOME", _FAKE_CUDA_HOME)  # noqa: B010 - a module attribute
            torch.version.cuda = cuda  # a stand-in toolkit (a CPU torch has None)
            setattr(builder_module, "installed_cuda_version", lambda name="": (major, minor))  # noqa: ARG005, B010
        torch_minor = ctx.get("torch")
        if isinstance(torch_minor, str):
            major_t, minor_t = (int(p) for p in torch_minor.split(".")[:2])
            setattr(builder_module, "TORCH_MAJOR", major_t)  # noqa: B010
            setattr(builder_module, "TORCH_MINOR", minor_t)  # noqa: B010
        yield
    finally:
        sys.platform = saved_platform
        if saved_env is None:
            os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
        else:
            os.environ["TORCH_CUDA_ARCH_LIST"] = saved_env
        setattr(cpp_extension, "CUDA_HOME", saved["cuda_home"])  # noqa: B010
        torch.version.cuda = saved["torch_cuda"]
        for name, key in (("installed_cuda_version", "installed"), ("TORCH_MAJOR", "major"), ("TORCH_MINOR", "minor")):
            if saved[key] is not None:
                setattr(builder_module, name, saved[key])


def _evaluate(
    ops: Mapping[str, object], wanted: list[str] | None, ctx: Mapping[str, object], recorder: _Recorder, root: str
) -> dict[str, object]:
    arch_list = ctx.get("arch_list")
    results: dict[str, object] = {}
    for name, template in ops.items():
        if wanted is not None and name not in wanted:
            continue
        if isinstance(arch_list, str) and (ctx.get("isolate") or not results):
            os.environ["TORCH_CUDA_ARCH_LIST"] = arch_list
        entry: dict[str, object] = {}
        recorder.calls.clear()
        with _quiet():
            try:
                # a fresh one: builders keep state (build_for_cpu, enable_bf16)
                builder = cast("_Builder", type(template)())
                entry["compatible"] = bool(builder.is_compatible())
                builder.builder()
            except Exception as exc:  # noqa: BLE001 - reported per op, the others still count
                entry["error"] = f"{type(exc).__name__}: {exc}"
        if recorder.calls:
            kind, kwargs = recorder.calls[-1]
            entry.update(_describe(kind, kwargs, root))
        elif "error" not in entry:
            entry["error"] = "builder() created no extension"
        results[name] = entry
    return results


_TREE_MODULES = ("op_builder", "accelerator")


@contextlib.contextmanager
def _tree(root: str, accelerator: str | None) -> Iterator[None]:
    """Import a tree's ``op_builder``/``accelerator`` afresh, as setup.py would in that tree."""
    saved_cwd, saved_accelerator = Path.cwd(), os.environ.get("DS_ACCELERATOR")
    for name in [m for m in sys.modules if m.split(".")[0] in _TREE_MODULES]:
        del sys.modules[name]
    sys.path.insert(0, root)
    os.chdir(root)
    if accelerator is not None:
        os.environ["DS_ACCELERATOR"] = accelerator
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        sys.path.remove(root)
        if saved_accelerator is None:
            os.environ.pop("DS_ACCELERATOR", None)
        else:
            os.environ["DS_ACCELERATOR"] = saved_accelerator


def _job(job: Mapping[str, object], recorder: _Recorder, cpp_extension: ModuleType) -> dict[str, object]:
    root = str(Path(str(job.get("tree") or Path.cwd())).resolve())
    accelerator = job.get("accelerator")
    wanted = job.get("ops")
    contexts = job.get("contexts") or [{}]
    with _tree(root, accelerator if isinstance(accelerator, str) else None):
        try:
            with _quiet():
                builder_module = importlib.import_module("op_builder.builder")
                all_ops = importlib.import_module("op_builder.all_ops")
                picked = importlib.import_module("accelerator").get_accelerator()._name  # noqa: SLF001 - as setup.py
        except Exception as exc:  # noqa: BLE001 - setup.py would stop the same way; the other jobs still count
            return {"tree": root, "accelerator": str(accelerator or ""), "error": f"{type(exc).__name__}: {exc}"}
        ops: Mapping[str, object] = all_ops.ALL_OPS
        results = []
        for ctx in contexts if isinstance(contexts, list) else [{}]:
            with _context(ctx, builder_module, cpp_extension):
                names = [str(n) for n in wanted] if isinstance(wanted, list) else None
                results.append({"context": ctx, "ops": _evaluate(ops, names, ctx, recorder, root)})
    return {"tree": root, "accelerator": picked, "results": results}


def main(argv: list[str]) -> int:
    """``argv[1]``: ``{"jobs": [{"tree", "accelerator", "ops", "contexts"}, ...]}`` (defaults: cwd, env, all, [{}])."""
    request = json.loads(argv[1])
    with _quiet():
        # torch first, before any stand-in: it must see the real machine
        cpp_extension = importlib.import_module("torch.utils.cpp_extension")
    recorder = _Recorder()
    for kind in _EXTENSIONS:
        setattr(cpp_extension, kind, recorder.factory(kind))
    jobs = [_job(job, recorder, cpp_extension) for job in request.get("jobs") or [{}]]
    payload = {"platform": sys.platform, "jobs": jobs}
    sys.stdout.write(MARK + json.dumps(payload) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
