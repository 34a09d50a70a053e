"""The CUDA parts of a toolchain: nvcc's facts, the arch list nvcc and torch both accept, DeepSpeed's CUDA check."""

from __future__ import annotations

from dswheels.core.compat import Compat, describe_versions
from dswheels.core.compat.entries import CudaToolkit
from dswheels.core.model import Cell, Reason
from dswheels.core.versions import VersionTuple, format_version, parse_version

__all__ = ["arch_value", "cuda_check", "nvcc_facts", "resolve_arch_list"]


def nvcc_facts(cell: Cell, nvcc: VersionTuple, compat: Compat) -> CudaToolkit | Reason:
    """compat.yml's facts of the nvcc that builds a CUDA cell, or why that nvcc cannot."""
    cuda = cell.variant.cuda
    if cuda is not None and nvcc[0] != cuda[0]:
        return Reason(
            rule="nvcc-major",
            message=f"nvcc {format_version(nvcc)} cannot build {cell.variant.name}: "
            "torch refuses a CUDA major mismatch",
            fix=f"install a CUDA {cuda[0]}.x toolkit, ideally {cell.variant.cuda_text}",
            source="cpp-extension _check_cuda_version",
        )
    toolkit = compat.cuda.get(nvcc)
    if toolkit is None:
        return Reason(
            rule="nvcc-facts",
            message=f"compat.yml has no facts for CUDA {format_version(nvcc)}",
            fix=f"use a toolkit compat.yml knows ({describe_versions(sorted(compat.cuda))}) or add it there",
            source="compat.yml cuda",
        )
    return toolkit


def _arch_token_sm(token: str) -> str:
    """``8.6`` -> ``86``; ``9.0a`` -> ``90a``; ``12.0+PTX`` -> ``120``."""
    return token.removesuffix("+PTX").replace(".", "")


def arch_value(token: str) -> VersionTuple:
    base = token.removesuffix("+PTX").rstrip("af")
    return parse_version(base)


def resolve_arch_list(
    cell: Cell,
    nvcc: CudaToolkit,
    compat: Compat,
    override: tuple[str, ...] | None,
) -> tuple[tuple[str, ...], list[str]] | str:
    notes: list[str] = []
    if override is not None:
        wanted = override
        notes.append(f"arch list from the matrix: {';'.join(override)}")
    else:
        row = compat.torch_arch_list(cell.torch, cell.variant.name)
        if row is None:
            return f"no TORCH_CUDA_ARCH_LIST known for torch {format_version(cell.torch)} {cell.variant.name}"
        wanted = row.lists[cell.platform.os]
        if row.inferred:
            notes.append(f"torch's arch list for {cell.variant.name} on {cell.platform.os} is inferred ({row.source})")
    accepted = compat.arch_tokens(cell.torch)
    kept: list[str] = []
    for token in wanted:
        base = token.removesuffix("+PTX")
        if base not in accepted:
            notes.append(f"dropped {token}: torch {format_version(cell.torch)} does not accept it")
        elif _arch_token_sm(token) not in nvcc.sm:
            notes.append(f"dropped {token}: nvcc {format_version(nvcc.minor)} cannot target sm_{_arch_token_sm(token)}")
        else:
            kept.append(token)
    if not kept:
        return (
            f"no arch of {';'.join(wanted)} can be built by nvcc {format_version(nvcc.minor)} "
            f"for torch {format_version(cell.torch)}"
        )
    return tuple(kept), notes


def cuda_check(cell: Cell, nvcc: VersionTuple, compat: Compat) -> tuple[bool, str]:
    torch_cuda = cell.variant.cuda
    if torch_cuda is None:
        return False, "cpu variant: no CUDA, no check"
    ds = format_version(cell.deepspeed)
    if nvcc == torch_cuda:
        return False, f"nvcc {format_version(nvcc)} = torch CUDA {format_version(torch_cuda)}: DeepSpeed's check passes"
    ok = compat.mismatch_ok(cell.deepspeed, nvcc[0])
    if nvcc in ok and torch_cuda in ok:
        return False, (
            f"nvcc {format_version(nvcc)} != torch CUDA {format_version(torch_cuda)}, both in DeepSpeed {ds}'s "
            "minor-mismatch list: the check passes"
        )
    listed = f"its CUDA {nvcc[0]} list is {describe_versions(sorted(ok))}" if ok else f"it has no CUDA {nvcc[0]} list"
    return True, (
        f"DS_SKIP_CUDA_CHECK=1: nvcc {format_version(nvcc)} != torch CUDA {format_version(torch_cuda)} and DeepSpeed "
        f"{ds} would refuse ({listed}); torch itself only warns on a minor mismatch"
    )
