"""What every comparison needs: compat.yml typed, raw and positioned, and how to word an edit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from dswheels.facts.findings import Finding, Kind
from dswheels.facts.yaml_edit import Edit, Span, render_flow, render_scalar
from dswheels.kernel.compat import Compat

__all__ = ["Context", "PathT"]

PathT = tuple[str | int, ...]


@dataclass
class Context:
    compat: Compat
    raw: Mapping[str, object]  # yaml.safe_load of compat.yml
    spans: Span  # its nodes with their positions (dswheels.facts.yaml_edit)
    today: str
    findings: list[Finding] = field(default_factory=list)
    settled: set[PathT] = field(default_factory=set)  # inferred entries a finding already settled
    notes: list[str] = field(default_factory=list)  # what the report says beside its findings

    # --- reading compat.yml --------------------------------------------------------------------

    def value(self, path: PathT) -> object:
        node: object = self.raw
        for step in path:
            if isinstance(step, int):
                node = node[step] if isinstance(node, list) and step < len(node) else None
            else:
                node = node.get(step) if isinstance(node, dict) else None
        return node

    def span(self, path: PathT) -> Span | None:
        node: Span | None = self.spans
        for step in path:
            if node is None:
                return None
            if isinstance(step, int):
                node = node.items[step] if node.kind == "seq" and step < len(node.items) else None
            else:
                node = node.get(step) if node.kind == "map" else None
        return node

    def inferred(self, path: PathT) -> bool:
        entry = self.value(path)
        return isinstance(entry, dict) and entry.get("confidence") == "inferred"

    # --- edits ---------------------------------------------------------------------------------

    def set_per_os(self, path: PathT, per_os: Mapping[str, Sequence[str]], *, quote: bool) -> list[Edit]:
        """Set ``{linux: [...], windows: [...]}``: per OS inside a block mapping, else the whole value."""
        node = self.span(path)
        current = self.value(path)
        if node is not None and node.kind == "map" and not node.flow and isinstance(current, dict):
            return [
                Edit("set", (*path, os), render_flow(values, quote=quote))
                for os, values in per_os.items()
                if list(current.get(os) or []) != list(values)
            ]
        body = ", ".join(f"{os}: {render_flow(values, quote=quote)}" for os, values in per_os.items())
        return [Edit("set", path, "{" + body + "}")]

    def note_source(self, path: PathT, note: str) -> list[Edit]:
        """Append ``note`` to the entry's ``source`` (every earlier note is kept)."""
        old = self.value((*path, "source"))
        text = f"{old.rstrip().rstrip('.')}; {note}" if isinstance(old, str) and old else note
        if self.span((*path, "source")) is None:
            return [Edit("add", path, render_scalar(text), key="source")]
        return [Edit("set", (*path, "source"), render_scalar(text))]

    def settle(self, path: PathT, note: str) -> list[Edit]:
        """An inferred entry a source settled: no longer inferred, and the source noted."""
        self.settled.add(path)
        edits = [Edit("remove", (*path, "confidence"))]
        if self.span((*path, "unsettled")) is not None:
            edits.append(Edit("remove", (*path, "unsettled")))
        return edits + self.note_source(path, note)

    # --- findings ------------------------------------------------------------------------------

    def add(
        self,
        kind: Kind,
        entry: str,
        message: str,
        source: str,
        *,
        edits: Sequence[Edit] = (),
        person: str = "",
    ) -> None:
        self.findings.append(Finding(kind, entry, message, source, tuple(edits), person))


def dotted(path: PathT) -> str:
    return ".".join(str(p) for p in path)
