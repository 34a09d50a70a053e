"""The plan contract, both ways: ``dswheels plan --format json`` written, and read back into typed cells.

The plan job of the wheels workflow writes the plan once; every build job reads it back
(``dswheels build --plan``) and builds exactly the cells it names, with the toolchain the plan
resolved: nothing is planned twice. The shape is ``PLAN_SCHEMA``, documented in
docs/plan-json.md. A build manifest keeps its cell in the same shape (its ``plan``), so the
reader here is also the manifest's. Reading is strict: a value of the wrong type, an unknown
platform or source kind, or a derived key (``id``, ``wheel``, ...) that disagrees with the
cell's own fields raises :class:`PlanFormatError` naming the key's path.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import ClassVar, TypeVar

from dswheels.kernel.binaries.linux_runtime import RuntimeFloor
from dswheels.kernel.model import (
    Cell,
    DroppedCell,
    HostCompiler,
    OpPlan,
    Plan,
    PlannedCell,
    Python,
    Reason,
    Source,
    SourceKind,
    Toolchain,
    Variant,
    parse_platform,
)
from dswheels.kernel.naming import build_string, cell_id, local_label, parse_cell_id, wheel_filename, wheel_version
from dswheels.kernel.untyped import Untyped
from dswheels.kernel.versions import format_version, parse_torch_minor, parse_torch_release, parse_version

__all__ = [
    "PLAN_MODES",
    "PLAN_SCHEMA",
    "PlanFormatError",
    "parse_plan",
    "parse_planned_cell",
    "planned_cell_json",
    "render_json",
]

PLAN_SCHEMA = "dswheels.plan/1"
PLAN_MODES = ("matrix", "combo", "canary")
_SEP = (", ", ": ")
_BUILD_ENV_PREFIX = "DS_BUILD_"
# manifests written before one source served every platform (dswheels.manifest/1 and /2) name a
# Windows cell's tag archive "git-archive": the same thing as an archive with its sha256 pinned
_LEGACY_SOURCE_KINDS = {"git-archive": SourceKind.ARCHIVE}

T = TypeVar("T")


class PlanFormatError(ValueError):
    """A plan (or a manifest's ``plan``) that is not what ``dswheels plan --format json`` writes."""


# --- writing ---------------------------------------------------------------------------------------


def _cell_head(item: PlannedCell) -> dict[str, object]:
    cell = item.cell
    return {
        "id": cell_id(cell),
        "deepspeed": format_version(cell.deepspeed),
        "torch": format_version(cell.torch),
        "torch_version": item.torch_version,
        "torch_index": item.torch_index,
        "variant": cell.variant.name,
        "cuda": cell.variant.cuda_text or None,
        "python": str(cell.python),
        "python_tag": cell.python.tag,
        "platform": cell.platform.value,
        "os": cell.platform.os,
        "local_label": local_label(cell),
        "build_string": build_string(cell),
        "version": wheel_version(cell),
        "wheel": wheel_filename(cell),
    }


def _cell_tail(item: PlannedCell) -> dict[str, object]:
    """The part shared by every Python of a (deepspeed, torch, variant, platform)."""
    tc = item.toolchain
    return {
        "source": {"kind": item.source.kind, "url": item.source.url or None, "sha256": item.source.sha256 or None},
        "toolchain": {
            "runner_image": tc.runner_image,
            "runs_on": list(tc.runs_on),
            "host_compiler": {
                "kind": tc.host_compiler.kind,
                "version": tc.host_compiler.version,
                "why": tc.host_compiler.why,
            },
            "nvcc": format_version(tc.nvcc) if tc.nvcc else None,
            "cuda_toolkit": tc.cuda_toolkit or None,
            "torch_cuda_arch_list": tc.arch_list_text or None,
            "skip_cuda_check": tc.skip_cuda_check,
            "cuda_check": tc.cuda_check,
            "nvcc_append_flags": list(tc.nvcc_flags),
            "cpu_baseline": tc.cpu_baseline,
            "cuda_components": list(tc.cuda_components),
            "notes": list(tc.notes),
            "linux_runtime": tc.linux_runtime.as_json() if tc.linux_runtime else None,
            "container": tc.container or None,
            "gcc_toolset": tc.gcc_toolset,
        },
        "ops": {
            "build": [{"name": name, "env": f"{_BUILD_ENV_PREFIX}{var}"} for name, var in item.ops.build],
            "left_out": [{"name": name, "reason": reason} for name, reason in item.ops.left_out],
        },
        "smoke_runs_on": list(item.smoke_runs_on),
    }


def planned_cell_json(item: PlannedCell) -> dict[str, object]:
    """One planned cell as the JSON contract spells it (docs/plan-json.md)."""
    return {**_cell_head(item), **_cell_tail(item)}


def _dropped_json(item: DroppedCell) -> dict[str, object]:
    return {
        "id": cell_id(item.cell),
        "reasons": [{"rule": r.rule, "message": r.message, "fix": r.fix, "source": r.source} for r in item.reasons],
    }


def _json_list(items: Sequence[dict[str, object]]) -> str:
    if not items:
        return "[]"
    return "[\n    " + ",\n    ".join(json.dumps(item, separators=_SEP) for item in items) + "\n  ]"


def _cells_json(planned: Sequence[PlannedCell]) -> str:
    """Cells share toolchain and ops objects per (ds, torch, variant, platform): encode those once."""
    if not planned:
        return "[]"
    tails: dict[tuple[int, int, int], str] = {}
    lines = []
    for item in planned:
        key = (id(item.toolchain), id(item.ops), id(item.source))
        tail = tails.get(key)
        if tail is None:
            tail = tails[key] = json.dumps(_cell_tail(item), separators=_SEP)[1:]
        lines.append(json.dumps(_cell_head(item), separators=_SEP)[:-1] + ", " + tail)
    return "[\n    " + ",\n    ".join(lines) + "\n  ]"


def render_json(plan: Plan, *, version: str) -> str:
    """The plan contract: a JSON object, one cell per line (diffable, and fast for 50k cells)."""
    head = {"schema": PLAN_SCHEMA, "dswheels": version, "matrix": plan.matrix, "mode": plan.mode}
    parts = [f"  {json.dumps(key)}: {json.dumps(value)}" for key, value in head.items()]
    parts.append(f'  "cells": {_cells_json(plan.planned)}')
    parts.append(f'  "dropped": {_json_list([_dropped_json(d) for d in plan.dropped])}')
    return "{\n" + ",\n".join(parts) + "\n}\n"


# --- reading ---------------------------------------------------------------------------------------


class _Node(Untyped):
    """A value of a plan document; its errors are :class:`PlanFormatError` naming the key path."""

    mapping_word: ClassVar[str] = "an object"

    def fail(self, expected: str) -> ValueError:
        return PlanFormatError(f"{self.path.lstrip('.') or 'the plan'}: expected {expected}")

    def parsed(self, parse: Callable[[str], T]) -> T:
        """The string here through ``parse`` (a ``ValueError`` becomes this key's error)."""
        text = self.text()
        try:
            return parse(text)
        except ValueError as exc:
            raise PlanFormatError(f"{self.path.lstrip('.')}: {exc}") from None

    def opt_parsed(self, parse: Callable[[str], T]) -> T | None:
        return None if self.data is None else self.parsed(parse)


def _source_kind(text: str) -> SourceKind:
    if text in _LEGACY_SOURCE_KINDS:
        return _LEGACY_SOURCE_KINDS[text]
    try:
        return SourceKind(text)
    except ValueError:
        known = ", ".join(kind.value for kind in SourceKind)
        msg = f"unknown source kind {text!r} (known: {known})"
        raise ValueError(msg) from None


def _cell(node: _Node) -> Cell:
    cell = Cell(
        deepspeed=node.at("deepspeed").parsed(parse_version),
        torch=node.at("torch").parsed(parse_torch_minor),
        variant=node.at("variant").parsed(Variant.parse),
        python=node.at("python").parsed(Python.parse),
        platform=node.at("platform").parsed(parse_platform),
    )
    derived: dict[str, str | None] = {
        "id": cell_id(cell),
        "cuda": cell.variant.cuda_text or None,
        "python_tag": cell.python.tag,
        "os": cell.platform.os,
        "local_label": local_label(cell),
        "build_string": build_string(cell),
        "version": wheel_version(cell),
        "wheel": wheel_filename(cell),
    }
    for key, expected in derived.items():
        given = node.at(key).opt_text()
        if given != expected:
            msg = f"{node.path.lstrip('.')}.{key} is {given!r}, but the cell's own fields make it {expected!r}"
            raise PlanFormatError(msg)
    return cell


def _runtime(node: _Node) -> RuntimeFloor | None:
    if node.data is None:
        return None
    mapping = node.map()
    try:
        return RuntimeFloor.from_json(mapping)
    except ValueError as exc:
        raise PlanFormatError(f"{node.path.lstrip('.')}.{exc}") from None


def _toolchain(node: _Node) -> Toolchain:
    compiler = node.at("host_compiler")
    arch_list = node.at("torch_cuda_arch_list").opt_parsed(_arch_list)
    return Toolchain(
        runner_image=node.at("runner_image").text(),
        runs_on=node.at("runs_on").strs(),
        host_compiler=HostCompiler(
            kind=compiler.at("kind").text(),
            version=compiler.at("version").parsed(_dotted_or_none),
            why=compiler.at("why").text(),
        ),
        nvcc=node.at("nvcc").opt_parsed(parse_version),
        cuda_toolkit=node.at("cuda_toolkit").opt_parsed(_dotted_or_none) or "",
        arch_list=arch_list or (),
        skip_cuda_check=node.at("skip_cuda_check").flag(),
        cuda_check=node.at("cuda_check").text(),
        nvcc_flags=node.at("nvcc_append_flags").strs(),
        cpu_baseline=node.at("cpu_baseline").text(),
        cuda_components=_cuda_components(node),
        notes=node.at("notes").strs(),
        linux_runtime=_runtime(node.at("linux_runtime")),
        # absent from the plans and manifests of before the manylinux container
        container=node.at("container").opt_text() or "",
        gcc_toolset=bool(node.at("gcc_toolset").opt_flag()),
    )


_ARCH = re.compile(r"[0-9]{1,3}\.[0-9][af]?(?:\+PTX)?")


def _arch_list(text: str) -> tuple[str, ...]:
    """``8.0;9.0+PTX``: each an architecture in ASCII digits (it becomes TORCH_CUDA_ARCH_LIST)."""
    tokens = tuple(text.split(";")) if text else ()
    if not all(_ARCH.fullmatch(t) for t in tokens):
        msg = f"not a TORCH_CUDA_ARCH_LIST: {text[:80]!r} (expected e.g. '8.0;9.0+PTX')"
        raise ValueError(msg)
    return tokens


def _dotted_or_none(text: str) -> str:
    """A version a toolchain names (``13.0.3``, ``14.44``, ``13``), or ""; ASCII digits."""
    if text:
        parse_version(text)
    return text


def _cuda_components(toolchain: _Node) -> tuple[str, ...]:
    """``cuda_components``; the manifests of wheels built before it have ``cuda_subpackages`` instead
    (the Windows installer's names, which nothing reads any more): read as none."""
    if toolchain.opt("cuda_components") is None and toolchain.opt("cuda_subpackages") is not None:
        return ()
    return toolchain.at("cuda_components").strs()


def _build_var(node: _Node) -> str:
    env = node.text()
    if not env.startswith(_BUILD_ENV_PREFIX) or env == _BUILD_ENV_PREFIX:
        raise PlanFormatError(f"{node.path.lstrip('.')}: expected {_BUILD_ENV_PREFIX}<OP>, got {env!r}")
    return env.removeprefix(_BUILD_ENV_PREFIX)


def _ops(node: _Node) -> OpPlan:
    return OpPlan(
        build=tuple((op.at("name").text(), _build_var(op.at("env"))) for op in node.at("build").seq()),
        left_out=tuple((op.at("name").text(), op.at("reason").text()) for op in node.at("left_out").seq()),
    )


def _planned(node: _Node) -> PlannedCell:
    source = node.at("source")
    return PlannedCell(
        cell=_cell(node),
        torch_version=node.at("torch_version").parsed(parse_torch_release),
        torch_index=node.at("torch_index").text(),
        toolchain=_toolchain(node.at("toolchain")),
        ops=_ops(node.at("ops")),
        source=Source(
            kind=source.at("kind").parsed(_source_kind),
            url=source.at("url").opt_text() or "",
            sha256=source.at("sha256").opt_text() or "",
        ),
        smoke_runs_on=node.at("smoke_runs_on").strs(),
    )


def parse_planned_cell(data: object, *, path: str = "") -> PlannedCell:
    """One planned cell from its JSON (a plan's ``cells[i]``, a manifest's ``plan``): inverse of
    :func:`planned_cell_json`. Raises :class:`PlanFormatError` naming the key that is wrong."""
    return _planned(_Node(data, path))


def _dropped(node: _Node) -> DroppedCell:
    return DroppedCell(
        cell=node.at("id").parsed(parse_cell_id),
        reasons=tuple(
            Reason(
                rule=r.at("rule").text(),
                message=r.at("message").text(),
                fix=r.at("fix").text(),
                source=r.at("source").text(),
            )
            for r in node.at("reasons").seq()
        ),
    )


def parse_plan(data: object) -> Plan:
    """A plan document (``json.loads`` of what :func:`render_json` wrote): inverse of it, less the notes.

    Raises :class:`PlanFormatError` for another schema or any key of the wrong shape.
    """
    root = _Node(data)
    schema = root.at("schema").opt_text()
    if schema != PLAN_SCHEMA:
        raise PlanFormatError(f"schema is {schema!r}; this dswheels reads {PLAN_SCHEMA} (docs/plan-json.md)")
    root.at("dswheels").text()
    mode = root.at("mode").text()
    if mode not in PLAN_MODES:
        raise PlanFormatError(f"mode: {mode!r} is none of {', '.join(PLAN_MODES)}")
    return Plan(
        planned=tuple(_planned(node) for node in root.at("cells").seq()),
        dropped=tuple(_dropped(node) for node in root.at("dropped").seq()),
        matrix=root.at("matrix").text(),
        mode=mode,
    )
