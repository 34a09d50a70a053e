"""``dswheels ci plan``: everything a run of the wheels workflow needs, from the event GitHub describes.

The plan job of .github/workflows/wheels.yml runs this one command; the workflow only wires
its outputs to the jobs. Every setting comes from the environment GitHub sets (or a flag,
which wins): see ``dswheels ci plan --help``.
"""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

from dswheels.cli.command import Command
from dswheels.cli.flags import Flag, Flags, PathUse, fill
from dswheels.cli.shared import MATRIX_FLAG, PUBLISHED_AT, REPORT, published_at
from dswheels.host import clock
from dswheels.host.gha import write_output
from dswheels.host.log import get_reporter
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.naming import cell_id
from dswheels.kernel.result import Done
from dswheels.plan.ci_step import OUTPUTS, CiPlanOptions, CiRun, plan_ci_run
from dswheels.plan.event import (
    AXES,
    DispatchInputs,
    Event,
    EventError,
    RunIntent,
    intent_for,
    parse_gpu_platforms,
)
from dswheels.plan.render_costs import render_cost_table
from dswheels.plan.render_plan import render_table

__all__ = ["COMMAND", "OUTPUTS"]

HELP = "the run's jobs, release and plan file, from the event"

DESCRIPTION = """\
Decide what a run of the wheels workflow builds and publishes, plan it once, and hand the
workflow its jobs. A tag push v<DeepSpeed version>[-<suffix>] builds that version across the
matrix and publishes to the release of the tag; a dispatch builds its combination (an input
set to "matrix" takes the matrix's values) and publishes to v<DeepSpeed version> when
"publish" is ticked; the canary (one cell of the version's matrix, whatever the other inputs
say) is never published. A run that publishes leaves out the cells
already published (in --publish-dir when set, else at --index-url).

Writes the plan (docs/plan-json.md) to OUT/plan.json for the build jobs (`dswheels build
--plan`), the step outputs to $GITHUB_OUTPUT (printed when it is unset), and the plan's table
and runner-minutes to $GITHUB_STEP_SUMMARY:

  matrix       the build jobs ({"include": [...]}, docs/plan-json.md `--format github`)
  parts        the part jobs that fill the compiler cache first (usually none)
  smoke        the build jobs of the platforms with a GPU runner (--gpu-runners)
  preflight    the Wine pre-flight: the canary of the run's Windows cells (its cell, the canary's ops),
               built and verified under Wine on Linux before any Windows build job (none: no Windows
               CUDA cell)
  release      the GitHub Release the wheels go to ("" publishes nothing)
  plan         the plan file the build jobs read
  publish_dir  --publish-dir ("" publishes to the GitHub Release)
  index_url    where the index is served (the pages job deploys it there)

examples:
  dswheels ci plan                                   # in the workflow: everything from the environment
  dswheels ci plan --event push --ref-name v0.19.8 --repository OWNER/dswheels   # what a tag push does
  dswheels ci plan --event workflow_dispatch --deepspeed 0.19.8 --torch 2.14 --cuda cu130 \\
                   --python 3.12 --platform win_amd64 --canary"""


_AXIS_HELP = {
    "deepspeed": "the dispatch's DeepSpeed version (X.Y.Z)",
    "torch": "the dispatch's torch MAJOR.MINOR, or matrix",
    "cuda": "the dispatch's torch variant (cuXYZ or cpu), or matrix",
    "python": "the dispatch's Python, or matrix",
    "platform": "the dispatch's platform, or matrix",
}

FLAGS: Flags = (
    Flag(
        "--event",
        env="GITHUB_EVENT_NAME",
        choices=tuple(e.value for e in Event),
        help="what started the run: a tag push or a dispatch",
    ),
    Flag("--ref-name", env="GITHUB_REF_NAME", metavar="TAG", help="the pushed tag, v<DeepSpeed version>"),
    *(Flag(f"--{axis}", env=f"INPUT_{axis.upper()}", metavar="VALUE", help=_AXIS_HELP[axis]) for axis in AXES),
    Flag(
        "--canary",
        env="INPUT_CANARY",
        action=argparse.BooleanOptionalAction,
        help="the dispatch builds the canary only: one cell of the version's matrix (never published)",
    ),
    Flag(
        "--publish",
        env="INPUT_PUBLISH",
        action=argparse.BooleanOptionalAction,
        help="the dispatch publishes to the release v<DeepSpeed>",
    ),
    MATRIX_FLAG.but(to="matrix"),
    *PUBLISHED_AT,
    Flag(
        "--gpu-runners",
        env="DSWHEELS_GPU_RUNNERS",
        metavar="PLATFORMS",
        help="platforms with a self-hosted GPU runner for the smoke jobs, e.g. 'linux_x86_64 win_amd64'",
    ),
    Flag(
        "--out",
        to="out",
        default=Path("plan"),
        metavar="DIR",
        path=PathUse.WRITES_INTO,
        help="where plan.json goes (%(default)s)",
    ),
    REPORT,
)


def _intent(args: argparse.Namespace) -> RunIntent:
    if args.event is None:
        raise ConfigError("no event: run in GitHub Actions (GITHUB_EVENT_NAME) or pass --event")
    event = Event(args.event)
    inputs = None
    if event is Event.WORKFLOW_DISPATCH:
        axes = {axis: getattr(args, axis) or "matrix" for axis in AXES}
        inputs = DispatchInputs(**axes, canary=args.canary, publish=args.publish)
    return intent_for(event, ref_name=args.ref_name or "", inputs=inputs)


def _options(args: argparse.Namespace) -> CiPlanOptions:
    try:
        intent = _intent(args)
        gpu = parse_gpu_platforms(args.gpu_runners or "")
    except EventError as exc:
        raise ConfigError(str(exc)) from None
    today = dt.date.fromisoformat(clock.today())  # the planned images' ends are judged on it
    return CiPlanOptions(**fill(args, FLAGS), intent=intent, gpu=gpu, published=published_at(args), today=today)


def _run(options: CiPlanOptions, _args: argparse.Namespace) -> Done:
    result = plan_ci_run(options)
    if result.skipped is not None:
        get_reporter().aside(result.skipped.line)
    _render(result)
    return Done(
        data={
            "planned": [cell_id(p.cell) for p in result.plan.planned],
            "jobs": len(result.jobs.jobs),
            "outputs": dict(result.outputs),
        }
    )


def _render(result: CiRun) -> None:
    report = render_table(result.plan, result.jobs, per_cell=result.per_cell)
    report += "\n" + render_cost_table(result.jobs, per_cell=result.per_cell)
    notes = "\n".join(result.notes)
    shown = get_reporter()
    shown.emit(notes + "\n\n" + report)
    written = [write_output(name, value) for name, value in result.outputs.items()]
    if not all(written):  # not in GitHub Actions: show what the workflow would get
        shown.emit("\n" + "".join(f"{name}={value}\n" for name, value in result.outputs.items()))
    shown.summary("### Plan\n\n" + "\n\n".join(result.notes) + "\n\n```\n" + report + "```")


COMMAND = Command("plan", HELP, DESCRIPTION, FLAGS, _options, _run)
