"""The workflow files as the workflow tests read them: loaded as GitHub does, with their jobs,
steps and expressions."""

from __future__ import annotations

import re
from collections.abc import Iterator

from tests.conftest import ROOT
from tests.gha.expressions import Value
from tests.gha.model import load_workflow

WORKFLOWS = ROOT / ".github" / "workflows"
WHEELS = load_workflow(WORKFLOWS / "wheels.yml")
CI = load_workflow(WORKFLOWS / "ci.yml")
JOBS: dict[str, dict[str, Value]] = WHEELS["jobs"]  # type: ignore[assignment]
PLAN_MATRIX = "${{ fromJSON(needs.plan.outputs.matrix) }}"
SMOKE_MATRIX = "${{ fromJSON(needs.plan.outputs.smoke) }}"
EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)


def strings(node: Value) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from strings(value)


def expressions(node: Value) -> Iterator[str]:
    """Every expression: ``${{ }}`` templates, and ``if:`` values (bare expressions)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "if" and isinstance(value, str) and "${{" not in value:
                yield value
            else:
                yield from expressions(value)
    elif isinstance(node, list):
        for value in node:
            yield from expressions(value)
    elif isinstance(node, str):
        yield from (m.group(1) for m in EXPRESSION.finditer(node))


def job_steps(job: str) -> list[dict[str, Value]]:
    return JOBS[job]["steps"]  # type: ignore[return-value]


def as_dict(value: Value) -> dict[str, Value]:
    return value if isinstance(value, dict) else {}
