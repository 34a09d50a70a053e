"""follow.yml's cost refit (``dswheels facts measured|refit|refit-pr``): find the release run to learn from,
refit compile_times.yml from its jobs' records (``nox -s costs``' fitting, :mod:`dswheels.plan.refit`), and
propose the result in a pull request whose every refit figure says ``measured on <runner> (run <id>)``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from dswheels.facts.effects.github_refit import (
    create_branch,
    create_pull,
    file_sha,
    pulls_for,
    put_file,
    run_artifacts,
    succeeded_runs,
)
from dswheels.facts.measured import MEASUREMENTS_PREFIX, branch_for, measured_runs, pull_body, pull_title, refit_before
from dswheels.host.files import read_bounded, write_text_atomic
from dswheels.host.github import GitHub, api_url_from_env, token_from_env
from dswheels.host.log import get_reporter
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.job_record import JobRecord, JobStage, parse_job_record
from dswheels.kernel.jsondoc import parse_json
from dswheels.kernel.manifest import Manifest, ManifestError, parse_manifest
from dswheels.kernel.untyped import Untyped
from dswheels.plan.costs import parse_costs
from dswheels.plan.refit import changed_figures, refit_release

__all__ = [
    "COMPILE_TIMES",
    "MeasuredOptions",
    "PullOptions",
    "RefitOptions",
    "Refitted",
    "measured_run",
    "open_refit_pull",
    "refit_from_records",
]

COMPILE_TIMES = "dswheels/compile_times.yml"  # in the repository
_RECORD = "job.json"


def _github(repo: str) -> GitHub:
    token = token_from_env()
    if not token:
        raise ConfigError("no GitHub token", hint="set GITHUB_TOKEN (the workflow passes its job token)")
    return GitHub(repo, token=token, api_url=api_url_from_env())


def _text(path: Path) -> str:
    try:
        return read_bounded(path).decode("utf-8")
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None


# --- which run ---------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class MeasuredOptions:
    repo: str
    compile_times: Path  # the checkout's: the runs its figures name are refit already
    workflow: str = "wheels.yml"


def measured_run(options: MeasuredOptions) -> int | None:
    """The newest successful wheels run with measurements, unless it is refit already (its figures merged,
    or a pull request for it, open or closed)."""
    gh = _github(options.repo)
    done = refit_before(_text(options.compile_times))
    reporter = get_reporter()
    for run in measured_runs(succeeded_runs(gh, options.workflow)):
        names = [a.name for a in run_artifacts(gh, run) if a.name.startswith(MEASUREMENTS_PREFIX) and not a.expired]
        if not names:
            reporter.info(f"run {run}: no measurements (older than `dswheels ci measure`, or expired)")
            continue
        if run in done:
            reporter.info(f"run {run}: its figures are in compile_times.yml already")
            return None
        if pulls_for(gh, branch_for(run)):
            reporter.info(f"run {run}: a pull request with its figures exists")
            return None
        reporter.info(f"run {run}: {len(names)} job record(s) to refit from")
        return run
    return None


# --- the refit --------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class RefitOptions:
    measurements: Path  # the run's measurements-* artifacts, downloaded
    run: int
    run_url: str
    compile_times: Path
    out: Path


@dataclass(frozen=True, kw_only=True, slots=True)
class Refitted:
    changed: int  # figures whose value or source changed
    jobs: int


def _records(folder: Path) -> list[tuple[JobRecord, list[Manifest]]]:
    found = []
    for path in sorted(folder.rglob(_RECORD)):
        try:
            record = parse_job_record(read_bounded(path))
            manifests = [parse_manifest(_text(path.parent / cell.manifest)) for cell in record.cells]
        except (ValueError, ManifestError) as exc:
            raise ConfigError(f"{path}: not a job record with its manifests: {exc}") from None
        found.append((record, manifests))
    if not found:
        raise ConfigError(
            f"no job records ({_RECORD}) under {folder}", hint="download the run's measurements-* artifacts"
        )
    return found


def refit_from_records(options: RefitOptions) -> Refitted:
    """OUT/compile_times.yml refit from the run's records, OUT/pull.md saying what changed, OUT/refit.json."""
    found = _records(options.measurements)
    text = _text(options.compile_times)
    model = parse_costs(yaml.safe_load(text))
    records = [record for record, _ in found]
    builds = [record for record in records if record.stage is JobStage.BUILD]
    refit = refit_release(text, model, builds or records, [m for _, ms in found for m in ms], run=str(options.run))
    after = parse_costs(yaml.safe_load(refit.text))  # what is proposed reads back
    changes = changed_figures(model, after)
    for line in refit.notes:
        get_reporter().info(line)
    body = pull_body(run=options.run, run_url=options.run_url, changes=changes, jobs=len(records), notes=refit.notes)
    write_text_atomic(options.out / "compile_times.yml", refit.text)
    write_text_atomic(options.out / "pull.md", body)
    meta = {"run": options.run, "branch": branch_for(options.run), "title": pull_title(options.run)}
    write_text_atomic(options.out / "refit.json", json.dumps(meta, indent=2) + "\n")
    return Refitted(changed=len(changes), jobs=len(records))


# --- the pull request ---------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class PullOptions:
    refit: Path  # what `facts refit` wrote
    repo: str
    base: str  # the branch the pull request goes to
    sha: str  # the commit the refit read compile_times.yml from: the branch starts there


def open_refit_pull(options: PullOptions) -> str:
    """Open the pull request (once: an existing one for the run is left as it is); its URL."""
    gh = _github(options.repo)
    try:
        run = Untyped(parse_json(_text(options.refit / "refit.json"), what="refit.json"), "refit").at("run").integer()
    except ValueError as exc:
        raise ConfigError(
            f"{options.refit / 'refit.json'}: {exc}", hint="give the folder `facts refit` wrote"
        ) from None
    branch = branch_for(run)  # made here again, not taken from the file: it names a ref
    text = _text(options.refit / "compile_times.yml")
    parse_costs(yaml.safe_load(text))  # never propose a file the model cannot read
    existing = pulls_for(gh, branch)
    if existing:
        return existing[0].url
    if not create_branch(gh, branch, options.sha):
        get_reporter().info(f"branch {branch} exists: committing to it")
    put_file(
        gh,
        COMPILE_TIMES,
        branch=branch,
        text=text,
        sha=file_sha(gh, COMPILE_TIMES, ref=branch),
        message=f"compile_times.yml: refit from what wheels run {run} measured (dswheels facts refit)",
    )
    made = create_pull(gh, head=branch, base=options.base, title=pull_title(run), body=_text(options.refit / "pull.md"))
    return made.url
