"""``dswheels smoke``: train a tiny model through deepspeed.initialize with the installed wheel.

Each run is its own process (a clean distributed state and a true per-run peak memory) in a
venv with the wheel, through the JIT-forbidding script verify and install load ops with
(:mod:`dswheels.probes.no_jit`); ``TORCH_EXTENSIONS_DIR`` must stay empty. A numerical check
compares DeepSpeedCPUAdam with torch's AdamW step by step.
"""

from __future__ import annotations

import json
import os
import re
import socket
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from dswheels.host import proc
from dswheels.host.log import get_reporter
from dswheels.host.opload import NO_JIT_SCRIPT, jit_files
from dswheels.host.venvs import probe_python
from dswheels.kernel.errors import SmokeError
from dswheels.kernel.model import Accelerator
from dswheels.probes import no_jit
from dswheels.smoke.runs import SmokeRun, deepspeed_config

__all__ = ["SmokeResult", "has_gpu", "run_adam_check", "run_smoke"]


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


def _env(accelerator: Accelerator, ext_dir: str) -> dict[str, str]:
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
    env["DS_ACCELERATOR"] = accelerator.value
    return env


def run_smoke(
    python: Path, runs: list[SmokeRun], *, device: str, accelerator: Accelerator, steps: int, log: Path | None
) -> list[dict[str, object]]:
    reporter = get_reporter()
    results: list[dict[str, object]] = []
    for run in runs:
        spec = {"device": device, "config": deepspeed_config(run), "steps": steps, "hidden": 256}
        with tempfile.TemporaryDirectory(prefix="dsw-ext-") as ext, tempfile.TemporaryDirectory() as cwd:
            out = proc.capture(
                [str(python), str(NO_JIT_SCRIPT), "train", json.dumps(spec)],
                cwd=Path(cwd),
                env=_env(accelerator, ext),
                heartbeat=60,
                heartbeat_label=f"smoke run {run.name}",
                log_file=log,
                timeout=900,
                error=SmokeError,
                what=f"smoke run {run.name}",
            )
            data = proc.marked_json(out.output, no_jit.TRAIN_MARK)
            jit = list(jit_files(Path(ext)))
        result: dict[str, object] = {
            "name": run.name,
            "stage": run.stage,
            "config": spec["config"],
            "seconds": round(out.duration, 1),
        }
        if not isinstance(data, dict):
            result.update(ok=False, error=_exception_line(out.output) or " / ".join(out.tail[-3:]))
        else:
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
            if isinstance(data, dict)
            else str(result.get("error"))
        )
        reporter.info(f"  {mark:6}  {run.name}: {detail}" + (f" ({result['why']})" if result.get("why") else ""))
        results.append(result)
    return results


def run_adam_check(python: Path, *, accelerator: Accelerator, tolerance: float, log: Path | None) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="dsw-ext-") as ext, tempfile.TemporaryDirectory() as cwd:
        out = proc.capture(
            [str(python), str(NO_JIT_SCRIPT), "adam"],
            cwd=Path(cwd),
            env=_env(accelerator, ext),
            log_file=log,
            timeout=600,
            error=SmokeError,
            what="DeepSpeedCPUAdam vs AdamW",
        )
        data = proc.marked_json(out.output, no_jit.ADAM_MARK)
    if not isinstance(data, dict):
        return {"ok": False, "error": _exception_line(out.output) or " / ".join(out.tail[-3:])}
    diff = float(str(data["max_abs_diff"]))
    return {**data, "tolerance": tolerance, "ok": diff <= tolerance}


def has_gpu(python: Path) -> bool:
    """Whether the torch of ``python`` sees a CUDA device."""
    return bool(probe_python(python, gpus=True).cuda_devices)
