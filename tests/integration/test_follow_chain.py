"""The follow workflow's own steps, run here in job order (`nox -s dryrun`): sources and GitHub on loopback.

Two runs of .github/workflows/follow.yml's jobs on a workspace whose compat.yml does not know
DeepSpeed 0.19.8 yet (a planted fact), every source served from loopback (tests/support/upstream.py:
the recordings and real sdists) through the repository variables DSWHEELS_FACTS_*, GitHub's
API answered by a loopback fake (tests/support/github_follow_fake.py):

1. a scheduled run: the check reports the new release (its sdist read: the facts place it) and
   the rest of today's drift; ONE issue is opened with the proposed diff; wheels.yml is
   dispatched for 0.19.8 (new) and 0.19.7 (a version of the matrix with nothing published);
2. a run the same day: the issue is kept (no second one), and no build is started again while
   the first ones are queued.

DSWHEELS_FOLLOW=off skipping every job is a condition: tests/unit/test_follow_workflow.py.
The steps run as tests/gha/steps.py runs them (no Actions runner is emulated).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dswheels.kernel.compat import parse_compat
from dswheels.kernel.naming import cell_id, wheel_filename
from dswheels.plan.effects.matrix_file import load_matrix
from dswheels.plan.planner import plan
from tests.conftest import DATA, ROOT, require
from tests.gha.expressions import Status, Value, condition
from tests.gha.model import as_map, load_workflow, validate_inputs
from tests.gha.steps import Artifacts, Job, run_job
from tests.support.github_follow_fake import Dispatch, FollowGitHub
from tests.support.scenarios import deepspeed_release, torch_release
from tests.support.upstream import UpstreamServer, assemble, urls

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

FOLLOW = load_workflow(ROOT / ".github" / "workflows" / "follow.yml")
JOBS = as_map(FOLLOW["jobs"], "jobs")
REPOSITORY = "dswheels/dswheels"
TOKEN = "chain-token"  # noqa: S105 - what the fake GitHub accepts, not a secret


def _checkout(dest: Path, compat: str) -> Path:
    """What a job of the follow workflow has: the repository with ``compat`` as its facts, installed as the
    job's `pip install .` installs it (a copy of the package that PYTHONPATH puts first, :func:`_installed`),
    and wheels.yml (the CUDA-install action's pin)."""
    shutil.copytree(ROOT / "dswheels", dest / "dswheels", ignore=shutil.ignore_patterns("__pycache__"))
    (dest / "dswheels" / "compat.yml").write_text(compat, encoding="utf-8")
    (dest / ".github" / "workflows").mkdir(parents=True)
    shutil.copy2(ROOT / ".github" / "workflows" / "wheels.yml", dest / ".github" / "workflows" / "wheels.yml")
    return dest


def _installed(checkout: Path, cache: Path) -> dict[str, str]:
    """The machine of a job that installed ``checkout``: its dswheels (and facts) are the checkout's."""
    return {"DSWHEELS_CACHE": str(cache), "PYTHONPATH": str(checkout)}


def _planted_checkout(dest: Path) -> Path:
    """The checkout with compat.yml not knowing DeepSpeed 0.19.8 yet."""
    text = (ROOT / "dswheels" / "compat.yml").read_text(encoding="utf-8")
    planted = text.replace('"0.19.7", "0.19.8",\n', '"0.19.7",\n', 1)
    assert planted != text, "the planted fact (0.19.8 unknown) could not be made: deepspeed.releases changed shape"
    return _checkout(dest, planted)


def _run(out: Path, variables: dict[str, str], api_url: str, cache: Path, checkout: Path) -> dict[str, list[str]]:
    """The three jobs of one run on ``checkout``; which steps ran in each."""
    contexts: dict[str, Value] = {
        "github": {
            "event_name": "schedule",
            "ref_name": "main",
            "repository": REPOSITORY,
            "api_url": api_url,
            "token": TOKEN,
            "event": {"repository": {"default_branch": "main"}},
        },
        "vars": dict(variables),
        "inputs": {},
        "runner": {"os": "Linux"},
    }
    machine = _installed(checkout, cache)
    store = Artifacts(out / "artifacts")
    assert condition(str(as_map(JOBS["check"], "check")["if"]), contexts, Status())
    shutil.rmtree(checkout / "facts", ignore_errors=True)  # a fresh checkout has no report yet
    checked = run_job(
        Job(workflow=FOLLOW, job="check", workspace=checkout, contexts=contexts, extra_env=machine), store
    )
    needs: dict[str, Value] = {"check": {"result": "success", "outputs": dict(checked.outputs)}}
    ran = {"check": checked.ran}
    for name in ("issue", "build"):
        if condition(as_map(JOBS[name], name).get("if"), {**contexts, "needs": needs}, Status()):  # type: ignore[arg-type]
            job = Job(
                workflow=FOLLOW,
                job=name,
                workspace=out / name,
                contexts={**contexts, "needs": needs},
                extra_env=machine,
            )
            ran[name] = run_job(job, store).ran
    return ran


def test_the_follow_workflow_chain_runs_here(tmp_path: Path, dswheels_cache: Path) -> None:
    require(sys.platform == "linux", "the chain stands in for the workflow's ubuntu runners")
    site = assemble(tmp_path / "upstream", dswheels_cache / "sources")
    with UpstreamServer(site) as upstream, FollowGitHub(REPOSITORY, ROOT / ".github" / "workflows") as gh:
        options = urls(upstream.base_url)
        sources = dict(zip(options[::2], options[1::2], strict=True))
        variables = {
            "DSWHEELS_FACTS_PYPI": sources["--pypi"],
            "DSWHEELS_FACTS_TORCH_INDEX": sources["--torch-index"],
            "DSWHEELS_FACTS_ACTION_LINKS": sources["--action-links"],
            "DSWHEELS_FACTS_RUNNER_IMAGES": sources["--runner-images"],
            "DSWHEELS_MATRIX": str(DATA / "follow-matrix.yml"),
            "DSWHEELS_PUBLISH_DIR": str(tmp_path / "published"),
        }
        checkout = _planted_checkout(tmp_path / "checkout")
        first = _run(tmp_path / "scheduled", variables, gh.api_url, dswheels_cache, checkout)
        # every source was read from loopback: the repository variables reached the check
        served = upstream.paths
        assert any(p.startswith("/pypi/deepspeed/") for p in served), served
        assert any(p.startswith("/whl/") for p in served), served
        # wheels.yml installs CUDA with `dswheels cuda install`: no CUDA-install action's tables are read
        assert not any(p.startswith("/Jimver/cuda-toolkit/") for p in served), served
        assert first == {
            "check": [
                "Check compat.yml against its sources",
                "Builds that became possible",
                "actions/upload-artifact",
            ],
            "issue": ["actions/download-artifact", "Open, update or close the drift issue"],
            "build": ["Dispatch wheels.yml"],
        }
        (issue,) = gh.issues
        body = str(issue["body"])
        assert "DeepSpeed 0.19.8 is on PyPI" in body
        assert "```diff" in body
        assert '"0.19.7", "0.19.8"' in body  # the proposed edit: the new release appended
        started = [(d.workflow, d.inputs) for d in gh.state.dispatches]
        assert started == [
            ("wheels.yml", {**_matrix_inputs(), "deepspeed": "0.19.8"}),  # the new release the facts place
            ("wheels.yml", {**_matrix_inputs(), "deepspeed": "0.19.7"}),  # the matrix's, nothing published
        ]
        second = _run(tmp_path / "again", variables, gh.api_url, dswheels_cache, checkout)
        assert second["issue"] == first["issue"]
        assert len(gh.issues) == 1  # kept up to date, never a second one
        assert len(gh.state.dispatches) == 2  # the first run's builds are queued: nothing started again
        report = json.loads((checkout / "facts" / "report.json").read_text(encoding="utf-8"))
        assert report["placeable_deepspeed"] == ["0.19.8"]


def _matrix_inputs() -> dict[str, str]:
    """What a build of a whole DeepSpeed version asks of wheels.yml: every axis from its matrix, published."""
    return {
        "torch": "matrix",
        "cuda": "matrix",
        "python": "matrix",
        "platform": "matrix",
        "canary": "false",
        "publish": "true",
    }


def test_facts_builds_reads_the_repository_matrix_from_any_directory(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"schema": "dswheels.facts-report/1", "placeable_deepspeed": []}), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSWHEELS_", "GITHUB_"))}
    args = [sys.executable, "-m", "dswheels", "facts", "builds", "--facts", str(report)]
    args += ["--publish-dir", str(tmp_path / "published")]
    outputs = []
    for cwd in (ROOT, ROOT / "docs"):
        done = subprocess.run(args, capture_output=True, text=True, cwd=cwd, env=env, check=False, timeout=300)
        assert done.returncode == 0, f"from {cwd}: {done.stderr}"
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]  # matrix/matrix.yml of the clone, wherever it runs from
    assert json.loads(outputs[0])  # the shipped matrix plans versions, none published here


# --- releases that arrive unattended: derived scenarios (tests/support/scenarios.py) ----------------------

NEWEST = DATA / "follow-matrix-newest.yml"  # the shipped matrix's shape: newest DeepSpeed, newest torch
WHEELS = load_workflow(ROOT / ".github" / "workflows" / "wheels.yml")


def _publish_everything_planned(published: Path, compat_text: str) -> list[str]:
    """The published index as it is before the release: every cell the matrix plans today has its wheel.
    Returns those cells' ids."""
    compat = parse_compat(yaml.safe_load(compat_text))
    cells = [item.cell for item in plan(load_matrix(NEWEST, compat), compat).planned]
    published.mkdir(parents=True)
    for cell in cells:
        (published / wheel_filename(cell)).write_bytes(b"")  # `facts builds` and `ci plan` read names only
    return sorted(cell_id(cell) for cell in cells)


def _merge_the_issue(body: str, checkout: Path) -> None:
    """What the person does: apply the issue's proposed diff to the repository, nothing else."""
    diff = body.split("```diff\n", 1)[1].split("\n```", 1)[0] + "\n"
    patch = checkout / "facts.diff"
    patch.write_text(diff, encoding="utf-8")
    done = subprocess.run(
        ["git", "apply", "-p1", str(patch)], cwd=checkout, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    patch.unlink()


def _planned_today(out: Path, checkout: Path, variables: dict[str, str], cache: Path) -> list[str]:
    """The cells a whole-matrix wheels run of DeepSpeed 0.19.8 plans on ``checkout`` with nothing published."""
    out.mkdir(parents=True)
    nothing = {**variables, "DSWHEELS_PUBLISH_DIR": str(out / "nothing-published")}
    (out / "nothing-published").mkdir()
    dispatch = Dispatch("wheels.yml", "main", {**_matrix_inputs(), "deepspeed": "0.19.8"})
    return sorted(_planned_by_the_dispatched_run(out, dispatch, checkout, nothing, cache))


def _planned_by_the_dispatched_run(
    tmp_path: Path, dispatch: Dispatch, checkout: Path, variables: dict[str, str], cache: Path
) -> dict[str, list[str]]:
    """The cells the wheels run that ``dispatch`` started plans (its plan job, on ``checkout``), with their notes."""
    declared = as_map(as_map(as_map(WHEELS["on"], "on")["workflow_dispatch"], "wd")["inputs"], "inputs")
    contexts: dict[str, Value] = {
        "github": {"event_name": "workflow_dispatch", "ref_name": dispatch.ref, "repository": REPOSITORY, "token": ""},
        "inputs": validate_inputs(declared, dispatch.inputs),
        "vars": {k: v for k, v in variables.items() if not k.startswith("DSWHEELS_FACTS_")},
        "runner": {"os": "Linux"},
    }
    job = Job(
        workflow=WHEELS,
        job="plan",
        workspace=tmp_path / "wheels-plan",
        contexts=contexts,
        extra_env=_installed(checkout, cache),
    )
    planned = run_job(job, Artifacts(tmp_path / "wheels-artifacts"))
    plan_file = json.loads((job.workspace / planned.steps["plan"].outputs["plan"]).read_text(encoding="utf-8"))
    built = {cell for entry in json.loads(planned.outputs["matrix"])["include"] for cell in entry["cells"].split()}
    assert built == {cell["id"] for cell in plan_file["cells"]}  # the build jobs get every planned cell
    return {cell["id"]: cell["toolchain"]["notes"] for cell in plan_file["cells"]}


def _findings(checkout: Path) -> dict[str, list[dict[str, object]]]:
    found: dict[str, list[dict[str, object]]] = {}
    report = json.loads((checkout / "facts" / "report.json").read_text(encoding="utf-8"))
    for finding in report["findings"]:
        found.setdefault(str(finding["entry"]), []).append(finding)
    return found


def test_torch_2_16_arrives_unattended(tmp_path: Path, dswheels_cache: Path) -> None:
    """2.16.0 on PyPI and download.pytorch.org (derived from 2.15.0): proposed, merged, planned, dispatched."""
    require(sys.platform == "linux", "the chain stands in for the workflow's ubuntu runners")
    site = assemble(tmp_path / "upstream", dswheels_cache / "sources")
    torch_release(site)
    shipped = (ROOT / "dswheels" / "compat.yml").read_text(encoding="utf-8")
    before = _publish_everything_planned(tmp_path / "published", shipped)
    assert before
    assert not [c for c in before if "-torch2.16-" in c]
    with UpstreamServer(site) as upstream, FollowGitHub(REPOSITORY, ROOT / ".github" / "workflows") as gh:
        variables = {
            **_source_variables(upstream),
            "DSWHEELS_MATRIX": str(NEWEST),
            "DSWHEELS_PUBLISH_DIR": str(tmp_path / "published"),
        }
        checkout = _checkout(tmp_path / "checkout", shipped)
        today = _planned_today(tmp_path / "today", checkout, variables, dswheels_cache)
        assert today
        assert all("-torch2.15-" in c for c in today)
        # the day it appears: proposed in the issue, nothing built (the facts do not know 2.16 yet)
        first = _run(tmp_path / "day1", variables, gh.api_url, dswheels_cache, checkout)
        assert "build" not in first
        (proposed,) = _findings(checkout)["torch.2.16"]
        assert proposed["kind"] == "new"
        assert proposed["written"] is True
        person = str(proposed["person"])
        assert "cxx_std (20) is torch 2.15's, marked inferred" in person  # what a person must still decide
        assert "add 2.16 to the `torch` choices of .github/workflows/wheels.yml" in person
        (issue,) = gh.issues
        body = str(issue["body"])
        assert "torch 2.16.0 (released 2026-12-22) is on PyPI" in body
        assert '+  "2.16":' in body
        assert "+    variants: {linux: [cu130, cu132], windows: [cu130, cu132]}" in body
        assert not gh.state.dispatches
        # a person merges the issue's diff; the next day's run builds what the matrix now plans
        _merge_the_issue(body, checkout)
        second = _run(tmp_path / "day2", variables, gh.api_url, dswheels_cache, checkout)
        assert second["build"] == ["Dispatch wheels.yml"]
        found = _findings(checkout)
        assert "torch.2.16" not in [e for e, fs in found.items() if any(f["kind"] == "new" for f in fs)]
        # its cxx_std is still a guess: the issue keeps saying so (the confirmed variants do not settle it)
        ((kind, message),) = [(f["kind"], str(f["message"])) for f in found["torch.2.16"]]
        assert kind == "unsettled"
        assert message.startswith("cxx_std: torch 2.15's; no source dswheels facts check reads")
        assert len(gh.issues) == 1
        (dispatch,) = gh.state.dispatches
        assert (dispatch.workflow, dispatch.inputs) == ("wheels.yml", {**_matrix_inputs(), "deepspeed": "0.19.8"})
        planned = _planned_by_the_dispatched_run(tmp_path, dispatch, checkout, variables, dswheels_cache)
    # 2.16's cells with its variants (those of 2.15, whose shape it has): only they, 2.15's are published
    assert sorted(planned) == [c.replace("-torch2.15-", "-torch2.16-") for c in today]
    assert {c.split("-")[2] for c in planned} >= {"cu130", "cpu"}
    assert {c.rsplit("-", 1)[1] for c in planned} == {"linux_x86_64", "win_amd64"}


def test_a_new_deepspeed_release_is_built_the_day_it_appears(tmp_path: Path, dswheels_cache: Path) -> None:
    """0.19.9 on PyPI (derived from 0.19.8, its sdist too): read, placed, dispatched before any merge."""
    require(sys.platform == "linux", "the chain stands in for the workflow's ubuntu runners")
    site = assemble(tmp_path / "upstream", dswheels_cache / "sources")
    deepspeed_release(site)
    shipped = (ROOT / "dswheels" / "compat.yml").read_text(encoding="utf-8")
    _publish_everything_planned(tmp_path / "published", shipped)
    with UpstreamServer(site) as upstream, FollowGitHub(REPOSITORY, ROOT / ".github" / "workflows") as gh:
        variables = {
            **_source_variables(upstream),
            "DSWHEELS_MATRIX": str(NEWEST),
            "DSWHEELS_PUBLISH_DIR": str(tmp_path / "published"),
        }
        checkout = _checkout(tmp_path / "checkout", shipped)
        today = _planned_today(tmp_path / "today", checkout, variables, dswheels_cache)
        assert today
        # a cache of its own: a kept one (DSWHEELS_TEST_CACHE) holds 0.19.9's sdist by its digest from an
        # earlier run, and the check job would not read it from upstream
        ran = _run(tmp_path / "day1", variables, gh.api_url, tmp_path / "cache", checkout)
        assert ran["build"] == ["Dispatch wheels.yml"]
        assert any(p.endswith("/deepspeed-0.19.9.tar.gz") for p in upstream.paths)  # its sdist was read
        report = json.loads((checkout / "facts" / "report.json").read_text(encoding="utf-8"))
        assert report["placeable_deepspeed"] == ["0.19.9"]
        (new,) = _findings(checkout)["deepspeed.releases"]
        assert new["written"] is True
        assert not new["person"]  # nothing for a person: the issue's diff only records the release
        (issue,) = gh.issues
        assert '"0.19.8", "0.19.9",' in str(issue["body"])
        (dispatch,) = gh.state.dispatches
        assert (dispatch.workflow, dispatch.inputs) == ("wheels.yml", {**_matrix_inputs(), "deepspeed": "0.19.9"})
        # before the merge: planned with compat.yml's open-ended ranges, for the torch the matrix has
        planned = _planned_by_the_dispatched_run(tmp_path, dispatch, checkout, variables, dswheels_cache)
    # the cells 0.19.8 has, for 0.19.9 (none published yet)
    assert sorted(planned) == [c.replace("ds0.19.8-", "ds0.19.9-", 1) for c in today]
    # what a person still does: record its op flags (`nox -s update_flags`); until then each build judges them
    for notes in planned.values():
        assert any("DeepSpeed 0.19.9's op flags are not recorded in op_flags.json" in n for n in notes), notes


def _source_variables(upstream: UpstreamServer) -> dict[str, str]:
    """The repository variables that point the facts check at the loopback sources."""
    options = urls(upstream.base_url)
    sources = dict(zip(options[::2], options[1::2], strict=True))
    return {
        "DSWHEELS_FACTS_PYPI": sources["--pypi"],
        "DSWHEELS_FACTS_TORCH_INDEX": sources["--torch-index"],
        "DSWHEELS_FACTS_ACTION_LINKS": sources["--action-links"],
        "DSWHEELS_FACTS_RUNNER_IMAGES": sources["--runner-images"],
    }
