"""The cell selection shared by ``plan``, ``build``, ``ci plan`` and ``facts builds``: its flags, the
plan, the canary, where the wheels are published, and leaving out what is published already."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from dswheels.commands.common import add_env_option, add_matrix_argument, load_matrix, parse_nvcc_option
from dswheels.core.compat import Compat
from dswheels.core.index.site import published_canonical_names
from dswheels.core.jsondoc import parse_json
from dswheels.core.model import PlannedCell
from dswheels.core.naming import cell_id, wheel_filename
from dswheels.core.plan.contract import PlanFormatError, parse_plan
from dswheels.core.plan.planner import Combo, Plan, combo_from_values, plan, select_cells
from dswheels.core.workflow.canary import pick_canary
from dswheels.core.workflow.costs import load_costs
from dswheels.core.workflow.event import EventError, default_index_url, skip_published_source
from dswheels.core.workflow.jobs import JobPlan, plan_jobs
from dswheels.effects.files import read_bounded
from dswheels.effects.index import list_published
from dswheels.errors import ConfigError, NothingToDoError

__all__ = [
    "COMBO_AXES",
    "MAX_PLAN_BYTES",
    "add_published_arguments",
    "add_selection_arguments",
    "canary_plan",
    "cells_of_plan",
    "compute_plan",
    "index_url_of",
    "jobs_of",
    "plan_selection",
    "published_source",
    "published_wheels",
    "skip_published",
]

COMBO_AXES = ("deepspeed", "torch", "cuda", "python", "platform")
MAX_PLAN_BYTES = 256 * 1024**2  # a plan of the whole matrix is a few MB; far more is not a plan


def add_selection_arguments(p: argparse.ArgumentParser) -> None:
    """--matrix, --only and the combination flags: shared by every command that takes cells."""
    add_matrix_argument(p)
    p.add_argument(
        "--only", action="append", default=[], metavar="ID", help="cell id or glob of the matrix (repeatable)"
    )
    p.add_argument("--deepspeed", metavar="X.Y.Z", help="DeepSpeed version of the combination")
    p.add_argument(
        "--torch", metavar="M.m", help="torch MAJOR.MINOR of the combination, as in the label (2.14, not 2.14.1)"
    )
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


def add_published_arguments(p: argparse.ArgumentParser) -> None:
    """Where the wheels are published (the workflows' repository variables): a directory, else an index."""
    add_env_option(
        p, "--publish-dir", env="DSWHEELS_PUBLISH_DIR", metavar="DIR", help="publish into this directory, not a release"
    )
    add_env_option(p, "--index-url", env="DSWHEELS_INDEX_URL", metavar="URL", help="where the index is served")
    add_env_option(
        p,
        "--repository",
        env="GITHUB_REPOSITORY",
        metavar="OWNER/NAME",
        help="gives the default --index-url, https://OWNER.github.io/NAME/",
    )


def index_url_of(args: argparse.Namespace) -> str:
    """--index-url, else GitHub Pages' URL of --repository; "" when neither is known."""
    if args.index_url:
        return str(args.index_url)
    try:
        return default_index_url(args.repository) if args.repository else ""
    except EventError as exc:
        raise ConfigError(f"--repository: {exc}") from None


def published_source(args: argparse.Namespace) -> str:
    """Where the published wheels are listed (see :func:`add_published_arguments`)."""
    source = skip_published_source(publish_dir=args.publish_dir or "", index_url=index_url_of(args))
    if not source:
        raise ConfigError(
            "nothing says where the wheels are published",
            hint="set DSWHEELS_PUBLISH_DIR or DSWHEELS_INDEX_URL (or pass --publish-dir/--index-url); in GitHub "
            "Actions, GITHUB_REPOSITORY gives the default https://OWNER.github.io/NAME/",
        )
    return source


def published_wheels(location: str, *, missing_dir_ok: bool = False) -> list[str]:
    """The wheel filenames published at ``location``; with ``missing_dir_ok`` a directory that does not
    exist yet (a publish directory before the first publish) lists none."""
    if missing_dir_ok and "://" not in location and not Path(location).exists():
        return []
    return list_published(location)


def skip_published(result: Plan, location: str, *, allow_empty: bool, missing_dir_ok: bool = False) -> Plan:
    """Drop the cells whose wheel ``location`` already lists; exit 3 when none is left (unless allowed)."""
    published = published_canonical_names(published_wheels(location, missing_dir_ok=missing_dir_ok))
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
    """The plan of the canary alone (:mod:`dswheels.core.workflow.canary`)."""
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


def cells_of_plan(path: Path, *, ids: Sequence[str], only: Sequence[str]) -> list[PlannedCell]:
    """The planned cells of a plan file: all, those named by id (each must be in it), or matching ``only``."""
    try:
        planned = parse_plan(parse_json(read_bounded(path, limit=MAX_PLAN_BYTES), what=str(path))).planned
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
    by_id = {cell_id(item.cell): item for item in planned}
    if ids:
        missing = [cid for cid in ids if cid not in by_id]
        if missing:
            raise ConfigError(
                f"not in the plan {path} ({len(planned)} cells): {', '.join(missing)}",
                hint="a build job builds cells of the plan its plan job wrote; plan them first",
            )
        picked = [by_id[cid] for cid in dict.fromkeys(ids)]
        if only:
            raise ConfigError("--cell and --only both select cells of the plan: give one")
        return picked
    if only:
        chosen = select_cells([item.cell for item in planned], only, what=f"the plan {path}")
        return [by_id[cell_id(cell)] for cell in chosen]
    return list(planned)
