"""One extension per CPU ISA level for each DeepSpeed op whose compiler flags depend on the level.

DeepSpeed's builders ask ``cpu_arch()`` and ``simd_width()`` for the CPU's instruction set (``-march=native``,
``-D__AVX512__``: the build host's). dswheels patches both to return ``dswheels_cpu_arch`` /
``dswheels_simd_width`` when a builder has them, else the cell's baseline
(dswheels.building.patches), and copies this file into the source tree as ``dswheels_isa_variants.py``
with :data:`LEVELS` filled in. DeepSpeed's setup.py (patched) then calls :func:`add_variants`: every op
it is about to build whose builder hands the compiler other flags at another level is replaced by one
extension per level, each from the same builder with that level's answers and named
``<absolute_name>_<suffix>`` (its own ``TORCH_EXTENSION_NAME``, so its ``PyInit_`` matches its file).
The op's own name becomes a small module that loads the variant the CPU runs
(``deepspeed/dswheels_isa.py``, dswheels.probes.isa_dispatch). Everything else is built once.

The build's op probe (dswheels.probes.op_sources) asks :func:`variant_levels` the same question before
anything compiles. Standard library only: it runs in the build interpreter; Python 3.10+.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, MutableSequence, Sequence
from pathlib import Path
from typing import Any

__all__ = ["DISPATCH_MODULE", "LEVELS", "add_variants", "fill_constant", "shim_path", "shim_text", "variant_levels"]

# (suffix, level, cpu_arch() answer, simd_width() answer, further compile flags) per level, the cell's baseline
# first, the best last; filled in by dswheels
LEVELS: tuple[tuple[str, str, str, str, tuple[tuple[str, tuple[str, ...]], ...]], ...] = ()

DISPATCH_MODULE = "deepspeed/dswheels_isa.py"  # dswheels.probes.isa_dispatch, with the tables filled in
SHIM_MARK = "# dswheels: ISA variants"


def fill_constant(text: str, name: str, value: object) -> str:
    """``text`` with the module-level assignment of ``name`` (one line) set to ``value``'s repr.

    >>> fill_constant("A = 1\\nOPS: dict[str, str] = {}\\n", "OPS", {"x": "m"})
    "A = 1\\nOPS: dict[str, str] = {'x': 'm'}\\n"
    """
    pattern = re.compile(rf"^(?P<head>{name}(?:: [^=\n]+)? = ).*$", re.MULTILINE)
    if len(pattern.findall(text)) != 1:
        msg = f"expected one line assigning {name}"
        raise ValueError(msg)
    return pattern.sub(lambda m: m["head"] + repr(value), text, count=1)


def _extension(builder: Any, level: Sequence[Any]) -> Any:  # noqa: ANN401 - DeepSpeed's builder, setuptools' Extension
    """The builder's extension with ``level``'s answers to cpu_arch() and simd_width()."""
    builder.dswheels_cpu_arch, builder.dswheels_simd_width = level[2], level[3]
    try:
        return builder.builder()
    finally:
        del builder.dswheels_cpu_arch, builder.dswheels_simd_width


def _add_flags(extension: Any, flags: Sequence[str]) -> None:  # noqa: ANN401 - setuptools' Extension
    """The level's further flags, for the C++ compiler (torch's extensions take a list, or ``{"cxx": [...]}``)."""
    if not flags:
        return
    args = extension.extra_compile_args
    if isinstance(args, dict):
        args["cxx"] = [*args.get("cxx", []), *flags]
    else:
        extension.extra_compile_args = [*(args or []), *flags]


def variant_levels(builder: Any) -> tuple[tuple[str, str, str, str, tuple[tuple[str, tuple[str, ...]], ...]], ...]:  # noqa: ANN401 - a builder
    """:data:`LEVELS` when the builder hands the compiler its ``cpu_arch()``/``simd_width()`` answer, else ``()``.

    Asked at the top level, whose answers no other flag contains: an op whose builder never asks
    (or drops the answer) compiles the same at every level and is built once.
    """
    if len(LEVELS) < 2:
        return ()
    top = LEVELS[-1]
    extension = _extension(builder, top)
    flags = repr((extension.extra_compile_args, extension.extra_link_args, extension.define_macros))
    return LEVELS if any(answer and answer in flags for answer in top[2:4]) else ()


def shim_path(module: str) -> str:
    """Where the module DeepSpeed imports an op as lives in the tree (and the wheel).

    >>> shim_path("deepspeed.ops.adam.cpu_adam_op")
    'deepspeed/ops/adam/cpu_adam_op.py'
    """
    return module.replace(".", "/") + ".py"


def shim_text(op: str, suffixes: Sequence[str]) -> str:
    """The module an op with variants is imported as: it becomes the variant the CPU runs."""
    return (
        f"{SHIM_MARK} of {op}: {', '.join(suffixes)}. deepspeed.dswheels_isa loads the one this CPU runs\n"
        "# (torch.backends.cpu.get_cpu_capability(), which ATEN_CPU_CAPABILITY overrides) and this module becomes it.\n"
        "from deepspeed.dswheels_isa import load_into\n"
        "\n"
        "load_into(globals())\n"
        "del load_into\n"
    )


def add_variants(
    ext_modules: MutableSequence[Any], all_ops: Mapping[str, Any], install_ops: Mapping[str, object], root: str = "."
) -> list[Any]:
    """``ext_modules`` with each op whose flags depend on the level replaced by one extension per level; writes
    the op's module (:func:`shim_text`) and the dispatch table into the tree under ``root``."""
    out = list(ext_modules)
    ops: dict[str, str] = {}
    for name, builder in all_ops.items():
        if not install_ops.get(name):
            continue
        module = builder.absolute_name()
        at = next((i for i, ext in enumerate(out) if ext.name == module), None)
        levels = variant_levels(builder) if at is not None else ()
        if at is None or not levels:
            continue
        variants = []
        for level in levels:
            extension = _extension(builder, level)
            extension.name = f"{module}_{level[0]}"
            _add_flags(extension, next((flags for op, flags in level[4] if op == name), ()))
            variants.append(extension)
        out[at : at + 1] = variants
        ops[name] = module
        path = Path(root, shim_path(module))
        path.write_text(shim_text(name, [level[0] for level in levels]), encoding="utf-8")
    dispatch = Path(root, DISPATCH_MODULE)
    dispatch.write_text(fill_constant(dispatch.read_text(encoding="utf-8"), "OPS", ops), encoding="utf-8")
    suffixes = ", ".join(level[0] for level in LEVELS)
    sys.stdout.write(f"dswheels: ISA variants ({suffixes}) of {', '.join(ops) or 'no op'}\n")
    return out
