"""`dswheels ci plan`: what a run of the wheels workflow builds and publishes, from its event; and how a
setting reaches an option through the environment (flag, then variable, then default)."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import pytest

from dswheels.cli import main
from dswheels.cli.ci_plan import OUTPUTS
from dswheels.cli.flags import Flag, add_flags, settle
from dswheels.index.step import IndexOptions, site_url_for
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.model import Platform
from dswheels.plan.event import (
    DispatchInputs,
    Event,
    EventError,
    default_index_url,
    intent_for,
    parse_gpu_platforms,
    parse_release_tag,
)
from tests.conftest import ROOT
from tests.gha.model import read_file_commands

MATRIX = str(ROOT / "matrix" / "matrix.yml")

# --- the decisions -------------------------------------------------------------------------------


@pytest.mark.parametrize(("tag", "version"), [("v0.19.8", "0.19.8"), ("v0.19.8-2", "0.19.8"), ("v0.14.0-rc", "0.14.0")])
def test_a_release_tag_names_the_deepspeed_version_it_builds(tag: str, version: str) -> None:
    assert parse_release_tag(tag) == version
    intent = intent_for(Event.PUSH, ref_name=tag, inputs=None)
    assert dict(intent.selection) == {"deepspeed": version}  # every other axis: the matrix's
    assert (intent.release, intent.canary, intent.publishes) == (tag, False, True)


@pytest.mark.parametrize("tag", ["v0.19", "vnext", "0.19.8", "v1.2.3.4", "v-2", "main"])
def test_a_tag_that_names_no_version_is_refused(tag: str) -> None:
    with pytest.raises(EventError, match=r"is not v<DeepSpeed version>\[-<suffix>\]"):
        intent_for(Event.PUSH, ref_name=tag, inputs=None)


def test_a_dispatch_builds_its_combination_and_matrix_axes_are_left_to_the_matrix() -> None:
    one = DispatchInputs(deepspeed="0.19.8", torch="2.14", cuda="cu130", python="3.12", platform="win_amd64")
    intent = intent_for(Event.WORKFLOW_DISPATCH, ref_name="main", inputs=one)
    assert dict(intent.selection) == {
        "deepspeed": "0.19.8",
        "torch": "2.14",
        "cuda": "cu130",
        "python": "3.12",
        "platform": "win_amd64",
    }
    assert intent.release == ""  # "publish" not ticked
    every = intent_for(
        Event.WORKFLOW_DISPATCH, ref_name="main", inputs=DispatchInputs(deepspeed="0.19.8", publish=True)
    )
    assert dict(every.selection) == {
        "deepspeed": "0.19.8",
        "torch": None,
        "cuda": None,
        "python": None,
        "platform": None,
    }
    assert every.release == "v0.19.8"
    with pytest.raises(EventError, match="names one DeepSpeed version"):
        intent_for(Event.WORKFLOW_DISPATCH, ref_name="main", inputs=DispatchInputs(deepspeed="matrix"))


def test_the_canary_is_never_published() -> None:
    canary = DispatchInputs(deepspeed="0.19.8", canary=True, publish=True)
    intent = intent_for(Event.WORKFLOW_DISPATCH, ref_name="main", inputs=canary)
    assert (intent.canary, intent.release, intent.publishes) == (True, "", False)


def test_the_canary_is_drawn_from_the_versions_matrix_whatever_the_other_inputs_say() -> None:
    """The dispatch always sends every axis (its defaults name one cu130 cell); the canary's cell is the
    matrix's newest CUDA (dswheels.plan.canary), so the other axes would only hide it."""
    axes = {"torch": "2.14", "cuda": "cu130", "python": "3.12", "platform": "win_amd64"}
    one = DispatchInputs(deepspeed="0.19.8", torch="2.14", cuda="cu130", python="3.12", platform="win_amd64")
    canary = replace(one, canary=True)
    intent = intent_for(Event.WORKFLOW_DISPATCH, ref_name="main", inputs=canary)
    assert intent.selection == {"deepspeed": "0.19.8", "torch": None, "cuda": None, "python": None, "platform": None}
    assert intent_for(Event.WORKFLOW_DISPATCH, ref_name="main", inputs=one).selection == {"deepspeed": "0.19.8", **axes}


def test_the_index_and_the_gpu_platforms() -> None:
    assert default_index_url("octo/dswheels") == "https://octo.github.io/dswheels/"
    # GITHUB_REPOSITORY keeps the owner's case; the Pages host is lower case, the same URL `index --github` uses
    assert default_index_url("Octo/dswheels") == "https://octo.github.io/dswheels/"
    assert site_url_for(IndexOptions(github="Octo/dswheels")) == default_index_url("Octo/dswheels")
    with pytest.raises(EventError, match="not OWNER/NAME"):
        default_index_url("dswheels")
    assert parse_gpu_platforms("") == frozenset()
    assert parse_gpu_platforms("linux_x86_64 win_amd64 linux_aarch64") == frozenset(Platform)
    assert parse_gpu_platforms(" win_amd64,") == {Platform.WIN_AMD64}
    with pytest.raises(EventError, match="'linux': not a platform"):
        parse_gpu_platforms("linux")


# --- settings through the environment ------------------------------------------------------------


FLAGS = (
    Flag("--index-url", env="X_INDEX", help="where"),
    Flag("--matrix", env="X_MATRIX", default=Path("m.yml"), type=Path, help="file"),
    Flag("--event", env="X_EVENT", choices=("push", "workflow_dispatch"), help="what"),
    Flag("--canary", env="X_CANARY", action=argparse.BooleanOptionalAction, help="canary"),
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    add_flags(p, FLAGS)
    return p


def test_a_flag_wins_then_the_variable_then_the_default() -> None:
    env = {"X_INDEX": "https://env/", "X_MATRIX": "env.yml", "X_CANARY": "TRUE", "X_EVENT": "push"}
    args = _parser().parse_args(["--index-url", "https://flag/", "--no-canary"])
    settle(args, FLAGS, env)
    assert (args.index_url, args.matrix, args.canary, args.event) == ("https://flag/", Path("env.yml"), False, "push")
    args = _parser().parse_args([])
    settle(args, FLAGS, {"X_INDEX": "", "X_CANARY": ""})  # empty: unset (a repository variable not set)
    assert (args.index_url, args.matrix, args.canary, args.event) == (None, Path("m.yml"), False, None)
    args = _parser().parse_args([])
    settle(args, FLAGS, {"X_CANARY": "true"})
    assert args.canary is True
    assert "(default: $X_MATRIX, else m.yml)" in _parser().format_help().replace("\n", " ").replace("  ", " ")


@pytest.mark.parametrize(
    ("env", "words"),
    [({"X_CANARY": "yes"}, "$X_CANARY='yes': expected true or false"), ({"X_EVENT": "schedule"}, "expected one of")],
)
def test_a_bad_variable_is_bad_input_naming_it(env: dict[str, str], words: str) -> None:
    args = _parser().parse_args([])
    with pytest.raises(ConfigError) as info:
        settle(args, FLAGS, env)
    assert words in info.value.message


def test_the_torch_index_variable_is_still_the_default_of_torch_index(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DSWHEELS_TORCH_INDEX", "/nowhere/wheels")
    monkeypatch.chdir(ROOT)
    assert main(["build", "--cell", "ds0.19.8-torch2.13-cpu-cp311-linux_x86_64", "--prepare-only"]) == 2
    assert "--torch-index /nowhere/wheels: no such directory" in capsys.readouterr().err


# --- the command ---------------------------------------------------------------------------------


def _ci_plan(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *args: str, **env: str) -> tuple[int, dict[str, str]]:
    output, summary = tmp_path / "output", tmp_path / "summary"
    for name in ("GITHUB_EVENT_NAME", "GITHUB_REF_NAME", "GITHUB_REPOSITORY", "DSWHEELS_GPU_RUNNERS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")  # GitHub's reporter: groups, annotations
    monkeypatch.setenv("GITHUB_OUTPUT", str(output))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("DSWHEELS_MATRIX", MATRIX)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code = main(["ci", "plan", "--out", str(tmp_path / "plan"), *args])
    return code, read_file_commands(output)


def test_ci_plan_writes_every_output_and_the_plan_the_jobs_build(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, outputs = _ci_plan(
        monkeypatch,
        tmp_path,
        GITHUB_EVENT_NAME="workflow_dispatch",
        GITHUB_REF_NAME="main",
        GITHUB_REPOSITORY="octo/dswheels",
        INPUT_DEEPSPEED="0.19.8",
        INPUT_TORCH="matrix",
        INPUT_CUDA="matrix",
        INPUT_PYTHON="matrix",
        INPUT_PLATFORM="matrix",
        INPUT_CANARY="false",
        INPUT_PUBLISH="false",
        DSWHEELS_GPU_RUNNERS="linux_x86_64",
    )
    assert code == 0
    assert set(outputs) == set(OUTPUTS)
    plan = json.loads(Path(outputs["plan"]).read_text(encoding="utf-8"))
    matrix = json.loads(outputs["matrix"])["include"]
    built = sorted(cid for job in matrix for cid in job["cells"].split())
    assert built == sorted(c["id"] for c in plan["cells"])  # the jobs build exactly the plan's cells
    smoke = json.loads(outputs["smoke"])["include"]
    assert smoke
    assert smoke == [job for job in matrix if job["platform"] == "linux_x86_64"]  # GPU runner for Linux only
    assert outputs["release"] == ""
    assert outputs["index_url"] == "https://octo.github.io/dswheels/"
    out = capsys.readouterr().out
    skipped = (
        "::notice title=GPU smoke test skipped::no GPU runner for linux_aarch64, win_amd64 in DSWHEELS_GPU_RUNNERS"
    )
    assert skipped in out
    summary = (tmp_path / "summary").read_text(encoding="utf-8")
    assert summary.startswith("### Plan")
    assert "publishes nothing" in summary
    assert "runner-hours" in summary  # the cost model's estimate, as `dswheels plan --costs` prints it


def test_without_gpu_runners_the_smoke_test_is_skipped_visibly(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, outputs = _ci_plan(
        monkeypatch, tmp_path, "--event", "push", "--ref-name", "v0.19.8", "--publish-dir", str(tmp_path / "pub")
    )
    assert code == 0
    assert json.loads(outputs["smoke"]) == {"include": []}
    assert outputs["release"] == "v0.19.8"
    assert outputs["publish_dir"] == str(tmp_path / "pub")
    assert "no GPU smoke test: set the repository variable DSWHEELS_GPU_RUNNERS" in capsys.readouterr().out
    assert "no GPU smoke test" in (tmp_path / "summary").read_text(encoding="utf-8")


def test_a_publishing_run_builds_only_what_is_not_published(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    published = tmp_path / "published"
    code, outputs = _ci_plan(
        monkeypatch, tmp_path, "--event", "push", "--ref-name", "v0.19.8", DSWHEELS_PUBLISH_DIR=str(published)
    )
    assert code == 0
    planned = json.loads(Path(outputs["plan"]).read_text(encoding="utf-8"))["cells"]
    first = planned[0]["wheel"]
    published.mkdir()
    (published / first).write_bytes(b"a published wheel")
    capsys.readouterr()
    code, outputs = _ci_plan(
        monkeypatch, tmp_path, "--event", "push", "--ref-name", "v0.19.8", DSWHEELS_PUBLISH_DIR=str(published)
    )
    assert code == 0
    left = json.loads(Path(outputs["plan"]).read_text(encoding="utf-8"))["cells"]
    assert [c["wheel"] for c in left] == [c["wheel"] for c in planned[1:]]
    assert f"1 of {len(planned)} planned cells already published at {published}" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("given", "words"),
    [
        (((), {}), "no event: run in GitHub Actions (GITHUB_EVENT_NAME) or pass --event"),
        ((("--event", "push", "--ref-name", "vnext"), {}), "tag 'vnext' is not v<DeepSpeed version>"),
        ((("--event", "push", "--ref-name", "v0.19.8"), {}), "nothing says where the wheels are published"),
        ((("--event", "workflow_dispatch"), {}), "names one DeepSpeed version"),
        ((("--event", "push", "--ref-name", "v0.19.8"), {"DSWHEELS_GPU_RUNNERS": "gpu"}), "'gpu': not a platform"),
        ((("--event", "workflow_dispatch", "--deepspeed", "0.19.8", "--torch", "2.x"), {}), "bad combination flags"),
    ],
)
def test_bad_events_are_bad_input(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    given: tuple[tuple[str, ...], dict[str, str]],
    words: str,
) -> None:
    args, env = given
    code, outputs = _ci_plan(monkeypatch, tmp_path, *args, **env)
    assert code == 2
    assert words in capsys.readouterr().err
    assert outputs == {}  # nothing half-written
    assert not (tmp_path / "plan").exists()
