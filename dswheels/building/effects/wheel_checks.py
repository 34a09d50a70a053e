"""What a freshly built wheel must hold before it leaves the build: every planned op, and only allowed code.

Right after the compile (:func:`check_planned_ops`): every planned op is marked built in
``installed_ops`` with its extension file, for the accelerator DeepSpeed was asked for. After
post-processing (:func:`check_postprocessed`): no instruction above the CPU baseline outside
run-time dispatched code, SASS and PTX only for the planned archs, and the Linux runtime floor
said out loud (a warning when it is above the plan's promise: ``dswheels verify`` fails such a wheel).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from dswheels.building.effects.postprocess import Postprocessed
from dswheels.building.output_reading import OpSources
from dswheels.host.log import get_reporter
from dswheels.host.wheel_file import WheelContents, read_wheel
from dswheels.kernel.binaries.fatbin import GpuCode, judge_gpu_code
from dswheels.kernel.binaries.isa import IsaReport
from dswheels.kernel.binaries.linux_runtime import RuntimeFloor, exceeds, floor_of
from dswheels.kernel.compat import Compat
from dswheels.kernel.errors import BuildError
from dswheels.kernel.isa_variants import DISPATCH_MODULE, variant_problems
from dswheels.kernel.model import PlannedCell
from dswheels.kernel.naming import cell_id
from dswheels.kernel.platform_traits import traits
from dswheels.kernel.wheel_contents import WheelContentError, check_ops, extension_for_module

__all__ = ["check_planned_ops", "check_postprocessed", "report_runtime"]


def check_planned_ops(
    planned: PlannedCell, built: Path, *, ops: Sequence[OpSources], accelerator: str, lines: Sequence[str], log: Path
) -> WheelContents:
    """The wheel ``built``, read; BuildError unless every op of ``ops`` is in it (``lines``: the compile's output)."""
    cid = cell_id(planned.cell)
    contents = read_wheel(built, error=BuildError)
    installed = contents.installed
    if installed.accelerator_name != accelerator:
        raise BuildError(f"{cid}: the wheel says accelerator {installed.accelerator_name!r}, expected {accelerator!r}")
    found = check_ops(
        [op.name for op in ops],
        installed=installed,
        modules={op.name: op.extension_modules for op in ops},
        names=contents.names,
    )
    variants = _variant_problems(ops, contents)
    if found.missing or found.no_file or variants:
        details = []
        if found.missing:
            details.append(f"not in installed_ops: {', '.join(found.missing)} (DeepSpeed skipped them)")
        if found.no_file:
            details.append(f"no extension file in the wheel: {', '.join(found.no_file)}")
        details += variants
        named = [*found.missing, *found.no_file, *(p.split(":", 1)[0] for p in variants)]
        excerpt = [ln for ln in lines if any(name in ln for name in named)][-20:]
        raise BuildError(
            f"{cid}: planned op(s) missing from the wheel: {', '.join(named)}",
            details="\n".join([*details, "log lines naming them:", *excerpt]),
            hint=f"full log: {log}",
        )
    return contents


def _variant_problems(ops: Sequence[OpSources], contents: WheelContents) -> list[str]:
    """The ops built once per ISA level: as the builders said before the compile, each with its dispatch and
    every level's extension (``op: problem`` lines)."""
    try:
        table = contents.variants
    except WheelContentError as exc:
        return [f"{DISPATCH_MODULE}: {exc}"]
    expected = {op.name: op.variants for op in ops if op.variants}
    problems = [
        f"{name}: its builder passes cpu_arch()/simd_width() on, but setup.py built it once"
        for name in sorted(set(expected) - set(table.ops))
    ]
    problems += [f"{name}: built once per ISA level, unexpectedly" for name in sorted(set(table.ops) - set(expected))]
    problems += [
        f"{name}: built at {', '.join(s for s, _l in table.levels)}, expected {', '.join(s for s, _l in levels)}"
        for name, levels in expected.items()
        if name in table.ops and tuple(levels) != table.levels
    ]
    extension_of = {m: extension_for_module(m, contents.names) for op in table.ops for m in table.modules(op)}
    return problems + variant_problems(table, contents.names, extension_of)


def check_postprocessed(
    planned: PlannedCell,
    pp: Postprocessed,
    *,
    ops: Sequence[OpSources],
    names: Sequence[str],
    compat: Compat,
    levels: Mapping[str, str] | None = None,
) -> RuntimeFloor | None:
    """The CPU level of every extension and the GPU code (BuildError), then what the wheel needs of the OS's
    runtime (reported) where its wheels promise a floor (Linux's; None elsewhere: a Windows wheel's DLLs come
    with torch and the CUDA wheels). ``levels``: an ISA variant's extension -> its level (the others: the
    baseline)."""
    _check_cpu_baseline(planned, pp.isa, levels or {})
    _check_gpu_code(planned, pp.gpu, ops, names)
    return report_runtime(planned, pp.needs, compat) if traits(planned.cell.platform).runtime_floor else None


def _check_cpu_baseline(planned: PlannedCell, isa: Mapping[str, IsaReport], levels: Mapping[str, str]) -> None:
    """No extension uses instructions above its level (the plan's CPU baseline, or its ISA variant's) outside
    run-time dispatched code."""
    reporter = get_reporter()
    baseline = planned.toolchain.cpu_baseline
    bad = {name: rep for name, rep in isa.items() if not rep.ok}
    if bad:
        raise BuildError(
            f"{cell_id(planned.cell)}: compiled code uses instructions above its level",
            details="\n".join(f"{name}: {rep.describe(levels.get(name, baseline))}" for name, rep in bad.items()),
            hint="the portable-CPU patch did not reach this code, or DeepSpeed compiles it for newer CPUs without "
            "checking at run time; do not publish this wheel (leave the op out of the matrix)",
        )
    for name, rep in isa.items():
        if rep.violations:
            reporter.info(f"  {name.rsplit('/', 1)[-1]}: {rep.describe(levels.get(name, baseline))}")
    if isa:
        total = sum(r.instructions for r in isa.values())
        above = sorted({levels[name] for name in isa if name in levels})
        variants = f"; {len(levels)} ISA variant(s) within their own level ({', '.join(above)})" if levels else ""
        reporter.info(
            f"CPU baseline {baseline} holds: {total} instructions in {len(isa)} extension(s), "
            f"none above its level outside run-time dispatched code{variants}",
        )


def _check_gpu_code(
    planned: PlannedCell, gpu: Mapping[str, GpuCode], ops: Sequence[OpSources], names: Sequence[str]
) -> None:
    """Every CUDA extension carries SASS only for planned archs (and at least one), PTX only where planned, and
    SASS for every arch its op's builder asked nvcc for."""
    if not planned.cell.variant.is_cuda:
        return
    problems: list[str] = []
    for op in ops:
        ext = extension_for_module(op.extension_modules[0], names)
        code = gpu.get(ext or "")
        if code is None:
            continue
        get_reporter().info(f"  {op.name}: {code.describe()}")
        judged = judge_gpu_code(code, planned.toolchain.arch_list, op.sass)
        problems += [f"{op.name}: {problem}" for problem in judged.problems()]
    if problems:
        raise BuildError(
            f"{cell_id(planned.cell)}: the GPU code does not match the arch list {planned.toolchain.arch_list_text}",
            details="\n".join(problems),
            hint="TORCH_CUDA_ARCH_LIST did not reach nvcc as planned",
        )


def report_runtime(
    planned: PlannedCell, needs: Mapping[str, Mapping[str, tuple[str, ...]]], compat: Compat
) -> RuntimeFloor:
    """The wheel's glibc/libstdc++ floor, said out loud; a warning when it is above the plan's promise.

    ``dswheels verify`` fails such a wheel; the build still finishes so the wheel can be inspected.
    """
    reporter = get_reporter()
    floor = floor_of(needs.values())
    reporter.info(f"Linux runtime floor: {floor.describe(compat.libstdcxx)}")
    promised = planned.toolchain.linux_runtime
    if promised is not None and (above := exceeds(floor, promised)):
        worst = sorted(
            name.rsplit("/", 1)[-1] for name, per_lib in needs.items() if exceeds(floor_of([per_lib]), promised)
        )
        reporter.warning(
            f"{cell_id(planned.cell)} needs more than the promised {promised.describe(compat.libstdcxx)}: "
            f"{'; '.join(above)} (in {', '.join(worst)}); dswheels verify will fail it. Build on an older image "
            "or with an older GCC (runners in the matrix), or raise linux_runtime",
        )
    return floor
