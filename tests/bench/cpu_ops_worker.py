"""Time DeepSpeed's CPU optimizer steps on request, in the interpreter of one DeepSpeed install.

Run by :mod:`tests.bench.cpu_ops_bench` as a long-lived process in each venv (ours, the native JIT), so the two
are measured in turns, side by side. Reads one JSON request per line from stdin:
``{"optimizer": "adam"|"adagrad"|"lion", "dtype": "fp32"|"bf16", "numel": N, "steps": S}`` and answers one
JSON line after :data:`MARK` (DeepSpeed prints to stdout too: a JIT compile, its logger): each timed step's
milliseconds, and which op module was loaded (its ISA variant, its file).
``{"drop": true}`` frees the optimizers held so far. Standard library besides torch and DeepSpeed.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from typing import Any

_CLASSES = {
    "adam": ("deepspeed.ops.adam", "DeepSpeedCPUAdam", "ds_opt_adam"),
    "adagrad": ("deepspeed.ops.adagrad", "DeepSpeedCPUAdagrad", "ds_opt_adagrad"),
    "lion": ("deepspeed.ops.lion", "DeepSpeedCPULion", "ds_opt_lion"),
}
_HELD: dict[tuple[str, str, int], Any] = {}
MARK = "DSWHEELS-BENCH "


def _optimizer(name: str, dtype: str, numel: int) -> Any:
    key = (name, dtype, numel)
    if key not in _HELD:
        torch = importlib.import_module("torch")
        module, cls, _attr = _CLASSES[name]
        kind = torch.bfloat16 if dtype == "bf16" else torch.float32
        gen = torch.Generator().manual_seed(0)
        param = torch.nn.Parameter(torch.randn(numel, generator=gen).to(kind))
        param.grad = torch.randn(numel, generator=gen).to(kind) * 1e-3
        _HELD[key] = getattr(importlib.import_module(module), cls)([param], lr=1e-3)
    return _HELD[key]


def _answer(request: dict[str, Any]) -> dict[str, object]:
    if request.get("drop"):
        _HELD.clear()
        return {"dropped": True}
    name = request["optimizer"]
    optimizer = _optimizer(name, request["dtype"], int(request["numel"]))
    optimizer.step()  # warm: first touch of the state, the thread pool
    times = []
    for _ in range(int(request["steps"])):
        start = time.perf_counter()
        optimizer.step()
        times.append((time.perf_counter() - start) * 1000)
    op = getattr(optimizer, _CLASSES[name][2])
    return {
        "ms": times,
        "module": getattr(op, "__name__", ""),
        "file": getattr(op, "__file__", ""),
        "variant": getattr(op, "__dswheels_variant__", ""),
    }


def main() -> int:
    for line in sys.stdin:
        if not line.strip():
            continue
        answer = _answer(json.loads(line))
        sys.stdout.write(MARK + json.dumps(answer) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
