"""What loading a wheel's ops with JIT forbidden showed, and what it means.

:mod:`dswheels.probes.no_jit` loads the ops in the target interpreter and prints what it
saw; :mod:`dswheels.host.opload` runs it and lists what appeared in the empty
``TORCH_EXTENSIONS_DIR``. This module reads that answer and judges each op the same way for
``verify`` (one check per op) and ``install`` (one line per problem): an op is good only when
DeepSpeed loaded the prebuilt module its builder names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["LoadReport", "OpLoad", "OpVerdict", "judge_loads", "load_problems", "parse_load"]


@dataclass(frozen=True, kw_only=True, slots=True)
class OpLoad:
    name: str
    module: str  # what the op's builder says the prebuilt module is (absolute_name())
    loaded: str  # the module load() returned ("" when it raised)
    file: str
    prebuilt: bool
    error: str  # why load() failed ("" when it did not)
    seconds: float
    variant: str = ""  # an op built once per ISA level: the variant its module loaded (avx2, ...)


@dataclass(frozen=True, kw_only=True, slots=True)
class LoadReport:
    """The answer of ``no_jit.py load``, and what appeared in ``TORCH_EXTENSIONS_DIR`` meanwhile."""

    version: str  # deepspeed.git_version_info.version
    torch: str
    accelerator_runtime: str  # the accelerator DeepSpeed picked here
    accelerator_wheel: str  # the one the wheel was built for
    torch_info: Mapping[str, str]
    ops: tuple[OpLoad, ...]
    cpu_capability: str  # torch.backends.cpu.get_cpu_capability() there: what picks an ISA variant
    error: str  # DeepSpeed (or torch) did not import: why
    jit_files: tuple[str, ...]  # files in TORCH_EXTENSIONS_DIR afterwards: a JIT compile
    raw: Mapping[str, object]  # the answer as printed (verify's report keeps it)


@dataclass(frozen=True, kw_only=True, slots=True)
class OpVerdict:
    name: str
    ok: bool
    detail: str


def _text(data: Mapping[str, object], key: str) -> str:
    value = data.get(key)
    return "" if value is None else str(value)


def parse_load(data: Mapping[str, object], jit_files: tuple[str, ...] = ()) -> LoadReport:
    """Read the probe's answer (a JSON object); anything missing reads as empty."""
    raw_ops = data.get("ops")
    ops: list[OpLoad] = []
    for name, entry in sorted(raw_ops.items()) if isinstance(raw_ops, dict) else ():
        e: Mapping[str, object] = entry if isinstance(entry, dict) else {}
        seconds = e.get("seconds")
        ops.append(
            OpLoad(
                name=str(name),
                module=_text(e, "module"),
                loaded=_text(e, "loaded"),
                file=_text(e, "file"),
                prebuilt=e.get("prebuilt") is True,
                error=_text(e, "error"),
                seconds=float(seconds) if isinstance(seconds, (int, float)) else 0.0,
                variant=_text(e, "variant"),
            )
        )
    info = data.get("torch_info")
    return LoadReport(
        version=_text(data, "version"),
        torch=_text(data, "torch"),
        accelerator_runtime=_text(data, "accelerator_runtime"),
        accelerator_wheel=_text(data, "accelerator_wheel"),
        torch_info={str(k): str(v) for k, v in info.items()} if isinstance(info, dict) else {},
        ops=tuple(ops),
        cpu_capability=_text(data, "cpu_capability"),
        error=_text(data, "error"),
        jit_files=jit_files,
        raw=dict(data),
    )


def judge_loads(report: LoadReport) -> tuple[OpVerdict, ...]:
    """Each op: loaded from the wheel, or why not (with the accelerators when they differ).

    >>> r = parse_load({"accelerator_runtime": "cpu", "accelerator_wheel": "cuda", "ops": {
    ...     "fused_adam": {"module": "deepspeed.ops.adam.fused_adam_op", "error": "load() raised WouldJitError: x"},
    ...     "cpu_adam": {"module": "m", "loaded": "m", "prebuilt": True, "seconds": 0.25}}})
    >>> [v.detail for v in judge_loads(r)]
    ['m from the wheel in 0.25s', "load() raised WouldJitError: x (run-time accelerator cpu, the wheel's cuda)"]
    """
    verdicts = []
    for op in report.ops:
        if op.prebuilt:
            variant = f" (its {op.variant} variant)" if op.variant else ""
            detail = f"{op.loaded}{variant} from the wheel in {op.seconds}s"
            verdicts.append(OpVerdict(name=op.name, ok=True, detail=detail))
            continue
        why = op.error or f"loaded {op.loaded} instead of the prebuilt {op.module} (JIT-compiled)"
        if report.accelerator_runtime != report.accelerator_wheel:
            why += f" (run-time accelerator {report.accelerator_runtime}, the wheel's {report.accelerator_wheel})"
        verdicts.append(OpVerdict(name=op.name, ok=False, detail=why))
    return tuple(verdicts)


def load_problems(report: LoadReport, *, expected_version: str = "") -> list[str]:
    """Every reason the load does not prove the wheel's ops (empty: it does)."""
    problems = [report.error] if report.error else []
    problems += [f"{v.name}: {v.detail}" for v in judge_loads(report) if not v.ok]
    if report.jit_files:
        problems.append(
            "TORCH_EXTENSIONS_DIR is not empty after loading: something was JIT-compiled "
            f"({', '.join(report.jit_files)})"
        )
    if expected_version and report.version and report.version != expected_version:
        problems.append(f"deepspeed.git_version_info.version is {report.version}, expected {expected_version}")
    return problems
