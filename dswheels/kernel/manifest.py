"""The build manifest: one JSON file beside each wheel, written by build, read by verify and publish.

It records what the wheel is (the planned cell), what it was built with (toolchain
versions, environment), what went in (ops built with their compile time and extension
file, ops left out with the reason) and what came out (sizes, sha256, the glibc/libstdc++
floor of a Linux wheel) and how the source was changed before the build (``source_changes``).
Shape: ``MANIFEST_SCHEMA``, documented in docs/manifest.md; the older ``dswheels.manifest/1``
(no ``runtime``, no ``producer``) and ``/2`` (no ``source_changes``) are still read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from dswheels.kernel.binaries.linux_runtime import RuntimeFloor
from dswheels.kernel.jsondoc import parse_json
from dswheels.kernel.model import PlannedCell
from dswheels.kernel.naming import cell_id
from dswheels.kernel.plan_json import PlanFormatError, parse_planned_cell, planned_cell_json

__all__ = [
    "MANIFEST_SCHEMA",
    "PRODUCERS",
    "READABLE_SCHEMAS",
    "BuiltOp",
    "BuiltVariant",
    "FileInfo",
    "Manifest",
    "ManifestError",
    "manifest_name",
    "parse_manifest",
    "render_manifest",
]

MANIFEST_SCHEMA = "dswheels.manifest/3"
READABLE_SCHEMAS = ("dswheels.manifest/1", "dswheels.manifest/2", MANIFEST_SCHEMA)
PRODUCERS = ("dswheels build",)  # the one build pipeline, on every platform


class ManifestError(ValueError):
    """A manifest file that is not what build writes."""


def manifest_name(wheel_filename: str) -> str:
    """``deepspeed-...whl`` -> ``deepspeed-...manifest.json`` (beside the wheel)."""
    return wheel_filename.removesuffix(".whl") + ".manifest.json"


@dataclass(frozen=True, slots=True)
class FileInfo:
    filename: str
    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class BuiltVariant:
    """One ISA level an op with SIMD paths was compiled at (dswheels.kernel.isa_variants)."""

    suffix: str  # torch's CPU capability in lower case: default, avx2, avx512
    level: str  # the compat.yml cpu_baseline it is compiled for, e.g. x86-64-v3
    module: str  # what it imports as: <the op's module>_<suffix>
    extension: str  # its file inside the wheel
    size: int
    seconds: float | None


@dataclass(frozen=True, slots=True)
class BuiltOp:
    name: str
    env: str  # DS_BUILD_<VAR>
    # path inside the wheel, e.g. deepspeed/ops/adam/cpu_adam_op.cpython-311-x86_64-linux-gnu.so (an op built per
    # ISA level: its baseline variant's)
    extension: str
    module: str  # importable name, as the builder's absolute_name() gives it (an op built per ISA level: its dispatch)
    size: int  # its extension's bytes (an op built per ISA level: all its variants')
    seconds: float | None  # compile time, when the build log allowed measuring it (per ISA level: all of them)
    # each translation unit's compile seconds, from ninja's log: (source relative to the tree, seconds)
    units: tuple[tuple[str, float], ...] = ()
    # the SASS archs its builder asked nvcc for (sm_80 -> 80; empty for a C++ op or an older manifest)
    sass: tuple[int, ...] = ()
    # each source's scope (dswheels.plan.scopes: which builds share its object; empty: not probed)
    scopes: tuple[tuple[str, str], ...] = ()
    variants: tuple[BuiltVariant, ...] = ()  # one per ISA level, the baseline first (empty: built once)


@dataclass(frozen=True, slots=True)
class Manifest:
    cell_id: str
    plan: PlannedCell  # the cell as planned (JSON: exactly as `dswheels plan --format json` gives it)
    wheel: FileInfo
    accelerator: str  # "cuda" | "cpu", as DeepSpeed stamped it in git_version_info_installed.py
    torch_version: str  # e.g. "2.14.1+cu130"
    torch_cuda: str | None  # torch.version.cuda
    python_version: str  # e.g. "3.11.7"
    toolchain: Mapping[str, str]  # tool -> version line (nvcc, gcc/cl, ninja, setuptools, ccache ...)
    cpu_baseline: str
    arch_list: str  # TORCH_CUDA_ARCH_LIST used ("" for cpu)
    env: Mapping[str, str]  # the build environment dswheels set (DS_*, TORCH_*, CUDA_HOME, ...)
    ops_built: tuple[BuiltOp, ...]
    ops_left_out: Mapping[str, str]  # op -> reason
    durations: Mapping[str, float]  # step -> seconds (source, interpreter, compile, postprocess, total)
    source: Mapping[str, str]  # kind, url, sha256 actually used
    source_changes: tuple[str, ...]  # what dswheels changed in the source before building, one line each
    created: str  # ISO 8601 UTC
    dswheels: str
    debug_symbols: FileInfo | None = None
    compiler_cache: Mapping[str, object] = field(default_factory=dict)  # tool, hits, misses
    runtime: RuntimeFloor | None = None  # what a Linux wheel needs of glibc/libstdc++ (None: Windows, or /1)
    producer: str = "dswheels build"  # who ran the compiler (one of PRODUCERS)
    # a Windows cell built on Linux under Wine: what the Windows toolchain was made of ({}: a native build)
    windows_host: Mapping[str, object] = field(default_factory=dict)
    # the GitHub Actions runner and run that built it ({}: built elsewhere): where its seconds were measured
    runner: Mapping[str, str] = field(default_factory=dict)

    @property
    def ops(self) -> tuple[str, ...]:
        return tuple(op.name for op in self.ops_built)


def render_manifest(manifest: Manifest) -> str:
    def file(info: FileInfo | None) -> dict[str, object] | None:
        return None if info is None else {"filename": info.filename, "size": info.size, "sha256": info.sha256}

    data = {
        "schema": MANIFEST_SCHEMA,
        "cell_id": manifest.cell_id,
        "plan": planned_cell_json(manifest.plan),
        "wheel": file(manifest.wheel),
        "debug_symbols": file(manifest.debug_symbols),
        "accelerator": manifest.accelerator,
        "torch": {"version": manifest.torch_version, "cuda": manifest.torch_cuda},
        "python": manifest.python_version,
        "toolchain": dict(manifest.toolchain),
        "cpu_baseline": manifest.cpu_baseline,
        "arch_list": manifest.arch_list,
        "env": dict(sorted(manifest.env.items())),
        "ops": {
            "built": [
                {
                    "name": op.name,
                    "env": op.env,
                    "extension": op.extension,
                    "module": op.module,
                    "size": op.size,
                    "seconds": op.seconds,
                    "units": [{"source": source, "seconds": round(s, 2)} for source, s in op.units],
                    "sass": list(op.sass),
                    "scopes": dict(op.scopes),
                    "variants": [
                        {
                            "suffix": v.suffix,
                            "level": v.level,
                            "module": v.module,
                            "extension": v.extension,
                            "size": v.size,
                            "seconds": v.seconds,
                        }
                        for v in op.variants
                    ],
                }
                for op in manifest.ops_built
            ],
            "left_out": dict(manifest.ops_left_out),
        },
        "durations": {k: round(v, 2) for k, v in manifest.durations.items()},
        "compiler_cache": dict(manifest.compiler_cache),
        "runtime": manifest.runtime.as_json() if manifest.runtime is not None else None,
        "producer": manifest.producer,
        "windows_host": dict(manifest.windows_host),
        "runner": dict(manifest.runner),
        "source": dict(manifest.source),
        "source_changes": list(manifest.source_changes),
        "created": manifest.created,
        "dswheels": manifest.dswheels,
    }
    return json.dumps(data, indent=2) + "\n"


class _Get:
    """Typed access to untyped JSON, naming the key path on any surprise."""

    def __init__(self, data: object, path: str = "") -> None:
        self.data, self.path = data, path

    def __getitem__(self, key: str) -> _Get:
        if not isinstance(self.data, dict) or key not in self.data:
            raise ManifestError(f"manifest: missing {self.path + '.' if self.path else ''}{key}")
        return _Get(self.data[key], f"{self.path}.{key}" if self.path else key)

    def text(self) -> str:
        if not isinstance(self.data, str):
            raise ManifestError(f"manifest: {self.path} should be a string")
        return self.data

    def opt_text(self) -> str | None:
        return None if self.data is None else self.text()

    def integer(self) -> int:
        if isinstance(self.data, bool) or not isinstance(self.data, int):
            raise ManifestError(f"manifest: {self.path} should be an integer")
        return self.data

    def num(self) -> float | None:
        if self.data is None:
            return None
        if isinstance(self.data, bool) or not isinstance(self.data, (int, float)):
            raise ManifestError(f"manifest: {self.path} should be a number")
        return float(self.data)

    def obj(self) -> dict[str, object]:
        if not isinstance(self.data, dict):
            raise ManifestError(f"manifest: {self.path} should be an object")
        return {str(k): v for k, v in self.data.items()}

    def strmap(self) -> dict[str, str]:
        return {k: _Get(v, f"{self.path}.{k}").text() for k, v in self.obj().items()}

    def items(self) -> list[_Get]:
        if not isinstance(self.data, list):
            raise ManifestError(f"manifest: {self.path} should be a list")
        return [_Get(item, f"{self.path}[{i}]") for i, item in enumerate(self.data)]

    def opt_map(self, key: str) -> dict[str, str]:
        """The string mapping under ``key``; absent or null reads as empty (a key newer than the manifest)."""
        if not isinstance(self.data, dict) or self.data.get(key) is None:
            return {}
        return self[key].strmap()

    def opt_items(self, key: str) -> list[_Get]:
        """The list under ``key``; absent or null reads as empty (a key newer than the manifest)."""
        if not isinstance(self.data, dict) or self.data.get(key) is None:
            return []
        return self[key].items()


def _file(get: _Get) -> FileInfo | None:
    if get.data is None:
        return None
    return FileInfo(filename=get["filename"].text(), size=get["size"].integer(), sha256=get["sha256"].text())


def parse_manifest(text: str) -> Manifest:
    try:
        data = parse_json(text, what="manifest")
    except ValueError as exc:
        raise ManifestError(str(exc)) from None
    root = _Get(data)
    schema = root["schema"].text()
    if schema not in READABLE_SCHEMAS:
        raise ManifestError(f"manifest schema {schema!r}; this dswheels reads {', '.join(READABLE_SCHEMAS)}")
    v1 = schema == READABLE_SCHEMAS[0]
    wheel = _file(root["wheel"])
    if wheel is None:
        raise ManifestError("manifest: wheel is missing")
    ops = root["ops"]
    try:
        planned = parse_planned_cell(root["plan"].data, path="plan")
    except PlanFormatError as exc:
        raise ManifestError(f"manifest: {exc}") from None
    if root["cell_id"].text() != cell_id(planned.cell):
        raise ManifestError(f"manifest: cell_id {root['cell_id'].text()!r} is not its plan's {cell_id(planned.cell)!r}")
    return Manifest(
        cell_id=root["cell_id"].text(),
        plan=planned,
        wheel=wheel,
        debug_symbols=_file(root["debug_symbols"]),
        accelerator=root["accelerator"].text(),
        torch_version=root["torch"]["version"].text(),
        torch_cuda=root["torch"]["cuda"].opt_text(),
        python_version=root["python"].text(),
        toolchain=root["toolchain"].strmap(),
        cpu_baseline=root["cpu_baseline"].text(),
        arch_list=root["arch_list"].text(),
        env=root["env"].strmap(),
        ops_built=tuple(
            BuiltOp(
                name=op["name"].text(),
                env=op["env"].text(),
                extension=op["extension"].text(),
                module=op["module"].text(),
                size=op["size"].integer(),
                seconds=op["seconds"].num(),
                # per-unit compile times (since the cost model), the SASS its builder asked for (since that check)
                units=tuple((u["source"].text(), u["seconds"].num() or 0.0) for u in op.opt_items("units")),
                sass=tuple(a.integer() for a in op.opt_items("sass")),
                scopes=tuple(op.opt_map("scopes").items()),
                variants=tuple(_variant(v) for v in op.opt_items("variants")),  # since the ISA variants
            )
            for op in ops["built"].items()
        ),
        ops_left_out=ops["left_out"].strmap(),
        durations={k: float(v) for k, v in root["durations"].obj().items() if isinstance(v, (int, float))},
        compiler_cache=root["compiler_cache"].obj(),
        source=root["source"].strmap(),
        source_changes=() if schema != MANIFEST_SCHEMA else tuple(c.text() for c in root["source_changes"].items()),
        created=root["created"].text(),
        dswheels=root["dswheels"].text(),
        runtime=None if v1 else _runtime(root["runtime"]),
        producer="dswheels build" if v1 else _producer(root["producer"]),
        windows_host=root["windows_host"].obj() if isinstance(root.data, dict) and "windows_host" in root.data else {},
        runner=root.opt_map("runner"),
    )


def _variant(get: _Get) -> BuiltVariant:
    return BuiltVariant(
        suffix=get["suffix"].text(),
        level=get["level"].text(),
        module=get["module"].text(),
        extension=get["extension"].text(),
        size=get["size"].integer(),
        seconds=get["seconds"].num(),
    )


def _runtime(get: _Get) -> RuntimeFloor | None:
    if get.data is None:
        return None
    try:
        return RuntimeFloor.from_json(get.obj())
    except ValueError as exc:
        raise ManifestError(f"manifest: {get.path}.{exc}") from None


def _producer(get: _Get) -> str:
    text = get.text()
    if text not in PRODUCERS:
        raise ManifestError(f"manifest: producer {text!r} is none of {', '.join(PRODUCERS)}")
    return text
