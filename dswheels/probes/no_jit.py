"""DeepSpeed with JIT compilation forbidden: load its ops, or train with them, in the target interpreter.

``verify``, ``install`` and ``smoke`` all prove that a wheel's ops come from the wheel, and all
run this one script for it. Before DeepSpeed does anything, :func:`forbid_jit` replaces
``OpBuilder.jit_load`` (what DeepSpeed calls when it finds no usable prebuilt op) with one that
raises :class:`WouldJitError`, so a wheel that lacks an op, or was built for another torch or
accelerator, fails loudly instead of compiling for minutes and passing. The caller also runs it
with an empty ``TORCH_EXTENSIONS_DIR`` and checks that it stays empty.

``python no_jit.py load REQUEST``: ``REQUEST`` is ``{"ops": [names] | null}``; null: every op
``installed_ops`` marks. Prints :data:`LOAD_MARK` and per op the module it loaded and whether
it is the prebuilt one (``builder.absolute_name()``) and, for an op built once per ISA level, the
variant it loaded; with DeepSpeed's and torch's versions, torch's CPU capability and
both accelerators (the caller sets ``DS_ACCELERATOR``: DeepSpeed loads a prebuilt op only under
the accelerator it was built for).

``python no_jit.py train SPEC``: a few steps of a tiny model through ``deepspeed.initialize``
(``SPEC``: device, DeepSpeed config, steps, hidden size); prints :data:`TRAIN_MARK` with the
losses, samples/s and peak memory. ``python no_jit.py adam``: DeepSpeedCPUAdam against
``torch.optim.AdamW`` for 20 steps; prints :data:`ADAM_MARK` with the largest difference.

Standard library only (besides the torch and DeepSpeed it tests), Python 3.10+.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

LOAD_MARK = "DSWHEELS-LOAD "
TRAIN_MARK = "DSWHEELS-SMOKE "
ADAM_MARK = "DSWHEELS-ADAM "


class WouldJitError(RuntimeError):
    """DeepSpeed was about to JIT-compile an op: the wheel has no usable prebuilt one."""


def forbid_jit() -> None:
    """Make every JIT compile of this process raise :class:`WouldJitError` (imports DeepSpeed's op builder)."""
    builder = importlib.import_module("deepspeed.ops.op_builder.builder")

    def refuse(self: Any, *_args: object, **_kwargs: object) -> NoReturn:  # noqa: ANN401 - DeepSpeed's OpBuilder
        msg = f"{self.name} would be JIT-compiled: DeepSpeed found no usable prebuilt module for this accelerator"
        raise WouldJitError(msg)

    builder.OpBuilder.jit_load = refuse


def _err(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _importable(package: str) -> bool:
    """Whether ``package`` would import, without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return False
    return spec is not None and bool(spec.submodule_search_locations)


def _load_one(all_ops: dict[str, Any], name: str) -> dict[str, object]:
    builder = all_ops.get(name)
    if builder is None:
        return {"error": "DeepSpeed has no builder for it"}
    entry: dict[str, object] = {"module": builder.absolute_name()}
    start = time.perf_counter()
    try:
        module = builder.load()
    except Exception as exc:  # noqa: BLE001 - reported per op; the others still count
        entry["error"] = f"load() raised {_err(exc)}"
    else:
        entry["loaded"] = module.__name__
        entry["file"] = getattr(module, "__file__", "") or ""
        entry["prebuilt"] = module.__name__ == builder.absolute_name()
        # an op built once per ISA level: the variant its module loaded (dswheels.probes.isa_dispatch)
        entry["variant"] = str(getattr(module, "__dswheels_variant__", "") or "")
    entry["seconds"] = round(time.perf_counter() - start, 3)
    return entry


def load(ops: Sequence[str] | None) -> dict[str, object]:
    """Load ``ops`` (None: every installed op) with JIT forbidden; what happened, as :func:`main` prints it."""
    result: dict[str, object] = {"version": "", "torch": "", "torch_cuda": None, "accelerator_runtime": ""}
    result.update(accelerator_wheel="", torch_info={}, ops={}, error="")
    if not _importable("deepspeed"):
        result["error"] = f"deepspeed is not importable in {sys.executable}"
        return result
    try:
        torch = importlib.import_module("torch")
        result.update(torch=str(torch.__version__), torch_cuda=torch.version.cuda)
        ask = getattr(getattr(getattr(torch, "backends", None), "cpu", None), "get_cpu_capability", None)
        result["cpu_capability"] = str(ask()) if ask is not None else ""  # what picks an ISA variant
        forbid_jit()
        info = importlib.import_module("deepspeed.git_version_info")
        installed = {str(k): bool(v) for k, v in dict(info.installed_ops).items()}
        result.update(version=str(info.version), accelerator_wheel=str(getattr(info, "accelerator_name", "")))
        result["torch_info"] = {str(k): str(v) for k, v in dict(getattr(info, "torch_info", {})).items()}
        result["accelerator_runtime"] = importlib.import_module("deepspeed.accelerator").get_accelerator()._name  # noqa: SLF001
        names = sorted(n for n, on in installed.items() if on) if ops is None else list(ops)
        all_ops = importlib.import_module("deepspeed.ops.op_builder.all_ops").ALL_OPS if names else {}
        result["ops"] = {name: _load_one(all_ops, name) for name in names}
    except Exception as exc:  # noqa: BLE001 - DeepSpeed that does not import is the answer
        result["error"] = f"import failed: {_err(exc)}"
    return result


def _peak_rss_mb() -> float:
    if sys.platform == "win32":
        psutil = importlib.import_module("psutil")  # a DeepSpeed requirement
        peak = float(psutil.Process().memory_info().peak_wset) / 2**20
    else:
        import resource  # noqa: PLC0415 - POSIX only

        peak = float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) / 1024
    return peak


def train(spec: dict[str, Any]) -> dict[str, object]:
    """A tiny regression model trained through ``deepspeed.initialize`` with ``spec["config"]``."""
    torch = importlib.import_module("torch")
    deepspeed = importlib.import_module("deepspeed")
    device, config = spec["device"], spec["config"]
    torch.manual_seed(0)
    deepspeed.init_distributed(dist_backend="gloo" if device == "cpu" else None)  # cuda: nccl, gloo on Windows
    hidden = spec["hidden"]
    nn = torch.nn
    model = nn.Sequential(nn.Linear(32, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))
    engine, _opt, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    gen = torch.Generator().manual_seed(1)
    w_true = torch.randn(32, 1, generator=gen)
    dtype = torch.bfloat16 if config.get("bf16", {}).get("enabled") else torch.float32
    mb, ga = config["train_micro_batch_size_per_gpu"], config["gradient_accumulation_steps"]
    cuda = device == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    losses: list[float] = []
    start = time.perf_counter()
    for step in range(spec["steps"]):
        if step == 1:  # the first step is warm-up
            if cuda:
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
    if cuda:
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    return {
        "losses": losses,
        "samples_per_s": (spec["steps"] - 1) * mb * ga / elapsed,
        "peak_memory_mb": torch.cuda.max_memory_allocated() / 2**20 if cuda else _peak_rss_mb(),
        "optimizer": type(engine.optimizer).__name__,
        "inner_optimizer": type(getattr(engine.optimizer, "optimizer", engine.optimizer)).__name__,
    }


def adam() -> dict[str, object]:
    """DeepSpeedCPUAdam and torch's AdamW from the same start with the same gradients: the largest gap."""
    torch = importlib.import_module("torch")
    ds_adam: ModuleType = importlib.import_module("deepspeed.ops.adam")
    torch.manual_seed(0)
    shape = (1024, 33)
    base = torch.randn(shape)
    p_ds, p_pt = torch.nn.Parameter(base.clone()), torch.nn.Parameter(base.clone())
    kw: dict[str, Any] = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01}
    ds = ds_adam.DeepSpeedCPUAdam([p_ds], adamw_mode=True, **kw)
    pt = torch.optim.AdamW([p_pt], **kw)
    worst = 0.0
    for _ in range(20):
        grad = torch.randn(shape)
        p_ds.grad, p_pt.grad = grad.clone(), grad.clone()
        ds.step()
        pt.step()
        worst = max(worst, float((p_ds.detach() - p_pt.detach()).abs().max().item()))
    return {"max_abs_diff": worst, "steps": 20, "optimizer": type(ds).__name__}


def _load_main(args: Sequence[str]) -> tuple[str, dict[str, object]]:
    request = json.loads(args[0]) if args else {}
    ops = request.get("ops")
    return LOAD_MARK, load(None if ops is None else [str(o) for o in ops])


def _train_main(args: Sequence[str]) -> tuple[str, dict[str, object]]:
    forbid_jit()
    return TRAIN_MARK, train(json.loads(args[0]))


def _adam_main(_args: Sequence[str]) -> tuple[str, dict[str, object]]:
    forbid_jit()
    return ADAM_MARK, adam()


_MODES: dict[str, Callable[[Sequence[str]], tuple[str, dict[str, object]]]] = {
    "load": _load_main,
    "train": _train_main,
    "adam": _adam_main,
}


def main(argv: Sequence[str]) -> int:
    """``argv[1]``: load | train | adam; what follows is the mode's argument. A failure of train or adam
    is raised (its traceback is the caller's evidence); load reports failures in its answer."""
    if len(argv) < 2 or argv[1] not in _MODES:
        sys.stderr.write(f"usage: {Path(argv[0]).name} {{{'|'.join(_MODES)}}} [JSON]\n")
        return 2
    mark, answer = _MODES[argv[1]](argv[2:])
    sys.stdout.write(mark + json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
