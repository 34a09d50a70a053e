"""The cell selection shared by ``plan``, ``build`` and ``ci plan``: its flags, the plan, the canary,
and leaving out what is published already."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from dswheels.commands.common import add_matrix_argument, load_matrix, parse_nvcc_option
from dswheels.core.canary import pick_canary
from dswheels.core.compat import Compat
from dswheels.core.costs import load_costs
from dswheels.core.index import published_canonical_names
from dswheels.core.jobs import JobPlan, plan_jobs
from dswheels.core.naming import wheel_filename
from dswheels.core.plan import Combo, Plan, combo_from_values, plan
from dswheels.effects.index import list_published
from dswheels.errors import ConfigError, NothingToDoError

__all__ = [
    "COMBO_AXES",
    "add_selection_arguments",
    "canary_plan",
    "compute_plan",
    "jobs_of",
    "plan_selection",
    "skip_published",
]

COMBO_AXES = ("deepspeed", "torch", "cuda", "python", "platform")


def add_selection_arguments(p: argparse.ArgumentParser) -> None:
    """--matrix, --only and the combination flags: shared by every command that takes cells."""
    add_matrix_argument(p)
    p.add_argument(
        "--only", action="append", default=[], metavar="ID", help="cell id or glob of the matrix (repeatable)"
    )
    p.add_argument("--deepspeed", metavar="X.Y.Z", help="DeepSpeed version of the combination")
    p.add_argument("--torch", metavar="M.m", help="torch MAJOR.MINOR of the combination")
    p.add_argument("--cuda", metavar="cuXYZ|X.Y|cpu", help="torch variant of the combination (cpu for the CPU build)")
    p.add_argument("--python", metavar="3.X", help="Python version of the combination")
    p.add_argument("--platform", metavar="PLAT", help="win_amd64 or linux_x86_64")
    p.add_argument(
        "--nvcc",
        metavar="X.Y",
        help="plan as if the builder had this nvcc instead of each variant's own CUDA (same major)",
    )


def plan_selection(matrix: Path, compat: Compat, *, only: list[str], combo: Combo, nvcc: str | None = None) -> Plan:
    """The plan of a matrix file for ``only`` (ids or globs) or a combination (never both)."""
    if combo.given and only:
        raise ConfigError("--only selects cells of the matrix; it cannot be combined with --deepspeed/--torch/...")
    return plan(load_matrix(matrix, compat), compat, only=only, combo=combo, nvcc=parse_nvcc_option(nvcc))


def compute_plan(args: argparse.Namespace, compat: Compat) -> Plan:
    """The plan for the selection arguments of ``args`` (see :func:`add_selection_arguments`)."""
    combo = combo_from_values({key: getattr(args, key) for key in COMBO_AXES})
    return plan_selection(args.matrix, compat, only=args.only, combo=combo, nvcc=args.nvcc)


def skip_published(result: Plan, location: str, *, allow_empty: bool) -> Plan:
    """Drop the cells whose wheel ``location`` already lists; exit 3 when none is left (unless allowed)."""
    published = published_canonical_names(list_published(location))
    left = tuple(item for item in result.planned if wheel_filename(item.cell) not in published)
    skipped = len(result.planned) - len(left)
    sys.stderr.write(f"skipped {skipped} of {len(result.planned)} cells: their wheels are published at {location}\n")
    if not left and not allow_empty:
        raise NothingToDoError(
            f"all {len(result.planned)} selected cells are already published at {location}",
            hint="pass --allow-empty to get an empty plan (exit 0) instead",
        )
    return replace(result, planned=left)


def canary_plan(result: Plan) -> Plan:
    """The plan of the canary alone (:mod:`dswheels.core.canary`)."""
    picked = pick_canary(result.planned)
    if picked is None:
        raise ConfigError(
            "no canary: the selection plans no Windows CUDA cell that builds cpu_adam and fused_adam",
            hint="select Windows CUDA cells (e.g. --deepspeed alone, on the shipped matrix)",
        )
    return replace(result, planned=(picked,), mode="canary")


def jobs_of(result: Plan, *, group: str = "python") -> tuple[JobPlan, JobPlan | None]:
    """The plan's jobs (grouped by ``group``, under the cost model's budget) and, for the runner-hours
    comparison, one job per cell (None for an empty plan)."""
    model = load_costs()
    jobs = plan_jobs(result.planned, model, finest=group)
    per_cell = plan_jobs(result.planned, model, finest="cell", limit=sys.maxsize) if result.planned else None
    return jobs, per_cell
