"""Destinations that are not folders (issue 30, point 6), through the real command line.

``cuda install --dest`` naming a regular file renamed the user's file and put a root in its
place (then a traceback); a loop of links was a traceback, a dangling link was written through.
Every folder a command writes into is judged by one function
(:func:`dswheels.host.destinations.judge_destination`) before the command does anything: a
path that exists and is not a folder is exit 2 (the user's file untouched), and so is a way to
it through a dangling link, a loop of links or a file, except for ``publish --dir`` and
``index --out``, whose round-two promise for those is exit 7.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dswheels.cli import main
from dswheels.host.destinations import destination_problem
from tests.conftest import DATA
from tests.support.fuzz import examples
from tests.support.wheels import write_deepspeed_wheel

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs and symbolic links as a test makes them")

CELL = "ds0.19.8-torch2.13-cpu-cp311-linux_x86_64"
OFFLINE = "http://127.0.0.1:9/"  # nothing listens: a command that got past the judgement would fail otherwise


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("GITHUB_ACTIONS", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GITHUB_ENV", "GITHUB_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DSWHEELS_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    dispatch = {"GITHUB_EVENT_NAME": "workflow_dispatch", "GITHUB_REF_NAME": "main", "INPUT_DEEPSPEED": "0.19.8"}
    dispatch |= {f"INPUT_{axis}": "matrix" for axis in ("TORCH", "CUDA", "PYTHON", "PLATFORM")}
    dispatch |= {"INPUT_CANARY": "false", "INPUT_PUBLISH": "false"}
    for name, value in dispatch.items():  # what `ci plan` reads of a workflow_dispatch run
        monkeypatch.setenv(name, value)


def _places(tmp_path: Path) -> dict[str, Path]:
    """Each kind of path that is no folder, and no way to one; the files and links stay as made."""
    (tmp_path / "user-file").write_text("mine", encoding="utf-8")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "loop-a").symlink_to("loop-b")
    (tmp_path / "loop-b").symlink_to("loop-a")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "link-to-file").symlink_to("user-file")
    return {
        "regular-file": tmp_path / "user-file",
        "fifo": tmp_path / "fifo",
        "link-to-a-file": tmp_path / "link-to-file",
        "loop": tmp_path / "loop-a",
        "below-a-loop": tmp_path / "loop-a" / "out",
        "dangling-link": tmp_path / "dangling",
        "below-a-dangling-link": tmp_path / "dangling" / "out",
        "below-a-file": tmp_path / "user-file" / "out",
    }


ITSELF = {"regular-file", "fifo", "link-to-a-file"}  # the path exists and is not a folder: exit 2 everywhere


def _cuda(place: Path) -> list[str]:
    return ["cuda", "install", "--toolkit", "13.0.3", "--redist-url", OFFLINE, "--dest", str(place)]


def _build(flag: str) -> Callable[[Path], list[str]]:
    matrix = ["--matrix", str(DATA / "matrix-cpu.yml")]
    return lambda place: ["build", *matrix, "--cell", CELL, "--prepare-only", "--pypi", OFFLINE, flag, str(place)]


def _ci_plan(place: Path) -> list[str]:
    return ["ci", "plan", "--matrix", str(DATA / "matrix-cpu.yml"), "--out", str(place)]


COMMANDS: dict[str, Callable[[Path], list[str]]] = {
    "cuda-install-dest": _cuda,
    "build-out": _build("--out"),
    "build-work-dir": _build("--work-dir"),
    "build-cache-dir": _build("--cache-dir"),
    "ci-plan-out": _ci_plan,
}


def _snapshot(tmp_path: Path) -> dict[str, str]:
    return {
        p.name: str(p.readlink()) if p.is_symlink() else p.read_text() if p.is_file() else "fifo" if p.is_fifo() else ""
        for p in tmp_path.iterdir()
        if p.name != "cache"
    }


@pytest.mark.parametrize("command", COMMANDS)
def test_a_destination_that_is_no_folder_is_exit_2_before_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    places = _places(tmp_path)
    before = _snapshot(tmp_path)
    for case, place in places.items():
        code = main(COMMANDS[command](place))
        err = capsys.readouterr().err
        assert "Traceback" not in err
        assert code == 2, (case, err)
        assert err.startswith("bad input: "), (case, err)
        assert str(place).split("/out")[0] in err, (case, err)
        assert _snapshot(tmp_path) == before, f"{case}: a path outside the judgement changed"
    assert not (tmp_path / "nowhere").exists(), "written through a dangling link"
    assert (tmp_path / "user-file").read_text(encoding="utf-8") == "mine"


def test_the_cache_directory_from_the_environment_is_judged_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for case, place in _places(tmp_path).items():
        monkeypatch.setenv("DSWHEELS_CACHE", str(place))
        code = main(["cuda", "install", "--toolkit", "13.0.3", "--redist-url", OFFLINE])
        err = capsys.readouterr().err
        assert code == 2, (case, err)
        assert "the cache directory (--cache-dir, $DSWHEELS_CACHE)" in err, (case, err)
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("command", ["publish", "index"])
def test_publish_and_index_keep_round_twos_codes_through_the_same_judgement(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """The way through a loop, a dangling link or a file: exit 7 (round two); the path itself no folder: 2."""
    write_deepspeed_wheel(tmp_path / "dist", variant="cpu", torch="2.13")
    for case, place in _places(tmp_path).items():
        args = ["publish", "dist", "--dir", str(place)] if command == "publish" else ["index", "--from", "dist"]
        code = main(args if command == "publish" else [*args, "--out", str(place)])
        err = capsys.readouterr().err
        assert "Traceback" not in err
        assert code == (2 if case in ITSELF else 7), (case, err)
    assert not (tmp_path / "nowhere").exists()
    assert (tmp_path / "user-file").read_text(encoding="utf-8") == "mine"


def test_a_new_path_and_a_link_to_a_folder_are_destinations(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "to-real").symlink_to("real")
    for good in ("new/deeper", "real", "to-real", "to-real/new", "real/../new"):
        assert destination_problem(Path(good)) is None, good
    assert destination_problem(Path("/")) is None


_PARTS = ["dir", "file", "fifo", "loop", "dangling", "to-dir", "to-file", "missing"]


def _make(path: Path, part: str, scratch: Path) -> bool:
    """``path`` made as ``part``; whether it is a link that names nothing."""
    if part == "dir":
        path.mkdir()
    elif part == "file":
        path.write_text("x")
    elif part == "fifo":
        os.mkfifo(path)
    elif part == "loop":
        path.symlink_to(path.name)
    elif part == "dangling":
        path.symlink_to("nothing-here")
        return True
    elif part in ("to-dir", "to-file"):
        target = scratch / f"{path.name}-target"
        target.mkdir() if part == "to-dir" else target.write_text("x")
        path.symlink_to(target)
    return False


@settings(max_examples=examples(100), deadline=None)
@given(way=st.lists(st.sampled_from(_PARTS), min_size=1, max_size=4))
def test_any_way_is_judged_as_the_file_system_would_write_it(way: list[str]) -> None:
    """A path through parts of every kind: judged a destination exactly when ``mkdir -p`` makes it a folder
    without following a link that names nothing (checked by doing it, in a scratch folder)."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch)
        follows_nothing = False
        for number, part in enumerate(way):
            if part == "missing" or not path.is_dir():
                path = path / f"p{number}"
                break
            path = path / f"p{number}"
            follows_nothing |= _make(path, part, Path(scratch))
        problem = destination_problem(path)
        try:
            path.mkdir(parents=True, exist_ok=True)
            made = path.is_dir()
        except OSError:
            made = False
        assert (problem is None) == (made and not follows_nothing), (way, problem)
