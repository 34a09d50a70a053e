"""wheels.yml's provenance path, its own steps run here in job order: subjects -> attest (one job per
wheel) -> release -> the published directory, each wheel with its PEP 740 provenance.

No wheel is built (the build jobs' artifact is made as they upload it) and GitHub is not reached:
actions/attest is stood in for by the tests' own Sigstore instance (tests/support/sigstore_fake.py),
which signs what the step's inputs say (subject-name, subject-digest) and writes GitHub's bundle where
the action's bundle-path output points. What is this repository's and runs for real: the jobs'
conditions, every run: step, the artifacts' names and paths (upload/download-artifact's rules),
scripts/attest_subjects.py, `dswheels publish`; then `verify_provenance` (sigstore-python) over what
was published.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dswheels.kernel.attestations import verify_provenance
from tests.conftest import ROOT
from tests.gha.expressions import Status, Value, condition
from tests.gha.model import as_map, load_workflow
from tests.gha.steps import Artifacts, Job, run_job
from tests.support.sigstore_fake import FakeSigstore, Identity
from tests.support.wheels import write_deepspeed_wheel

pytestmark = pytest.mark.integration

WHEELS = load_workflow(ROOT / ".github" / "workflows" / "wheels.yml")
JOBS = as_map(WHEELS["jobs"], "jobs")
REPOSITORY = "octo/dswheels"


def _if(job: str) -> str:
    return str(as_map(JOBS[job], job)["if"])


def _checkout(workspace: Path) -> Path:
    """What actions/checkout puts in the workspace, as far as the job's steps use it."""
    (workspace / "scripts").mkdir(parents=True)
    shutil.copy2(ROOT / "scripts" / "attest_subjects.py", workspace / "scripts")
    return workspace


def test_every_wheel_is_attested_alone_and_published_with_its_provenance(tmp_path: Path) -> None:
    fake = FakeSigstore()
    store = Artifacts(tmp_path / "artifacts")
    # the build jobs' artifacts: wheels-<job> holding <variant>/<wheel> (build-cells.yml's "The wheels")
    built = [
        write_deepspeed_wheel(store.root / "wheels-cpu" / "cpu", version=v, variant="cpu", torch="2.13")
        for v in ("0.19.7", "0.19.8")
    ]
    built.append(write_deepspeed_wheel(store.root / "wheels-cu130" / "cu130", variant="cu130", torch="2.14"))
    published = tmp_path / "published"
    base: dict[str, Value] = {
        "github": {"event_name": "push", "ref_name": "v0.19.8", "repository": REPOSITORY, "sha": "0" * 40},
        "vars": {},
        "inputs": {},
        "runner": {"os": "Linux"},
    }
    plan: dict[str, Value] = {
        "release": "v0.19.8",
        "publish_dir": str(published),
        "index_url": "https://octo.github.io/dswheels/",
    }
    needs: dict[str, Value] = {
        "plan": {"result": "success", "outputs": plan},
        "build": {"result": "success", "outputs": {}},
        "smoke": {"result": "skipped", "outputs": {}},
    }
    after_skipped = Status(success=False)  # a job after a skipped one (smoke): success() is false
    assert condition(_if("subjects"), {**base, "needs": needs}, after_skipped)
    subjects = Job(
        workflow=WHEELS, job="subjects", workspace=_checkout(tmp_path / "subjects"), contexts={**base, "needs": needs}
    )
    listed = run_job(subjects, store)
    assert listed.ran == ["actions/download-artifact", "The wheels to attest"]
    entries = json.loads(listed.outputs["subjects"])["include"]
    assert [(e["name"], e["folder"]) for e in entries] == sorted((w.name, w.parent.name) for w in built)
    needs["subjects"] = {"result": "success", "outputs": dict(listed.outputs)}

    signed: list[tuple[str, str]] = []

    def attest(job: Job, step: str) -> dict[str, str]:
        """actions/attest, provenance mode, for the one subject its inputs name."""
        with_ = job.with_(step)
        assert set(with_) == {"subject-name", "subject-digest"}  # no file: the name and digest alone
        name, digest = with_["subject-name"], with_["subject-digest"].removeprefix("sha256:")
        signed.append((name, digest))
        path = job.temp / "attestation.json"
        path.write_bytes(fake.attest([(name, digest)], Identity(repository=REPOSITORY)))
        return {"bundle-path": str(path), "attestation-id": "1", "attestation-url": "https://github.com/x"}

    assert condition(_if("attest"), {**base, "needs": needs}, Status())
    for entry in entries:
        job = Job(
            workflow=WHEELS,
            job="attest",
            workspace=tmp_path / f"attest-{entry['index']}",
            contexts={**base, "needs": needs, "matrix": entry},
        )
        assert run_job(job, store, attestor=attest).ran == [
            "actions/attest",
            "Place the bundle as the wheel lies",
            "actions/upload-artifact",
        ]
    assert sorted(signed) == sorted((e["name"], e["sha256"]) for e in entries)  # each wheel alone

    needs["attest"] = {"result": "success", "outputs": {}}
    assert condition(_if("release"), {**base, "needs": needs}, Status())
    release = Job(workflow=WHEELS, job="release", workspace=tmp_path / "release", contexts={**base, "needs": needs})
    released = run_job(release, store)
    assert released.ran == [
        "actions/download-artifact",
        "The attestations, beside their wheels",
        "Publish to the directory",
    ]
    for wheel in built:  # GitHub's bundle lay beside the wheel: published as its provenance
        assert (release.workspace / "wheelhouse" / wheel.parent.name / f"{wheel.name}.sigstore.json").is_file()
        provenance = (published / f"{wheel.name}.provenance").read_bytes()
        entry = next(e for e in entries if e["name"] == wheel.name)
        attested = verify_provenance(
            provenance,
            filename=wheel.name,
            sha256=entry["sha256"],
            repository=REPOSITORY,
            where=wheel.name,
            root=fake.trusted_root(),
        )
        assert attested.signer.repository == REPOSITORY
    assert not list(published.glob("*.sigstore.json"))  # the bundle itself is not published: its provenance is


def test_the_release_waits_for_every_attestation(tmp_path: Path) -> None:
    base: dict[str, Value] = {"github": {"event_name": "push"}, "vars": {}, "inputs": {}}
    needs: dict[str, Value] = {"plan": {"result": "success", "outputs": {"release": "v0.19.8"}}}
    for result, runs in (("success", True), ("failure", False), ("skipped", False), ("cancelled", False)):
        needs["attest"] = {"result": result, "outputs": {}}
        assert condition(_if("release"), {**base, "needs": needs}, Status()) is runs, result
