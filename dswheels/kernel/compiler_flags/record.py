"""The op flags of every DeepSpeed release, recorded from the real sdists (``dswheels/op_flags.json``).

``nox -s update_flags`` runs DeepSpeed's own op builders of each release's PyPI sdist,
patched as dswheels patches it, with the platform set to ``win32`` and to ``linux`` (see
:mod:`dswheels.probes.op_flags`), and writes what they hand the compilers. ``dswheels plan``
judges the planned ops of every cell with it, without running anything. The file is generated,
never edited: ``tests/integration/test_op_flags.py`` recomputes it from the sdists.

Flags do not change with the Python version; with the cell's torch and CUDA only ``-std=``
changes, never in a way the compilers judge differently, so one torch and one CUDA (the file's
``context``) stand for all cells. The arch list does matter (``-gencode`` spellings, ``filter_ccs``,
``-DBF16_AVAILABLE``): each CUDA record is for one arch list, those the shipped matrix plans. A
cell with another arch list is judged by its other flags, and the build judges the exact flags
of its own cell again before compiling.

``is_compatible()`` is not recorded: it answers for the machine that runs it (libaio, a GPU),
and the build asks it again. Compact: every distinct flag list is stored once (``lists``), and an op's entries name the
releases they hold for as runs of consecutive recorded releases (``0.14.3..0.19.7``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources

from dswheels.kernel.compiler_flags.nvcc import NvccOption, NvccOptions
from dswheels.kernel.compiler_flags.op_flag_set import OpFlags
from dswheels.kernel.untyped import Untyped
from dswheels.kernel.versions import parse_version

__all__ = [
    "EMPTY_RECORD",
    "FLAGS_FILE",
    "FlagRecord",
    "Key",
    "key_text",
    "load_flag_record",
    "parse_flag_record",
    "render_flag_record",
]

FLAGS_FILE = "op_flags.json"
SCHEMA = 1
# (platform as the builders see it, accelerator, arch list): ("win32", "cuda", "7.5;8.0;..."), ("linux", "cpu", "")
Key = tuple[str, str, str]


def key_text(key: Key) -> str:
    """``win32 cuda 7.5;8.0`` / ``linux cpu``."""
    return " ".join(part for part in key if part)


@dataclass(frozen=True)
class FlagRecord:
    context: Mapping[str, str]  # what the builders were told: torch, cuda, arch_list, cpu_baseline, ...
    nvcc: NvccOptions
    versions: tuple[str, ...]  # the releases recorded, oldest first
    ops: Mapping[Key, Mapping[str, Mapping[str, OpFlags]]]  # key -> version -> op -> flags
    not_recorded: Mapping[str, str]  # "0.14.0 win32 cuda" -> why

    def lookup(self, version: str, key: Key) -> tuple[Mapping[str, OpFlags], bool] | None:
        """The ops of one release: (ops, exact). Not exact: recorded for another arch list only.

        None when the release is not recorded for the platform and accelerator at all.
        """
        if (found := self.ops.get(key, {}).get(version)) is not None:
            return found, True
        for other, per_version in self.ops.items():
            if other[:2] == key[:2] and version in per_version:
                return per_version[version], False
        return None


# No release recorded: what the recorder plans with, so the record it replaces cannot shape it
EMPTY_RECORD = FlagRecord(context={}, nvcc=NvccOptions(version="", options=()), versions=(), ops={}, not_recorded={})


def _runs(versions: Iterable[str], order: Mapping[str, int], names: tuple[str, ...]) -> str:
    """``0.14.3..0.16.5 0.17.0``: runs of consecutive recorded releases."""
    indices = sorted(order[v] for v in versions)
    runs: list[str] = []
    start = prev = indices[0]
    for i in [*indices[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        runs.append(names[start] if start == prev else f"{names[start]}..{names[prev]}")
        if i is not None:
            start = prev = i
    return " ".join(runs)


def _expand(runs: str, order: Mapping[str, int], names: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for run in runs.split():
        first, _, last = run.partition("..")
        out.extend(names[order[first] : order[last or first] + 1])
    return out


def render_flag_record(
    *,
    context: Mapping[str, str],
    nvcc: NvccOptions,
    results: Mapping[tuple[str, str, str, str], Mapping[str, OpFlags]],
    not_recorded: Mapping[str, str],
    about: str,
) -> str:
    """The file's text; ``results``: (version, platform, accelerator, arch list) -> op -> flags. Deterministic."""
    names = tuple(sorted({key[0] for key in results}, key=parse_version))
    order = {v: i for i, v in enumerate(names)}
    lists: dict[tuple[str, ...], int] = {}

    def index(values: tuple[str, ...] | None) -> int:
        return -1 if values is None else lists.setdefault(values, len(lists))

    grouped: dict[str, dict[str, dict[tuple[object, ...], list[str]]]] = {}
    for (version, platform, accelerator, arch), ops in sorted(results.items(), key=lambda kv: (order[kv[0][0]], kv[0])):
        per_key = grouped.setdefault(key_text((platform, accelerator, arch)), {})
        for name, flags in sorted(ops.items()):
            entry = (
                flags.extension,
                index(flags.cxx),
                index(flags.nvcc),
                index(flags.link),
                index(flags.libraries),
                index(flags.include_dirs),
                flags.error,
            )
            per_key.setdefault(name, {}).setdefault(entry, []).append(version)
    lines = [
        "{",
        f'"schema": {SCHEMA},',
        f'"about": {json.dumps(about)},',
        f'"context": {json.dumps(dict(sorted(context.items())))},',
        f'"nvcc_version": {json.dumps(nvcc.version)},',
        '"nvcc_options": [',
        ",\n".join(json.dumps(o.as_json()) for o in nvcc.options),
        "],",
        f'"versions": {json.dumps(list(names))},',
        f'"not_recorded": {json.dumps(dict(sorted(not_recorded.items())), indent=0)},',
        '"lists": [',
        ",\n".join(json.dumps(list(values)) for values in lists),
        "],",
        '"ops": {',
    ]
    key_blocks = []
    for heading in sorted(grouped):
        op_lines = []
        for name in sorted(grouped[heading]):
            entries = [[_runs(vs, order, names), *entry] for entry, vs in grouped[heading][name].items()]
            op_lines.append(f"  {json.dumps(name)}: [\n    " + ",\n    ".join(json.dumps(e) for e in entries) + "]")
        key_blocks.append(f" {json.dumps(heading)}: {{\n" + ",\n".join(op_lines) + "}")
    lines.append(",\n".join(key_blocks))
    lines += ["}", "}"]
    return "\n".join(lines) + "\n"


def parse_flag_record(text: str) -> FlagRecord:
    root = Untyped(json.loads(text), FLAGS_FILE)
    if root.at("schema").integer() != SCHEMA:
        raise ValueError(f"{FLAGS_FILE}: schema {root.at('schema').data}, this dswheels reads {SCHEMA}")
    options = tuple(
        NvccOption(
            long=row.seq()[0].text(),
            short=row.seq()[1].text(),
            value=row.seq()[2].text(),
            listed=row.seq()[3].flag(),
            choices=row.seq()[4].strs(),
        )
        for row in root.at("nvcc_options").seq()
    )
    names = root.at("versions").strs()
    order = {v: i for i, v in enumerate(names)}
    lists = [item.strs() for item in root.at("lists").seq()]
    ops: dict[Key, dict[str, dict[str, OpFlags]]] = {}
    for heading, per_key in root.at("ops").items():
        platform, accelerator, *arch = heading.split(" ", 2)
        by_version = ops.setdefault((platform, accelerator, arch[0] if arch else ""), {})
        for name, entries in per_key.items():
            for entry in entries.seq():
                runs, ext, cxx, nvcc, link, libs, incs, error = entry.seq()
                flags = OpFlags(
                    op=name,
                    extension=ext.text(),
                    cxx=lists[cxx.integer()],
                    nvcc=None if nvcc.integer() < 0 else lists[nvcc.integer()],
                    link=lists[link.integer()],
                    libraries=lists[libs.integer()],
                    include_dirs=lists[incs.integer()],
                    error=error.text(),
                )
                for version in _expand(runs.text(), order, names):
                    by_version.setdefault(version, {})[name] = flags
    return FlagRecord(
        context={k: v.text() for k, v in root.at("context").items()},
        nvcc=NvccOptions(version=root.at("nvcc_version").text(), options=options),
        versions=names,
        ops=ops,
        not_recorded={k: v.text() for k, v in root.at("not_recorded").items()},
    )


@cache
def load_flag_record() -> FlagRecord:
    """The shipped record (package data), parsed once per process."""
    return parse_flag_record(resources.files("dswheels").joinpath(FLAGS_FILE).read_text(encoding="utf-8"))
