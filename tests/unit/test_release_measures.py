"""The release measures itself: a build job's record (`dswheels ci measure`), the refit of a release's records
(dswheels.plan.refit) and the decisions of follow.yml's refit (dswheels.facts.measured).
tests/integration/test_refit_chain.py runs the workflows' steps end to end."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from dswheels.building.measure_step import MeasureOptions, measure_job
from dswheels.facts.measured import branch_for, measured_runs, pull_body, refit_before
from dswheels.host.gha import RUNNER_IDENTITY
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.github_api import read_runs
from dswheels.kernel.job_record import CellRecord, JobRecord, JobStage, parse_job_record, render_job_record
from dswheels.kernel.manifest import parse_manifest, render_manifest
from dswheels.kernel.model import OS
from dswheels.kernel.remote_json import RemoteDocumentError, RemoteJson
from dswheels.kernel.result import StageResult, StageStatus
from dswheels.plan.costs import Figure, parse_costs
from dswheels.plan.refit import Change, changed_figures, refit_release
from tests.conftest import DATA, ROOT

SHIPPED = (ROOT / "dswheels" / "compile_times.yml").read_text(encoding="utf-8")
MODEL = parse_costs(yaml.safe_load(SHIPPED))
LINUX = parse_manifest((DATA / "manifest-cuda-units.json").read_text(encoding="utf-8"))


def _record(**changes: object) -> JobRecord:
    record = JobRecord(
        job="j",
        stage=JobStage.BUILD,
        os=OS.LINUX,
        runs_on="ubuntu-24.04",
        runner={"run_id": "9"},
        job_seconds=1000.0,
        cuda_install=300.0,
        build=500.0,
        verify=60.0,
        cells=(CellRecord(cell_id=LINUX.cell_id, manifest="a.manifest.json", compile=400.0),),
    )
    return replace(record, **changes)  # type: ignore[arg-type]


def test_a_record_splits_the_job_as_the_cost_model_does() -> None:
    record = _record()
    assert record.setup == 1000 - 300 - 500 - 60  # everything but the CUDA install, the build and verify
    assert record.per_cell == (500 - 400) + 60  # the build outside its compile, and verify, per cell
    assert parse_job_record(render_job_record(record)) == record
    cpu = _record(cuda_install=None, cells=())
    assert cpu.setup == 1000 - 500 - 60
    assert cpu.per_cell is None
    assert _record(build=None).setup is None  # a job whose build did not finish measured no setup


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("manifest", "../../etc/passwd.manifest.json", "a manifest's file name"),
        ("manifest", "a/b.manifest.json", "a manifest's file name"),
        ("compile", -1, "seconds"),
        ("compile", True, "seconds"),
    ],
)
def test_a_record_from_an_artifact_is_read_as_hostile(key: str, value: object, message: str) -> None:
    data = json.loads(render_job_record(_record()))
    data["cells"][0][key] = value
    with pytest.raises(ValueError, match=message):
        parse_job_record(json.dumps(data))


def test_the_measure_step_records_the_job_from_its_reports_and_manifests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in RUNNER_IDENTITY.values():  # ci.yml's runners set them: only the test's count
        monkeypatch.delenv(variable, raising=False)
    for key, value in {
        "GITHUB_ACTIONS": "true",
        "RUNNER_OS": "Linux",
        "ImageOS": "ubuntu24",
        "ImageVersion": "20261201.1",
        "GITHUB_RUN_ID": "4242",
        "RUNNER_NAME": "GitHub Actions 12\x1b[31m",  # not printable: left out
    }.items():
        monkeypatch.setenv(key, value)
    wheelhouse = tmp_path / "wheelhouse" / "cu130"
    wheelhouse.mkdir(parents=True)
    (wheelhouse / "a.manifest.json").write_text(render_manifest(LINUX), encoding="utf-8")
    reports = tmp_path / "measure"
    reports.mkdir()
    for name, seconds, status in (
        ("cuda", 300.0, StageStatus.OK),
        ("build", 500.0, StageStatus.OK),
        ("verify", 9.0, StageStatus.FAILED),
    ):
        report = StageResult(stage=name, status=status, duration_s=seconds).as_json(version="0")
        (reports / f"{name}.json").write_text(json.dumps(report), encoding="utf-8")
    options = MeasureOptions(
        started=int(time.time()) - 1000,
        job="j",
        stage=JobStage.BUILD,
        reports=reports,
        wheelhouse=tmp_path / "wheelhouse",
        out=reports,
    )
    record = measure_job(options)
    assert record.runs_on == "ubuntu-22.04"  # what the plan gave the cell's job
    assert (record.cuda_install, record.build, record.verify) == (300.0, 500.0, None)  # a failed verify: none
    assert record.runner == {"os": "Linux", "image": "ubuntu24", "image_version": "20261201.1", "run_id": "4242"}
    assert 999 <= record.job_seconds <= 1010
    assert parse_job_record((reports / "job.json").read_bytes()) == record
    assert (reports / "a.manifest.json").read_text(encoding="utf-8") == render_manifest(LINUX)
    with pytest.raises(ConfigError, match="not when this job started"):
        measure_job(replace(options, started=int(time.time()) + 3600))


def test_a_releases_records_refit_the_runners_and_the_ops_each_saying_where() -> None:
    records = [_record(job_seconds=1000.0), _record(job="k", job_seconds=1100.0)]
    cached = replace(LINUX, compiler_cache={"tool": "sccache", "hits": 6, "misses": 0})
    refit = refit_release(SHIPPED, MODEL, records, [LINUX, cached], run="77")
    after = parse_costs(yaml.safe_load(refit.text))
    linux = after.runners["linux"]
    assert linux.setup == Figure(
        190,
        "measured",
        "on ubuntu-24.04 (run 77): median of 2 of 2 jobs: the job's start to its record, less the CUDA install, "
        "the build and verify",
    )
    assert linux.cuda_setup.value == 300
    assert linux.per_cell.value == 160
    # every unit of the cached build came from the cache: the median of them is what a lookup costs
    assert linux.cached_unit.status == "measured"
    units = sorted(s for op in LINUX.ops_built for _, s in op.units)
    assert linux.cached_unit.value == round((units[2] + units[3]) / 2, 1)  # six units: the middle two
    assert after.runners["windows"] == MODEL.runners["windows"]  # no Windows job: its figures stay
    assert after.ops["quantizer"].linux.source.startswith("on ubuntu-24.04 (run 77): refit from 1 build(s)")
    names = {change.name for change in changed_figures(MODEL, after)}
    assert {"runners.linux.setup", "runners.linux.cuda_setup", "ops.quantizer seconds"} <= names
    assert not any(name.startswith("runners.windows") for name in names)


def test_which_run_is_refit_and_when_it_is_done() -> None:
    items: list[dict[str, object]] = [
        {"id": 1, "conclusion": "success", "display_title": "wheels v0.19.7", "created_at": "2026-11-01T00:00:00Z"},
        {"id": 2, "conclusion": "failure", "display_title": "wheels v0.19.8", "created_at": "2026-11-02T00:00:00Z"},
        {
            "id": 3,
            "conclusion": "success",
            "display_title": "wheels 0.19.8 (canary)",
            "created_at": "2026-11-03T00:00:00Z",
        },
        {"id": 4, "conclusion": "success", "display_title": "wheels 0.19.8", "created_at": "2026-11-04T00:00:00Z"},
    ]
    runs = read_runs(RemoteJson({"workflow_runs": [{**item, "status": "completed"} for item in items]}))
    with pytest.raises(RemoteDocumentError, match=r"workflow_runs\[0\]\.id"):  # GitHub's answer, read by its reader
        read_runs(RemoteJson({"workflow_runs": [{**items[0], "id": "5", "status": "completed"}]}))
    assert measured_runs(runs) == [4, 1]
    assert refit_before('  setup: {value: 1, measured: "on ubuntu-24.04 (run 4242): x"}\n(run 17)') == {4242, 17}
    assert refit_before(SHIPPED) == frozenset()  # no release has measured the shipped figures yet
    assert branch_for(4242) == "dswheels/measured-4242"


def test_the_pull_requests_table_keeps_its_columns() -> None:
    before = Figure(150, "assumed", "a | b")
    after = Figure(171, "measured", "on x (run 1): c")
    body = pull_body(run=1, run_url="u", changes=[Change("runners.linux.setup", before, after)], jobs=1, notes=["n"])
    assert "| `runners.linux.setup` | 150 (assumed: a / b) | 171 (measured: on x (run 1): c) |" in body
