"""What one build job of wheels.yml measured (``dswheels ci measure``), kept as the artifact
``measurements-<job>`` beside copies of its cells' manifests: the record a release's cost refit reads.

A job's minutes, as the cost model splits them (docs/costs.md): its fixed steps (``setup``), the CUDA
install, each cell's compile (the manifests hold every unit's seconds and the compiler cache's hits),
and each cell's venv, post-processing and verify (``per_cell``). The job's seconds come from its own
clock (wheels.yml's first step) to this record; the CUDA install, the build and verify from their stage
reports (``--report``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from dswheels.kernel.jsondoc import parse_json
from dswheels.kernel.model import OS
from dswheels.kernel.untyped import Untyped

__all__ = ["JOB_RECORD_SCHEMA", "CellRecord", "JobRecord", "JobStage", "parse_job_record", "render_job_record"]

JOB_RECORD_SCHEMA = "dswheels.job-measurements/1"
_MANIFEST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,250}\.manifest\.json", re.ASCII)


class JobStage(str, Enum):
    """Which of wheels.yml's build jobs: one that makes wheels, or a part job that fills the compiler cache."""

    BUILD = "build"
    PART = "part"


@dataclass(frozen=True, kw_only=True, slots=True)
class CellRecord:
    cell_id: str
    manifest: str  # the manifest's file name, beside the record
    compile: float  # seconds (the manifest's durations.compile)


@dataclass(frozen=True, kw_only=True, slots=True)
class JobRecord:
    job: str  # the matrix entry's name
    stage: JobStage
    os: OS
    runs_on: str  # the runner label the plan gave the job, e.g. ubuntu-24.04
    runner: Mapping[str, str] = field(default_factory=dict)  # the runner's image, name, run id (host.gha)
    job_seconds: float  # the job's clock to this record
    cuda_install: float | None = None  # `dswheels cuda install` (None: a CPU job)
    build: float | None = None  # `dswheels build`, every cell
    verify: float | None = None  # `dswheels verify` (None: a part job)
    cells: tuple[CellRecord, ...] = ()

    @property
    def setup(self) -> float | None:
        """The job's fixed steps: everything but the CUDA install, the build and verify (None: no build)."""
        if self.build is None:
            return None
        return max(0.0, self.job_seconds - (self.cuda_install or 0.0) - self.build - (self.verify or 0.0))

    @property
    def per_cell(self) -> float | None:
        """Each cell's time outside its compile: the build's source, venv and post-processing, and verify's."""
        if self.build is None or not self.cells:
            return None
        outside = self.build - sum(c.compile for c in self.cells) + (self.verify or 0.0)
        return max(0.0, outside) / len(self.cells)


def render_job_record(record: JobRecord) -> str:
    def seconds(value: float | None) -> float | None:
        return None if value is None else round(value, 2)

    data = {
        "schema": JOB_RECORD_SCHEMA,
        "job": record.job,
        "stage": record.stage.value,
        "os": record.os.value,
        "runs_on": record.runs_on,
        "runner": dict(record.runner),
        "seconds": {
            "job": seconds(record.job_seconds),
            "cuda_install": seconds(record.cuda_install),
            "build": seconds(record.build),
            "verify": seconds(record.verify),
        },
        "cells": [{"cell_id": c.cell_id, "manifest": c.manifest, "compile": seconds(c.compile)} for c in record.cells],
    }
    return json.dumps(data, indent=2) + "\n"


def _seconds(value: Untyped) -> float | None:
    if value.data is None:
        return None
    if isinstance(value.data, bool) or not isinstance(value.data, (int, float)) or not 0 <= value.data < 10**7:
        raise value.fail("seconds (a number from 0 to 10^7)")
    return float(value.data)


def _file_name(value: Untyped) -> str:
    """A manifest's name beside the record: a bare file name, never a path."""
    name = value.text()
    if not _MANIFEST_NAME.fullmatch(name):
        raise value.fail("a manifest's file name (*.manifest.json, no directory)")
    return name


def parse_job_record(text: str | bytes) -> JobRecord:
    """A record ``dswheels ci measure`` wrote; ValueError naming the key for anything else."""
    root = Untyped(parse_json(text, what="job record"), "record")
    if root.at("schema").data != JOB_RECORD_SCHEMA:
        raise ValueError(f"not a job record ({JOB_RECORD_SCHEMA})")
    seconds = root.at("seconds")
    job_seconds = _seconds(seconds.at("job"))
    if job_seconds is None:
        raise ValueError("record.seconds.job: expected seconds")
    try:
        os_name = OS(root.at("os").text())
    except ValueError:
        raise root.at("os").fail(f"one of {', '.join(OS)}") from None
    cells = tuple(
        CellRecord(
            cell_id=cell.at("cell_id").text(),
            manifest=_file_name(cell.at("manifest")),
            compile=_seconds(cell.at("compile")) or 0.0,
        )
        for cell in root.at("cells").seq()
    )
    return JobRecord(
        job=root.at("job").text(),
        stage=JobStage(root.at("stage").text()),
        os=os_name,
        runs_on=root.at("runs_on").text(),
        runner={k: v.text() for k, v in root.at("runner").items()},
        job_seconds=job_seconds,
        cuda_install=_seconds(seconds.at("cuda_install")),
        build=_seconds(seconds.at("build")),
        verify=_seconds(seconds.at("verify")),
        cells=cells,
    )
