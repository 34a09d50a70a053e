"""``dswheels plan``: the matrix expanded into buildable cells with their toolchains."""

from __future__ import annotations

import argparse
import datetime as dt

from dswheels import __version__
from dswheels.cli.command import Command
from dswheels.cli.commands import listed_help
from dswheels.cli.flags import Flag, Flags, PathUse, choice, fill
from dswheels.cli.shared import REPORT, SELECTION, matrix_selection
from dswheels.host import clock
from dswheels.host.log import get_reporter
from dswheels.kernel.errors import NothingToDoError
from dswheels.kernel.naming import cell_id
from dswheels.kernel.plan_json import render_json
from dswheels.kernel.result import Done
from dswheels.plan.render_costs import render_cost_table
from dswheels.plan.render_plan import render_explain, render_github, render_table
from dswheels.plan.step import JobGrouping, PlanOptions, PlanRun, run_plan

__all__ = ["COMMAND"]

HELP = listed_help("plan")

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
                                                  # (the wheels workflow runs `dswheels ci plan`)
  dswheels plan --skip-published https://OWNER.github.io/dswheels/   # only what is not published yet
  dswheels plan --skip-published site/                                # ... or not in a local index
  dswheels plan --canary --format github          # the canary job of a fork's first run"""


FLAGS: Flags = (
    *SELECTION,
    Flag(
        "--format",
        choices=("table", "json", "github"),
        default="table",
        help="table (default, for people), json (the contract, docs/plan-json.md), github (jobs for fromJSON)",
    ),
    Flag("--explain", action="store_true", help="print every dropped cell and the rule that drops it"),
    Flag(
        "--costs",
        action="store_true",
        help="print every job with its estimated runner minutes (compile_times.yml, docs/costs.md), the total, the "
        "tag's critical path (the longest job's setup + compile + checks; tag to the last wheel indexed) and every "
        "figure the estimates read, each measured, probed, documented, chosen or assumed",
    ),
    choice(
        "--group",
        JobGrouping,
        help="python (default): one job builds every Python of a (deepspeed, torch, variant, platform), compiling "
        "the .cu objects once; cell: one job per cell (coarser either way past 256 jobs)",
    ),
    Flag(
        "--stage",
        choices=("build", "part"),
        default="build",
        help="with --format github: build (the jobs that make wheels) or part (the jobs that first compile some "
        "ops of a group too big for one job into the shared compiler cache; usually none)",
    ),
    Flag(
        "--skip-published",
        to="skip_published",
        metavar="INDEX_URL|DIR",
        path=PathUse.READS_PUBLISHED,
        help="leave out cells whose wheel is already in this index (site URL, simple/ URL, site or wheel directory)",
    ),
    Flag(
        "--canary",
        to="canary",
        action="store_true",
        help="plan only the canary: of the selected cells, the Windows CUDA cell with the newest nvcc (then the "
        "cheapest), building just cpu_adam, fused_adam and random_ltd (run it first on a fork: it proves the "
        "Windows path in about half an hour; never published)",
    ),
    Flag(
        "--allow-empty",
        action="store_true",
        help="with nothing left to build, print an empty job list and exit 0 instead of 3",
    ),
    REPORT,
)


def _options(args: argparse.Namespace) -> PlanOptions:
    return PlanOptions(
        **fill(args, FLAGS),
        selection=matrix_selection(args),
        group=None if args.explain or args.format == "json" else JobGrouping(args.group),
        today=dt.date.fromisoformat(clock.today()),  # SOURCE_DATE_EPOCH fixes it
    )


def _run(options: PlanOptions, args: argparse.Namespace) -> Done:
    result = run_plan(options)
    for warning in result.warnings:
        get_reporter().warning(warning)
    if result.skipped is not None:
        get_reporter().aside(result.skipped.line)
        if not result.plan.planned and not args.allow_empty:
            raise NothingToDoError(
                f"all {result.skipped.total} selected cells are already published at {result.skipped.location}",
                hint="pass --allow-empty to get an empty plan (exit 0) instead",
            )
    get_reporter().emit(_render(result, args))
    return Done(data=_data(result))


def _data(result: PlanRun) -> dict[str, object]:
    """The report's data: the cells planned and dropped (``--format json`` is the whole plan)."""
    skipped = result.skipped
    return {
        "matrix": result.plan.matrix,
        "mode": result.plan.mode,
        "planned": [cell_id(p.cell) for p in result.plan.planned],
        "dropped": [cell_id(d.cell) for d in result.plan.dropped],
        "skipped_published": None if skipped is None else {"skipped": skipped.skipped, "at": skipped.location},
        "jobs": None if result.jobs is None else len(result.jobs.jobs),
    }


def _render(result: PlanRun, args: argparse.Namespace) -> str:
    if args.explain:
        return render_explain(result.plan)
    if args.format == "json":
        return render_json(result.plan, version=__version__)
    assert result.jobs is not None  # noqa: S101 - the options ask for them in these formats
    if args.format == "github":
        return render_github(result.plan, result.jobs, stage=args.stage) + "\n"
    if args.costs:
        return render_cost_table(result.jobs, per_cell=result.per_cell)
    return render_table(result.plan, result.jobs, per_cell=result.per_cell)


COMMAND = Command("plan", HELP, DESCRIPTION, FLAGS, _options, _run)
