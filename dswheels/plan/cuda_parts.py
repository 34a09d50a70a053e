"""The CUDA parts of a toolchain: nvcc's facts, the arch list nvcc and torch both accept, DeepSpeed's CUDA check."""

from __future__ import annotations

from dswheels.cuda.redist import missing_components, recorded_release, redist_json_name, redist_platform
from dswheels.kernel.compat import Compat, describe_versions
from dswheels.kernel.compat.entries import CudaToolkit
from dswheels.kernel.model import Cell, Reason
from dswheels.kernel.platform_traits import traits
from dswheels.kernel.versions import VersionTuple, format_version, parse_version

__all__ = ["arch_value", "cuda_check", "nvcc_facts", "redist_reason", "resolve_arch_list"]

_RECORD_HINT = "record NVIDIA's {name} and pin it (dswheels/cuda_redist/README.md)"


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
        key = traits(cell.platform).compat_key
        row = compat.torch_arch_list(cell.torch, cell.variant.name, key)
        if row is None:
            return (
                f"no TORCH_CUDA_ARCH_LIST known for torch {format_version(cell.torch)} {cell.variant.name} "
                f"on {cell.platform.value}"
            )
        wanted = row.lists[key]
        if row.inferred:
            notes.append(f"torch's arch list for {cell.variant.name} on {key} is inferred ({row.source})")
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


def redist_reason(cell: Cell, toolkit: CudaToolkit, compat: Compat, *, required: bool) -> Reason | str | None:
    """Why a build runner cannot install ``toolkit`` for the cell's OS from NVIDIA's archives.

    The job installs exactly compat.yml's components from ``redistrib_<install>.json``, pinned
    by ``redist_sha256`` (:mod:`dswheels.cuda.redist`). A component the recorded JSON
    lacks (renamed, or not built for the platform) would fail the job after it started: a
    :class:`Reason`, so the plan says it first. A toolkit with no pinned JSON cannot be
    installed at all: a Reason when ``required`` (the plan of the wheels workflow's jobs),
    else a note (str) that says so.
    """
    name = redist_json_name(toolkit.install)
    minor = format_version(toolkit.minor)
    release = recorded_release(compat, toolkit)
    if release is None:
        message = (
            f"CUDA {toolkit.install}: compat.yml pins no {name} (cuda.{minor}.redist_sha256), so a build runner "
            "cannot install it from NVIDIA's archives"
        )
        if not required:
            return f"{message} (`dswheels ci plan` drops the cell): {_RECORD_HINT.format(name=name)}"
        return Reason(
            rule="cuda-redist",
            message=message,
            fix=_RECORD_HINT.format(name=name) + ", or build with a toolkit that has one (`toolkits:` in the matrix)",
            source="compat.yml cuda, nvidia-redist",
        )
    missing = missing_components(release, compat.components_for(toolkit.minor), cell.platform)
    if missing:
        return Reason(
            rule="cuda-redist",
            message=f"CUDA {toolkit.install}: {name} has no {redist_platform(cell.platform)} archive of "
            f"{', '.join(missing)}, a component compat.yml's cuda_components list needs",
            fix="correct the component's `redist` name in compat.yml cuda_components (NVIDIA renamed or "
            "split it?), or its `cuda` range",
            source="compat.yml cuda_components, nvidia-redist",
        )
    return None
