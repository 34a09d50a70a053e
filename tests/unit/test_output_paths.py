"""Every output of every command is judged before the command changes anything (issue 30, point 5).

``--report``, ``--json``/``--markdown``, ``--out``, ``--dir``, ``--dest``, ``--work-dir``, ``--cache-dir``:
a path that cannot be written, that would replace what the command reads, or that lies among published
files is exit 2 naming it, and nothing is written: not the stage's work, not its report. Through the real
command line, in-process; the integration twin with /proc, /sys and a full disk is
tests/integration/test_hostile_paths.py.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from dswheels.cli import build_parser, main
from dswheels.kernel.manifest import manifest_name
from tests.support.wheels import cpu_deepspeed_wheel

if TYPE_CHECKING:  # the last test's (the rest run on a tree without dswheels.cli.flags too)
    from dswheels.cli.command import Command
    from dswheels.cli.flags import Flag


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in ("GITHUB_ACTIONS", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "DSWHEELS_INDEX", "DSWHEELS_CACHE"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.fixture
def wheel(here: Path) -> Path:
    return cpu_deepspeed_wheel(here / "dist")


def _tree(root: Path) -> dict[str, bytes | str]:
    """Every path below ``root`` with its bytes (a file), its target (a link) or its kind."""
    found: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        mode = path.lstat().st_mode
        key = str(path.relative_to(root))
        if stat.S_ISLNK(mode):
            found[key] = f"-> {path.readlink()}"
        elif stat.S_ISREG(mode):
            found[key] = path.read_bytes()
        else:
            found[key] = "dir" if stat.S_ISDIR(mode) else "special"
    return found


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str], *says: str) -> str:
    """Exit 2 with one paragraph (``bad input: ...``, ``hint: ...``) that says each of ``says``."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("bad input: "), err
    assert "\nhint: " in err, err
    assert "Traceback" not in err
    for text in says:
        assert text in err, (text, err)
    return err


# --- the two cases ------------------------------------------------------------------------------


def test_a_report_naming_the_wheel_being_published_is_refused(
    here: Path, wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Today's main published it, then replaced the wheel with the JSON report (exit 0)."""
    before = _tree(here)
    _refused(capsys, ["publish", str(wheel), "--dir", "published", "--report", str(wheel)], f"--report {wheel}")
    assert _tree(here) == before  # the wheel as it was, nothing published


def test_a_report_that_cannot_be_written_stops_the_publish_before_it_starts(
    here: Path, wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Today's main published the wheel, then failed on the report (exit 2): a half-done command."""
    (here / "a-file").write_text("")
    before = _tree(here)
    _refused(capsys, ["publish", "dist", "--report", "a-file/report.json"], "a-file exists and is a regular file")
    assert _tree(here) == before
    assert not (here / "published").exists()


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() == 0, reason="root may write anywhere (POSIX modes)")
def test_a_report_in_a_folder_this_user_cannot_write_is_refused(
    here: Path, wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    locked = here / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        _refused(capsys, ["publish", "dist", "--report", "locked/r.json"], "cannot be written")
    finally:
        locked.chmod(0o700)
    assert not (here / "published").exists()


# --- what a path is ----------------------------------------------------------------------------------


def _places(here: Path) -> Iterator[tuple[str, str]]:
    """(a path, what the refusal says): each cannot be an output file."""
    (here / "a-file").write_text("")
    (here / "a-folder").mkdir()
    (here / "dangling").symlink_to(here / "nowhere")
    (here / "loop").symlink_to(here / "loop")
    yield "a-folder", "is a folder"
    yield "a-file/r.json", "a-file exists and is a regular file, not a directory"
    yield "dangling", "is a symbolic link to"
    yield "dangling/r.json", "is a symbolic link to"
    yield "loop", "is a loop of symbolic links"
    yield "loop/r.json", "is a loop of symbolic links"
    if hasattr(os, "mkfifo"):
        os.mkfifo(here / "fifo")
        yield "fifo", "is a FIFO, not a file"
    if Path("/dev/null").exists():
        yield "/dev/null", "is a device, not a file"


def test_an_output_file_that_cannot_be_one_is_refused_with_nothing_written(
    here: Path, wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for place, says in list(_places(here)):
        before = _tree(here)
        _refused(capsys, ["publish", "dist", "--report", place], f"--report {place}", says)
        _refused(capsys, ["facts", "check", "--skip", "torch-index", "--json", place], f"--json {place}", says)
        assert _tree(here) == before, place
    assert not (here / "nowhere").exists()  # never written through a dangling link


def test_an_output_folder_that_cannot_be_one_is_refused_before_the_work(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (here / "a-file").write_text("mine")
    (here / "dangling").symlink_to(here / "nowhere")
    before = _tree(here)
    cell = ["--cell", "ds0.19.8-torch2.13-cpu-cp311-linux_x86_64", "--prepare-only"]
    _refused(capsys, ["build", *cell, "--out", "a-file"], "--out a-file: ", "a-file exists and is a regular file")
    _refused(capsys, ["build", *cell, "--work-dir", "a-file/w"], "--work-dir a-file/w: ", "(on the way to")
    _refused(capsys, ["build", *cell, "--cache-dir", "dangling"], "--cache-dir dangling: ", "is a symbolic link to")
    _refused(capsys, ["cuda", "install", "--toolkit", "13.0.3", "--dest", "a-file"], "--dest a-file: ", "a-file exists")
    _refused(capsys, ["ci", "plan", "--event", "push", "--ref-name", "v0.19.8", "--out", "a-file"], "--out a-file")
    assert _tree(here) == before  # the user's file as it was, nothing built, downloaded or planned
    assert not (here / "nowhere").exists()


def test_publish_and_index_keep_exit_7_for_a_place_they_cannot_write_but_judge_it_first(
    here: Path, wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Round two promised exit 7 for a destination that cannot be written (docs/hostile-input.md); it is now
    found before anything is published or staged. A destination that is something else stays exit 2."""
    (here / "a-file").write_text("mine")
    (here / "dangling").symlink_to(here / "nowhere")
    before = _tree(here)
    for argv in (["publish", "dist", "--dir", "a-file/pub"], ["index", "--from", "dist", "--out", "dangling/site"]):
        assert main(argv) == 7
        err = capsys.readouterr().err
        assert err.startswith("publish failed: "), err
        assert argv[-1] in err
    _refused(capsys, ["publish", "dist", "--dir", "a-file"], "--dir a-file: ", "exists and is a regular file")
    assert _tree(here) == before
    assert not (here / "nowhere").exists()


# --- what a path is to the others ------------------------------------------------------------------


def test_no_output_replaces_what_the_command_reads(here: Path, wheel: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = wheel.with_name(manifest_name(wheel.name))
    (here / "matrix.yml").write_text("schema: 1\n")
    before = _tree(here)
    _refused(capsys, ["inspect", str(wheel), "--report", str(wheel)], f"is the wheel {wheel}")
    _refused(capsys, ["verify", "dist", "--static", "--report", str(manifest)], "the manifest of the wheel")
    _refused(capsys, ["smoke", str(wheel), "--report", f"./dist/../dist/{wheel.name}"], "which this command reads")
    _refused(capsys, ["plan", "--matrix", "matrix.yml", "--report", "matrix.yml"], "is --matrix matrix.yml")
    _refused(
        capsys,
        ["facts", "check", "--json", "r.json", "--markdown", "r.json"],
        "--json r.json: is also --markdown r.json",
    )
    assert _tree(here) == before


def test_no_output_goes_among_published_files(here: Path, wheel: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Whoever names them: a folder `publish --dir` filled (its ledger) and a site `index` wrote (its marker)."""
    assert main(["publish", "dist", "--dir", "shelf"]) == 0
    assert main(["index", "--from", "shelf", "--out", "www"]) == 0
    capsys.readouterr()
    published = here / "shelf" / wheel.name
    before = _tree(here)
    for output in ("shelf/r.json", f"shelf/{wheel.name}", "shelf/deeper/r.json", "www/index.html", "www/x/r.json"):
        _refused(capsys, ["inspect", str(wheel), "--report", output], "no output may replace a published file")
    _refused(capsys, ["publish", "dist", "--dir", "shelf", "--report", "shelf/r.json"], "is inside")
    _refused(capsys, ["index", "--from", "shelf", "--out", "www", "--report", "www/r.json"], "is inside")
    _refused(capsys, ["build", "--out", "shelf", "--cell", "x"], "--out shelf: is a folder `dswheels publish` fills")
    _refused(capsys, ["publish", "dist", "--dir", "www"], "--dir www: is a site `dswheels index` wrote")
    _refused(capsys, ["index", "--from", "dist", "--out", "shelf"], "--out shelf: is a folder `dswheels publish`")
    _refused(capsys, ["index", "--from", "shelf", "--out", "shelf/site"], "is inside")
    _refused(capsys, ["index", "--from", "www/files", "--out", "www"], "holds --from www/files")
    assert _tree(here) == before
    assert published.read_bytes() == wheel.read_bytes()
    # their own folder is each one's to write: publishing again, indexing again
    assert main(["publish", "dist", "--dir", "shelf"]) == 0
    assert main(["index", "--from", "shelf", "--out", "www"]) == 0


def test_a_report_beside_the_inputs_is_written(here: Path, wheel: Path) -> None:
    """The judgement refuses what would do harm, not what is merely near: a report in the wheels' folder."""
    assert main(["publish", "dist", "--dir", "published", "--report", "dist/publish.json"]) == 0
    assert (here / "dist" / "publish.json").is_file()
    assert main(["inspect", str(wheel), "--report", "new/deep/inspect.json"]) == 0  # folders made as before
    assert (here / "new" / "deep" / "inspect.json").is_file()


# --- every path flag says what the command does with it ---------------------------------------------


def _commands(parser: argparse.ArgumentParser) -> Iterator[Command[object]]:
    from dswheels.cli.parser import COMMAND_DEST

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                if (command := sub.get_default(COMMAND_DEST)) is not None:
                    yield command
                yield from _commands(sub)


def _names_a_path(flag: Flag) -> bool:
    shown = (flag.metavar or "").split("|")
    return flag.type is Path or bool({"FILE", "DIR", "PATH", "WHEEL"} & set(shown))


def test_every_flag_that_names_a_path_says_what_the_command_does_with_it() -> None:
    """So a new output flag cannot be left out of the judgement."""
    from dswheels.cli.flags import PathUse, each_flag

    commands = list(_commands(build_parser()))
    assert len(commands) == 22
    missing = [
        f"{command.name} {flag.name}"
        for command in commands
        for flag in each_flag(command.flags)
        if _names_a_path(flag) and flag.path is None
    ]
    assert missing == []
    outputs = {
        f"{command.name} {flag.name}"
        for command in commands
        for flag in each_flag(command.flags)
        if flag.path in {PathUse.WRITES, PathUse.WRITES_INTO, PathUse.PUBLISHES_INTO, PathUse.REPLACES}
    }
    assert {"build --out", "build --work-dir", "build --cache-dir", "publish --dir", "index --out"} <= outputs
    assert {"install --dest", "plan --out", "check --json", "check --markdown"} <= outputs  # cuda, ci, facts
    assert {"measure --out", "refit --out"} <= outputs  # ci measure, facts refit
    assert {f"{command.name} --report" for command in commands} <= outputs
