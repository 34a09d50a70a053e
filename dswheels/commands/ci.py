"""``dswheels ci plan``: everything a run of the wheels workflow needs, from the event GitHub describes.

The plan job of .github/workflows/wheels.yml runs this one command; the workflow only wires
its outputs to the jobs. Every setting comes from the environment GitHub sets (or a flag,
which wins): see ``dswheels ci plan --help``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from dswheels import __version__
from dswheels.commands.common import (
    Subparsers,
    add_command_group,
    add_env_flag,
    add_env_option,
    add_matrix_argument,
    formatter,
)
from dswheels.commands.selection import (
    add_published_arguments,
    canary_plan,
    index_url_of,
    jobs_of,
    plan_selection,
    published_source,
    skip_published,
)
from dswheels.core.compat import load_compat
from dswheels.core.model import Platform
from dswheels.core.plan.contract import render_json
from dswheels.core.plan.planner import Plan, combo_from_values
from dswheels.core.plan.render import render_github, render_table
from dswheels.core.workflow.event import (
    AXES,
    DispatchInputs,
    Event,
    EventError,
    RunIntent,
    intent_for,
    parse_gpu_platforms,
    platforms_text,
)
from dswheels.core.workflow.jobs import JobPlan
from dswheels.core.workflow.render_costs import render_cost_table
from dswheels.effects.files import write_text_atomic
from dswheels.effects.gha import write_output, write_summary
from dswheels.errors import ConfigError
from dswheels.log import get_reporter

__all__ = ["OUTPUTS", "register"]

DESCRIPTION = """\
Decide what a run of the wheels workflow builds and publishes, plan it once, and hand the
workflow its jobs. A tag push v<DeepSpeed version>[-<suffix>] builds that version across the
matrix and publishes to the release of the tag; a dispatch builds its combination (an input
set to "matrix" takes the matrix's values) and publishes to v<DeepSpeed version> when
"publish" is ticked; the canary is never published. A run that publishes leaves out the cells
already published (in --publish-dir when set, else at --index-url).

Writes the plan (docs/plan-json.md) to OUT/plan.json for the build jobs (`dswheels build
--plan`), the step outputs to $GITHUB_OUTPUT (printed when it is unset), and the plan's table
and runner-minutes to $GITHUB_STEP_SUMMARY:

  matrix       the build jobs ({"include": [...]}, docs/plan-json.md `--format github`)
  parts        the part jobs that fill the compiler cache first (usually none)
  smoke        the build jobs of the platforms with a GPU runner (--gpu-runners)
  release      the GitHub Release the wheels go to ("" publishes nothing)
  plan         the plan file the build jobs read
  publish_dir  --publish-dir ("" publishes to the GitHub Release)
  index_url    where the index is served (the pages job deploys it there)

examples:
  dswheels ci plan                                   # in the workflow: everything from the environment
  dswheels ci plan --event push --ref-name v0.19.8 --repository OWNER/dswheels   # what a tag push does
  dswheels ci plan --event workflow_dispatch --deepspeed 0.19.8 --torch 2.14 --cuda cu130 \\
                   --python 3.12 --platform win_amd64 --canary"""

OUTPUTS = ("matrix", "parts", "smoke", "release", "plan", "publish_dir", "index_url")


def register(sub: Subparsers[argparse.ArgumentParser]) -> None:
    ci_sub = add_command_group(
        sub,
        "ci",
        help="what a CI run builds and publishes (the wheels workflow's plan job)",
        description="The steps of the wheels workflow that decide; `dswheels ci plan --help`.",
    )
    p = ci_sub.add_parser(
        "plan",
        help="the run's jobs, release and plan file, from the event",
        description=DESCRIPTION,
        formatter_class=formatter,
    )
    add_env_option(
        p,
        "--event",
        env="GITHUB_EVENT_NAME",
        choices=[e.value for e in Event],
        help="what started the run: a tag push or a dispatch",
    )
    add_env_option(p, "--ref-name", env="GITHUB_REF_NAME", metavar="TAG", help="the pushed tag, v<DeepSpeed version>")
    helps = {
        "deepspeed": "the dispatch's DeepSpeed version (X.Y.Z)",
        "torch": "the dispatch's torch MAJOR.MINOR, or matrix",
        "cuda": "the dispatch's torch variant (cuXYZ or cpu), or matrix",
        "python": "the dispatch's Python, or matrix",
        "platform": "the dispatch's platform, or matrix",
    }
    for axis in AXES:
        add_env_option(p, f"--{axis}", env=f"INPUT_{axis.upper()}", metavar="VALUE", help=helps[axis])
    add_env_flag(p, "--canary", env="INPUT_CANARY", help="the dispatch builds the canary only (never published)")
    add_env_flag(p, "--publish", env="INPUT_PUBLISH", help="the dispatch publishes to the release v<DeepSpeed>")
    add_matrix_argument(p)
    add_published_arguments(p)
    add_env_option(
        p,
        "--gpu-runners",
        env="DSWHEELS_GPU_RUNNERS",
        metavar="PLATFORMS",
        help="platforms with a self-hosted GPU runner for the smoke jobs, e.g. 'linux_x86_64 win_amd64'",
    )
    p.add_argument("--out", type=Path, default=Path("plan"), metavar="DIR", help="where plan.json goes (%(default)s)")
    p.set_defaults(func=run_plan)


def _intent(args: argparse.Namespace) -> RunIntent:
    if args.event is None:
        raise ConfigError("no event: run in GitHub Actions (GITHUB_EVENT_NAME) or pass --event")
    event = Event(args.event)
    inputs = None
    if event is Event.WORKFLOW_DISPATCH:
        axes = {axis: getattr(args, axis) or "matrix" for axis in AXES}
        inputs = DispatchInputs(**axes, canary=args.canary, publish=args.publish)
    return intent_for(event, ref_name=args.ref_name or "", inputs=inputs)


def _skip_published(result: Plan, args: argparse.Namespace) -> tuple[Plan, str]:
    """Leave out what is published; (the plan, what the summary says about it)."""
    source = published_source(args)
    left = skip_published(result, source, allow_empty=True, missing_dir_ok=True)
    skipped = len(result.planned) - len(left.planned)
    return left, f"{skipped} of {len(result.planned)} planned cells already published at {source}"


def _smoke_jobs(jobs: JobPlan, gpu: frozenset[Platform]) -> JobPlan:
    return replace(jobs, jobs=tuple(j for j in jobs.builds if j.cells[0].cell.platform in gpu))


def _smoke_notes(result: Plan, gpu: frozenset[Platform]) -> list[str]:
    reporter = get_reporter()
    title = "GPU smoke test skipped"
    if not gpu:
        text = (
            "no GPU smoke test: set the repository variable DSWHEELS_GPU_RUNNERS to the platforms that have a "
            "self-hosted GPU runner (README: Set up a self-hosted GPU runner)"
        )
        reporter.notice(title, text)
        return [text]
    lacking = {item.cell.platform for item in result.planned} - gpu
    if not lacking:
        return [f"GPU smoke test on {platforms_text(gpu)}"]
    text = f"no GPU runner for {platforms_text(lacking)} in DSWHEELS_GPU_RUNNERS: those wheels are not smoke-tested"
    reporter.notice(title, text)
    return [text]


def _describe(intent: RunIntent) -> str:
    axes = " ".join(f"{axis}={value or 'matrix'}" for axis, value in intent.selection.items())
    what = f"{axes}{' (canary)' if intent.canary else ''}"
    return f"{what}; {'publishes to the release ' + intent.release if intent.publishes else 'publishes nothing'}"


def run_plan(args: argparse.Namespace) -> int:
    try:
        intent = _intent(args)
        gpu = parse_gpu_platforms(args.gpu_runners or "")
    except EventError as exc:
        raise ConfigError(str(exc)) from None
    compat = load_compat()
    result = plan_selection(args.matrix, compat, only=[], combo=combo_from_values(intent.selection))
    if intent.canary:
        result = canary_plan(result)
    notes = [_describe(intent)]
    if intent.publishes:
        result, published = _skip_published(result, args)
        notes.append(published)
    jobs, per_cell = jobs_of(result)
    plan_file = args.out / "plan.json"
    write_text_atomic(plan_file, render_json(result, version=__version__))
    notes += _smoke_notes(result, gpu)
    outputs = {
        "matrix": render_github(result, jobs, stage="build"),
        "parts": render_github(result, jobs, stage="part"),
        "smoke": render_github(result, _smoke_jobs(jobs, gpu), stage="build"),
        "release": intent.release,
        "plan": plan_file.as_posix(),
        "publish_dir": args.publish_dir or "",
        "index_url": index_url_of(args),
    }
    report = render_table(result, jobs, per_cell=per_cell) + "\n" + render_cost_table(jobs, per_cell=per_cell)
    sys.stdout.write("\n".join(notes) + "\n\n" + report)
    written = [write_output(name, value) for name, value in outputs.items()]
    if not all(written):  # not in GitHub Actions: show what the workflow would get
        sys.stdout.write("\n" + "".join(f"{name}={value}\n" for name, value in outputs.items()))
    write_summary("### Plan\n\n" + "\n\n".join(notes) + "\n\n```\n" + report + "```")
    return 0
