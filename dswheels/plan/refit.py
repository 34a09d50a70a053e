"""Refit the cost model (compile_times.yml) from what real builds measured: `nox -s costs` on any manifests,
and follow.yml's refit on a release's own records (:func:`refit_release`).

From build manifests (:mod:`dswheels.kernel.manifest`): each op's seconds, the median of its cold builds
(a build whose compiler cache served anything measured lookups), Linux manifests its Linux figures and
Windows ones its ``windows`` figures, and the Windows runner's speed from builds of one shape on both
(or from the ops measured on both). From a release's job records (:mod:`dswheels.kernel.job_record`),
each runner's fixed steps, CUDA install, per-cell checks and cached unit, each the median over its jobs.
Every refit figure says where it was measured; pure: the caller reads the files and writes the result.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from dswheels.kernel.job_record import JobRecord
from dswheels.kernel.manifest import Manifest
from dswheels.kernel.model import OS
from dswheels.kernel.numbers import is_ascii_digits
from dswheels.plan.costs import CostModel, Figure, OpCost, OpSample, Seconds, figures_used, refit_op, replace_op_lines

__all__ = [
    "Change",
    "Refit",
    "changed_figures",
    "manifest_os",
    "refit_manifests",
    "refit_release",
    "replace_runner_figure",
]


def manifest_os(manifest: Manifest) -> OS:
    return manifest.plan.cell.platform.os


# compile_times.yml keeps an op's seconds per OS: its Linux figures, and its own Windows ones when measured there
_WITH_SECONDS: dict[OS, Callable[[OpCost, Seconds], OpCost]] = {
    OS.LINUX: lambda cost, seconds: replace(cost, linux=seconds),
    OS.WINDOWS: lambda cost, seconds: replace(cost, windows=seconds),
}


def _median(values: Iterable[float]) -> float:
    return float(statistics.median(values))


def _shape(manifest: Manifest) -> tuple[object, ...]:
    """What a build compiled, but for its platform: two builds of one shape differ only by their OS."""
    return (manifest.cell_id.rsplit("-", 1)[0], manifest.arch_list, tuple(sorted(manifest.ops)))


def _pairs(manifests: Sequence[Manifest]) -> list[tuple[Manifest, Manifest]]:
    """(Linux, Windows) builds of one shape: measured side by side, their compiles' ratio is Windows' speed."""
    by_shape: dict[tuple[object, ...], dict[OS, Manifest]] = defaultdict(dict)
    for manifest in manifests:
        by_shape[_shape(manifest)].setdefault(manifest_os(manifest), manifest)
    return [(both[OS.LINUX], both[OS.WINDOWS]) for both in by_shape.values() if len(both) == len(OS)]


def _slots(manifest: Manifest) -> int | None:
    """The build's compile slots: its jobserver's (MAKEFLAGS -jN), None when it had none."""
    match = re.search(r"-j([0-9]+)", manifest.env.get("MAKEFLAGS", ""))
    return int(match.group(1)) if match else None


def _measured_share(manifest: Manifest) -> float | None:
    """The share of a core each compile had, from the build's own CPU seconds (None: not recorded): its CPU
    seconds over what its slots could have used in its compile's wall time (every slot busy: a pooled build)."""
    cpu, wall, slots = manifest.durations.get("compile_cpu"), manifest.durations.get("compile"), _slots(manifest)
    if cpu is None or not wall or slots is None:
        return None
    return min(1.0, cpu / (slots * wall))


def cache_hits(manifest: Manifest) -> int:
    hits = manifest.compiler_cache.get("hits")
    return hits if isinstance(hits, int) else 0


def _samples(
    manifests: Sequence[Manifest], cpu_share: float, model: CostModel, note: Callable[[str], None]
) -> dict[tuple[OS, str], list[OpSample]]:
    """(os, op) -> its samples from the manifests with a cold compiler cache."""
    samples: dict[tuple[OS, str], list[OpSample]] = defaultdict(list)
    for manifest in manifests:
        archs = len([t for t in manifest.arch_list.split(";") if t])
        threads_text = manifest.env.get("DS_NVCC_THREADS", "1")
        threads = int(threads_text) if is_ascii_digits(threads_text) else 1
        share = _measured_share(manifest)
        if share is not None:
            note(f"{manifest.cell_id}: each compile had {share:.2f} of a core (its CPU seconds over its slots')")
        for op in manifest.ops_built:
            if manifest.accelerator == "cpu" and model.op(op.name).units.device_count:
                # the CPU accelerator's op of that name (fused_adam) is another one: C++ only
                note(f"skipped {op.name} of {manifest.cell_id}: the CPU accelerator's, not the CUDA op the model has")
                continue
            if op.units:
                samples[(manifest_os(manifest), op.name)].append(
                    OpSample(
                        op.name,
                        op.units,
                        archs,
                        threads or 1,
                        manifest.cell_id,
                        cpu_share=share if share is not None else cpu_share,
                        scopes=dict(op.scopes),
                    )
                )
    return samples


def _pair_speed(pairs: Sequence[tuple[Manifest, Manifest]], measured_on: str) -> Figure | None:
    """Windows' speed from builds of one shape on both: the median ratio of their compiles' seconds (a Windows
    compile's link does what MSVC's /GL left to it, which no unit's seconds hold)."""
    if not pairs:
        return None
    ratios = [w.durations["compile"] / lx.durations["compile"] for lx, w in pairs]
    shown = "; ".join(
        f"{', '.join(lx.ops)} for {lx.arch_list or 'the CPU'}: Windows {w.durations['compile']:.0f} s, Linux "
        f"{lx.durations['compile']:.0f} s"
        for lx, w in pairs
    )
    where = f" ({measured_on})" if measured_on else ""
    both = "the same builds for Windows (under Wine: MSVC's cl and link, Windows nvcc) and Linux, one after the other"
    return Figure(round(_median(ratios), 2), "measured", f"{both}{where}: {shown}")


def _windows_speed(ops: Mapping[str, OpCost]) -> Figure | None:
    """The median ratio of Windows to Linux seconds over the ops measured on both (None: no such op)."""
    pairs = sorted(
        (name, (c.windows.host + c.windows.device) / (c.linux.host + c.linux.device))
        for name, c in ops.items()
        if c.windows is not None and c.windows.status == c.linux.status == "measured" and c.linux.host + c.linux.device
    )
    if not pairs:
        return None
    names = ", ".join(f"{n} {r:.2f}" for n, r in pairs)
    return Figure(
        round(_median(r for _, r in pairs), 2),
        "measured",
        f"median of the Windows/Linux ratio of the ops measured on both: {names}",
    )


def replace_runner_figure(text: str, os_name: str, key: str, figure: Figure) -> str:
    """compile_times.yml with ``runners.<os>.<key>`` replaced."""
    lines = text.splitlines()
    start = lines.index("runners:")
    at = next(i for i in range(start + 1, len(lines)) if lines[i] == f"  {os_name}:")
    end = next((i for i in range(at + 1, len(lines)) if not lines[i].startswith("    ")), len(lines))
    source = figure.source.replace('"', "'")
    line = f'    {key}: {{value: {figure.value:g}, {figure.status}: "{source}"}}'
    for i in range(at + 1, end):
        if re.match(rf"^    {re.escape(key)}:", lines[i]):
            lines[i] = line
            break
    else:
        lines.insert(end, line)
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, kw_only=True, slots=True)
class Refit:
    text: str  # compile_times.yml, refit
    notes: tuple[str, ...]  # what was fitted, and what was left out and why
    fitted: int = 0  # figures fitted (the same value as before still counts)


def refit_manifests(
    text: str,
    model: CostModel,
    manifests: Sequence[Manifest],
    *,
    cpu_share: float = 1.0,
    measured_on: str = "",
    where: Mapping[OS, str] | None = None,
) -> Refit:
    """The ops (and Windows' speed) refit from ``manifests``. ``measured_on`` (where and how they were built)
    ends each refit figure's source; ``where``, per OS, begins it (``on ubuntu-24.04 (run 4242)``)."""
    lead = dict(where or {})
    notes: list[str] = []
    cold = [m for m in manifests if not cache_hits(m)]
    notes += [
        f"skipped {m.cell_id}: its compiler cache served {cache_hits(m)} unit(s)" for m in manifests if m not in cold
    ]
    pairs = _pairs(cold)
    paired = {id(windows) for _linux, windows in pairs}  # the Windows build of a pair: its figure is the speed
    samples = _samples([m for m in cold if id(m) not in paired], cpu_share, model, notes.append)
    fitted: dict[str, OpCost] = {}
    for (os_name, name), found in sorted(samples.items()):
        seconds, units = refit_op(found, measured_on=measured_on)
        if os_name in lead:
            seconds = replace(seconds, source=f"{lead[os_name]}: {seconds.source}")
        cost = fitted.get(name) or model.op(name)
        cost = _WITH_SECONDS[os_name](cost, seconds)
        if units is not None:
            cost = replace(cost, units=units)
        fitted[name] = cost
        notes.append(
            f"{name} ({os_name}): host {seconds.host:g} s, device {seconds.device:g} s per arch, "
            f"{cost.units.count} units ({seconds.source})"
        )
    text = replace_op_lines(text, fitted) if fitted else text
    speed = _pair_speed(pairs, measured_on) or _windows_speed({**model.ops, **fitted})
    if speed is not None:
        if (windows_where := lead.get(OS.WINDOWS)) is not None:
            speed = replace(speed, source=f"{windows_where}: {speed.source}")
        text = replace_runner_figure(text, OS.WINDOWS, "speed", speed)
        notes.append(f"windows speed: {speed.value:g} ({speed.source})")
    return Refit(text=text, notes=tuple(notes), fitted=len(fitted) + (speed is not None))


def _where(records: Sequence[JobRecord], run: str) -> str:
    """``on ubuntu-24.04 (run 4242)``: the runner label(s) the jobs ran on, and the run."""
    labels = sorted({r.runs_on for r in records if r.runs_on})
    return f"on {', '.join(labels) or 'a runner'} (run {run})"


def _runner_figures(records: Sequence[JobRecord], where: str) -> dict[str, Figure]:
    """One OS's runner figures, each the median over its jobs (cells for the checks)."""
    n = len(records)
    figures: dict[str, Figure] = {}
    setups = [s for r in records if (s := r.setup) is not None]
    if setups:
        figures["setup"] = Figure(
            round(_median(setups)),
            "measured",
            f"{where}: median of {len(setups)} of {n} jobs: the job's start to its record, less the CUDA install, "
            "the build and verify",
        )
    cuda = [r.cuda_install for r in records if r.cuda_install is not None]
    if cuda:
        figures["cuda_setup"] = Figure(
            round(_median(cuda)), "measured", f"{where}: median of {len(cuda)} jobs' `dswheels cuda install`"
        )
    checks = [c for r in records if (c := r.per_cell) is not None]
    if checks:
        figures["per_cell"] = Figure(
            round(_median(checks)),
            "measured",
            f"{where}: median of {len(checks)} jobs: the build's time outside the compile (source, venv, "
            "post-processing) and verify's, per cell",
        )
    return figures


def _cached_unit(manifests: Sequence[Manifest], where: str) -> Figure | None:
    """A unit taken from the compiler cache: the median unit of the builds whose cache served every unit."""
    served = [m for m in manifests if cache_hits(m) and m.compiler_cache.get("misses") == 0]
    units = [seconds for m in served for op in m.ops_built for _, seconds in op.units]
    if not units:
        return None
    return Figure(
        round(_median(units), 1),
        "measured",
        f"{where}: median of {len(units)} units of {len(served)} builds whose compiler cache served every unit",
    )


def refit_release(
    text: str, model: CostModel, records: Sequence[JobRecord], manifests: Sequence[Manifest], *, run: str
) -> Refit:
    """compile_times.yml refit from one release's job records and the manifests they list: each figure
    ``measured on <runner> (run <id>)``."""
    by_os: dict[OS, list[JobRecord]] = defaultdict(list)
    for record in records:
        by_os[record.os].append(record)
    where = {os_name: _where(found, run) for os_name, found in by_os.items()}
    ops = refit_manifests(text, model, manifests, where=where)
    text, notes, fitted = ops.text, list(ops.notes), ops.fitted
    for os_name, found in sorted(by_os.items()):
        figures = _runner_figures(found, where[os_name])
        cached = _cached_unit([m for m in manifests if manifest_os(m) == os_name], where[os_name])
        if cached is not None:
            figures["cached_unit"] = cached
        for key, figure in figures.items():
            text = replace_runner_figure(text, os_name, key, figure)
            notes.append(f"runners.{os_name}.{key}: {figure.value:g} ({figure.source})")
            fitted += 1
    return Refit(text=text, notes=tuple(notes), fitted=fitted)


@dataclass(frozen=True, slots=True)
class Change:
    name: str  # as compile_times.yml names it, e.g. runners.linux.setup
    before: Figure | None  # None: a figure the model did not have
    after: Figure


def changed_figures(before: CostModel, after: CostModel) -> list[Change]:
    """Every figure whose value or source the refit changed, by its name in compile_times.yml."""
    ops = sorted(set(before.ops) | set(after.ops))
    oses = sorted(before.runners)
    old = dict(figures_used(before, ops, oses))
    new = figures_used(after, ops, oses)
    return [Change(name, old.get(name), figure) for name, figure in new if old.get(name) != figure]
