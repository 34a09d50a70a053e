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
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import DATA, ROOT, require
from tests.gha.expressions import Status, Value, condition
from tests.gha.model import as_map, load_workflow
from tests.gha.steps import Artifacts, Job, run_job
from tests.support.github_follow_fake import FollowGitHub
from tests.support.upstream import UpstreamServer, assemble, urls

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

FOLLOW = load_workflow(ROOT / ".github" / "workflows" / "follow.yml")
JOBS = as_map(FOLLOW["jobs"], "jobs")
REPOSITORY = "dswheels/dswheels"
TOKEN = "chain-token"  # noqa: S105 - what the fake GitHub accepts, not a secret


def _planted_checkout(dest: Path) -> Path:
    """What the check job reads from its checkout: compat.yml without 0.19.8, and wheels.yml (which
    names no CUDA-install action any more: the check reports that source as not used)."""
    text = (ROOT / "dswheels" / "compat.yml").read_text(encoding="utf-8")
    planted = text.replace('"0.19.7", "0.19.8",\n', '"0.19.7",\n', 1)
    assert planted != text, "the planted fact (0.19.8 unknown) could not be made: deepspeed.releases changed shape"
    (dest / "dswheels").mkdir(parents=True)
    (dest / "dswheels" / "compat.yml").write_text(planted, encoding="utf-8")
    (dest / ".github" / "workflows").mkdir(parents=True)
    shutil.copy2(ROOT / ".github" / "workflows" / "wheels.yml", dest / ".github" / "workflows" / "wheels.yml")
    return dest


def _run(out: Path, variables: dict[str, str], api_url: str, cache: Path) -> dict[str, list[str]]:
    """The three jobs of one run; which steps ran in each."""
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
    machine = {"DSWHEELS_CACHE": str(cache)}
    store = Artifacts(out / "artifacts")
    assert condition(str(as_map(JOBS["check"], "check")["if"]), contexts, Status())
    checkout = _planted_checkout(out / "check")
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
            "DSWHEELS_MATRIX": str(DATA / "follow-matrix.yml"),
            "DSWHEELS_PUBLISH_DIR": str(tmp_path / "published"),
        }
        first = _run(tmp_path / "scheduled", variables, gh.api_url, dswheels_cache)
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
        second = _run(tmp_path / "again", variables, gh.api_url, dswheels_cache)
        assert second["issue"] == first["issue"]
        assert len(gh.issues) == 1  # kept up to date, never a second one
        assert len(gh.state.dispatches) == 2  # the first run's builds are queued: nothing started again
        report = json.loads((tmp_path / "again" / "check" / "facts" / "report.json").read_text(encoding="utf-8"))
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
