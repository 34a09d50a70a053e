"""The select step: which cells to work on, planned.

Each way of naming cells is one options class; :func:`select_cells` plans what it names.
Which one a command line means (and which flags cannot go together) is the command's to say.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dswheels.host.files import read_bounded
from dswheels.kernel.compat import Compat
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.jsondoc import parse_json
from dswheels.kernel.model import Plan, PlannedCell
from dswheels.kernel.naming import cell_id, parse_cell_id
from dswheels.kernel.plan_json import PlanFormatError, parse_plan
from dswheels.kernel.versions import VersionTuple
from dswheels.plan.effects.matrix_file import load_matrix
from dswheels.plan.effects.this_machine import ThisMachine, plan_this_machine
from dswheels.plan.planner import Combo, plan
from dswheels.plan.planner import select_cells as select_matching

__all__ = [
    "MAX_PLAN_BYTES",
    "CellSelection",
    "MatrixCells",
    "NamedCells",
    "PlanFileCells",
    "ThisMachine",
    "plan_cell_ids",
    "plan_matrix",
    "read_plan_cells",
    "select_cells",
]

MAX_PLAN_BYTES = 256 * 1024**2  # a plan of the whole matrix is a few MB; far more is not a plan


@dataclass(frozen=True, kw_only=True, slots=True)
class MatrixCells:
    """Cells of the matrix file: those ``only`` names (ids or globs), or those of a combination."""

    matrix: Path
    only: tuple[str, ...] = ()
    combo: Combo = field(default_factory=Combo)
    nvcc: VersionTuple | None = None  # plan as if the builder had this nvcc
    redist_required: bool = False  # for runners that install CUDA from NVIDIA's archives (`dswheels ci plan`)


@dataclass(frozen=True, kw_only=True, slots=True)
class NamedCells:
    """Complete cells named by id, planned from the rules alone (the matrix gives ops, arch lists,
    baseline and index), listed in the matrix or not."""

    ids: tuple[str, ...]
    matrix: Path
    nvcc: VersionTuple | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class PlanFileCells:
    """Cells of a plan file exactly as planned: all of them, those named by id, or those ``only`` matches."""

    path: Path
    ids: tuple[str, ...] = ()
    only: tuple[str, ...] = ()


CellSelection = MatrixCells | NamedCells | PlanFileCells | ThisMachine


def select_cells(selection: CellSelection, compat: Compat) -> tuple[PlannedCell, ...]:
    """The planned cells ``selection`` names."""
    if isinstance(selection, PlanFileCells):
        return read_plan_cells(selection)
    if isinstance(selection, NamedCells):
        return plan_cell_ids(selection, compat)
    if isinstance(selection, ThisMachine):
        return (plan_this_machine(selection, compat),)
    return plan_matrix(selection, compat).planned


def plan_matrix(selection: MatrixCells, compat: Compat) -> Plan:
    """The plan of a matrix file for its ``only`` ids/globs or its combination."""
    spec = load_matrix(selection.matrix, compat)
    return plan(
        spec,
        compat,
        only=selection.only,
        combo=selection.combo,
        nvcc=selection.nvcc,
        redist_required=selection.redist_required,
    )


def plan_cell_ids(selection: NamedCells, compat: Compat) -> tuple[PlannedCell, ...]:
    """Plan cells named by id from the rules alone; every bad id is reported at once."""
    spec = load_matrix(selection.matrix, compat)
    cells = []
    problems: list[str] = []
    for text in selection.ids:
        try:
            cells.append(parse_cell_id(text))
        except ValueError as exc:  # noqa: PERF203 - every bad id is reported at once
            problems.append(str(exc))
    if problems:
        raise ConfigError("bad --cell value", details="\n".join(problems))
    planned: list[PlannedCell] = []
    for cell in cells:
        combo = Combo(
            deepspeed=cell.deepspeed, torch=cell.torch, variant=cell.variant, python=cell.python, platform=cell.platform
        )
        planned.extend(plan(spec, compat, combo=combo, nvcc=selection.nvcc).planned)
    return tuple(planned)


def _read_plan(path: Path) -> tuple[PlannedCell, ...]:
    try:
        return parse_plan(parse_json(read_bounded(path, limit=MAX_PLAN_BYTES), what=str(path))).planned
    except FileNotFoundError:
        raise ConfigError(
            f"no plan file at {path}", hint="write one with `dswheels plan --format json > FILE`"
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read the plan file {path}: {exc.strerror}") from None
    except ValueError as exc:  # not JSON, too large, or not the plan contract (PlanFormatError)
        what = "is not a plan" if isinstance(exc, PlanFormatError) else "cannot be read"
        raise ConfigError(
            f"{path} {what}: {exc}", hint="give the file `dswheels plan --format json` wrote (docs/plan-json.md)"
        ) from None


def read_plan_cells(selection: PlanFileCells) -> tuple[PlannedCell, ...]:
    """The planned cells of a plan file: all, those named by id (each must be in it), or matching ``only``."""
    path = selection.path
    planned = _read_plan(path)
    by_id = {cell_id(item.cell): item for item in planned}
    if selection.ids:
        return _by_ids(selection.ids, by_id, what=f"the plan {path} ({len(planned)} cells)")
    if selection.only:
        chosen = select_matching([item.cell for item in planned], selection.only, what=f"the plan {path}")
        return tuple(by_id[cell_id(cell)] for cell in chosen)
    return planned


def _by_ids(ids: Sequence[str], by_id: dict[str, PlannedCell], *, what: str) -> tuple[PlannedCell, ...]:
    missing = [cid for cid in ids if cid not in by_id]
    if missing:
        raise ConfigError(
            f"not in {what}: {', '.join(missing)}",
            hint="a build job builds cells of the plan its plan job wrote; plan them first",
        )
    return tuple(by_id[cid] for cid in dict.fromkeys(ids))
