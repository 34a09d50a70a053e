"""``dswheels smoke``: train a tiny model through deepspeed.initialize with the installed wheel.

Each run is its own process (a clean distributed state and a true per-run peak memory) in a
venv with the wheel; JIT compilation is made to fail and ``TORCH_EXTENSIONS_DIR`` must stay
empty. A numerical check compares DeepSpeedCPUAdam with torch's AdamW step by step.
"""

from __future__ import annotations

import json
import os
import re
import socket
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from dswheels.core.smoke import SmokeRun, deepspeed_config
from dswheels.effects import proc
from dswheels.errors import SmokeError
from dswheels.log import get_reporter

__all__ = ["SmokeResult", "run_adam_check", "run_smoke"]

_GUARD = r"""
import json, os, sys, time
from deepspeed.ops.op_builder import builder as _builder
class WouldJit(RuntimeError):
    pass
def _no_jit(self, *args, **kwargs):
    raise WouldJit(f"{self.name} would be JIT-compiled: the wheel does not prebuild it for this accelerator")
_builder.OpBuilder.jit_load = _no_jit
"""

_TRAIN = (
    _GUARD
    + r"""
try:
    import resource
    def peak_rss_mb():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
except ImportError:  # Windows
    import psutil  # a DeepSpeed requirement
    def peak_rss_mb():
        return psutil.Process().memory_info().peak_wset / 2**20
import torch
import deepspeed
spec = json.loads(sys.argv[1])
device = spec["device"]
torch.manual_seed(0)
deepspeed.init_distributed(dist_backend="gloo" if device == "cpu" else None)  # cuda: nccl, gloo on Windows
hidden = spec["hidden"]
model = torch.nn.Sequential(
    torch.nn.Linear(32, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
    torch.nn.Linear(hidden, 1),
)
engine, _opt, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=spec["config"])
gen = torch.Generator().manual_seed(1)
w_true = torch.randn(32, 1, generator=gen)
dtype = torch.bfloat16 if spec["config"].get("bf16", {}).get("enabled") else torch.float32
mb = spec["config"]["train_micro_batch_size_per_gpu"]
ga = spec["config"]["gradient_accumulation_steps"]
if device == "cuda":
    torch.cuda.reset_peak_memory_stats()
losses = []
start = None
for step in range(spec["steps"]):
    if step == 1:
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
    total = 0.0
    for _ in range(ga):
        x = torch.randn(mb, 32, generator=gen)
        y = x @ w_true
        x, y = x.to(engine.device, dtype), y.to(engine.device, dtype)
        loss = torch.nn.functional.mse_loss(engine(x).float(), y.float())
        engine.backward(loss)
        engine.step()
        total += float(loss.detach())
    losses.append(total / ga)
if device == "cuda":
    torch.cuda.synchronize()
elapsed = time.perf_counter() - start
samples = (spec["steps"] - 1) * mb * ga
if device == "cuda":
    peak = torch.cuda.max_memory_allocated() / 2**20
else:
    peak = peak_rss_mb()
print("DSWHEELS-SMOKE " + json.dumps({
    "losses": losses, "samples_per_s": samples / elapsed, "peak_memory_mb": peak,
    "optimizer": type(engine.optimizer).__name__,
    "inner_optimizer": type(getattr(engine.optimizer, "optimizer", engine.optimizer)).__name__,
}))
"""
)

_ADAM = (
    _GUARD
    + r"""
import torch
from deepspeed.ops.adam import DeepSpeedCPUAdam
torch.manual_seed(0)
shape = (1024, 33)
base = torch.randn(shape)
p_ds = torch.nn.Parameter(base.clone())
p_pt = torch.nn.Parameter(base.clone())
kw = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
ds = DeepSpeedCPUAdam([p_ds], adamw_mode=True, **kw)
pt = torch.optim.AdamW([p_pt], **kw)
worst = 0.0
for step in range(20):
    grad = torch.randn(shape)
    p_ds.grad = grad.clone()
    p_pt.grad = grad.clone()
    ds.step()
    pt.step()
    worst = max(worst, (p_ds.detach() - p_pt.detach()).abs().max().item())
print("DSWHEELS-ADAM " + json.dumps({"max_abs_diff": worst, "steps": 20, "optimizer": type(ds).__name__}))
"""
)


@dataclass
class SmokeResult:
    runs: list[dict[str, object]] = field(default_factory=list)
    adam: dict[str, object] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(bool(r.get("ok")) for r in self.runs) and bool(self.adam.get("ok", True))


_EXC_RE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Jit|Interrupt|Exit)\b.*")


def _exception_line(output: str) -> str:
    """The last exception line of a traceback (``RuntimeError: ...``)."""
    found = [ln.strip() for ln in output.splitlines() if _EXC_RE.match(ln.strip())]
    return found[-1] if found else ""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env(accelerator: str, ext_dir: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DS_BUILD_")}
    env.update(
        {
            "TORCH_EXTENSIONS_DIR": ext_dir,
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(_free_port()),
            "RANK": "0",
            "LOCAL_RANK": "0",
            "WORLD_SIZE": "1",
            "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS", "2"),
        },
    )
    if accelerator:
        env["DS_ACCELERATOR"] = accelerator
    return env


def run_smoke(
    python: Path, runs: list[SmokeRun], *, device: str, accelerator: str, steps: int, log: Path | None
) -> list[dict[str, object]]:
    reporter = get_reporter()
    results: list[dict[str, object]] = []
    for run in runs:
        spec = {"device": device, "config": deepspeed_config(run), "steps": steps, "hidden": 256}
        with tempfile.TemporaryDirectory(prefix="dsw-ext-") as ext, tempfile.TemporaryDirectory() as cwd:
            out = proc.capture(
                [str(python), "-c", _TRAIN, json.dumps(spec)],
                cwd=Path(cwd),
                env=_env(accelerator, ext),
                heartbeat=60,
                heartbeat_label=f"smoke run {run.name}",
                log_file=log,
                timeout=900,
                error=SmokeError,
                what=f"smoke run {run.name}",
            )
            jit = sorted(p.name for p in Path(ext).iterdir())
        result: dict[str, object] = {
            "name": run.name,
            "stage": run.stage,
            "config": spec["config"],
            "seconds": round(out.duration, 1),
        }
        payload = proc.marked_line(out.output, "DSWHEELS-SMOKE ")
        if payload is None:
            result.update(ok=False, error=_exception_line(out.output) or " / ".join(out.tail[-3:]))
        else:
            data = json.loads(payload)
            losses = [float(v) for v in data["losses"]]
            head, tail = sum(losses[:2]) / 2, sum(losses[-2:]) / 2
            fell = tail < 0.8 * head
            result.update(
                losses=losses,
                loss_first=losses[0],
                loss_last=losses[-1],
                loss_fell=fell,
                samples_per_s=float(data["samples_per_s"]),
                peak_memory_mb=float(data["peak_memory_mb"]),
                optimizer=data["inner_optimizer"],
                jit=jit,
            )
            why = []
            if not fell:
                why.append(f"the loss did not fall ({head:.4f} -> {tail:.4f})")
            if jit:
                why.append(f"JIT-compiled {', '.join(jit)}")
            result.update(ok=not why, why="; ".join(why))
        mark = "ok" if result["ok"] else "FAILED"
        detail = (
            f"loss {result.get('loss_first', 0):.4f} -> {result.get('loss_last', 0):.4f}, "
            f"{result.get('samples_per_s', 0):.1f} samples/s, peak {result.get('peak_memory_mb', 0):.0f} MB, "
            f"{result.get('optimizer', '?')}"
            if payload is not None
            else str(result.get("error"))
        )
        reporter.info(f"  {mark:6}  {run.name}: {detail}" + (f" ({result['why']})" if result.get("why") else ""))
        results.append(result)
    return results


def run_adam_check(python: Path, *, accelerator: str, tolerance: float, log: Path | None) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="dsw-ext-") as ext, tempfile.TemporaryDirectory() as cwd:
        out = proc.capture(
            [str(python), "-c", _ADAM],
            cwd=Path(cwd),
            env=_env(accelerator, ext),
            log_file=log,
            timeout=600,
            error=SmokeError,
            what="DeepSpeedCPUAdam vs AdamW",
        )
    payload = proc.marked_line(out.output, "DSWHEELS-ADAM ")
    if payload is None:
        return {"ok": False, "error": _exception_line(out.output) or " / ".join(out.tail[-3:])}
    data: Mapping[str, object] = json.loads(payload)
    diff = float(str(data["max_abs_diff"]))
    return {**data, "tolerance": tolerance, "ok": diff <= tolerance}
