"""Checks of DeepSpeed itself: the installed one's build (prebuilt ops, torch and CUDA), the index."""

from __future__ import annotations

from dswheels.doctor.checkup import Check, Status, Verdict
from dswheels.doctor.environment_view import Env
from dswheels.kernel.versions import format_version

__all__ = ["check_deepspeed", "check_index"]


def check_deepspeed(env: Env) -> Check:
    ds = env.facts.deepspeed
    if ds is None:
        return Check("deepspeed", Status.OK, "DeepSpeed is not installed", fix="dswheels install --index URL")
    if ds.error:
        return Check(
            "deepspeed",
            Status.WARN,
            f"DeepSpeed {ds.version}: cannot read its build info",
            detail=ds.error,
            fix="reinstall DeepSpeed from a wheel (dswheels install)",
        )
    prebuilt = sorted(name for name, on in ds.installed_ops.items() if on)
    title = f"DeepSpeed {ds.version} ({ds.accelerator} accelerator, {len(prebuilt)} prebuilt ops)"
    detail = "prebuilt: " + (", ".join(prebuilt) if prebuilt else "none")
    torch = env.facts.torch
    if torch is not None and env.torch_minor is not None and ds.torch_version:
        built = ds.torch_version
        if built != format_version(env.torch_minor):
            return Check(
                "deepspeed",
                Status.FAIL,
                title,
                detail=f"built with torch {built}, torch {torch.version} is installed: loading any prebuilt op "
                "raises 'PyTorch version mismatch'. " + detail,
                fix=f"install the DeepSpeed wheel for torch {format_version(env.torch_minor)} (dswheels install), or "
                f"torch {built}",
            )
    if torch is not None and torch.cuda and ds.accelerator == "cuda" and ds.cuda_version not in ("", "0.0"):
        torch_cuda = ".".join(torch.cuda.split(".")[:2])
        if ds.cuda_version != torch_cuda:
            return Check(
                "deepspeed",
                Status.WARN,
                title,
                detail=f"built with CUDA {ds.cuda_version}, torch is CUDA {torch_cuda}: DeepSpeed refuses to load "
                "prebuilt CUDA ops on a GPU when the CUDA major.minor differ. " + detail,
                fix=f"install the wheel for torch {torch.version} (dswheels install)",
            )
    if not prebuilt:
        return Check(
            "deepspeed",
            Status.WARN,
            title,
            detail="no op is prebuilt: every op JIT-compiles on first use (needs a toolkit, a compiler and ninja)",
            fix="dswheels install --index URL installs a wheel with the ops prebuilt",
        )
    if torch is not None and torch.cuda and ds.accelerator != "cuda" and env.gpus:
        return Check(
            "deepspeed",
            Status.WARN,
            title,
            detail=f"built for the {ds.accelerator} accelerator but this machine runs CUDA: DeepSpeed JIT-compiles "
            "every CUDA op. " + detail,
            fix="dswheels install --index URL (a CUDA wheel)",
        )
    return Check("deepspeed", Status.OK, title, detail=detail)


def check_index(verdict: Verdict) -> list[Check]:
    index = verdict.index
    if index is None:
        return []
    if index.error:  # it was asked for: what it would say cannot be known, so the answer is not OK
        return [
            Check(
                "index",
                Status.FAIL,
                f"cannot read the index {index.url}",
                detail=index.error,
                fix="check the --index URL (the site's base URL or directory) and the network, then run again",
            )
        ]
    if verdict.cell is None:
        return []
    if verdict.wheel is not None:
        return [Check("index", Status.OK, f"published: {verdict.wheel.filename}", detail=verdict.wheel.url)]
    return [
        Check(
            "index",
            Status.WARN,
            f"no published wheel for {verdict.cell_id}",
            detail="; ".join(verdict.nearest),
            fix="see the verdict: change torch to a published combination, or build locally",
        ),
    ]
