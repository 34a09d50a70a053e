"""The workflow files as the workflow tests read them: loaded as GitHub does, with their jobs,
steps and expressions."""

from __future__ import annotations

import re
from collections.abc import Iterator

from tests.conftest import ROOT
from tests.gha.expressions import Value
from tests.gha.model import load_workflow
from tests.gha.steps import called_job, reusable

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


BUILD_CELLS = load_workflow(WORKFLOWS / "build-cells.yml")  # the steps of the parts and build jobs


def job_spec(job: str) -> dict[str, Value]:
    """What wheels.yml's ``job`` runs: its own spec, or the job of the reusable workflow it calls."""
    called = reusable(WHEELS, job)
    if called is None:
        return JOBS[job]
    workflow, name = called
    return as_dict(as_dict(workflow["jobs"])[name])


CELL = "fromJSON(inputs.cell)"  # how build-cells.yml reads its job's matrix entry (its `cell` input)


def entry(job: str, key: str) -> str:
    """How ``job``'s steps read ``key`` of its matrix entry: ``matrix.key``, or through the ``cell`` input
    of the reusable workflow the job calls."""
    return f"{CELL}.{key}" if reusable(WHEELS, job) else f"matrix.{key}"


def entry_keys(text: str) -> set[str]:
    """The keys of a matrix entry an expression reads, either way (:func:`entry`)."""
    return set(re.findall(r"(?:\bmatrix|fromJSON\(inputs\.cell\))\.([A-Za-z_][\w-]*)", text))


def seen_by_steps(job: str, contexts: dict[str, Value]) -> dict[str, Value]:
    """The contexts ``job``'s steps see when the job runs with ``contexts`` (``matrix``, ``needs``, ...): those,
    or for a job that calls a reusable workflow, what that workflow's job sees (its ``inputs``)."""
    called = called_job(WHEELS, job, contexts)
    return contexts if called is None else called[2]


def job_steps(job: str) -> list[dict[str, Value]]:
    return job_spec(job)["steps"]  # type: ignore[return-value]


def as_dict(value: Value) -> dict[str, Value]:
    return value if isinstance(value, dict) else {}
