"""``dswheels ci measure``: the record of what a build job measured, for the cost model's refit after a release."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from dswheels.building.measure_step import RECORD_NAME, REPORTS, MeasureOptions, measure_job
from dswheels.cli.command import Command
from dswheels.cli.flags import Flag, Flags, PathUse, fill
from dswheels.cli.shared import REPORT
from dswheels.host.log import get_reporter
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.job_record import JobStage
from dswheels.kernel.result import Done

__all__ = ["COMMAND"]

HELP = "record what a build job measured (its cost model refit)"
DESCRIPTION = f"""\
Write what this build job measured to OUT/{RECORD_NAME}, with a copy of each of its cells' manifests beside
it: the job's seconds since --started (its first step's clock), and those of its CUDA install, build and
verify (the stage reports their steps wrote with --report into --reports: {", ".join(REPORTS.values())}),
each cell's compile (its manifest: every unit's seconds, the compiler cache's hits), and the runner and
run it ran on. wheels.yml's build jobs run it last and upload OUT as the artifact measurements-<job>;
after a release, follow.yml refits the cost model from them (`dswheels facts refit`, docs/costs.md).
"""


def _started(text: str) -> int:
    if not re.fullmatch(r"[0-9]{1,12}", text, re.ASCII):
        raise ConfigError(f"--started: expected epoch seconds, got {text[:20]!r}")
    return int(text)


def _stage(text: str) -> JobStage:
    try:
        return JobStage(text)
    except ValueError:
        raise ConfigError(f"--stage: expected build or part, got {text[:20]!r}") from None


FLAGS: Flags = (
    Flag("--started", to="started", parse=_started, required=True, metavar="EPOCH", help="the job's first `date +%%s`"),
    Flag("--job", to="job", required=True, metavar="NAME", help="the job's matrix entry's name"),
    Flag("--stage", to="stage", parse=_stage, default="build", metavar="build|part", help="a build or a part job"),
    Flag("--reports", to="reports", required=True, metavar="DIR", path=PathUse.READS, help="the steps' --report files"),
    Flag("--wheelhouse", to="wheelhouse", required=True, metavar="DIR", path=PathUse.READS, help="the build's --out"),
    Flag("--out", to="out", required=True, metavar="DIR", path=PathUse.WRITES_INTO, help="the record and manifests"),
    REPORT,
)


def _options(args: argparse.Namespace) -> MeasureOptions:
    return MeasureOptions(**fill(args, FLAGS))


def _run(options: MeasureOptions, _args: argparse.Namespace) -> Done:
    record = measure_job(options)
    setup = "-" if record.setup is None else f"{record.setup:.0f} s"
    out = Path(options.out) / RECORD_NAME
    get_reporter().emit(
        f"{options.job}: {record.job_seconds:.0f} s on {record.runs_on or record.os}: setup {setup}, "
        f"{len(record.cells)} cell(s) recorded in {out}\n"
    )
    return Done(data={"record": str(out), "cells": [c.cell_id for c in record.cells]})


COMMAND = Command("measure", HELP, DESCRIPTION, FLAGS, _options, _run)
