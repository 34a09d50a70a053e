"""Ask DeepSpeed's own op builders, in the build interpreter, what the cell's planned ops are.

:mod:`dswheels.probes.op_sources` runs there by file path, in the patched tree: the accelerator
DeepSpeed picks, and for every planned op its ``DS_BUILD_*`` switch, extension module, sources
and whether DeepSpeed would build it here. A planned op that is missing, switched by another
variable, empty or incompatible fails the build before anything compiles (DeepSpeed would skip it
silently), and so does a compiler flag of theirs the platform's compilers reject
(:func:`dswheels.building.effects.op_flags_asked.check_tree_flags`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from dswheels.building.effects.op_flags_asked import check_tree_flags
from dswheels.building.output_reading import OpSources
from dswheels.host import proc
from dswheels.kernel.errors import BuildError
from dswheels.kernel.model import PlannedCell
from dswheels.kernel.versions import format_version
from dswheels.plan.scopes import SearchPath, unit_scope
from dswheels.probes import op_sources

__all__ = ["OP_SOURCES_SCRIPT", "probe_ops"]

OP_SOURCES_SCRIPT = Path(op_sources.__file__)


def probe_ops(
    planned: PlannedCell,
    python: Path,
    src: Path,
    env: Mapping[str, str],
    log: Path,
) -> tuple[str, list[OpSources]]:
    """The accelerator DeepSpeed picked, and each planned op as its builder describes it (raises BuildError)."""
    result = proc.capture(
        [str(python), str(OP_SOURCES_SCRIPT), json.dumps(list(planned.ops.build_names))],
        cwd=src,
        env=env,
        log_file=log,
        error=BuildError,
        what="DeepSpeed's op builders",
    )
    data = proc.marked_json(result.output, op_sources.MARK)
    if not isinstance(data, dict):
        raise BuildError(
            "DeepSpeed's op builders could not be loaded in the build environment",
            details="\n".join(result.tail[-25:]),
            hint=f"full log: {log}",
        )
    accelerator = str(data["accelerator"])
    ops_data: dict[str, dict[str, object]] = data["ops"]
    expected = planned.cell.variant.accelerator
    if accelerator != expected:
        raise BuildError(
            f"DeepSpeed picked the {accelerator} accelerator, the cell needs {expected}",
            hint="DS_ACCELERATOR is set by dswheels; check that torch in the build interpreter is the cell's",
        )
    problems: list[str] = []
    found: list[OpSources] = []
    for name, var in planned.ops.build:
        entry = ops_data.get(name)
        if entry is None:
            problems.append(
                f"{name}: DeepSpeed {format_version(planned.cell.deepspeed)} has no such op "
                f"for the {accelerator} accelerator (it has {', '.join(sorted(ops_data))})"
            )
            continue
        raw_sources = entry.get("sources")
        sources = [str(s) for s in raw_sources] if isinstance(raw_sources, list) else []
        problems += _problems(name, var, entry, sources)
        raw_includes = entry.get("include_paths")
        includes = tuple(str(s) for s in raw_includes) if isinstance(raw_includes, list) else ()
        found.append(
            OpSources(
                name=name,
                var=f"DS_BUILD_{var}",
                module=str(entry["module"]),
                sources=tuple(sources),
                include_paths=includes,
                variants=_variants(entry.get("variants")),
            )
        )
    if problems:
        raise BuildError(
            f"{len(problems)} planned op(s) cannot be built: " + ", ".join(p.split(":", 1)[0] for p in problems),
            details="\n".join(problems),
            hint=f"install what they need on the builder, or leave them out of the matrix's ops; full log: {log}",
        )
    # the flags each op's builder hands cl/g++/nvcc, judged before anything compiles (raises BuildError)
    sass = check_tree_flags(planned, python, src, env, log)
    headers = data.get("include")
    dirs = (
        {k: [str(d) for d in v] for k, v in headers.items() if isinstance(v, list)} if isinstance(headers, dict) else {}
    )
    return accelerator, [
        replace(op, sass=sass.get(op.name, frozenset()), scopes=unit_scopes(op, src, dirs)) for op in found
    ]


def _variants(raw: object) -> tuple[tuple[str, str], ...]:
    """The probe's ``[[suffix, level], ...]`` for one op (anything else: built once)."""
    if not isinstance(raw, list):
        return ()
    return tuple((str(row[0]), str(row[1])) for row in raw if isinstance(row, list) and len(row) == 2)


def unit_scopes(op: OpSources, src: Path, dirs: Mapping[str, Sequence[str]]) -> tuple[tuple[str, str], ...]:
    """Each source of ``op`` with its scope, read from the tree's ``#include`` graph and torch's headers."""
    texts: dict[str, str | None] = {}

    def read(path: str) -> str | None:
        if path not in texts:
            file = Path(path) if Path(path).is_absolute() else src / path
            try:
                texts[path] = file.read_text(encoding="utf-8", errors="replace") if file.is_file() else None
            except OSError:
                texts[path] = None
        return texts[path]

    def posix(paths: Sequence[str]) -> tuple[str, ...]:
        return tuple(p.replace("\\", "/") for p in paths)

    search = SearchPath(
        op=posix(op.include_paths), torch=posix(dirs.get("torch", ())), python=posix(dirs.get("python", ()))
    )
    return tuple((source, str(unit_scope(source.replace("\\", "/"), search, read))) for source in op.sources)


def _problems(name: str, var: str, entry: Mapping[str, object], sources: Sequence[str]) -> list[str]:
    """Why the builder's answer for the planned op ``name`` (switched by ``DS_BUILD_<var>``) cannot be built."""
    problems: list[str] = []
    if entry.get("var") != f"DS_BUILD_{var}":
        problems.append(f"{name}: its switch is {entry.get('var')}, the plan says DS_BUILD_{var}")
    messages = str(entry.get("messages", "")).strip()
    if entry.get("error"):
        problems.append(f"{name}: {entry['error']}")
    elif not sources:
        problems.append(f"{name}: has no sources (an empty extension breaks ninja builds)")
    elif not entry.get("compatible"):
        why = messages.splitlines()[-1] if messages else "its is_compatible() is False"
        problems.append(f"{name}: DeepSpeed says it cannot be built here and would skip it silently: {why}")
    return problems
