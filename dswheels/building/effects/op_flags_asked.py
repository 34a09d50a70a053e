"""DeepSpeed's op flags, evaluated in the build interpreter and judged before anything compiles.

:func:`run_probe` runs :mod:`dswheels.probes.op_flags` (by file path, in the interpreter that
has the cell's torch) over one or more source trees. :func:`check_tree_flags` is the build's
check: the planned ops of the tree it is about to compile, on the real platform with the real
toolkit, judged for the platform's compilers (:func:`dswheels.kernel.compiler_flags.judge.judge_op`); a
flag a compiler would stop at fails the build before the compile, naming op, flag and version.
:func:`apply_flag_patches` applies the source patches that make such flags acceptable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from dswheels.building.patches import (
    BUILDER_FILES,
    CPU_BUILDER_FILES,
    PatchError,
    patch_arch_list_leak,
    patch_cpu_builder_win32,
)
from dswheels.host import proc
from dswheels.host.log import get_reporter
from dswheels.kernel.compiler_flags.issue import Finding
from dswheels.kernel.compiler_flags.judge import judge_op, narrowed_archs, sass_archs, summarize
from dswheels.kernel.compiler_flags.op_flag_set import (
    MARK,
    EvalContext,
    ProbeAnswer,
    ProbeJob,
    parse_probe,
    probe_request,
)
from dswheels.kernel.compiler_flags.record import load_flag_record
from dswheels.kernel.errors import BuildError, DswheelsError
from dswheels.kernel.model import PlannedCell
from dswheels.kernel.platform_traits import traits
from dswheels.kernel.versions import format_version
from dswheels.probes import op_flags as _probe_module

__all__ = ["PROBE_SCRIPT", "apply_flag_patches", "check_tree_flags", "run_probe"]

PROBE_SCRIPT = Path(_probe_module.__file__)


def run_probe(
    python: Path | str,
    jobs: Sequence[ProbeJob],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    log_file: Path | None = None,
    cuda_home: str | None = None,
    error: type[DswheelsError] = BuildError,
    timeout: float = 900,
) -> ProbeAnswer:
    """What the builders of each job's tree hand the compilers (``cuda_home`` reads as ``$CUDA_HOME``)."""
    result = proc.capture(
        [str(python), str(PROBE_SCRIPT), probe_request(jobs)],
        cwd=cwd,
        env=env,
        log_file=log_file,
        timeout=timeout,
        error=error,
        what="DeepSpeed's op builders (their compiler flags)",
    )
    payload = proc.marked_line(result.output, MARK)
    if payload is None:
        raise error(
            "DeepSpeed's op builders could not be evaluated for their compiler flags",
            details="\n".join(result.tail[-25:]),
            hint=f"full log: {log_file}" if log_file else "run it again with a log file",
        )
    return parse_probe(payload, cuda_home=cuda_home)


def _cell_context(planned: PlannedCell, *, isolate: bool) -> EvalContext:
    """Stand-ins for the cell's machine: its platform, toolkit, torch minor and arch list."""
    tc = planned.toolchain
    return EvalContext(
        platform=traits(planned.cell.platform).sys_platform,
        cuda=format_version(tc.nvcc) if planned.cell.variant.is_cuda and tc.nvcc else None,
        torch=format_version(planned.cell.torch),
        arch_list=tc.arch_list_text or None,
        isolate=isolate,
    )


def check_tree_flags(
    planned: PlannedCell, python: Path, src: Path, env: Mapping[str, str], log: Path, *, stand_in: bool = False
) -> dict[str, frozenset[int]]:
    """Judge the planned ops' flags of the patched tree ``src``; a fatal one raises :class:`BuildError`.

    The ops are evaluated in setup.py's order with nothing stood in for: the platform, torch,
    toolkit and ``TORCH_CUDA_ARCH_LIST`` are the build's own (``env``); and once more each op
    alone, to warn about archs an earlier op's ``filter_ccs`` takes from later ones. With
    ``stand_in`` (``build --prepare-only``, on any machine) the probe stands in for the cell's
    platform, toolkit, torch minor and arch list instead.

    Returns the SASS archs each CUDA op's builder asks nvcc for when built alone, which the
    built wheel must then carry (empty without an arch list).
    """
    version = format_version(planned.cell.deepspeed)
    if stand_in:
        arch_list = planned.toolchain.arch_list_text or None
        contexts = (_cell_context(planned, isolate=False),) + (
            (_cell_context(planned, isolate=True),) if arch_list else ()
        )
    else:
        arch_list = env.get("TORCH_CUDA_ARCH_LIST")
        contexts = (EvalContext(),) + ((EvalContext(arch_list=arch_list, isolate=True),) if arch_list else ())
    accelerator = planned.cell.variant.accelerator.value if stand_in else None
    job = ProbeJob(tree=str(src), accelerator=accelerator, ops=planned.ops.build_names, contexts=contexts)
    answer = run_probe(python, [job], env=env, cwd=src, log_file=log, cuda_home=env.get("CUDA_HOME"))
    if answer.jobs[0].error:
        raise BuildError(
            f"DeepSpeed {version}'s op builders cannot be imported in the build interpreter",
            details=answer.jobs[0].error,
            hint=f"full log: {log}",
        )
    flags = answer.jobs[0].results[0].ops
    nvcc_append = planned.toolchain.nvcc_flags if planned.cell.variant.is_cuda else ()
    nvcc = load_flag_record().nvcc
    findings: list[Finding] = []
    for name in planned.ops.build_names:
        if name in flags:  # an op DeepSpeed lacks is the ops probe's to report
            findings += judge_op(
                flags[name], platform=planned.cell.platform, deepspeed=version, nvcc_append=nvcc_append, nvcc=nvcc
            )
    fatal = [f for f in findings if f.fatal]
    if fatal:
        ops = list(dict.fromkeys(f.op for f in fatal))
        raise BuildError(
            f"DeepSpeed {version}'s flags for {', '.join(ops)} would stop the "
            f"{'/'.join(dict.fromkeys(f.tool for f in fatal))} compile on {planned.cell.platform.value}",
            details="\n".join(f.describe() for f in fatal),
            hint="nothing was compiled; leave the op(s) out of the matrix's ops list, or teach dswheels' source "
            f"patches this DeepSpeed (dswheels/building/patches.py); full log: {log}",
        )
    reporter = get_reporter()
    for line in summarize(findings):
        reporter.info(f"flags: {line} (harmless)")
    if not arch_list:
        return {}
    alone = answer.jobs[0].results[1].ops
    for line in narrowed_archs(flags, alone):
        reporter.warning(f"{line}: DeepSpeed {version} builds it for fewer archs than {arch_list}")
    return {name: sass_archs(op) for name, op in alone.items() if op.cuda}


def apply_flag_patches(src: Path, planned: PlannedCell) -> list[str]:
    """The source patches that make DeepSpeed's flags what the cell needs; notes for the manifest.

    CUDA cells: one op's filtered arch list no longer narrows the ops built after it (0.19.0+,
    :func:`~dswheels.building.patches.patch_arch_list_leak`). Windows: ``CPUOpBuilder.cxx_args()``
    gets a win32 branch (cl stops at its ``-Wno-reorder``).
    """
    notes: list[str] = []
    if planned.cell.variant.is_cuda:
        notes += _patch_files(
            src,
            BUILDER_FILES,
            lambda text, rel: patch_arch_list_leak(text, filename=rel),
            planned=planned,
            note="OpBuilder.compute_capability_args() sets TORCH_CUDA_ARCH_LIST for JIT builds only "
            "(one op's filtered archs narrowed every later op)",
            hint="the TORCH_CUDA_ARCH_LIST patch (dswheels/building/patches.py patch_arch_list_leak) needs updating",
        )
    if traits(planned.cell.platform).compiler == "msvc":  # cl rejects the GCC options
        notes += _patch_files(
            src,
            CPU_BUILDER_FILES,
            lambda text, rel: (patch_cpu_builder_win32(text, filename=rel), 1),
            planned=planned,
            note="CPUOpBuilder.cxx_args() on win32 -> ['-O2', cpu_arch, simd] (cl rejects -Wno-reorder)",
            hint="this DeepSpeed's op_builder/cpu/builder.py differs from 0.14.3-0.19.8; the win32 cxx_args patch "
            "(dswheels/building/patches.py patch_cpu_builder_win32) needs updating",
        )
    return notes


def _patch_files(
    src: Path,
    files: Sequence[str],
    patch: Callable[[str, str], tuple[str, int]],
    *,
    planned: PlannedCell,
    note: str,
    hint: str,
) -> list[str]:
    notes: list[str] = []
    seen: set[Path] = set()
    for rel in files:
        path = src / rel
        if not path.exists() or path.resolve() in seen:
            continue
        seen.add(path.resolve())
        try:
            text, count = patch(path.read_text(encoding="utf-8"), rel)
        except PatchError as exc:
            raise BuildError(
                f"cannot patch DeepSpeed {format_version(planned.cell.deepspeed)}'s {rel}: {exc}", hint=hint
            ) from None
        if count:
            path.write_text(text, encoding="utf-8")
            notes.append(f"patched {rel}: {note}")
    return notes
