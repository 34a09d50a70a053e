"""Reading a DeepSpeed build's output: which op is compiling, what failed, cache statistics.

The builder streams ``python -m build`` line by line; these pure functions turn lines into
progress events and, on failure, into the excerpt that names the failing op.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dswheels.kernel.numbers import is_ascii_digits
from dswheels.plan.compiler_cache_keys import CacheTool

__all__ = [
    "CacheStats",
    "OpSources",
    "extension_started",
    "failing_ops",
    "failure_excerpt",
    "parse_ccache_stats_log",
    "parse_ninja_log",
    "parse_sccache_stats",
    "unit_seconds",
]

_BUILDING_RE = re.compile(r"building '([\w.]+)' extension")


def extension_started(line: str) -> str | None:
    """The module name when setuptools starts an extension.

    >>> extension_started("building 'deepspeed.ops.adam.cpu_adam_op' extension")
    'deepspeed.ops.adam.cpu_adam_op'
    """
    match = _BUILDING_RE.search(line)
    return match.group(1) if match else None


@dataclass(frozen=True, slots=True)
class OpSources:
    """An op as the build tree's op_builder describes it (from the builder's probe)."""

    name: str
    var: str  # BUILD_VAR, e.g. DS_BUILD_CPU_ADAM
    module: str  # absolute_name()
    sources: tuple[str, ...]  # relative to the source tree
    # the SASS archs its builder asks nvcc for when the op is built alone (empty: a C++ op, or not asked)
    sass: frozenset[int] = frozenset()
    include_paths: tuple[str, ...] = ()  # its builder's include_paths(), relative to the source tree
    # each source with its scope (dswheels.plan.scopes): which builds share its object
    scopes: tuple[tuple[str, str], ...] = ()
    # (suffix, level) of each ISA level the op is built at, the baseline first (dswheels.probes.isa_variants):
    # one extension per level, imported as <module>_<suffix>; empty: one extension, at ``module``
    variants: tuple[tuple[str, str], ...] = ()

    @property
    def extension_modules(self) -> tuple[str, ...]:
        """The modules of the op's extensions: its variants', or its own."""
        return tuple(f"{self.module}_{suffix}" for suffix, _level in self.variants) or (self.module,)

    def label(self, module: str) -> str:
        """How progress names one of its extensions: ``cpu_adam``, or ``cpu_adam (avx2)`` for a variant."""
        suffix = module.removeprefix(f"{self.module}_") if module != self.module else ""
        return f"{self.name} ({suffix})" if suffix else self.name

    def seconds(self, done: Mapping[str, float]) -> float | None:
        """Its compile seconds once every extension of it is linked (``done``: module -> seconds), else None."""
        found = [done[m] for m in self.extension_modules if m in done]
        return sum(found) if len(found) == len(self.extension_modules) else None


_ERROR_RE = re.compile(
    r"(FAILED: |error:|Error:|fatal error|error [A-Z]+[0-9]+|No such file or directory|undefined reference|"
    r"CUDAMismatchException|RuntimeError|AssertionError|ninja: build stopped|Traceback)",
)


def failure_excerpt(lines: Sequence[str], *, limit: int = 40) -> list[str]:
    """The lines worth showing for a failed build: the first errors with a little context, then the end."""
    picked: list[int] = []
    for i, line in enumerate(lines):
        if _ERROR_RE.search(line):
            picked.extend(range(max(0, i - 2), min(len(lines), i + 4)))
        if len(set(picked)) >= limit // 2:
            break
    head = sorted(set(picked))[: limit // 2]
    tail_start = max(len(lines) - (limit - len(head)), (head[-1] + 1) if head else 0)
    out: list[str] = []
    last = -1
    for i in [*head, *range(tail_start, len(lines))]:
        if i <= last:
            continue
        if last >= 0 and i != last + 1:
            out.append("  [...]")
        out.append(lines[i])
        last = i
    return out


def failing_ops(lines: Sequence[str], ops: Sequence[OpSources], started: Sequence[str]) -> list[str]:
    """Which ops a failed build log blames: sources named in ``FAILED:``/error lines, else the last started.

    >>> ops = [OpSources("cpu_adam", "DS_BUILD_CPU_ADAM", "deepspeed.ops.adam.cpu_adam_op", ("csrc/adam/a.cpp",)),
    ...        OpSources("ccl", "DS_BUILD_CCL_COMM", "deepspeed.ops.comm.ccl_op", ("csrc/cpu/comm/ccl.cpp",))]
    >>> failing_ops(["FAILED: /w/build/temp.linux/csrc/cpu/comm/ccl.o", "x"], ops, [])
    ['ccl']
    """
    blamed: list[str] = []
    stems = {op.name: [s.rsplit(".", 1)[0] for s in op.sources] for op in ops}
    for line in lines:
        if not _ERROR_RE.search(line):
            continue
        for op in ops:
            if op.name in blamed:
                continue
            if any(f"{stem}." in line for stem in stems[op.name]) or op.module in line:
                blamed.append(op.name)
    if blamed:
        return blamed
    by_module = {module: op.name for op in ops for module in op.extension_modules}
    return [by_module[m] for m in started[-1:] if m in by_module]


@dataclass(frozen=True, slots=True)
class CacheStats:
    tool: CacheTool
    hits: int
    misses: int
    uncacheable: int = 0

    @property
    def hit_rate(self) -> float | None:
        total = self.hits + self.misses
        return self.hits / total if total else None

    def as_json(self) -> dict[str, object]:
        rate = self.hit_rate
        return {
            "tool": self.tool.value,
            "hits": self.hits,
            "misses": self.misses,
            "uncacheable": self.uncacheable,
            "hit_rate": round(rate, 3) if rate is not None else None,
        }

    def describe(self) -> str:
        rate = self.hit_rate
        pct = f" ({rate:.0%})" if rate is not None else ""
        return f"{self.tool}: {self.hits} hits, {self.misses} misses{pct}"


def parse_ccache_stats_log(text: str, *, base_dir: str) -> CacheStats:
    r"""Hits and misses of the build's own sources, from ccache's stats log (``CCACHE_STATSLOG``).

    Each compilation is a ``# <input>`` line followed by its counters. Compilations of files
    outside ``base_dir`` (absolute paths elsewhere: compiler probes in /tmp) are not the build's
    and are left out; relative inputs are relative to a build directory inside it.

    >>> log = "# /tmp/x/test.c\ncache_miss\n# ../../csrc/adam/cpu_adam.cpp\ndirect_cache_hit\n" \
    ...       "# /w/csrc/a.cu\ncache_miss\n# build/a.o\ncalled_for_link\n"
    >>> parse_ccache_stats_log(log, base_dir="/w")
    CacheStats(tool=<CacheTool.CCACHE: 'ccache'>, hits=1, misses=1, uncacheable=1)
    """
    hits = misses = uncacheable = 0
    base = base_dir.rstrip("/\\") + "/"
    current: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("#"):
            name = line[1:].strip().replace("\\", "/")
            absolute = name.startswith("/") or (len(name) > 1 and name[1] == ":")
            current = name if name and (not absolute or name.startswith(base)) else None
            continue
        if current is None:
            continue
        if line in ("direct_cache_hit", "preprocessed_cache_hit"):
            hits += 1
        elif line == "cache_miss":
            misses += 1
        elif line in (
            "called_for_link",
            "called_for_preprocessing",
            "unsupported_compiler_option",
            "unsupported_source_language",
            "compiler_produced_no_output",
            "multiple_source_files",
        ):
            uncacheable += 1
    return CacheStats(tool=CacheTool.CCACHE, hits=hits, misses=misses, uncacheable=uncacheable)


def parse_sccache_stats(data: Mapping[str, object], before: Mapping[str, object] | None = None) -> CacheStats:
    """``sccache --show-stats --stats-format=json``: hits/misses, as a difference when ``before`` is given."""

    def total(stats: Mapping[str, object] | None, key: str) -> int:
        if stats is None:
            return 0
        inner = stats.get("stats", stats)
        value = inner.get(key) if isinstance(inner, dict) else None
        counts = value.get("counts") if isinstance(value, dict) else None
        if isinstance(counts, dict):
            return sum(v for v in counts.values() if isinstance(v, int))
        return value if isinstance(value, int) else 0

    return CacheStats(
        tool=CacheTool.SCCACHE,
        hits=total(data, "cache_hits") - total(before, "cache_hits"),
        misses=total(data, "cache_misses") - total(before, "cache_misses"),
        uncacheable=total(data, "non_cacheable_compilations") - total(before, "non_cacheable_compilations"),
    )


def parse_ninja_log(text: str) -> dict[str, float]:
    r"""Seconds per output of ninja's ``.ninja_log`` (v5+: start ms, end ms, mtime, output, hash).

    >>> parse_ninja_log("# ninja log v7\n0\t52100\t1\t/w/build/t/csrc/adam/a.o\tab\n")
    {'/w/build/t/csrc/adam/a.o': 52.1}
    """
    seconds: dict[str, float] = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if line.startswith("#") or len(parts) < 4 or not (is_ascii_digits(parts[0]) and is_ascii_digits(parts[1])):
            continue
        seconds[parts[3]] = (int(parts[1]) - int(parts[0])) / 1000  # a rebuilt output: its last compile
    return seconds


def unit_seconds(op: OpSources, outputs: dict[str, float]) -> tuple[tuple[str, float], ...]:
    """Each source of ``op`` with the compile seconds of its object (torch names it after the source); an op
    built once per ISA level: each source once per level, from the level's own build directory.

    >>> op = OpSources("fused_adam", "DS_BUILD_FUSED_ADAM", "m", ("csrc/adam/f.cpp", "csrc/adam/k.cu"))
    >>> unit_seconds(op, {"/w/build/t/csrc/adam/k.o": 52.1, "/w/build/t/csrc/adam/f.o": 51.0})
    (('csrc/adam/f.cpp', 51.0), ('csrc/adam/k.cu', 52.1))
    >>> op = OpSources("cpu_adam", "V", "d.o.cpu_adam_op", ("a.cpp",), variants=(("default", "v2"), ("avx2", "v3")))
    >>> unit_seconds(op, {"/w/t/d.o.cpu_adam_op_avx2/a.o": 9.0, "/w/t/d.o.cpu_adam_op_default/a.o": 6.0})
    (('a.cpp', 6.0), ('a.cpp', 9.0))
    """
    found: list[tuple[str, float]] = []
    folders = [f"/{m}/" for m in op.extension_modules] if op.variants else [""]
    for folder in folders:
        for source in op.sources:
            stem = source.replace("\\", "/").rsplit(".", 1)[0]
            for output, seconds in outputs.items():
                path = output.replace("\\", "/")
                if folder in path and path.endswith((f"/{stem}.o", f"/{stem}.obj")):
                    found.append((source, seconds))
                    break
    return tuple(found)
