"""A doctor :class:`~dswheels.doctor.Report` as text or JSON.

``dswheels doctor --json`` prints ``{"schema": "dswheels.doctor/1", "facts": ..., "checks":
..., "verdict": ..., "guidance": ...}`` (docs/doctor.md); the facts part is
:mod:`dswheels.doctor.machine_facts_json`.
"""

from __future__ import annotations

import json

from dswheels.doctor import Report, Status
from dswheels.doctor.machine_facts import Facts
from dswheels.doctor.machine_facts_json import facts_to_data
from dswheels.kernel.naming import wheel_filename
from dswheels.kernel.urls import shell_word
from dswheels.kernel.versions import format_version

__all__ = ["DOCTOR_SCHEMA", "render_json", "render_text", "report_to_data"]

DOCTOR_SCHEMA = "dswheels.doctor/1"


def report_to_data(report: Report) -> dict[str, object]:
    verdict = report.verdict
    local = verdict.local
    cell = verdict.cell
    tc = local.toolchain
    index = verdict.index
    return {
        "status": report.worst.value,
        "env_kind": report.env_kind,
        "checks": [
            {"id": c.id, "status": c.status.value, "title": c.title, "detail": c.detail, "fix": c.fix}
            for c in report.checks
        ],
        "verdict": {
            "cell": verdict.cell_id or None,
            "no_cell": verdict.no_cell or None,
            "wheel_filename": wheel_filename(cell) if cell else None,
            "deepspeed": format_version(cell.deepspeed) if cell else None,
            "rules": [{"rule": r.rule, "message": r.message, "fix": r.fix} for r in verdict.rules],
            "index": None
            if index is None
            else {"url": index.url, "error": index.error or None, "files": len(index.files)},
            "published": None
            if verdict.wheel is None
            else {"filename": verdict.wheel.filename, "url": verdict.wheel.url, "sha256": verdict.wheel.sha256},
            "nearest": list(verdict.nearest),
            "local_build": {
                "status": local.status.value,
                "blockers": list(local.blockers),
                "workarounds": list(local.workarounds),
                "environment": dict(local.environment),
                "host_compiler": None
                if tc is None
                else {"kind": tc.host_compiler.kind, "version": tc.host_compiler.version, "why": tc.host_compiler.why},
                "nvcc": format_version(tc.nvcc) if tc and tc.nvcc else None,
                "cuda_check": tc.cuda_check if tc else None,
                "ops": list(local.ops),
                "left_out": [{"op": name, "why": why} for name, why in local.left_out],
            },
        },
        "guidance": list(report.guidance),
    }


def render_json(report: Report, facts: Facts, *, version: str) -> str:
    data: dict[str, object] = {"schema": DOCTOR_SCHEMA, "dswheels": version}
    data.update(report_to_data(report))
    data["facts"] = facts_to_data(facts)
    return json.dumps(data, indent=2) + "\n"


_MARK = {Status.OK: "OK  ", Status.WARN: "WARN", Status.FAIL: "FAIL"}


def render_text(report: Report) -> str:
    lines = _check_lines(report)
    lines += ["", "verdict", *_cell_lines(report), *_published_lines(report), *_local_build_lines(report)]
    if report.guidance:
        lines.append("")
        lines.append(f"CUDA_HOME ({report.env_kind} environment)")
        lines.extend(f"  {line}" for line in report.guidance)
    counts = {s: sum(1 for c in report.checks if c.status is s) for s in Status}
    lines.append("")
    lines.append(f"{counts[Status.OK]} ok, {counts[Status.WARN]} warnings, {counts[Status.FAIL]} failures")
    return "\n".join(lines) + "\n"


def _check_lines(report: Report) -> list[str]:
    lines: list[str] = []
    for check in report.checks:
        lines.append(f"[{_MARK[check.status]}] {check.title}")
        if check.detail:
            lines.extend(f"         {line}" for line in check.detail.splitlines())
        if check.fix and check.status is not Status.OK:
            lines.append(f"         fix: {check.fix}")
    return lines


def _cell_lines(report: Report) -> list[str]:
    """The cell this environment is (and the rules that forbid it)."""
    verdict = report.verdict
    if verdict.cell is None:
        return [f"  this environment   no cell: {verdict.no_cell}"]
    lines = [f"  this environment   {verdict.cell_id}", f"  its wheel          {wheel_filename(verdict.cell)}"]
    for reason in verdict.rules:
        lines.append(f"  forbidden          [{reason.rule}] {reason.message}")
        if reason.fix:
            lines.append(f"                     what would work: {reason.fix}")
    return lines


def _published_lines(report: Report) -> list[str]:
    """Whether the index has this environment's wheel."""
    verdict = report.verdict
    index = verdict.index
    if index is None:
        return ["  published wheel    not checked (pass --index URL)"]
    if index.error:
        return [f"  published wheel    cannot read {index.url}: {index.error}"]
    if verdict.wheel is not None:
        return [
            f"  published wheel    yes: {verdict.wheel.url}",
            "                     install it with: dswheels install --index " + shell_word(index.url),
        ]
    if verdict.cell is not None:
        return [
            f"  published wheel    none in {index.url}",
            *(f"                     {line}" for line in verdict.nearest),
        ]
    return []


def _local_build_lines(report: Report) -> list[str]:
    """Whether a local build would work, what it needs, and with which toolchain."""
    local = report.verdict.local
    words = {Status.OK: "works", Status.WARN: "works with the steps below", Status.FAIL: "blocked"}
    lines = [f"  local build        {words[local.status]}"]
    lines.extend(f"    blocked: {b}" for b in local.blockers)
    lines.extend(f"    needs:   {w}" for w in local.workarounds)
    tc = local.toolchain
    if tc is not None:
        nvcc = f", nvcc {format_version(tc.nvcc)}" if tc.nvcc else ""
        compiler = tc.host_compiler
        after = " (once unblocked)" if local.status is Status.FAIL else ""
        lines.append(f"    toolchain: {compiler.kind} {compiler.version}{nvcc}{after}")
        lines.append(f"    ops:       {', '.join(local.ops)} (DS_BUILD_<OP>=1 each)")
        env = " ".join(f"{k}={_quote(v)}" for k, v in local.environment if not k.startswith("DS_BUILD_"))
        if env:
            lines.append(f"    env:       {env}")
    return lines


def _quote(value: str) -> str:
    return f'"{value}"' if (" " in value or ";" in value) else value
