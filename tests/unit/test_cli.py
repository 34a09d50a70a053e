"""The command line as a user meets it: help, selection, errors, exit codes."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from dswheels.cli import build_parser, main
from dswheels.cli.commands import LISTED
from tests.conftest import ROOT


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def test_help_explains_commands_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "plan" in out
    assert "exit codes" in out


def test_plan_help_has_examples(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    out = capsys.readouterr().out
    assert "examples:" in out
    assert "--explain" in out


def test_shipped_matrix_plans(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plan")
    assert code == 0
    assert "cells planned" in out


def test_one_combo_is_shown_in_full(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "plan",
        "--deepspeed",
        "0.19.8",
        "--torch",
        "2.14",
        "--cuda",
        "cu130",
        "--python",
        "3.12",
        "--platform",
        "linux_x86_64",
    )
    assert code == 0
    assert "arch list      7.5;8.0;8.6;9.0;10.0;12.0+PTX" in out
    assert "left out       async_io: links the system libaio" in out


def test_cuda_accepts_a_version_and_cpu(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plan", "--deepspeed", "0.19.8", "--torch", "2.13", "--cuda", "13.0", "--format", "json")
    assert code == 0
    assert {c["variant"] for c in json.loads(out)["cells"]} == {"cu130"}
    one_cell = [
        "--deepspeed",
        "0.19.8",
        "--torch",
        "2.13",
        "--cuda",
        "cpu",
        "--python",
        "3.12",
        "--platform",
        "win_amd64",
    ]
    code, out, _ = run(capsys, "plan", *one_cell, "--format", "json")
    assert code == 0  # the matrix excludes Windows CPU wheels, but one named cell is planned when allowed
    assert [c["id"] for c in json.loads(out)["cells"]] == ["ds0.19.8-torch2.13-cpu-cp312-win_amd64"]


def test_a_partial_combo_is_the_matrix_narrowed_and_keeps_its_excludes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plan", "--deepspeed", "0.19.8", "--cuda", "cpu", "--format", "json")
    assert code == 0
    cells = json.loads(out)["cells"]
    assert cells
    # `exclude: {platform: win_amd64, variant: cpu}`
    assert {c["platform"] for c in cells} == {"linux_x86_64", "linux_aarch64"}
    assert {c["deepspeed"] for c in cells} == {"0.19.8"}
    code, _, err = run(capsys, "plan", "--cuda", "cpu", "--platform", "win_amd64")
    assert code == 2
    assert "exclude patterns of matrix/matrix.yml remove every cell" in err
    assert "name all five axes" in err


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--torch", "2.9.1"], "--torch: give MAJOR.MINOR"),
        (["--cuda", "cuda12"], "--cuda: not a torch variant"),
        (["--platform", "win64"], "did you mean 'win_amd64'"),
        (["--python", "three"], "--python: not a Python version"),
        (["--nvcc", "thirteen"], "--nvcc: not a plain dotted version"),
        (["--only", "x", "--torch", "2.9"], "cannot be combined"),
        (["--only", "ds9*"], "matches no cell"),
        (
            ["--deepspeed", "0.14.0", "--platform", "win_amd64", "--torch", "2.3", "--cuda", "cu121"],
            "deepspeed-windows-native",
        ),
    ],
)
def test_bad_flags_exit_2_with_the_reason(capsys: pytest.CaptureFixture[str], args: list[str], words: str) -> None:
    code, out, err = run(capsys, "plan", *args)
    assert code == 2
    assert out == ""
    assert words in err


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["plan", "--torch", "2.14.1"], "--torch: give MAJOR.MINOR (e.g. '2.14'), not '2.14.1'"),
        (["build", "--torch", "2.14.1", "--cuda", "cpu"], "--torch: give MAJOR.MINOR (e.g. '2.14'), not '2.14.1'"),
        (["build", "--torch", "two", "--cuda", "cpu"], "--torch: give MAJOR.MINOR (e.g. '2.14'), not 'two'"),
    ],
)
def test_torch_is_the_minor_a_wheel_is_built_for(
    capsys: pytest.CaptureFixture[str], args: list[str], words: str
) -> None:
    """plan/build --torch: MAJOR.MINOR only; a release is refused with the expected form, never truncated."""
    code, _out, err = run(capsys, *args)
    assert code == 2, err
    assert words in err


@pytest.mark.parametrize(
    ("value", "words"),
    [("2.14", "give an exact torch release X.Y.Z (e.g. '2.14.1'), not '2.14'"), ("2.14.1.0", "not '2.14.1.0'")],
)
def test_verify_torch_version_is_an_exact_release(capsys: pytest.CaptureFixture[str], value: str, words: str) -> None:
    with pytest.raises(SystemExit) as info:
        main(["verify", "x.whl", "--torch-version", value])
    assert info.value.code == 2
    assert words in capsys.readouterr().err


def test_github_format_is_a_fromjson_matrix(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plan", "--format", "github", "--only", "ds0.19.8-torch2.14-cu130-cp312-*")
    assert code == 0
    jobs = json.loads(out)["include"]
    assert {job["platform"] for job in jobs} == {"win_amd64", "linux_x86_64", "linux_aarch64"}
    windows = next(job for job in jobs if job["os"] == "windows")
    assert windows["msvc_toolset"] == "14.44"
    assert windows["cuda_toolkit"] == "13.0.3"
    # what `dswheels cuda install` assembles, on both OSes: compat.yml's one list for CUDA 13.0
    assert windows["cuda_components"].split() == [
        "cuda_nvcc",
        "cuda_cudart",
        "cuda_cccl",
        "cuda_profiler_api",
        "libcublas",
        "libcurand",
        "libcusparse",
        "libcusolver",
        "cuda_crt",
        "libnvvm",
    ]
    linux = next(job for job in jobs if job["os"] == "linux")
    assert linux["cuda_components"] == windows["cuda_components"]
    assert windows["runs_on"] == ["windows-2022"]


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[str, argparse.ArgumentParser]]:
    """Every command and subcommand of the parser tree, by its full name (``facts dispatch``)."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append((" ".join((*path, name)), sub))
                found += _commands(sub, (*path, name))
    return found


def test_every_command_says_what_it_does_in_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    commands = _commands(build_parser())
    assert {"facts dispatch", "facts issue", "facts check", "build", "doctor"} <= {name for name, _ in commands}
    for name, _parser in commands:
        with pytest.raises(SystemExit) as info:
            main([*name.split(), "--help"])
        assert info.value.code == 0
        _usage, _, rest = capsys.readouterr().out.partition("\n\n")
        # argparse puts the description between the usage and the first group of options
        assert not rest.startswith(("options:", "optional arguments:")), f"dswheels {name} --help has no description"


def test_each_listed_line_is_its_commands_own(capsys: pytest.CaptureFixture[str]) -> None:
    """`dswheels --help` lists each command from the list without loading it: what it lists is what the
    loaded command (or group) says of itself, in the same order."""
    listed = {entry.name: entry for entry in LISTED}
    assert len(listed) == len(LISTED)
    for entry in LISTED:
        loaded = entry.load()
        assert (loaded.name, loaded.help) == (entry.name, entry.help)  # type: ignore[attr-defined]
    assert [name for name, _ in _commands(build_parser()) if " " not in name] == list(listed)
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for entry in LISTED:
        assert entry.name in out


# what `dswheels --help` must not import: every stage, and the libraries only they use
_STAGES = (
    "dswheels.stores",
    "dswheels.building",
    "dswheels.verify",
    "dswheels.plan",
    "dswheels.index",
    "requests",
    "yaml",
)
_IMPORTED = """\
import json, sys
from dswheels.cli import build_parser
argv = sys.argv[1:]
try:
    build_parser(argv).parse_args(argv)
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("dswheels", "requests", "yaml")))))
"""


def _imported_by(*argv: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", _IMPORTED, *argv], capture_output=True, text=True, check=True, cwd=ROOT)
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_help_and_a_command_load_only_what_they_use() -> None:
    """`dswheels --help` imports no stage (it was 0.65 s with every command's stage, 0.09 s without); a
    command line loads its own command's module and no other."""
    top = _imported_by("--help")
    assert not {m for m in top if m.startswith(_STAGES)}, sorted(top)
    assert not {m for m in top if m.startswith("dswheels.cli.") and m.endswith(("plan", "publish", "build"))}
    plan = _imported_by("plan", "--help")
    assert "dswheels.cli.plan" in plan
    assert not {"dswheels.cli.publish", "dswheels.cli.build", "dswheels.cli.verify"} & plan
    facts = _imported_by("facts", "check", "--help")
    assert {"dswheels.cli.facts_check", "dswheels.cli.facts_follow", "dswheels.cli.facts_refit"} <= facts
    assert "dswheels.cli.build" not in facts
