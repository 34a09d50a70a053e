"""``dswheels ci measure``: what a build job of wheels.yml measured, as one record beside its cells' manifests
(:mod:`dswheels.kernel.job_record`), which the job uploads as ``measurements-<job>``; after a release,
follow.yml refits the cost model from the records of every job (``dswheels facts refit``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dswheels.host.clock import utc_now
from dswheels.host.files import read_bounded, write_text_atomic
from dswheels.host.gha import runner_identity
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.job_record import CellRecord, JobRecord, JobStage, render_job_record
from dswheels.kernel.jsondoc import parse_json
from dswheels.kernel.manifest import Manifest, ManifestError, parse_manifest
from dswheels.kernel.model import OS
from dswheels.kernel.untyped import Untyped

__all__ = ["RECORD_NAME", "REPORTS", "MeasureOptions", "measure_job"]

RECORD_NAME = "job.json"
# the stage reports (`--report`) of the job's steps, by what the record calls them
REPORTS = {"cuda_install": "cuda.json", "build": "build.json", "verify": "verify.json"}


@dataclass(frozen=True, kw_only=True, slots=True)
class MeasureOptions:
    started: int  # the job's clock: epoch seconds of its first step
    job: str  # the matrix entry's name
    stage: JobStage
    reports: Path  # where the steps wrote their --report files (REPORTS)
    wheelhouse: Path  # the build's --out: the cells' manifests
    out: Path  # the record and copies of the manifests


def _seconds(path: Path) -> float | None:
    """The duration a stage report gives, when its stage ran to the end; None when there is none."""
    if not path.is_file():
        return None
    try:
        report = Untyped(parse_json(read_bounded(path), what=str(path)), path.name)
        if report.at("status").text() != "ok":
            return None
        seconds = report.at("duration_s").data
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the stage report {path}: {exc}") from None
    return float(seconds) if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) else None


def _manifests(wheelhouse: Path) -> list[tuple[Path, str, Manifest]]:
    found = []
    for path in sorted(wheelhouse.rglob("*.manifest.json")):
        try:
            text = read_bounded(path).decode("utf-8")
            found.append((path, text, parse_manifest(text)))
        except (OSError, ValueError, ManifestError) as exc:  # noqa: PERF203 - the first bad one names itself
            raise ConfigError(f"cannot read the build manifest {path}: {exc}") from None
    return found


def measure_job(options: MeasureOptions) -> JobRecord:
    """The job's record, written to ``out/job.json`` with a copy of each manifest beside it."""
    job_seconds = round(utc_now().timestamp() - options.started, 2)  # as the record holds it
    if not 0 <= job_seconds < 7 * 24 * 3600:
        raise ConfigError(f"--started {options.started}: not when this job started (epoch seconds)")
    manifests = _manifests(options.wheelhouse)
    runner = runner_identity()
    oses = {m.plan.cell.platform.os for _, _, m in manifests}
    labels = sorted({" ".join(m.plan.toolchain.runs_on) for _, _, m in manifests})
    try:
        os_name = oses.pop() if len(oses) == 1 else OS(runner.get("os", "").lower())
    except ValueError:
        raise ConfigError("cannot tell the job's OS: no manifest in --wheelhouse, and not on a GitHub runner") from None
    cells = []
    for path, text, manifest in manifests:
        write_text_atomic(options.out / path.name, text)
        cells.append(
            CellRecord(cell_id=manifest.cell_id, manifest=path.name, compile=manifest.durations.get("compile", 0.0))
        )
    record = JobRecord(
        job=options.job,
        stage=options.stage,
        os=os_name,
        runs_on=", ".join(labels),
        runner=runner,
        job_seconds=job_seconds,
        cells=tuple(cells),
        cuda_install=_seconds(options.reports / REPORTS["cuda_install"]),
        build=_seconds(options.reports / REPORTS["build"]),
        verify=_seconds(options.reports / REPORTS["verify"]),
    )
    write_text_atomic(options.out / RECORD_NAME, render_job_record(record))
    return record
