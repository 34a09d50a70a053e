"""The result of ``dswheels facts check``: findings entry by entry, the edit they make, and renderings.

A finding names the compat.yml entry (``torch.2.15.variants.linux``), what the sources say
about it, which source said so, and either the edit that brings compat.yml in line or what
a person has to decide (``person``). The report renders as text (the terminal), Markdown
(the drift issue) and JSON (``dswheels.facts-report/1``, what the follow workflow reads).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from dswheels.facts.yaml_edit import Edit

__all__ = ["REPORT_SCHEMA", "Finding", "Kind", "Report", "render_diff", "render_json", "render_markdown", "render_text"]

REPORT_SCHEMA = "dswheels.facts-report/1"


class Kind(str, Enum):
    DISAGREES = "disagrees"  # compat.yml says one thing, a source another: the entry is stale
    NEW = "new"  # upstream has something compat.yml does not know yet
    CONFIRMED = "confirmed"  # an `inferred` entry a source now confirms
    REFUTED = "refuted"  # an `inferred` entry a source contradicts
    UNSETTLED = "unsettled"  # an `inferred` entry no source read here can settle
    UNCHECKED = "unchecked"  # facts left unchecked because their source was left out or could not be read

    @property
    def drifts(self) -> bool:
        """Whether compat.yml should change (or a person decide) because of it."""
        return self in (Kind.DISAGREES, Kind.NEW, Kind.CONFIRMED, Kind.REFUTED)


_HEADINGS = {
    Kind.DISAGREES: "Stale: compat.yml disagrees with its sources",
    Kind.NEW: "New upstream: not in compat.yml yet",
    Kind.REFUTED: "Inferred entries the sources refute",
    Kind.CONFIRMED: "Inferred entries the sources confirm",
    Kind.UNSETTLED: "Inferred entries no source read here can settle",
    Kind.UNCHECKED: "Not checked",
}


@dataclass(frozen=True, slots=True)
class Finding:
    kind: Kind
    entry: str  # where in compat.yml: "torch.2.15.variants.linux", "deepspeed.releases"
    message: str
    source: str  # which source said so
    edits: tuple[Edit, ...] = ()
    person: str = ""  # when --write cannot settle it: what a person has to decide

    def to_json(self) -> dict[str, object]:
        return {
            "kind": self.kind.value,
            "entry": self.entry,
            "message": self.message,
            "source": self.source,
            "written": bool(self.edits),
            "person": self.person or None,
        }


@dataclass(frozen=True)
class Report:
    checked: str  # the date of the check (YYYY-MM-DD)
    compat: str  # the compat.yml that was checked
    findings: tuple[Finding, ...]
    read: Mapping[str, str]  # source -> what was read
    skipped: Mapping[str, str]  # source -> why it was not
    before: str  # compat.yml as it was
    after: str  # compat.yml with every edit made
    new_deepspeed: tuple[str, ...] = ()  # releases on PyPI that compat.yml does not list
    placeable_deepspeed: tuple[str, ...] = ()  # of those: read, and the facts place them as they are
    notes: tuple[str, ...] = field(default=())
    unreachable: Mapping[str, str] = field(default_factory=dict)  # source -> why it could not be read

    @property
    def drift(self) -> bool:
        return any(f.kind.drifts for f in self.findings)

    @property
    def needs_person(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.kind.drifts and f.person)


def render_diff(report: Report, *, name: str = "dswheels/compat.yml") -> str:
    return "".join(
        difflib.unified_diff(
            report.before.splitlines(keepends=True),
            report.after.splitlines(keepends=True),
            f"a/{name}",
            f"b/{name}",
        )
    )


def _grouped(findings: Sequence[Finding]) -> list[tuple[Kind, list[Finding]]]:
    return [
        (kind, [f for f in findings if f.kind is kind]) for kind in _HEADINGS if any(f.kind is kind for f in findings)
    ]


def render_text(report: Report) -> str:
    lines = [f"facts check of {report.compat} ({report.checked})"]
    for source, what in report.read.items():
        lines.append(f"  read    {source}: {what}")
    for source, why in report.skipped.items():
        lines.append(f"  skipped {source}: {why}")
    for source, why in report.unreachable.items():
        lines.append(f"  FAILED  {source}: {why}")
    for kind, items in _grouped(report.findings):
        lines += ["", f"{_HEADINGS[kind]} ({len(items)}):"]
        for f in items:
            mark = "  [--write fixes it]" if f.edits else ""
            lines.append(f"  - {f.entry}: {f.message} ({f.source}){mark}")
            if f.person:
                lines.append(f"      a person decides: {f.person}")
    for note in report.notes:
        lines.append(f"note: {note}")
    if report.new_deepspeed:
        placed = ", ".join(report.placeable_deepspeed) or "none"
        lines.append(f"\nnew DeepSpeed releases: {', '.join(report.new_deepspeed)}; the facts place: {placed}")
    edits = sum(len(f.edits) for f in report.findings)
    verdict = "drift" if report.drift else "no drift"
    lines.append(
        f"\n{verdict}: {len(report.findings)} findings, {edits} edits, {len(report.needs_person)} for a person"
    )
    if report.unreachable:
        lines.append(
            f"could not read {len(report.unreachable)} source(s): {', '.join(report.unreachable)} "
            "(their facts are unchecked; the rest was checked)"
        )
    return "\n".join(lines) + "\n"


def render_markdown(report: Report, *, diff: str) -> str:
    lines = [
        f"`dswheels facts check` on {report.checked} found that `{report.compat}` drifted from its sources.",
        "",
    ]
    for kind, items in _grouped(report.findings):
        if kind is Kind.UNCHECKED:
            continue
        lines += [f"### {_HEADINGS[kind]} ({len(items)})", ""]
        for f in items:
            mark = " — `--write` fixes it" if f.edits else ""
            lines.append(f"- `{f.entry}`: {f.message} _({f.source})_{mark}")
            if f.person:
                lines.append(f"  - **a person decides:** {f.person}")
        lines.append("")
    if diff:
        lines += [
            "### The proposed change",
            "",
            "`dswheels facts check --write` makes this edit (review it, commit it):",
            "",
            "```diff",
            diff.rstrip("\n"),
            "```",
            "",
        ]
    lines.append("Sources read: " + "; ".join(f"{k}: {v}" for k, v in report.read.items()))
    if report.skipped:
        lines.append("Not read: " + "; ".join(f"{k}: {v}" for k, v in report.skipped.items()))
    if report.unreachable:
        lines.append("Could not read: " + "; ".join(f"{k}: {v}" for k, v in report.unreachable.items()))
    return "\n".join(lines) + "\n"


def render_json(report: Report, *, diff: str) -> str:
    data = {
        "schema": REPORT_SCHEMA,
        "checked": report.checked,
        "compat": report.compat,
        "drift": report.drift,
        "read": dict(report.read),
        "skipped": dict(report.skipped),
        "unreachable": dict(report.unreachable),
        "findings": [f.to_json() for f in report.findings],
        "new_deepspeed": list(report.new_deepspeed),
        "placeable_deepspeed": list(report.placeable_deepspeed),
        "needs_person": len(report.needs_person),
        "notes": list(report.notes),
        "diff": diff,
    }
    return json.dumps(data, indent=2) + "\n"
