"""Plan-time judgement of a cell's ops by their recorded flags (:mod:`dswheels.kernel.compiler_flags.record`).

What a maintainer expects, and why:

* warnings (an option ``cl``/``link`` ignore) are harmless and the wheel is as good: one note
  per tool and message, so the plan says what the compilers will print;
* a fatal flag means the op cannot compile as dswheels patches it (a new DeepSpeed release
  broke the patches, or nobody has patched it yet). With ``ops: all`` the op is left out with
  the reason (op, flag, compiler, version), like every op that cannot be built on a platform,
  and the rest of the wheel still ships; the left-out reason is in the plan table and JSON.
  With an explicit op list the maintainer asked for that op, so the cell is dropped (rule
  ``op-flags``) instead of silently shipping a wheel without it. A rejected ``-gencode`` flag
  is the cell's arch list's fault, not the op's (DeepSpeed <= 0.16.3 spells arch 10.0 as
  ``compute_1.``, for every CUDA op), so that drops the cell too, with the arch list as the fix;
* a release with no record is planned as before, with a note: the build judges the flags of
  its own tree before compiling anyway; so is an op whose ``builder()`` raised on the recording
  machine (it had no CUTLASS, deepspeed-kernels or GPU: a fact of that machine, not of the flags).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from dswheels.kernel.compiler_flags.issue import Finding
from dswheels.kernel.compiler_flags.judge import judge_op, summarize
from dswheels.kernel.compiler_flags.op_flag_set import OpFlags
from dswheels.kernel.compiler_flags.record import FLAGS_FILE, FlagRecord
from dswheels.kernel.model import Cell, OpPlan, Reason
from dswheels.kernel.platform_traits import traits
from dswheels.kernel.versions import format_version

__all__ = ["screen_ops"]

_ARCH_FLAGS = ("-gencode", "--generate-code")  # spelled from the cell's arch list by DeepSpeed


def _reason(findings: Sequence[Finding]) -> str:
    first = findings[0]
    issue = first.issue
    what = f"{issue.flag!r} ({issue.code}: {issue.why})" if issue.flag else issue.why
    more = f" and {len(findings) - 1} more" if len(findings) > 1 else ""
    return f"{first.tool} rejects its flag {what}{more} in DeepSpeed {first.deepspeed} on {first.platform}"


def _is_arch(finding: Finding) -> bool:
    return finding.issue.flag.startswith(_ARCH_FLAGS)


def _without_arch_flags(flags: OpFlags) -> OpFlags:
    if flags.nvcc is None:
        return flags
    return replace(flags, nvcc=tuple(f for f in flags.nvcc if not f.startswith(_ARCH_FLAGS)))


def _with_baseline(flags: OpFlags, swap: Mapping[str, str]) -> OpFlags:
    """``flags`` with the record's CPU baseline flags replaced by the cell's (``swap``: old -> new)."""
    if not swap:
        return flags
    return replace(
        flags,
        cxx=tuple(swap.get(f, f) for f in flags.cxx),
        nvcc=None if flags.nvcc is None else tuple(swap.get(f, f) for f in flags.nvcc),
    )


def screen_ops(
    cell: Cell,
    ops: OpPlan,
    *,
    arch_list: str,
    nvcc_flags: Sequence[str],
    record: FlagRecord,
    explicit: bool,
    baseline_swap: Mapping[str, str] | None = None,
) -> tuple[OpPlan, tuple[str, ...], Reason | None]:
    """(ops with those that cannot compile left out, notes, a Reason to drop the cell or None).

    ``baseline_swap``: the record's CPU baseline flags -> the cell's, where they differ (the record is made
    with one baseline, ``-march=x86-64-v2 -D__SCALAR__``; an aarch64 cell's builders say ``-march=armv8.2-a
    -D__NEON__`` instead, and nothing else of their flags changes)."""
    swap = baseline_swap or {}
    version = format_version(cell.deepspeed)
    key = (traits(cell.platform).sys_platform, "cuda" if cell.variant.is_cuda else "cpu", arch_list)
    found = record.lookup(version, key)
    if found is None:
        why = record.not_recorded.get(f"{version} {key[0]} {key[1]}")
        return (
            ops,
            (
                f"DeepSpeed {version}'s op flags are not recorded in {FLAGS_FILE} for {key[0]}/{key[1]}"
                + (f" ({why})" if why else "")
                + ": the build judges them before compiling",
            ),
            None,
        )
    recorded, exact = found
    notes: list[str] = []
    if not exact:
        notes.append(
            f"{FLAGS_FILE} has DeepSpeed {version}'s flags for other arch lists than {arch_list}: its -gencode flags "
            "are judged by the build before compiling"
        )
    build: list[tuple[str, str]] = []
    left_out = list(ops.left_out)
    warnings: list[Finding] = []
    rejected: dict[str, list[Finding]] = {}
    for name, var in ops.build:
        flags = recorded.get(name)
        if flags is None or flags.error:
            # builder() raised on the recording machine (no CUTLASS, no deepspeed-kernels, no GPU): a fact of
            # that machine, not of the flags; the build evaluates the op where it has what it needs
            if flags is not None:
                notes.append(f"{name}: no recorded flags ({flags.error}): the build judges them before compiling")
            build.append((name, var))
            continue
        judged = _with_baseline(flags if exact else _without_arch_flags(flags), swap)
        findings = judge_op(judged, platform=cell.platform, deepspeed=version, nvcc_append=nvcc_flags, nvcc=record.nvcc)
        fatal = [f for f in findings if f.fatal]
        warnings += [f for f in findings if not f.fatal]
        if fatal:
            rejected[name] = fatal
            left_out.append((name, _reason(fatal)))
        else:
            build.append((name, var))
    notes += [f"flags: {line} (harmless)" for line in summarize(warnings)]
    arch_fault = next((name for name, fatal in rejected.items() if any(_is_arch(f) for f in fatal)), None)
    if rejected and (explicit or arch_fault):
        name = arch_fault or next(iter(rejected))
        fatal = rejected[name]
        return (
            ops,
            tuple(notes),
            Reason(
                rule="op-flags",
                message=f"{name}: {_reason(fatal)}"
                + (f"; also {', '.join(list(rejected)[1:])}" if len(rejected) > 1 else "")
                + (f"; the arch list {arch_list} is the cell's, not one op's" if arch_fault else ""),
                fix=(
                    f"set the matrix's arch_lists for {cell.variant.name} to archs DeepSpeed {version} spells right"
                    if arch_fault
                    else "leave the op out of the matrix's ops list, or teach dswheels' source patches this DeepSpeed "
                    "(dswheels/building/patches.py)"
                ),
                source=f"{FLAGS_FILE}, recorded from DeepSpeed's sdist by `nox -s update_flags`; "
                f"{fatal[0].issue.source}",
            ),
        )
    return OpPlan(build=tuple(build), left_out=tuple(left_out)), tuple(notes), None
