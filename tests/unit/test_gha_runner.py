"""The local workflow runner's rules: matrices, file commands, triggers, runners, artifacts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gha.actions import ActionError, Host, _download_artifact, _upload_artifact, action_key
from tests.gha.expressions import Value
from tests.gha.model import WorkflowError, load_workflow, tag_matches, validate_inputs
from tests.gha.runner import _expand_matrix, _read_file_commands, _runner_kind


def test_matrix_include_only() -> None:
    combos = _expand_matrix({"include": [{"name": "a", "os": "linux"}, {"name": "b"}]})
    assert combos == [{"name": "a", "os": "linux"}, {"name": "b"}]


def test_matrix_product_exclude_and_include_rules() -> None:
    # GitHub's documented example: include extends matching combinations, else adds one
    matrix: Value = {
        "fruit": ["apple", "pear"],
        "animal": ["cat", "dog"],
        "exclude": [{"fruit": "pear", "animal": "dog"}],
        "include": [
            {"color": "green"},
            {"color": "pink", "animal": "cat"},
            {"fruit": "apple", "shape": "circle"},
            {"fruit": "banana"},
        ],
    }
    assert _expand_matrix(matrix) == [
        {"fruit": "apple", "animal": "cat", "color": "pink", "shape": "circle"},
        {"fruit": "apple", "animal": "dog", "color": "green", "shape": "circle"},
        {"fruit": "pear", "animal": "cat", "color": "pink"},
        {"fruit": "banana"},
    ]


def test_an_empty_matrix_fails_like_github() -> None:
    with pytest.raises(WorkflowError, match="no jobs"):
        _expand_matrix({"include": []})


def test_file_commands(tmp_path: Path) -> None:
    path = tmp_path / "out"
    path.write_text('matrix={"include":[]}\nrelease=\nlist<<EOF\n3.11\n3.12\nEOF\nx=a=b\n', encoding="utf-8")
    assert _read_file_commands(path) == {"matrix": '{"include":[]}', "release": "", "list": "3.11\n3.12", "x": "a=b"}
    path.write_text("list<<EOF\nnever closed\n", encoding="utf-8")
    with pytest.raises(WorkflowError, match="never closed"):
        _read_file_commands(path)
    assert _read_file_commands(tmp_path / "missing") == {}


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


def test_which_runners_this_machine_stands_in_for() -> None:
    assert "self-hosted" in str(_runner_kind(["self-hosted", "linux", "gpu"]))
    assert "windows-2022" in str(_runner_kind(["windows-2022"]))
    assert "unknown" in str(_runner_kind(["my-runner"]))


def test_action_keys_ignore_the_ref_and_case() -> None:
    assert action_key("Jimver/cuda-toolkit@3d45d157f327c09c04b50ee6ccdea2d9d017ec76") == "jimver/cuda-toolkit"
    assert action_key("actions/upload-artifact/merge@v7") == "actions/upload-artifact/merge"


def _host(tmp_path: Path) -> Host:
    messages: list[str] = []
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return Host(
        repo=tmp_path,
        workspace=workspace,
        temp=tmp_path / "t",
        tool_cache=tmp_path / "tc",
        artifacts=tmp_path / "artifacts",
        pages=tmp_path / "pages",
        env={},
        say=messages.append,
    )


def test_artifacts_round_trip_with_patterns_and_merging(tmp_path: Path) -> None:
    host = _host(tmp_path)
    for name, files in (("wheels-a", ["cpu/a.whl", "cpu/a.json"]), ("wheels-b", ["cu130/b.whl"]), ("logs", ["x.log"])):
        for file in files:
            (host.workspace / "wheelhouse" / file).parent.mkdir(parents=True, exist_ok=True)
            (host.workspace / "wheelhouse" / file).write_text(name, encoding="utf-8")
        _upload_artifact(host, {"name": name, "path": "wheelhouse/", "if-no-files-found": "error"})
        for file in files:
            (host.workspace / "wheelhouse" / file).unlink()
    # the least common ancestor is the root: wheelhouse/ itself is not part of the artifact
    assert sorted(p.relative_to(host.artifacts).as_posix() for p in host.artifacts.rglob("*.whl")) == [
        "wheels-a/cpu/a.whl",
        "wheels-b/cu130/b.whl",
    ]
    (host.workspace / "wheelhouse" / "again.whl").write_text("x", encoding="utf-8")
    with pytest.raises(ActionError, match="already exists"):
        _upload_artifact(host, {"name": "wheels-a", "path": "wheelhouse/"})
    (host.workspace / "wheelhouse" / "again.whl").unlink()
    _download_artifact(host, {"pattern": "wheels-*", "merge-multiple": "true", "path": "merged"})
    assert sorted(
        p.relative_to(host.workspace / "merged").as_posix()
        for p in (host.workspace / "merged").rglob("*")
        if p.is_file()
    ) == ["cpu/a.json", "cpu/a.whl", "cu130/b.whl"]
    _download_artifact(host, {"pattern": "wheels-*", "path": "separate"})
    assert (host.workspace / "separate" / "wheels-b" / "cu130" / "b.whl").exists()
    with pytest.raises(ActionError, match="no files matched"):
        _upload_artifact(host, {"name": "empty", "path": "nothing/", "if-no-files-found": "error"})
