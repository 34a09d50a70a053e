"""One frozen result per stage, written by ``--report FILE`` on every command; the reporter the only door out."""

from __future__ import annotations

import argparse
import ast
import io
import json
import re
from pathlib import Path

import pytest

from dswheels.cli import build_parser, main
from dswheels.cli.parser import REPORT_DEST, STAGE_DEST
from dswheels.cuda.redist import redist_platform
from dswheels.doctor.render_report import DOCTOR_SCHEMA
from dswheels.host.log import GitHubReporter, TerminalReporter
from dswheels.host.stage_report import write_report
from dswheels.install.effects.install_wheel import Installer
from dswheels.kernel.errors import ConfigError, NothingToDoError, VerifyError
from dswheels.kernel.model import Platform
from dswheels.kernel.result import COMMON_FIELDS, Done, StageResult, StageStatus, failed_result
from dswheels.plan.jobs import LEVELS
from dswheels.plan.step import JobGrouping
from tests.conftest import ROOT
from tests.support.recording import RecordingReporter
from tests.support.wheels import cpu_deepspeed_wheel
from tests.unit.machines import machine_data

# every command line: the modules of dswheels/cli/ but main (cli/__init__.py), which renders errors
COMMAND_GLOBS = ("cli/[!_]*.py",)

# --- the result ----------------------------------------------------------------------------------


def test_done_becomes_the_result_its_exit_code_says() -> None:
    assert Done().result("plan", 1.0).status is StageStatus.OK
    failed = Done(exit_code=9, reason="a check failed").result("doctor", 0.5)
    assert (failed.status, failed.exit_code, failed.reason) == (StageStatus.FAILED, 9, "a check failed")
    error = VerifyError("1 of 2 wheel(s) failed verification")
    raised = Done(data={"wheels": []}, error=error).result("verify", 2.0)
    assert (raised.status, raised.exit_code, raised.reason) == (StageStatus.FAILED, 6, error.message)
    assert raised.data == {"wheels": []}
    nothing = Done(error=NothingToDoError("all published")).result("plan", 0.1)
    assert (nothing.status, nothing.exit_code) == (StageStatus.NOTHING_TO_DO, 3)


def test_an_interrupted_stage_says_so() -> None:
    result = failed_result("build", KeyboardInterrupt(), 3.0, exit_code=143)
    assert (result.status, result.reason, result.exit_code) == (StageStatus.INTERRUPTED, "terminated", 143)
    error = ConfigError("bad")
    assert failed_result("plan", error, 0.0, exit_code=2).status is StageStatus.FAILED


def test_a_stage_cannot_hide_a_common_field_under_its_data() -> None:
    with pytest.raises(ValueError, match="status"):
        Done(data={"status": "fine"})
    # a schema of its own is allowed: verify and smoke had one before the common fields
    assert Done(data={"schema": "dswheels.verify/1"}).result("verify", 0).as_json(version="0")["schema"] == (
        "dswheels.verify/1"
    )


def test_the_result_is_frozen() -> None:
    result = StageResult(stage="plan", status=StageStatus.OK)
    with pytest.raises(AttributeError):
        result.status = StageStatus.FAILED  # type: ignore[misc]


# --- the report file -----------------------------------------------------------------------------


def test_the_report_is_json_without_credentials(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "report.json"
    data = {"index": "https://alice:s3cret@example.org/simple/", "where": tmp_path}
    write_report(path, StageResult(stage="index", status=StageStatus.OK, duration_s=1.23456, data=data))
    report = json.loads(path.read_text(encoding="utf-8"))
    assert [key for key in report if key in COMMON_FIELDS] == list(COMMON_FIELDS)
    assert report["duration_s"] == 1.235
    assert report["index"] == "https://alice:****@example.org/simple/"
    assert report["where"] == str(tmp_path)
    assert [p.name for p in path.parent.iterdir()] == ["report.json"]  # nothing temporary left beside it


def test_a_report_that_cannot_be_written_is_bad_input(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"--report .*report\.json"):
        write_report(blocker / "report.json", StageResult(stage="plan", status=StageStatus.OK))


# --- every stage writes it -----------------------------------------------------------------------


def _leaf_parsers(parser: argparse.ArgumentParser, name: str = "") -> dict[str, argparse.ArgumentParser]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return {name: parser}
    found: dict[str, argparse.ArgumentParser] = {}
    for sub in subs:
        for child, p in sub.choices.items():
            found |= _leaf_parsers(p, f"{name} {child}".strip())
    return found


def test_every_command_takes_report_and_no_flag_shadows_it() -> None:
    leaves = _leaf_parsers(build_parser())
    assert len(leaves) > 10
    for name, parser in leaves.items():
        dests = [a.dest for a in parser._actions]
        assert dests.count(STAGE_DEST) == 0, name  # a default, never a flag's
        assert dests.count(REPORT_DEST) == 1, f"{name} has no --report"
        assert parser.get_default(STAGE_DEST) == name


def _doctor_facts(tmp_path: Path) -> Path:
    saved = tmp_path / "facts.json"
    saved.write_text(json.dumps({"schema": DOCTOR_SCHEMA, "facts": machine_data("windows-healthy-cu124")}))
    return saved


# (argv with {tmp} for the test's directory, the stage, its exit code): cheap runs, offline, some failing
STAGES = [
    (["plan", "--only", "ds0.19.8-torch2.14-cu130-cp312-*"], "plan", 0),
    (["plan", "--only", "no-such-cell"], "plan", 2),
    (["inspect", "{wheel}"], "inspect", 0),
    (["doctor", "--facts", "{facts}"], "doctor", 0),
    (["index", "--from", "{tmp}/published", "--out", "{tmp}/site"], "index", 0),
    (["publish", "{wheel}", "--dir", "{tmp}/published"], "publish", 0),
    (["verify", "{tmp}/missing.whl", "--static"], "verify", 6),
    (["smoke", "{tmp}/a-1.0-py3-none-any.whl"], "smoke", 2),
    (["build", "--cell", "not-a-cell"], "build", 2),
    (["install", "--index", "{tmp}/no-site", "--dry-run"], "install", 4),
    (["facts", "dispatch", "--versions-json", "[1]", "--repo", "o/r"], "facts dispatch", 2),
    (["cuda", "install", "--toolkit", "9.9.9", "--dest", "{tmp}/cuda"], "cuda install", 2),
    (["ci", "plan", "--event", "push", "--ref-name", "main", "--out", "{tmp}/plan"], "ci plan", 2),
]


@pytest.mark.parametrize(("argv", "stage", "code"), STAGES, ids=[" ".join(s[0][:2]) + f" {s[2]}" for s in STAGES])
def test_every_stage_writes_its_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], stage: str, code: int
) -> None:
    monkeypatch.chdir(ROOT)
    for name in ("GITHUB_ACTIONS", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "DSWHEELS_INDEX", "GITHUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "published").mkdir()
    names = {"tmp": str(tmp_path), "wheel": str(cpu_deepspeed_wheel(tmp_path)), "facts": str(_doctor_facts(tmp_path))}
    report = tmp_path / "report.json"
    assert main([*(a.format(**names) for a in argv), "--report", str(report)]) == code
    data = json.loads(report.read_text(encoding="utf-8"))
    assert set(COMMON_FIELDS) <= set(data)
    assert (data["stage"], data["exit_code"]) == (stage, code)
    assert data["status"] == ("ok" if code == 0 else "failed")
    assert isinstance(data["duration_s"], float)
    assert data["duration_s"] >= 0
    assert bool(data["reason"]) == (code != 0)


def test_a_failed_verify_report_keeps_its_own_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """verify's report had a schema and the wheels before the common fields: failing, it still has both."""
    monkeypatch.chdir(ROOT)
    wheel = cpu_deepspeed_wheel(tmp_path)  # no ops in it: short of the plan's
    report = tmp_path / "verify.json"
    assert main(["verify", str(wheel), "--static", "--report", str(report)]) == VerifyError.exit_code
    data = json.loads(report.read_text(encoding="utf-8"))
    assert (data["schema"], data["status"]) == ("dswheels.verify/1", "failed")
    assert data["reason"] == "1 of 1 wheel(s) failed verification"
    assert [(w["wheel"], w["ok"]) for w in data["wheels"]] == [(wheel.name, False)]


def test_a_report_that_cannot_be_written_is_refused_before_the_stage_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    code = main(["build", "--cell", "not-a-cell", "--report", str(blocker / "r.json")])
    err = capsys.readouterr().err
    assert code == 2
    assert f"--report {blocker / 'r.json'}: {blocker} exists and is a regular file, not a directory" in err
    assert "not-a-cell" not in err  # the stage never ran


def test_a_report_that_fails_late_does_not_hide_the_stage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A report judged writable whose write still fails (a full disk): a warning, and the stage's own error."""

    def full(path: Path, _result: StageResult) -> None:
        raise ConfigError(f"--report {path}: No space left on device")

    monkeypatch.setattr("dswheels.cli.write_report", full)
    code = main(["build", "--cell", "not-a-cell", "--report", str(tmp_path / "r.json")])
    out, err = capsys.readouterr()
    assert code == 2
    assert "not-a-cell" in err  # the stage's own error, not the report's
    assert "No space left on device" in out + err  # and a warning that it was not written


# --- the reporter is the only door out -----------------------------------------------------------


def _doors(path: Path) -> list[str]:
    """``sys.stdout``, ``sys.stderr`` and ``print(`` in a module: each a way out around the reporter."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in {"stdout", "stderr", "__stdout__", "__stderr__"}
            and isinstance(node.value, ast.Name)
            and node.value.id == "sys"
        ):
            found.append(f"{path.name}:{node.lineno}: sys.{node.attr}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            found.append(f"{path.name}:{node.lineno}: print(")
        if isinstance(node, ast.ImportFrom) and node.module == "sys":
            found += [f"{path.name}:{node.lineno}: from sys import {a.name}" for a in node.names]
        if isinstance(node, ast.ImportFrom) and node.module == "dswheels.host.gha":
            found += [f"{path.name}:{node.lineno}: {a.name}" for a in node.names if a.name == "write_summary"]
    return found


def test_commands_write_only_through_the_reporter() -> None:
    modules = sorted(m for pattern in COMMAND_GLOBS for m in (ROOT / "dswheels").glob(pattern))
    assert len(modules) > 10
    assert [door for module in modules for door in _doors(module)] == []


def test_the_door_check_sees_each_way_out(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "import sys\nfrom sys import stderr\nfrom dswheels.host.gha import write_summary\n"
        "sys.stdout.write('x')\nprint('y')\n",
        encoding="utf-8",
    )
    assert len(_doors(module)) == 4


def test_terminal_reporter_doors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    for reporter in (TerminalReporter(stream=io.StringIO()), GitHubReporter(stream=io.StringIO())):
        reporter.emit("result\nlines\n")
        reporter.aside("beside it")
        reporter.summary("### the stage")
        assert capsys.readouterr() == ("result\nlines\n", "beside it\n")
    assert summary.read_text(encoding="utf-8") == "### the stage\n\n" * 2
    recording = RecordingReporter()
    recording.emit("a")
    recording.aside("b")
    recording.summary("c")
    assert recording.events == [("emit", "a"), ("aside", "b"), ("summary", "c")]


# --- closed sets are enums ----------------------------------------------------------------------

_ONE_OF = re.compile(r"[\w.-]+ \| [\w.-]+")  # a comment listing the values: "# a | b | c", "(python | cell)"


def _closed_sets_as_strings(path: Path) -> list[str]:
    """Fields of an ``*Options`` class typed ``str`` whose comment lists the values they may take."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found = []
    for node in ast.walk(ast.parse("\n".join(lines))):
        if not (isinstance(node, ast.ClassDef) and node.name.endswith("Options")):
            continue
        for field in node.body:
            if not isinstance(field, ast.AnnAssign) or "str" not in ast.unparse(field.annotation):
                continue
            if _ONE_OF.search(lines[field.lineno - 1].partition("#")[2]):
                found.append(f"{path.name}:{field.lineno}: {node.name}.{ast.unparse(field.target)}")
    return found


def test_options_hold_closed_sets_as_enums() -> None:
    modules = [p for p in sorted((ROOT / "dswheels").rglob("*.py")) if "__pycache__" not in p.parts]
    assert [hit for module in modules for hit in _closed_sets_as_strings(module)] == []


def test_the_closed_set_check_sees_one(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "class InstallOptions:\n    installer: str = 'auto'  # auto | pip | uv\n    index: str  # a URL\n",
        encoding="utf-8",
    )
    assert _closed_sets_as_strings(module) == ["m.py:2: InstallOptions.installer"]


def test_enum_options_take_the_flag_values() -> None:
    assert {g.value for g in JobGrouping} <= set(LEVELS)  # plan_jobs groups by these
    assert [i.value for i in Installer] == ["auto", "pip", "uv"]
    # every platform has NVIDIA's archives, each its own (linux-sbsa for linux_aarch64)
    assert len({redist_platform(p) for p in Platform}) == len(Platform)
