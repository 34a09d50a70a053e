"""Which ops a DeepSpeed source tree has, and whether its builders would build the wanted ones here.

Run as ``python op_sources.py OPS_JSON`` in the build interpreter, with the tree as the working
directory (``setup.py``'s view: ``op_builder`` and ``accelerator`` imported from it). Prints
:data:`MARK` and a JSON object: the accelerator DeepSpeed picks, and for every op of
``ALL_OPS`` its ``BUILD_VAR`` and prebuilt module (``absolute_name()``); for each op named in
``OPS_JSON`` (``["*"]``: every op) also its ``sources()``, ``include_paths()``, ``is_compatible(verbose=True)`` and what
that printed (the reason an op would be skipped silently), and the ISA levels it is built at when the tree
builds variants of it (``variants``: ``[[suffix, level], ...]``, dswheels.probes.isa_variants; ``[]``: built
once); and where torch's and Python's headers
are (``include``: what each translation unit's scope is read from, dswheels.plan.scopes).
The build (:mod:`dswheels.building.effects.op_sources_asked`) checks these against the plan before it compiles
anything.

Standard library only, Python 3.10+: it runs in the build interpreter, where dswheels is not
installed.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MARK = "DSWHEELS-OPS "
_MESSAGES = 3000  # characters of an op's is_compatible() output kept


def _inspect(builder: Any) -> dict[str, object]:  # noqa: ANN401 - one of DeepSpeed's op builders
    """``sources()``, ``is_compatible(verbose=True)`` and what they printed."""
    entry: dict[str, object] = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            entry["sources"] = [str(s) for s in builder.sources()]
        except Exception as exc:  # noqa: BLE001 - reported per op
            entry["sources"] = []
            entry["error"] = repr(exc)
        try:
            entry["include_paths"] = [str(s) for s in builder.include_paths() if s]
        except Exception:  # noqa: BLE001 - only the scopes of its units need it
            entry["include_paths"] = []
        try:
            entry["compatible"] = bool(builder.is_compatible(verbose=True))
        except Exception as exc:  # noqa: BLE001
            entry["compatible"] = False
            entry["error"] = repr(exc)
        entry["variants"] = _variants(builder) if entry["compatible"] else []
    entry["messages"] = out.getvalue()[-_MESSAGES:]
    return entry


def _variants(builder: Any) -> list[list[str]]:  # noqa: ANN401 - one of DeepSpeed's op builders
    """The ISA levels the patched tree builds ``builder``'s op at (its dswheels_isa_variants.py), or none."""
    try:
        helper = importlib.import_module("dswheels_isa_variants")
    except ImportError:  # a tree dswheels did not patch for variants
        return []
    try:
        return [[suffix, level] for suffix, level, *_answers in helper.variant_levels(builder)]
    except Exception:  # noqa: BLE001 - an op whose builder() fails here fails the build's other checks
        return []


def describe(wanted: Sequence[str], tree: Path) -> dict[str, object]:
    """Import the tree's op builders (as setup.py does) and describe every op; ``wanted`` in full."""
    sys.path.insert(0, str(tree))
    with contextlib.redirect_stdout(io.StringIO()):  # builders print warnings; only the result line may reach stdout
        all_ops = importlib.import_module("op_builder.all_ops").ALL_OPS
        accelerator = importlib.import_module("accelerator").get_accelerator()._name  # noqa: SLF001 - as setup.py
    ops: dict[str, object] = {}
    for name, builder in all_ops.items():
        entry: dict[str, object] = {"var": getattr(builder, "BUILD_VAR", ""), "module": builder.absolute_name()}
        if name in wanted or "*" in wanted:  # "*": every op (the cost model's unit counts)
            entry.update(_inspect(builder))
        ops[name] = entry
    return {"accelerator": accelerator, "ops": ops, "include": _header_dirs()}


def _header_dirs() -> dict[str, list[str]]:
    """torch's include directories (as its cpp_extension gives them) and the interpreter's."""
    dirs: dict[str, list[str]] = {"torch": [], "python": []}
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            cpp_extension = importlib.import_module("torch.utils.cpp_extension")
            dirs["torch"] = [str(p) for p in cpp_extension.include_paths()]
        except Exception:  # noqa: BLE001 - without them torch's headers are judged by their names
            dirs["torch"] = []
        try:
            import sysconfig  # noqa: PLC0415

            dirs["python"] = [sysconfig.get_paths()["include"]]
        except Exception:  # noqa: BLE001
            dirs["python"] = []
    return dirs


def main(argv: Sequence[str]) -> int:
    wanted = [str(name) for name in json.loads(argv[1])]
    sys.stdout.write(MARK + json.dumps(describe(wanted, Path.cwd())) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
