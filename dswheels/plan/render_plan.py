"""Render a :class:`~dswheels.kernel.model.Plan` as a table, an explanation or GitHub jobs.

``--format json``, the contract the build jobs read back, is :mod:`dswheels.kernel.plan_json`.
``--format github`` renders the jobs of :mod:`dswheels.plan.jobs` (cells grouped per compile,
under 256 jobs and the 6-hour cap); its shape is documented in docs/plan-json.md.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence

from dswheels.kernel.model import Plan, PlannedCell
from dswheels.kernel.naming import cell_id, wheel_filename
from dswheels.kernel.versions import format_version
from dswheels.plan.compiler_cache_keys import cache_keys
from dswheels.plan.jobs import Job, JobPlan
from dswheels.plan.render_costs import render_job_summary

__all__ = ["render_explain", "render_github", "render_table"]

DETAIL_LIMIT = 4  # at most this many cells: the table shows each in full


# --- GitHub matrix ------------------------------------------------------------------------------


def _job_name(job: Job) -> str:
    items = job.cells
    cell = items[0].cell
    if len(items) == 1:
        name = cell_id(cell)
    else:
        variants = sorted({i.cell.variant.name for i in items})
        torches = sorted({i.cell.torch for i in items})
        name = (
            f"ds{format_version(cell.deepspeed)}-torch{'+'.join(format_version(t) for t in torches)}"
            f"-{'+'.join(variants)}-{cell.platform.value}"
        )
    return f"{name} part {job.part}" if job.stage == "part" else name


def _job_json(job: Job, *, plan_mode: str) -> dict[str, object]:
    items = job.cells
    first = items[0]
    cell, tc = first.cell, first.toolchain
    variants = sorted({i.cell.variant.name for i in items})
    pythons = sorted({i.cell.python for i in items})
    toolkits = sorted({i.toolchain.cuda_toolkit for i in items if i.toolchain.cuda_toolkit})
    torches = sorted({i.cell.torch for i in items})
    # `dswheels build --ops`: "" builds what the matrix plans; a part names its ops, the canary its own
    canary = " ".join(first.ops.build_names) if plan_mode == "canary" else ""
    ops = " ".join(job.ops) if job.ops else canary
    keys = cache_keys(items, part=job.part if job.stage == "part" else "")
    group = cache_keys(items).job
    return {
        "name": _job_name(job),
        "cells": " ".join(cell_id(i.cell) for i in items),
        "platform": cell.platform.value,
        "os": cell.platform.os,
        "runs_on": list(tc.runs_on),
        "smoke_runs_on": list(first.smoke_runs_on),
        "python": " ".join(str(p) for p in pythons),
        # setup-python's python-version takes one version a line
        "setup_python": "\n".join(str(p) for p in pythons),
        "deepspeed": format_version(cell.deepspeed),
        "torch": " ".join(format_version(t) for t in torches),
        "variant": " ".join(variants),
        "cuda_toolkit": " ".join(toolkits),
        "msvc_toolset": tc.host_compiler.version if tc.host_compiler.kind == "msvc" else "",
        "gcc": tc.host_compiler.version if tc.host_compiler.kind == "gcc" else "",
        # a Linux job's container (the runner itself: "") and the gcc-toolset the job installs in it
        "container": tc.container,
        "gcc_toolset": tc.host_compiler.version if tc.gcc_toolset else "",
        # what `dswheels cuda install --toolkit` assembles (it reads the same list from compat.yml)
        "cuda_components": " ".join(tc.cuda_components),
        "ops": ops,
        "stage": job.stage,
        "part": job.part,
        "estimate_minutes": f"{job.estimate.minutes:.0f}",
        # the compiler cache: one Actions cache entry per job, restored newest first from the family's
        # (dswheels.plan.compiler_cache_keys.cache_keys); a build job after parts also takes their objects
        "cache_key": keys.family,
        "cache_job": keys.job,
        "cache_parts": f"sccache-{group}-part*" if job.stage == "build" and job.part else "",
    }


def render_github(plan: Plan, jobs: JobPlan, *, stage: str = "build") -> str:
    """One JSON line: ``{"include": [job, ...]}`` for ``strategy.matrix: ${{ fromJSON(...) }}``.

    ``stage``: ``build`` (the jobs that make wheels) or ``part`` (the jobs that only compile
    some ops of a cell group too big for one job into the shared compiler cache).
    """
    picked = [j for j in jobs.jobs if j.stage == stage]
    return json.dumps({"include": [_job_json(j, plan_mode=plan.mode) for j in picked]}, separators=(",", ":"))


# --- human output ---------------------------------------------------------------------------------


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]


def _compiler(item: PlannedCell) -> str:
    hc = item.toolchain.host_compiler
    return f"{hc.kind} {hc.version}"


def _flags(item: PlannedCell) -> str:
    tc = item.toolchain
    flags = []
    if tc.skip_cuda_check:
        flags.append("DS_SKIP_CUDA_CHECK=1")
    flags.extend(tc.nvcc_flags)
    return " ".join(flags) or "-"


def _detail(item: PlannedCell) -> list[str]:
    cell, tc = item.cell, item.toolchain
    lines = [
        f"{cell_id(cell)}",
        f"  wheel          {wheel_filename(cell)}",
        f"  torch          {item.torch_version} from {item.torch_index}",
        f"  source         {item.source.kind}"
        + (f" {item.source.url}" if item.source.url else " (PyPI, sha256 from PyPI's JSON API)"),
        f"  runner         {', '.join(tc.runs_on) or tc.runner_image} ({tc.runner_image})",
        f"  compiler       {_compiler(item)}: {tc.host_compiler.why}",
    ]
    if tc.nvcc:
        lines += [
            f"  nvcc           {format_version(tc.nvcc)} (install CUDA {tc.cuda_toolkit})",
            f"  arch list      {tc.arch_list_text}",
            f"  cuda check     {tc.cuda_check}",
        ]
    if tc.nvcc_flags:
        lines.append(f"  nvcc flags     {' '.join(tc.nvcc_flags)}")
    lines.append(f"  cpu baseline   {tc.cpu_baseline}")
    lines.append(f"  ops built      {', '.join(item.ops.build_names)}")
    for name, reason in item.ops.left_out:
        lines.append(f"  left out       {name}: {reason}")
    for note in tc.notes:
        lines.append(f"  note           {note}")
    return lines


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _resolved(plan: Plan) -> list[str]:
    """What the matrix's selectors ({newest: N}, variants: all) resolved to, and other notes, first."""
    return [*plan.notes, ""] if plan.notes else []


def render_table(plan: Plan, jobs: JobPlan, *, per_cell: JobPlan | None = None) -> str:
    lines: list[str] = _resolved(plan)
    if len(plan.planned) <= DETAIL_LIMIT:
        for item in plan.planned:
            lines.extend(_detail(item))
            lines.append("")
    else:
        rows = [("CELL", "NVCC", "COMPILER", "TORCH_CUDA_ARCH_LIST", "OPS", "FLAGS")]
        rows.extend(
            (
                cell_id(item.cell),
                format_version(item.toolchain.nvcc) if item.toolchain.nvcc else "-",
                _compiler(item),
                item.toolchain.arch_list_text or "-",
                f"{len(item.ops.build)} built, {len(item.ops.left_out)} left out",
                _flags(item),
            )
            for item in plan.planned
        )
        lines.extend(_table(rows))
        lines.append("")
    summary = f"{_count(len(plan.planned), 'cell')} planned"
    if plan.dropped:
        summary += f"; {len(plan.dropped)} dropped by the rules (--explain says why)"
    lines.append(summary)
    lines.extend(render_job_summary(jobs, per_cell=per_cell))
    return "\n".join(lines) + "\n"


def render_explain(plan: Plan) -> str:
    lines: list[str] = _resolved(plan)
    if not plan.dropped:
        lines.append(f"No cell dropped: all {len(plan.planned)} cells of the selection can be built.")
        return "\n".join(lines) + "\n"
    counts: Counter[str] = Counter()
    for item in plan.dropped:
        lines.append(cell_id(item.cell))
        for reason in item.reasons:
            counts[reason.rule] += 1
            lines.append(f"  - [{reason.rule}] {reason.message}")
            if reason.fix:
                lines.append(f"    what would work: {reason.fix}")
            if reason.source:
                lines.append(f"    source: {reason.source}")
    lines.append("")
    lines.append(f"{len(plan.dropped)} dropped, {len(plan.planned)} planned. Dropped by rule:")
    lines.extend(f"  {rule:32} {count}" for rule, count in counts.most_common())
    return "\n".join(lines) + "\n"
