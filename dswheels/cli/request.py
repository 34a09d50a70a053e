"""``dswheels request answer|build|indexed``: the steps of .github/workflows/requests.yml, and of wheels.yml's
``answer`` job.

- ``answer``: read the issue an ``issues`` event is about (the payload file, never a value of it) and
  answer it in one comment: the cell's install line when it is published; why not, with each rule's
  source, when it cannot be built; else that it can be, and what it costs by the cost model;
- ``build``: on the maintainer's label, start wheels.yml for that one cell (published, with the issue to
  answer), or answer again why not;
- ``indexed``: after that run, comment the install line once the index lists the wheel.
"""

from __future__ import annotations

import argparse
import re

from dswheels.cli.command import Command
from dswheels.cli.flags import Flag, Flags, PathUse
from dswheels.cli.shared import COMBO_AXES, MATRIX_FLAG, PUBLISHED_AT, REPORT, published_at
from dswheels.host.log import get_reporter
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.model import Cell
from dswheels.kernel.result import Done
from dswheels.plan.planner import combo_from_values
from dswheels.request.form import BUILD_LABEL, FORM_LABEL
from dswheels.request.step import EventOptions, IndexedOptions, Outcome, answer_indexed, answer_request, build_request

__all__ = ["COMMANDS"]

ANSWER = f"""\
Answer the wheel-request issue (label {FORM_LABEL}) an `issues` event is about, in one comment that later
events edit: the cell and its install line when its wheel is published (--publish-dir, else --index-url);
why it cannot be built, each rule with its source; or that it can be, with the cost model's estimate.
The event is read from the payload file the runner writes ($GITHUB_EVENT_PATH). Needs GITHUB_TOKEN with
issues: write on the repository.
"""

BUILD = f"""\
On the `{BUILD_LABEL}` label of a wheel-request issue (only people with triage access can add one): start
wheels.yml on --ref for the one cell the issue asks for, published, with the issue for its `answer` job;
a cell that is published, impossible or unreadable is answered again instead. Needs GITHUB_TOKEN with
actions: write and issues: write.
"""

INDEXED = """\
Comment on --issue the install line of the cell once the index lists its wheel, or the run's URL
when it does not (wheels.yml's `answer` job, after its pages job). Needs GITHUB_TOKEN with issues: write.
"""

EVENT: Flags = (
    Flag("--event", env="GITHUB_EVENT_PATH", metavar="PATH", path=PathUse.READS, help="the event's payload file"),
    Flag("--event-name", env="GITHUB_EVENT_NAME", metavar="NAME", help="the event's name"),
    MATRIX_FLAG,
    *PUBLISHED_AT,
    REPORT,
)
BUILD_FLAGS: Flags = (
    *EVENT,
    Flag("--ref", default="main", help="the branch the build runs on (default: %(default)s)"),
)
INDEXED_FLAGS: Flags = (
    Flag("--issue", required=True, metavar="N", help="the wheel-request issue's number"),
    *(Flag(f"--{axis}", required=True, metavar="VALUE") for axis in COMBO_AXES),
    Flag("--run-url", default="", metavar="URL", help="the wheels run, named when the wheel is not indexed"),
    MATRIX_FLAG,
    *PUBLISHED_AT,
    REPORT,
)


def _event_options(args: argparse.Namespace) -> EventOptions:
    if args.event is None or not args.event_name or not args.repository:
        raise ConfigError(
            "no event to answer",
            hint="run it in the request workflow (GITHUB_EVENT_PATH, GITHUB_EVENT_NAME, GITHUB_REPOSITORY), or give "
            "--event, --event-name and --repository",
        )
    return EventOptions(
        event=args.event,
        event_name=args.event_name,
        repo=args.repository,
        matrix=args.matrix,
        published=published_at(args),
        ref=getattr(args, "ref", None) or "main",
    )


def _done(outcome: Outcome) -> Done:
    get_reporter().emit(outcome.did + "\n")
    kind = type(outcome.verdict).__name__.lower() if outcome.verdict is not None else ""
    return Done(data={"did": outcome.did, "verdict": kind, "cell": outcome.cell})


def _run_answer(options: EventOptions, _args: argparse.Namespace) -> Done:
    return _done(answer_request(options))


def _run_build(options: EventOptions, _args: argparse.Namespace) -> Done:
    return _done(build_request(options))


def _cell(args: argparse.Namespace) -> Cell:
    combo = combo_from_values({axis: getattr(args, axis) for axis in COMBO_AXES})
    ds, torch, variant, python, platform = combo.deepspeed, combo.torch, combo.variant, combo.python, combo.platform
    if ds is None or torch is None or variant is None or python is None or platform is None:
        raise ConfigError("give all five axes of the cell")
    return Cell(deepspeed=ds, torch=torch, variant=variant, python=python, platform=platform)


def _indexed(args: argparse.Namespace) -> IndexedOptions:
    if not re.fullmatch(r"[1-9][0-9]{0,9}", args.issue, re.ASCII):
        raise ConfigError("--issue: not an issue number", hint="wheels.yml's `request` input is the issue's number")
    if not args.repository:
        raise ConfigError("--repository (or GITHUB_REPOSITORY) names the repository of the issue")
    return IndexedOptions(
        issue=int(args.issue),
        repo=args.repository,
        cell=_cell(args),
        matrix=args.matrix,
        published=published_at(args),
        run_url=args.run_url,
    )


def _run_indexed(options: IndexedOptions, _args: argparse.Namespace) -> Done:
    return _done(answer_indexed(options))


COMMANDS = (
    Command("answer", "answer a wheel-request issue", ANSWER, EVENT, _event_options, _run_answer),
    Command("build", "start the build a wheel-request issue asks for", BUILD, BUILD_FLAGS, _event_options, _run_build),
    Command("indexed", "comment the install line of a requested wheel", INDEXED, INDEXED_FLAGS, _indexed, _run_indexed),
)
