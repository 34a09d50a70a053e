"""What the workflow tests read as GitHub does: YAML 1.2, tag filters, the dispatch form, file commands,
and the artifact path rules the chain tests follow (tests/gha/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gha.expressions import Value
from tests.gha.model import WorkflowError, load_workflow, read_file_commands, tag_matches, validate_inputs
from tests.gha.steps import Artifacts, Job


def test_file_commands(tmp_path: Path) -> None:
    path = tmp_path / "out"
    path.write_text('matrix={"include":[]}\nrelease=\nlist<<EOF\n3.11\n3.12\nEOF\nx=a=b\n', encoding="utf-8")
    assert read_file_commands(path) == {"matrix": '{"include":[]}', "release": "", "list": "3.11\n3.12", "x": "a=b"}
    path.write_text("list<<EOF\nnever closed\n", encoding="utf-8")
    with pytest.raises(WorkflowError, match="never closed"):
        read_file_commands(path)
    assert read_file_commands(tmp_path / "missing") == {}


def test_tag_filters() -> None:
    assert tag_matches("v0.19.8", ["v[0-9]*"])
    assert not tag_matches("vx", ["v[0-9]*"])
    assert not tag_matches("a/b", ["*"])  # * does not cross /
    assert tag_matches("a/b", ["**"])
    assert not tag_matches("v1-rc", ["v*", "!*-rc"])


def test_dispatch_inputs_are_checked_like_the_form() -> None:
    declared: dict[str, Value] = {
        "torch": {"type": "choice", "options": ["2.14", "2.13"], "default": "2.14"},
        "publish": {"type": "boolean", "default": False},
        "note": {"type": "string", "required": True},
    }
    assert validate_inputs(declared, {"note": "x"}) == {"torch": "2.14", "publish": False, "note": "x"}
    assert validate_inputs(declared, {"note": "", "publish": "true", "torch": "2.13"})["publish"] is True
    with pytest.raises(WorkflowError, match="not one of its options"):
        validate_inputs(declared, {"note": "x", "torch": "2.12"})
    with pytest.raises(WorkflowError, match="is required"):
        validate_inputs(declared, {})
    with pytest.raises(WorkflowError, match="unknown workflow_dispatch input"):
        validate_inputs(declared, {"note": "x", "typo": "1"})
    with pytest.raises(WorkflowError, match="is a boolean"):
        validate_inputs(declared, {"note": "x", "publish": "yes"})


def test_workflows_are_read_with_yaml_1_2_booleans(tmp_path: Path) -> None:
    path = tmp_path / "w.yml"
    path.write_text("on: {push: {tags: [v1]}}\njobs: {a: {runs-on: ubuntu-24.04, x: yes, y: true}}\n", encoding="utf-8")
    data = load_workflow(path)
    assert "on" in data
    assert data["jobs"] == {"a": {"runs-on": "ubuntu-24.04", "x": "yes", "y": True}}


def _job(tmp_path: Path, workspace: str, steps: list[dict[str, Value]]) -> Job:
    workflow: dict[str, Value] = {
        "defaults": {"run": {"shell": "bash"}},
        "jobs": {"j": {"runs-on": "ubuntu-24.04", "steps": steps}},  # type: ignore[dict-item]
    }
    return Job(workflow=workflow, job="j", workspace=tmp_path / workspace, contexts={"matrix": {"name": "a"}})


def test_artifacts_round_trip_with_patterns_and_merging(tmp_path: Path) -> None:
    store = Artifacts(tmp_path / "artifacts")
    job = _job(tmp_path, "none", [])
    for name, files in (("wheels-a", ["cpu/a.whl", "cpu/a.json"]), ("wheels-b", ["cu130/b.whl"])):
        job = _job(
            tmp_path, name, [{"uses": "actions/upload-artifact@x", "with": {"name": name, "path": "wheelhouse/"}}]
        )
        for file in files:
            (job.workspace / "wheelhouse" / file).parent.mkdir(parents=True, exist_ok=True)
            (job.workspace / "wheelhouse" / file).write_text(name, encoding="utf-8")
        store.upload(job, "actions/upload-artifact")
    # the directory itself is the root: wheelhouse/ is not part of the artifact
    assert sorted(p.relative_to(store.root).as_posix() for p in store.root.rglob("*.whl")) == [
        "wheels-a/cpu/a.whl",
        "wheels-b/cu130/b.whl",
    ]
    with pytest.raises(WorkflowError, match="already exists"):
        store.upload(job, "actions/upload-artifact")
    merged = _job(
        tmp_path,
        "release",
        [
            {
                "uses": "actions/download-artifact@x",
                "with": {"pattern": "wheels-*", "merge-multiple": True, "path": "w"},
            },
            {"name": "apart", "uses": "actions/download-artifact@x", "with": {"pattern": "wheels-*", "path": "s"}},
        ],
    )
    store.download(merged, "actions/download-artifact")
    assert sorted(p.relative_to(merged.workspace / "w").as_posix() for p in (merged.workspace / "w").rglob("*.*")) == [
        "cpu/a.json",
        "cpu/a.whl",
        "cu130/b.whl",
    ]
    store.download(merged, "apart")
    assert (merged.workspace / "s" / "wheels-b" / "cu130" / "b.whl").exists()
    # a single file: its directory is the root
    plan = _job(
        tmp_path, "plan", [{"uses": "actions/upload-artifact@x", "with": {"name": "plan", "path": "p/plan.json"}}]
    )
    (plan.workspace / "p").mkdir()
    (plan.workspace / "p" / "plan.json").write_text("{}", encoding="utf-8")
    store.upload(plan, "actions/upload-artifact")
    assert (store.root / "plan" / "plan.json").exists()
    empty = _job(
        tmp_path,
        "empty",
        [
            {
                "uses": "actions/upload-artifact@x",
                "with": {"name": "e", "path": "nothing/", "if-no-files-found": "error"},
            }
        ],
    )
    with pytest.raises(AssertionError, match="no files"):
        store.upload(empty, "actions/upload-artifact")


def test_a_step_runs_as_written_with_its_env_and_outputs(tmp_path: Path) -> None:
    job = _job(
        tmp_path,
        "ws",
        [
            {
                "name": "say",
                "id": "say",
                "env": {"NAME": "${{ matrix.name }}"},
                "run": 'echo "got=$NAME" >> "$GITHUB_OUTPUT"; echo "# $NAME" >> "$GITHUB_STEP_SUMMARY"',
            },
            {"name": "never", "if": "matrix.name == 'b'", "run": "exit 1"},
            {"name": "fails", "run": "false; echo not reached"},
        ],
    )
    said = job.run("say")
    assert (said.ran, said.outputs, said.summary) == (True, {"got": "a"}, "# a\n")
    assert not job.run("never").ran
    with pytest.raises(AssertionError, match="exited with 1"):
        job.run("fails")
