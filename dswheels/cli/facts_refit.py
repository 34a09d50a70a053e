"""``dswheels facts measured|refit|refit-pr``: follow.yml's cost refit after a release (docs/costs.md).

- ``measured``: the newest successful wheels run whose build jobs recorded what they measured
  (``measurements-*`` artifacts) and whose figures are not proposed or merged yet; its id as the
  step output ``run`` ("" for none);
- ``refit``: compile_times.yml refit from that run's records (downloaded), every refit figure
  ``measured on <runner> (run <id>)``, and the pull request's description;
- ``refit-pr``: a branch with the refit file and a pull request for it.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from dswheels.cli.command import Command
from dswheels.cli.flags import Flag, Flags, PathUse, fill
from dswheels.cli.shared import REPORT
from dswheels.facts.refit_step import (
    COMPILE_TIMES,
    MeasuredOptions,
    PullOptions,
    RefitOptions,
    measured_run,
    open_refit_pull,
    refit_from_records,
)
from dswheels.host.gha import write_output
from dswheels.host.log import get_reporter
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.result import Done

__all__ = ["COMMANDS"]

MEASURED = """\
The newest wheels run (--workflow) that finished with success and whose build jobs recorded what they
measured (artifacts measurements-*, `dswheels ci measure`), unless compile_times.yml names it already or a
pull request for it exists: its id as the step output `run` ("" when there is none). Needs GITHUB_TOKEN
with actions: read and pull-requests: read.
"""

REFIT = """\
Refit compile_times.yml from a run's job records (--measurements: its measurements-* artifacts, each a
job.json beside its cells' manifests): each op's seconds from its cold builds (as `nox -s costs` does),
each runner's setup, CUDA install, per-cell checks and cached unit from its jobs, every refit figure
measured on <runner> (run <id>). Writes OUT/compile_times.yml, OUT/pull.md (what changed) and
OUT/refit.json, and the step output `changed` (how many figures changed).
"""

REFIT_PR = f"""\
Propose what `facts refit` wrote (--refit): a branch dswheels/measured-<run> from --sha with
{COMPILE_TIMES} replaced, and a pull request to --base; one that exists for the run is left as it is.
Needs GITHUB_TOKEN with contents: write and pull-requests: write, and the repository's setting "Allow
GitHub Actions to create and approve pull requests".
"""


def _run_id(text: str) -> int:
    if not re.fullmatch(r"[1-9][0-9]{0,19}", text, re.ASCII):
        raise ConfigError(f"--run: not a workflow run id: {text[:30]!r}")
    return int(text)


def _sha(text: str) -> str:
    if not re.fullmatch(r"[0-9a-f]{40}", text, re.ASCII):
        raise ConfigError(f"--sha: not a commit sha: {text[:50]!r}")
    return text


REPO = Flag("--repo", to="repo", required=True, metavar="OWNER/NAME")
COMPILE_TIMES_FLAG = Flag(
    "--compile-times",
    to="compile_times",
    default=Path(COMPILE_TIMES),
    metavar="PATH",
    path=PathUse.READS,
    help="the cost model's figures (default: %(default)s)",
)

MEASURED_FLAGS: Flags = (
    REPO,
    Flag("--workflow", to="workflow", default="wheels.yml", help="the workflow whose runs built the wheels"),
    COMPILE_TIMES_FLAG,
    REPORT,
)
REFIT_FLAGS: Flags = (
    Flag("--measurements", to="measurements", required=True, metavar="DIR", path=PathUse.READS),
    Flag("--run", to="run", parse=_run_id, required=True, metavar="ID", help="the wheels run the records are from"),
    Flag("--run-url", to="run_url", default="", metavar="URL"),
    COMPILE_TIMES_FLAG,
    Flag("--out", to="out", required=True, metavar="DIR", path=PathUse.WRITES_INTO),
    REPORT,
)
PULL_FLAGS: Flags = (
    Flag("--refit", to="refit", required=True, metavar="DIR", path=PathUse.READS, help="what `facts refit` wrote"),
    REPO,
    Flag("--base", to="base", default="main", help="the branch the pull request goes to (default: %(default)s)"),
    Flag("--sha", to="sha", parse=_sha, required=True, help="the commit the refit read compile_times.yml from"),
    REPORT,
)


def _measured(args: argparse.Namespace) -> MeasuredOptions:
    return MeasuredOptions(**fill(args, MEASURED_FLAGS))


def _run_measured(options: MeasuredOptions, _args: argparse.Namespace) -> Done:
    run = measured_run(options)
    write_output("run", "" if run is None else str(run))
    get_reporter().emit(f"{'no run to refit from' if run is None else f'refit from run {run}'}\n")
    return Done(data={"run": run})


def _refit(args: argparse.Namespace) -> RefitOptions:
    return RefitOptions(**fill(args, REFIT_FLAGS))


def _run_refit(options: RefitOptions, _args: argparse.Namespace) -> Done:
    refitted = refit_from_records(options)
    write_output("changed", str(refitted.changed))
    get_reporter().emit(f"{refitted.changed} figure(s) changed, from {refitted.jobs} job record(s)\n")
    return Done(data={"changed": refitted.changed, "jobs": refitted.jobs})


def _pull(args: argparse.Namespace) -> PullOptions:
    return PullOptions(**fill(args, PULL_FLAGS))


def _run_pull(options: PullOptions, _args: argparse.Namespace) -> Done:
    url = open_refit_pull(options)
    get_reporter().emit(f"pull request: {url}\n")
    return Done(data={"pull_request": url})


COMMANDS = (
    Command(
        "measured", "the release run to refit the cost model from", MEASURED, MEASURED_FLAGS, _measured, _run_measured
    ),
    Command("refit", "refit compile_times.yml from a run's records", REFIT, REFIT_FLAGS, _refit, _run_refit),
    Command("refit-pr", "propose a refit compile_times.yml", REFIT_PR, PULL_FLAGS, _pull, _run_pull),
)
