"""CPU ops built once per ISA level: which levels a cell builds, and what a wheel says it holds.

torch compiles its own CPU kernels once per instruction-set level (DEFAULT, AVX2, AVX512) and picks one
at run time (``torch.backends.cpu.get_cpu_capability()``). dswheels builds DeepSpeed's ops with SIMD
paths the same way: from the cell's CPU baseline up, every compat.yml ``cpu_baselines`` level with a
``torch_capability`` (:func:`variant_levels`), each op whose builder passes its ``cpu_arch()`` or
``simd_width()`` answer on built once per level (dswheels.probes.isa_variants) and imported through
the wheel's ``deepspeed/dswheels_isa.py`` (dswheels.probes.isa_dispatch), whose tables
:func:`parse_variant_table` reads back (never runs). The rule that picks a variant is the wheel's own
(:func:`dswheels.probes.isa_dispatch.choose`); :func:`capability_from_flags` is torch's for a CPU
whose feature flags are known (``dswheels inspect``: which variant loads here).
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from dswheels.kernel.compat.entries import CpuBaseline
from dswheels.kernel.pysource import PythonSourceError, parse_source
from dswheels.kernel.wheel_contents import extension_for_module
from dswheels.probes.isa_dispatch import choose, rank
from dswheels.probes.isa_variants import DISPATCH_MODULE, SHIM_MARK, shim_path

__all__ = [
    "DISPATCH_MODULE",
    "VariantLevel",
    "VariantTable",
    "capability_from_flags",
    "chosen_suffix",
    "describe_levels",
    "extension_levels",
    "is_shim",
    "parse_variant_table",
    "rank",
    "shim_path",
    "variant_levels",
    "variant_module",
    "variant_problems",
]


@dataclass(frozen=True, slots=True)
class VariantLevel:
    """One level an op with SIMD paths is compiled at."""

    suffix: str  # torch's capability in lower case: the extension imports as <module>_<suffix>
    level: str  # the compat.yml cpu_baseline, e.g. x86-64-v3
    arch_flag: str  # what cpu_arch() answers: -march=x86-64-v3 (GCC), /arch:AVX2 (cl)
    simd_flag: str  # what simd_width() answers: -D__AVX256__
    # added to one op's variant compile: (op, flags) pairs (compat.yml gcc_variant_flags)
    extra_flags: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def flags_of(self, op: str) -> tuple[str, ...]:
        """The further flags ``op``'s variant at this level is compiled with."""
        return next((flags for name, flags in self.extra_flags if name == op), ())

    def helper_row(self) -> tuple[str, str, str, str, tuple[tuple[str, tuple[str, ...]], ...]]:
        """The row of dswheels.probes.isa_variants.LEVELS."""
        return (self.suffix, self.level, self.arch_flag, self.simd_flag, self.extra_flags)


def variant_levels(baselines: Mapping[str, CpuBaseline], baseline: str, *, compiler: str) -> tuple[VariantLevel, ...]:
    """The levels a cell builds its ops with SIMD paths at: its baseline, then every level compat.yml lists
    after it whose torch capability ranks higher; ``()`` when that is the baseline alone (one build).

    >>> from dswheels.kernel.compat import load_compat
    >>> levels = variant_levels(load_compat().cpu_baselines, "x86-64-v2", compiler="gcc")
    >>> [(v.suffix, v.level, v.arch_flag, v.simd_flag) for v in levels][1]
    ('avx2', 'x86-64-v3', '-march=x86-64-v3', '-D__AVX256__')
    >>> variant_levels(load_compat().cpu_baselines, "x86-64-v4", compiler="msvc")
    ()
    """
    names = list(baselines)
    start = baselines[baseline]
    if not start.torch_capability:
        return ()
    picked = [start]
    for name in names[names.index(baseline) + 1 :]:
        level = baselines[name]
        if level.torch_capability and rank(level.torch_capability) > rank(picked[-1].torch_capability):
            picked.append(level)
    if len(picked) < 2:
        return ()
    return tuple(
        VariantLevel(
            suffix=level.torch_capability.lower(),
            level=level.name,
            arch_flag=level.msvc if compiler == "msvc" else level.gcc,
            simd_flag=level.simd,
            # a level's own extra flags; the baseline variant is compiled exactly as a build without variants
            extra_flags=level.gcc_variant_flags if compiler == "gcc" and level is not start else (),
        )
        for level in picked
    )


def variant_module(module: str, suffix: str) -> str:
    """The module one variant of the op ``module`` imports as.

    >>> variant_module("deepspeed.ops.adam.cpu_adam_op", "avx2")
    'deepspeed.ops.adam.cpu_adam_op_avx2'
    """
    return f"{module}_{suffix}"


@dataclass(frozen=True, slots=True)
class VariantTable:
    """What a wheel's ``deepspeed/dswheels_isa.py`` says: the levels, and the ops built at each."""

    levels: tuple[tuple[str, str], ...] = ()  # (suffix, level), the baseline first
    ops: Mapping[str, str] = field(default_factory=dict)  # op -> the module DeepSpeed imports it as

    def modules(self, op: str) -> tuple[str, ...]:
        """The variant modules of ``op`` (``()``: it is built once)."""
        module = self.ops.get(op)
        return () if module is None else tuple(variant_module(module, suffix) for suffix, _level in self.levels)

    def level_of(self, module: str) -> tuple[str, str, str] | None:
        """``(op, suffix, level)`` when ``module`` is a variant module of the table, else None."""
        for op, base in self.ops.items():
            for suffix, level in self.levels:
                if module == variant_module(base, suffix):
                    return op, suffix, level
        return None

    @property
    def suffixes(self) -> tuple[str, ...]:
        return tuple(suffix for suffix, _level in self.levels)


def parse_variant_table(text: str) -> VariantTable:
    """Read ``LEVELS`` and ``OPS`` of a wheel's dispatch module (literals, never executed); ValueError if unreadable.

    >>> t = parse_variant_table("LEVELS = (('default', 'x86-64-v2'), ('avx2', 'x86-64-v3'))\\n"
    ...                         "OPS: dict[str, str] = {'cpu_adam': 'deepspeed.ops.adam.cpu_adam_op'}\\n")
    >>> t.modules("cpu_adam")
    ('deepspeed.ops.adam.cpu_adam_op_default', 'deepspeed.ops.adam.cpu_adam_op_avx2')
    """
    try:
        tree = parse_source(text, what=DISPATCH_MODULE)
    except PythonSourceError as exc:
        raise ValueError(str(exc)) from None
    found: dict[str, object] = {}
    for node in tree.body:
        target, value = None, None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        if isinstance(target, ast.Name) and target.id in {"LEVELS", "OPS"} and value is not None:
            try:
                found[target.id] = ast.literal_eval(value)
            except (ValueError, TypeError, RecursionError, MemoryError):
                msg = f"{DISPATCH_MODULE}: {target.id} is not a literal"
                raise ValueError(msg) from None
    levels, ops = (found.get(name) for name in ("LEVELS", "OPS"))
    listed = list(levels) if isinstance(levels, (tuple, list)) else []
    rows = [tuple(row) for row in listed if isinstance(row, (tuple, list)) and len(row) == 2]
    well_formed = bool(rows) and len(rows) == len(listed) and all(isinstance(x, str) for r in rows for x in r)
    if not well_formed or not isinstance(ops, dict):
        msg = f"{DISPATCH_MODULE} has no LEVELS ((suffix, level), ...) and OPS {{op: module}} tables"
        raise ValueError(msg)
    return VariantTable(
        levels=tuple((str(r[0]), str(r[1])) for r in rows),
        ops={str(k): str(v) for k, v in ops.items()},
    )


def extension_levels(table: VariantTable, names: Sequence[str]) -> dict[str, str]:
    """Each variant's extension file among ``names`` -> the level it is compiled for (``x86-64-v3``).

    >>> t = VariantTable(levels=(("default", "x86-64-v2"), ("avx2", "x86-64-v3")), ops={"a": "d.a_op"})
    >>> extension_levels(t, ["d/a_op_avx2.cpython-311-x86_64-linux-gnu.so", "d/a_op_default.so", "d/b.so"])
    {'d/a_op_default.so': 'x86-64-v2', 'd/a_op_avx2.cpython-311-x86_64-linux-gnu.so': 'x86-64-v3'}
    """
    found: dict[str, str] = {}
    for op in table.ops:
        for module, (_suffix, level) in zip(table.modules(op), table.levels, strict=True):
            member = extension_for_module(module, names)
            if member is not None:
                found[member] = level
    return found


def variant_problems(table: VariantTable, names: Collection[str], extension_of: Mapping[str, str | None]) -> list[str]:
    """Why loading an op with variants would fail: its module (the dispatch) or a variant's extension missing.

    ``names``: the wheel's members; ``extension_of``: variant module -> its extension file (None: none).
    """
    problems: list[str] = []
    for op, module in sorted(table.ops.items()):
        shim = shim_path(module)
        if shim not in names:
            problems.append(f"{op}: no {shim}: DeepSpeed imports {module} and finds no dispatch to a variant")
        missing = [m for m in table.modules(op) if extension_of.get(m) is None]
        if missing:
            problems.append(f"{op}: no extension for {', '.join(missing)}: a CPU that picks it cannot load {op}")
    if table.ops and DISPATCH_MODULE not in names:
        problems.append(f"no {DISPATCH_MODULE}: the ops' modules cannot pick a variant")
    return problems


def is_shim(text: str) -> bool:
    """Whether a module's text is an op's dispatch to its variants (what the build writes)."""
    return SHIM_MARK in text and "load_into(globals())" in text


def capability_from_flags(flags: Collection[str], override: str | None = None) -> str:
    """torch's CPU capability for a CPU with these feature flags (``/proc/cpuinfo`` names), as torch computes it.

    ``override``: ``ATEN_CPU_CAPABILITY``, which torch takes when it is one of its (lower-case) values.

    >>> capability_from_flags({"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq"})
    'AVX512'
    >>> capability_from_flags({"avx2", "fma"}), capability_from_flags({"avx", "sse4_2"})
    ('AVX2', 'DEFAULT')
    >>> capability_from_flags({"avx2", "fma"}, override="default")
    'DEFAULT'
    """
    if override in {"default", "avx2", "avx512"}:
        return override.upper()
    if {"avx512vl", "avx512bw", "avx512dq", "fma"} <= set(flags):
        return "AVX512"
    if {"avx2", "fma"} <= set(flags):
        return "AVX2"
    return "DEFAULT"


def chosen_suffix(table: VariantTable, capability: str) -> str | None:
    """The variant a CPU with torch capability ``capability`` loads from this wheel (None: none fits)."""
    return choose(capability, table.suffixes)


def describe_levels(table: VariantTable) -> str:
    """``default (x86-64-v2), avx2 (x86-64-v3), avx512 (x86-64-v4)``."""
    return ", ".join(f"{suffix} ({level})" for suffix, level in table.levels)
