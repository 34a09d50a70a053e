"""compat.yml against what its sources say: every finding, the edit each makes, and the result.

:func:`check_facts` is the whole comparison. It never changes a value a source did not
read: a source left out shows as ``unchecked``, and every ``inferred`` entry that no source
settled is listed with the reason compat.yml gives for it (``unsettled``).
"""

from __future__ import annotations

from collections.abc import Mapping

import yaml

from dswheels.facts.compare_cuda import compare_cuda, exact_pins
from dswheels.facts.compare_deepspeed import compare_releases, compare_sources
from dswheels.facts.compare_torch import compare_torch
from dswheels.facts.context import Context, PathT
from dswheels.facts.findings import Finding, Kind, Report
from dswheels.facts.runner_images import compare_runner_images
from dswheels.facts.seen import Upstream
from dswheels.facts.yaml_edit import Edit, EditError, Span, apply_edits, parse_spans, render_scalar
from dswheels.kernel.compat import CompatDataError, parse_compat
from dswheels.kernel.versions import parse_version

__all__ = ["check_facts", "inferred_entries"]


def _label(path: PathT, entry: object) -> str:
    parent = ".".join(str(p) for p in path if not isinstance(p, int))
    if isinstance(entry, dict) and isinstance(path[-1], int):
        if "id" in entry:
            return f"{parent}.{entry['id']}"
        if "torch" in entry and "variant" in entry:
            return f"{parent}[torch {entry['torch']} {entry['variant']}]"
        return f"{parent}[{path[-1]}]"
    return parent


def inferred_entries(raw: object, path: PathT = ()) -> list[tuple[PathT, str, str]]:
    """Every entry marked ``confidence: inferred``: (path, label, its ``unsettled`` reason)."""
    found: list[tuple[PathT, str, str]] = []
    if isinstance(raw, dict):
        if raw.get("confidence") == "inferred" and path:
            found.append((path, _label(path, raw), str(raw.get("unsettled") or "")))
        for key, value in raw.items():
            found += inferred_entries(value, (*path, str(key)))
    elif isinstance(raw, list):
        for index, value in enumerate(raw):
            found += inferred_entries(value, (*path, index))
    return found


def _unsettled(ctx: Context) -> None:
    for path, label, why in inferred_entries(ctx.raw):
        if path in ctx.settled:
            continue
        ctx.add(
            Kind.UNSETTLED,
            label,
            why or "compat.yml gives no reason why no source settles it (add `unsettled:`)",
            "compat.yml",
        )


def _checked_edits(text: str, spans: Span, findings: list[Finding]) -> list[Finding]:
    """Findings whose edit cannot be made alone become a person's to settle (never a broken file)."""
    checked = []
    for finding in findings:
        kept = finding
        if finding.edits:
            try:
                apply_edits(text, finding.edits, spans=spans)
            except EditError as exc:
                kept = Finding(
                    finding.kind,
                    finding.entry,
                    finding.message,
                    finding.source,
                    (),
                    f"--write cannot make this edit ({exc}): change compat.yml by hand",
                )
        checked.append(kept)
    return checked


def check_facts(text: str, upstream: Upstream, *, today: str, name: str = "dswheels/compat.yml") -> Report:
    """Compare compat.yml (``text``) with ``upstream``; the report carries the edited text in ``after``."""
    raw = yaml.safe_load(text)
    if not isinstance(raw, Mapping):
        raise CompatDataError(f"{name}: not a mapping")
    ctx = Context(compat=parse_compat(raw), raw=raw, spans=parse_spans(text), today=today)
    new: list[str] = []
    if upstream.deepspeed_releases is not None:
        new = compare_releases(ctx, upstream.deepspeed_releases)
    if upstream.torch is not None:
        compare_torch(ctx, upstream.torch, upstream.torch_index)
    if upstream.torch is not None or upstream.cuda_action is not None or upstream.cuda_toolkit is not None:
        compare_cuda(
            ctx,
            action=upstream.cuda_action,
            without_action=upstream.cuda_without_action,
            nvidia=upstream.cuda_toolkit,
            pins=exact_pins(upstream.torch or {}),
        )
    if upstream.runner_images is not None:
        compare_runner_images(ctx, upstream.runner_images)
    troubled = compare_sources(ctx, upstream.sources)
    read_versions = {s.version for s in upstream.sources}
    placeable = tuple(v for v in new if parse_version(v) in read_versions and parse_version(v) not in troubled)
    _unsettled(ctx)
    for source, why in upstream.skipped.items():
        ctx.add(Kind.UNCHECKED, source, why, source)
    for source, why in upstream.unreachable.items():
        ctx.add(Kind.UNCHECKED, source, f"could not be read: {why}", source)
    findings = _checked_edits(text, ctx.spans, ctx.findings)
    edits: list[Edit] = [e for f in findings for e in f.edits]
    after = text
    if edits:
        after = apply_edits(text, [*edits, Edit("set", ("collected",), render_scalar(today))], spans=ctx.spans)
        parse_compat(yaml.safe_load(after))  # the result must load: a bug here must not be written
    notes = (*ctx.notes, *(n for s in upstream.sources for n in s.notes))
    return Report(
        checked=today,
        compat=name,
        findings=tuple(findings),
        read=dict(upstream.read),
        skipped=dict(upstream.skipped),
        unreachable=dict(upstream.unreachable),
        before=text,
        after=after,
        new_deepspeed=tuple(new),
        placeable_deepspeed=placeable,
        notes=notes,
    )
