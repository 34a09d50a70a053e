"""The release measures itself: build jobs' records through follow.yml's refit, run here in job order (`nox -s dryrun`).

A release run (wheels run 4242) of two build jobs, a Linux and a Windows one, each holding a recorded
manifest (tests/data/manifest-cuda-units.json: quantizer for cu130; manifest-wine-units.json:
fused_adam and random_ltd for Windows): each job's own last steps, as build-cells.yml writes them, run
here (tests/gha/steps.py): `dswheels ci measure` reads the job's clock, the stage reports its CUDA
install, build and verify steps wrote (planted in dswheels' own report shape, with the seconds a runner
would take) and its manifests, and the upload step stores measurements-<job> in the run's artifacts.

Then follow.yml's `measured` job finds that run through GitHub's API (a loopback fake answering in the
documented shapes: tests/support/github_refit_fake.py), downloads its artifacts by run id
(download-artifact's `run-id`, modelled by tests/gha/steps.Artifacts) and refits compile_times.yml; its
`refit` job opens the pull request. The proposed figures say "measured on <runner> (run 4242)", and
`dswheels plan --costs` on the proposed file lists them as measured. A second run proposes nothing again.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from dswheels.kernel.result import StageResult, StageStatus
from dswheels.plan.costs import parse_costs
from tests.conftest import DATA, ROOT, require
from tests.gha.expressions import Status, Value, condition
from tests.gha.model import as_map, load_workflow
from tests.gha.steps import Artifacts, Job, JobRun, StepRun, run_job
from tests.support.github_refit_fake import RefitGitHub

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

WORKFLOWS = ROOT / ".github" / "workflows"
WHEELS = load_workflow(WORKFLOWS / "wheels.yml")
FOLLOW = load_workflow(WORKFLOWS / "follow.yml")
REPO = "octo/dswheels"
TOKEN = "refit-token"  # noqa: S105 - what the fake GitHub accepts, not a secret
RUN = 4242
SHIPPED = (ROOT / "dswheels" / "compile_times.yml").read_text(encoding="utf-8")


# each job: its recorded manifest and what its other steps took (seconds), as their --report files say. Two
# Linux jobs (quantizer, cold cache; fused_adam and cpu_adam) and a Windows one of the second's shape: built
# side by side, their compiles' ratio is the Windows runner's speed (docs/costs.md)
@dataclass(frozen=True)
class _Job:
    manifest: str  # tests/data/<name>
    setup: float  # seconds each step took, as the job's clock and its --report files say
    cuda: float
    verify: float


JOBS = {
    "ds0.19.8-torch2.14-cu130-linux_x86_64 quantizer": _Job("manifest-cuda-units.json", 171, 388, 97),
    "ds0.19.8-torch2.14-cu130-linux_x86_64": _Job("manifest-sbs-linux.json", 181, 402, 90),
    "ds0.19.8-torch2.14-cu130-win_amd64": _Job("manifest-sbs-windows.json", 262, 655, 141),
}
WHERE_LINUX, WHERE_WINDOWS = f"on ubuntu-22.04 (run {RUN})", f"on windows-2022 (run {RUN})"


def _report(path: Path, stage: str, seconds: float) -> None:
    """A stage's --report, as dswheels writes it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    result = StageResult(stage=stage, status=StageStatus.OK, duration_s=seconds)
    path.write_text(json.dumps(result.as_json(version="0.1.0")), encoding="utf-8")


def _release(tmp: Path) -> Path:
    """Run 4242's artifacts: each build job's last two steps, run as build-cells.yml writes them."""
    store = Artifacts(tmp / "release-artifacts")
    for name, spec in JOBS.items():
        manifest = json.loads((DATA / spec.manifest).read_text(encoding="utf-8"))
        entry: dict[str, Value] = {"name": name, "cells": manifest["cell_id"], "os": manifest["cell_id"][-9:]}
        contexts: dict[str, Value] = {
            "github": {"repository": REPO, "ref_name": "v0.19.8", "event_name": "push", "run_id": str(RUN)},
            "vars": {},
            "runner": {"os": "Linux"},
            "matrix": entry,
        }
        job = Job(workflow=WHEELS, job="build", workspace=tmp / name, contexts=contexts)
        wheel = manifest["wheel"]["filename"].removesuffix(".whl")
        variant = job.workspace / "wheelhouse" / manifest["cell_id"].split("-")[2]
        variant.mkdir(parents=True)
        (variant / f"{wheel}.manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
        build = float(manifest["durations"]["total"]) + 3.0  # the build's own start and end around its cell
        _report(job.workspace / "measure" / "cuda.json", "cuda install", spec.cuda)
        _report(job.workspace / "measure" / "build.json", "build", build)
        _report(job.workspace / "measure" / "verify.json", "verify", spec.verify)
        took = spec.setup + spec.cuda + build + spec.verify
        job.runs["clock"] = StepRun(ran=True, outputs={"started": str(int(time.time() - took))}, summary="", stdout="")
        assert job.run("Record what the job measured").ran
        store.upload(job, "The measurements")
    return store.root


def _checkout(dest: Path, compile_times: str) -> Path:
    """A follow job's checkout: the package (PYTHONPATH puts it first, as `pip install .` would) and its facts."""
    shutil.copytree(ROOT / "dswheels", dest / "dswheels", ignore=shutil.ignore_patterns("__pycache__"))
    (dest / "dswheels" / "compile_times.yml").write_text(compile_times, encoding="utf-8")
    shutil.copytree(ROOT / "matrix", dest / "matrix")
    return dest


def _follow(tmp: Path, gh: RefitGitHub, release: Path, checkout: Path) -> dict[str, JobRun]:
    contexts: dict[str, Value] = {
        "github": {
            "event_name": "schedule",
            "repository": REPO,
            "api_url": gh.api_url,
            "token": TOKEN,
            "sha": gh.main_sha,
            "server_url": "https://github.com",
            "event": {"repository": {"default_branch": "main"}},
        },
        "vars": {},
        "runner": {"os": "Linux"},
    }
    store = Artifacts(tmp / "follow-artifacts", runs={str(RUN): release})
    machine = {"PYTHONPATH": str(checkout)}
    ran: dict[str, JobRun] = {}
    jobs = as_map(FOLLOW["jobs"], "jobs")
    assert condition(str(as_map(jobs["measured"], "measured")["if"]), contexts, Status())
    measured = Job(workflow=FOLLOW, job="measured", workspace=tmp / "measured", contexts=contexts, extra_env=machine)
    shutil.copytree(checkout, measured.workspace, dirs_exist_ok=True)  # the job's checkout
    ran["measured"] = run_job(measured, store)
    needs: dict[str, Value] = {"measured": {"result": "success", "outputs": dict(ran["measured"].outputs)}}
    if condition(str(as_map(jobs["refit"], "refit")["if"]), {**contexts, "needs": needs}, Status()):
        job = Job(
            workflow=FOLLOW,
            job="refit",
            workspace=tmp / "refit",
            contexts={**contexts, "needs": needs},
            extra_env=machine,
        )
        ran["refit"] = run_job(job, store)
    return ran


def test_a_releases_records_become_a_pull_request_of_measured_figures(tmp_path: Path) -> None:
    require(sys.platform == "linux", "the chain stands in for the workflow's ubuntu runners")
    release = _release(tmp_path)
    names = sorted(p.name for p in release.iterdir())
    assert names == sorted(f"measurements-{name}" for name in JOBS)
    record = json.loads((release / names[0] / "job.json").read_text(encoding="utf-8"))
    assert record["runner"]["run_id"] == str(RUN)  # the runner's own variables name the run
    assert (release / names[0] / record["cells"][0]["manifest"]).is_file()  # the manifest travels with it

    checkout = _checkout(tmp_path / "checkout", SHIPPED)
    with RefitGitHub(REPO, WORKFLOWS, files={"dswheels/compile_times.yml": SHIPPED}) as gh:
        gh.add_finished_run("wheels.yml", run_id=4100, title="wheels v0.19.7", artifacts=["wheels-x"])  # before records
        gh.add_finished_run("wheels.yml", run_id=RUN, title="wheels v0.19.8", artifacts=[*names, "wheels-a"])
        gh.add_finished_run("wheels.yml", run_id=4300, title="wheels 0.19.8 (canary)", artifacts=names[:1])
        first = _follow(tmp_path / "day1", gh, release, checkout)
        assert first["measured"].outputs["run"] == str(RUN)  # the canary is no release; 4100 recorded nothing
        assert first["refit"].ran == ["actions/download-artifact", "Open the pull request"]
        (pull,) = gh.refit.pulls
        assert pull["head"]["ref"] == f"dswheels/measured-{RUN}"
        assert pull["base"]["ref"] == "main"
        assert pull["head"]["sha"] != gh.main_sha  # one commit on the branch
        proposed = gh.refit.files[f"dswheels/measured-{RUN}"]["dswheels/compile_times.yml"]
        assert gh.refit.files["main"]["dswheels/compile_times.yml"] == SHIPPED  # main is left alone

        _check_proposed(proposed, str(pull["body"]))
        _check_plan_costs(tmp_path, checkout, proposed)

        # the next day: the run's pull request exists, nothing is proposed again
        (checkout / "dswheels" / "compile_times.yml").write_text(SHIPPED, encoding="utf-8")
        again = _follow(tmp_path / "day2", gh, release, checkout)
        assert again["measured"].outputs["run"] == ""
        assert "refit" not in again
        assert len(gh.refit.pulls) == 1


def _check_proposed(proposed: str, body: str) -> None:
    """Every figure the release measured says so, with its runner and run; the rest is as it was."""
    model = parse_costs(yaml.safe_load(proposed))
    linux, windows = model.runners["linux"], model.runners["windows"]
    for runner, where in ((linux, WHERE_LINUX), (windows, WHERE_WINDOWS)):
        assert runner.setup.status == runner.cuda_setup.status == runner.per_cell.status == "measured"
        assert runner.setup.source.startswith(where), runner.setup.source
    assert 171 <= linux.setup.value <= 181 + 3  # the median of its jobs (the clock ticks while a step runs)
    assert linux.cuda_setup.value == 395  # the median of 388 and 402
    assert windows.cuda_setup.value == 655
    assert windows.speed.value == round(521.94 / 316.33, 2)  # the Windows job and its Linux twin
    assert windows.speed.status == "measured"
    quantizer = model.ops["quantizer"].linux
    assert quantizer.status == "measured"
    assert quantizer.source.startswith(f"{WHERE_LINUX}: refit from 1 build(s)")
    fused = model.ops["fused_adam"].linux
    assert fused.source.startswith(WHERE_LINUX)
    assert "x 0.23 (the share of a core" in fused.source  # its own CPU seconds over its slots'
    assert model.ops["fused_adam"].windows is None  # the Windows twin gives the speed, not op figures
    assert "    speed: {value: 1.0, chosen:" in proposed  # an unchanged figure keeps its line, word for word
    assert "| `runners.linux.setup` | 150 (assumed: " in body  # before: the assumed figure, after: measured
    assert f"(measured: {WHERE_LINUX}: median of 2 of 2 jobs" in body


def _check_plan_costs(tmp: Path, checkout: Path, proposed: str) -> None:
    """`plan --costs` on the proposed file lists the figures as measured, with their run."""
    before = int(_counts(_plan_costs(_checkout(tmp / "before", SHIPPED)))["measured"])
    (checkout / "dswheels" / "compile_times.yml").write_text(proposed, encoding="utf-8")
    costs = _plan_costs(checkout)
    for name, where in (("runners.linux.setup", WHERE_LINUX), ("runners.windows.cuda_setup", WHERE_WINDOWS)):
        line = next(text for text in costs.splitlines() if f" {name} " in text)
        assert line.split()[0] == "measured", line
        assert where in line, line
    assert int(_counts(costs)["measured"]) > before


def _plan_costs(checkout: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSWHEELS_", "GITHUB_"))}
    done = subprocess.run(
        [sys.executable, "-m", "dswheels", "plan", "--costs", "--deepspeed", "0.19.8"],
        cwd=checkout,
        env={**env, "PYTHONPATH": str(checkout)},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _counts(costs: str) -> dict[str, str]:
    """``figures (...): 6 measured, 17 probed, ...`` as {status: count}."""
    line = next(text for text in costs.splitlines() if text.startswith("figures (dswheels/compile_times.yml): "))
    return {part.split()[1]: part.split()[0] for part in line.split(": ", 1)[1].split(", ")}
