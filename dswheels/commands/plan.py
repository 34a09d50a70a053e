"""``dswheels plan``: the matrix expanded into buildable cells with their toolchains."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from dswheels import __version__
from dswheels.commands.common import DEFAULT_MATRIX, Subparsers, formatter, load_matrix, parse_nvcc_option
from dswheels.core.canary import pick_canary
from dswheels.core.compat import Compat, load_compat
from dswheels.core.costs import load_costs
from dswheels.core.index import published_canonical_names
from dswheels.core.jobs import plan_jobs
from dswheels.core.naming import wheel_filename
from dswheels.core.plan import Plan, combo_from_values, plan
from dswheels.core.render_costs import render_cost_table
from dswheels.core.render_plan import render_explain, render_github, render_json, render_table
from dswheels.effects.index import list_published
from dswheels.errors import ConfigError, NothingToDoError

__all__ = ["add_selection_arguments", "compute_plan", "register", "run", "skip_published"]

DESCRIPTION = """\
Expand the build matrix into cells (one wheel each), drop what the compatibility rules
forbid, and resolve every remaining cell's toolchain: runner image, MSVC toolset or GCC,
nvcc, TORCH_CUDA_ARCH_LIST, the ops to build and the ops left out (with why), workaround
flags and the DS_SKIP_CUDA_CHECK decision.

Select cells of the matrix with --only (ids or globs). Or use --deepspeed/--torch/--cuda/
--python/--platform: all five name one exact cell, planned whenever the rules allow it,
listed in the matrix or not (as workflow_dispatch does); fewer replace those axes of the
matrix and keep its include/exclude (a tag build uses --deepspeed alone).

examples:
  dswheels plan                                   # table of the shipped matrix
  dswheels plan --explain                         # every dropped cell and the rule why
  dswheels plan --only 'ds0.19.8-torch2.14-*-linux_x86_64'
  dswheels plan --deepspeed 0.15.1 --torch 2.1 --cuda cu121 --python 3.11 --platform win_amd64
  dswheels plan --deepspeed 0.19.8 --torch 2.14 --cuda cu130 --python 3.12 \\
                --platform linux_x86_64 --nvcc 13.2    # what if the builder has nvcc 13.2?
  echo "matrix=$(dswheels plan --format github --allow-empty)" >> "$GITHUB_OUTPUT"
  dswheels plan --skip-published https://OWNER.github.io/dswheels/   # only what is not published yet
  dswheels plan --skip-published site/                                # ... or not in a local index
  dswheels plan --canary --format github          # the canary job of a fork's first run"""


def add_selection_arguments(p: argparse.ArgumentParser) -> None:
    """--matrix, --only and the combination flags: shared by every command that takes cells."""
    p.add_argument(
        "--matrix", type=Path, default=DEFAULT_MATRIX, metavar="PATH", help="matrix file (default: %(default)s)"
    )
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


def register(sub: Subparsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "plan",
        help="expand the matrix into buildable cells with their toolchains",
        description=DESCRIPTION,
        formatter_class=formatter,
    )
    add_selection_arguments(p)
    p.add_argument(
        "--format",
        choices=("table", "json", "github"),
        default="table",
        help="table (default, for people), json (the contract, docs/plan-json.md), github (jobs for fromJSON)",
    )
    p.add_argument("--explain", action="store_true", help="print every dropped cell and the rule that drops it")
    p.add_argument(
        "--costs",
        action="store_true",
        help="print every job with its estimated runner minutes (compile_times.yml, docs/costs.md) and the total",
    )
    p.add_argument(
        "--group",
        choices=("python", "cell"),
        default="python",
        help="python (default): one job builds every Python of a (deepspeed, torch, variant, platform), compiling "
        "the .cu objects once; cell: one job per cell (coarser either way past 256 jobs)",
    )
    p.add_argument(
        "--stage",
        choices=("build", "part"),
        default="build",
        help="with --format github: build (the jobs that make wheels) or part (the jobs that first compile some "
        "ops of a group too big for one job into the shared compiler cache; usually none)",
    )
    p.add_argument(
        "--skip-published",
        metavar="INDEX_URL|DIR",
        help="leave out cells whose wheel is already in this index (site URL, simple/ URL, site or wheel directory)",
    )
    p.add_argument(
        "--canary",
        action="store_true",
        help="plan only the canary: of the selected cells, the cheapest Windows CUDA cell, building just cpu_adam "
        "and fused_adam (run it first on a fork: it proves the Windows path in about 20 minutes; never published)",
    )
    p.add_argument(
        "--allow-empty",
        action="store_true",
        help="with nothing left to build, print an empty job list and exit 0 instead of 3",
    )
    p.set_defaults(func=run)


def compute_plan(args: argparse.Namespace, compat: Compat) -> Plan:
    """The plan for the selection arguments of ``args`` (see :func:`add_selection_arguments`)."""
    spec = load_matrix(args.matrix, compat)
    combo = combo_from_values({key: getattr(args, key) for key in ("deepspeed", "torch", "cuda", "python", "platform")})
    if combo.given and args.only:
        raise ConfigError("--only selects cells of the matrix; it cannot be combined with --deepspeed/--torch/...")
    return plan(spec, compat, only=args.only, combo=combo, nvcc=parse_nvcc_option(args.nvcc))


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


def run(args: argparse.Namespace) -> int:
    compat = load_compat()
    result = compute_plan(args, compat)
    if args.canary:
        result = canary_plan(result)
    if args.skip_published:
        result = skip_published(result, args.skip_published, allow_empty=args.allow_empty)
    if args.explain:
        sys.stdout.write(render_explain(result))
    elif args.format == "json":
        sys.stdout.write(render_json(result, version=__version__))
    else:
        model = load_costs()
        jobs = plan_jobs(result.planned, model, finest=args.group)
        if args.format == "github":
            sys.stdout.write(render_github(result, jobs, stage=args.stage) + "\n")
            return 0
        per_cell = plan_jobs(result.planned, model, finest="cell", limit=sys.maxsize) if result.planned else None
        if args.costs:
            sys.stdout.write(render_cost_table(jobs, per_cell=per_cell))
        else:
            sys.stdout.write(render_table(result, jobs, per_cell=per_cell))
    return 0
