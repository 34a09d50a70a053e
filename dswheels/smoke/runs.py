"""The smoke runs: a tiny model trained a few steps through ``deepspeed.initialize`` per config.

Configs follow the seed's experiment runner (``create_deepspeed_config``): ZeRO stage,
micro batch, gradient accumulation, optimizer offload, bf16. On CPU (gloo) the optimizer
steps go through DeepSpeedCPUAdam (offload) or torch's AdamW; on a GPU additionally
FusedAdam and bf16. Each run needs certain prebuilt ops; a run whose ops the wheel does not
have is skipped with the reason (it would JIT-compile, which smoke forbids).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["SmokeRun", "deepspeed_config", "render_smoke_markdown", "runs_for"]


@dataclass(frozen=True, slots=True)
class SmokeRun:
    name: str
    stage: int
    offload: bool  # offload_optimizer to CPU: DeepSpeedCPUAdam
    bf16: bool
    micro_batch: int
    grad_accum: int
    fused: bool  # FusedAdam (GPU) instead of torch's AdamW
    needs: tuple[str, ...]  # prebuilt ops the run uses


# What a run's optimizer asks of the wheel: (offload_optimizer, FusedAdam, the prebuilt ops it uses).
_OPTIMIZERS: dict[str, tuple[bool, bool, tuple[str, ...]]] = {
    "torch-adamw": (False, False, ()),  # torch's AdamW: no DeepSpeed op
    "cpuadam": (True, False, ("cpu_adam",)),  # offloaded to the CPU: DeepSpeedCPUAdam
    "fusedadam": (False, True, ("fused_adam",)),  # on the GPU: FusedAdam
}


def _run(
    name: str, stage: int, optimizer: str, *, micro_batch: int, grad_accum: int = 1, bf16: bool = False
) -> SmokeRun:
    offload, fused, needs = _OPTIMIZERS[optimizer]
    return SmokeRun(
        name,
        stage,
        offload=offload,
        bf16=bf16,
        micro_batch=micro_batch,
        grad_accum=grad_accum,
        fused=fused,
        needs=needs,
    )


_CPU_RUNS = (
    _run("zero0-torch-adamw", 0, "torch-adamw", micro_batch=8),
    _run("zero1-offload-cpuadam", 1, "cpuadam", micro_batch=8),
    _run("zero2-offload-cpuadam-ga2", 2, "cpuadam", micro_batch=4, grad_accum=2),
    _run("zero3-offload-cpuadam", 3, "cpuadam", micro_batch=8),
)
_GPU_RUNS = (
    _run("gpu-zero0-fusedadam-bf16", 0, "fusedadam", micro_batch=16, bf16=True),
    _run("gpu-zero1-fusedadam-bf16", 1, "fusedadam", micro_batch=16, bf16=True),
    _run("gpu-zero2-fusedadam-bf16-ga2", 2, "fusedadam", micro_batch=8, grad_accum=2, bf16=True),
    _run("gpu-zero3-fusedadam-bf16", 3, "fusedadam", micro_batch=16, bf16=True),
    _run("gpu-zero2-offload-cpuadam-bf16", 2, "cpuadam", micro_batch=16, bf16=True),
)


def runs_for(device: str, ops: Sequence[str]) -> tuple[list[SmokeRun], list[tuple[SmokeRun, str]]]:
    """The runs for ``device`` (cpu|cuda) the wheel's ``ops`` allow, and the skipped ones with why.

    >>> runs, skipped = runs_for("cpu", ["cpu_adam"])
    >>> [r.stage for r in runs], skipped
    ([0, 1, 2, 3], [])
    >>> [s.name for s, _ in runs_for("cuda", ["fused_adam"])[1]]
    ['zero1-offload-cpuadam', 'zero2-offload-cpuadam-ga2', 'zero3-offload-cpuadam', 'gpu-zero2-offload-cpuadam-bf16']
    """
    candidates = [*_CPU_RUNS, *(_GPU_RUNS if device == "cuda" else ())]
    chosen: list[SmokeRun] = []
    skipped: list[tuple[SmokeRun, str]] = []
    have = set(ops)
    for run in candidates:
        missing = [op for op in run.needs if op not in have]
        if missing:
            skipped.append((run, f"needs {', '.join(missing)}, which this wheel does not prebuild"))
        else:
            chosen.append(run)
    return chosen, skipped


def deepspeed_config(run: SmokeRun, *, lr: float = 1e-2) -> dict[str, object]:
    """The DeepSpeed config of a run, in the shape of the seed's ``create_deepspeed_config``."""
    zero: dict[str, object] = {"stage": run.stage}
    if run.offload:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": False}
    optimizer_type = "Adam" if (run.fused or run.offload) else "AdamW"
    params: dict[str, object] = {"lr": lr, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0}
    if not (run.fused or run.offload):
        params["torch_adam"] = True  # torch's AdamW: no DeepSpeed op needed
    config: dict[str, object] = {
        "train_micro_batch_size_per_gpu": run.micro_batch,
        "gradient_accumulation_steps": run.grad_accum,
        "optimizer": {"type": optimizer_type, "params": params},
        "zero_optimization": zero,
        "steps_per_print": 1_000_000,
        "wall_clock_breakdown": False,
    }
    if run.bf16:
        config["bf16"] = {"enabled": True}
    if run.offload:
        config["zero_force_ds_cpu_optimizer"] = True
    return config


def render_smoke_markdown(results: Sequence[Mapping[str, object]], skipped: Sequence[tuple[str, str]]) -> str:
    lines = [
        "| run | ZeRO | result | loss first -> last | samples/s | peak memory |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        ok = "ok" if r.get("ok") else f"**FAILED**: {r.get('error') or r.get('why', '')}"
        first, last = r.get("loss_first"), r.get("loss_last")
        loss = f"{first:.4f} -> {last:.4f}" if isinstance(first, float) and isinstance(last, float) else "-"
        sps = r.get("samples_per_s")
        mem = r.get("peak_memory_mb")
        lines.append(
            f"| {r.get('name')} | {r.get('stage')} | {ok} | {loss} | "
            f"{f'{sps:.1f}' if isinstance(sps, float) else '-'} | "
            f"{f'{mem:.0f} MB' if isinstance(mem, float) else '-'} |",
        )
    lines.extend(f"| {name} | | skipped: {why} | | | |" for name, why in skipped)
    return "\n".join(lines) + "\n"
