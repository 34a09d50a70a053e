"""The matrix loader: every problem at once, each with file:line, the bad value and a way out."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from dswheels.cli import main
from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import ConfigError
from dswheels.plan.matrix.parse import parse_matrix

COMPAT = load_compat()

GOOD = """\
schema: 1
deepspeed: ["0.19.8"]
torch:
  - version: "2.14"
    variants: [cu126, cu130, cpu]
python: ["3.11", "3.12"]
platforms: [win_amd64, linux_x86_64]
runners:
  win_amd64: {build: [windows-2022], smoke: [self-hosted, windows, gpu]}
  linux_x86_64: {build: [ubuntu-24.04], smoke: [self-hosted, linux, gpu]}
"""


def run_plan(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    path = tmp_path / "matrix.yml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    code = main(["plan", "--matrix", str(path), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_good_matrix_plans(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_plan(tmp_path, GOOD, capsys)
    assert code == 0, err
    assert "ds0.19.8-torch2.14-cu130-cp311-linux_x86_64" in out
    assert "12 cells planned" in out


def test_unquoted_versions_are_read_as_written(tmp_path: Path) -> None:
    # YAML reads an unquoted 2.10 as the float 2.1: the loader keeps the text
    spec = parse_matrix(GOOD.replace('"2.14"', "2.10").replace('["0.19.8"]', "[0.19.8]"), "m.yml", COMPAT)
    assert spec.torch[0][0] == (2, 10)


@pytest.mark.parametrize(
    ("edit", "line", "words"),
    [
        # unknown key, with the close match
        (
            lambda t: t.replace("platforms:", "platform:"),
            7,
            "unknown key 'platform' in the matrix file (did you mean 'platforms'?)",
        ),
        (
            lambda t: t.replace("    variants:", "    variant:"),
            5,
            "unknown key 'variant' in a torch entry (did you mean 'variants'?)",
        ),
        # wrong types
        (lambda t: t.replace('python: ["3.11", "3.12"]', "python: 3.11"), 6, "python must be a list, got '3.11'"),
        (
            lambda t: t.replace('deepspeed: ["0.19.8"]', "deepspeed: [true]"),
            2,
            "a DeepSpeed version must be a string, got 'true'",
        ),
        # unknown versions and values
        (lambda t: t.replace('"0.19.8"', '"0.19.9"'), 2, "unknown DeepSpeed version '0.19.9' (did you mean '0.19.8'?)"),
        (lambda t: t.replace('"2.14"', '"2.16"'), 4, "unknown torch version '2.16'"),
        (lambda t: t.replace('"2.14"', '"2.14.1"'), 4, "torch is given as MAJOR.MINOR ('2.14')"),
        (lambda t: t.replace("cu126, cu130", "cu126, cu118"), 5, "torch 2.14 has no cu118 build on any platform"),
        (lambda t: t.replace("cu126, cu130", "cu126, cuda13"), 5, "not a torch variant: 'cuda13'"),
        (lambda t: t.replace('"3.12"]', '"3.7"]'), 6, "no torch release has wheels for Python '3.7'"),
        (
            lambda t: t.replace("[win_amd64, linux_x86_64]", "[win64, linux_x86_64]"),
            7,
            "unknown platform 'win64' (did you mean 'win_amd64'?)",
        ),
        (
            lambda t: t.replace("build: [windows-2022]", "build: [windows-2019]"),
            9,
            "unknown runner image 'windows-2019'",
        ),
        (
            lambda t: t.replace("build: [ubuntu-24.04]", "build: [windows-2022]"),
            10,
            "image 'windows-2022' is windows, not linux",
        ),
        (lambda t: t + "ops: [cpu_adma]\n", 11, "unknown op 'cpu_adma' (did you mean 'cpu_adam'?)"),
        (lambda t: t + "cpu_baseline: x86-64-v5\n", 11, "unknown cpu_baseline 'x86-64-v5'"),
        (lambda t: t + "cuda_check: lenient\n", 11, "cuda_check must be one of skip-when-needed, strict"),
        (lambda t: t + "toolkits: {cu130: '12.8'}\n", 11, "nvcc 12.8 cannot build for cu130"),
        (lambda t: t + "arch_lists: {cu130: '8.0;sm90'}\n", 11, "not a TORCH_CUDA_ARCH_LIST: '8.0;sm90'"),
        (lambda t: t + "exclude: [{platform: linux_x86_64, variant: cu118}]\n", 11, "matches no cell of the matrix"),
        (lambda t: t + "include: [{deepspeed: '0.19.8', torch: '2.14'}]\n", 11, "missing variant, python, platform"),
        (lambda t: t + "schema: 2\n", 11, "key 'schema' appears twice"),
        (lambda t: t.replace("schema: 1", "schema: 2"), 1, "unsupported schema '2'"),
        (lambda t: t.replace("runners:", "runnerz:"), 8, "unknown key 'runnerz'"),
        # linux_runtime: what a Linux wheel may need of glibc and libstdc++
        (lambda t: t + "linux_runtime: '2.35'\n", 11, "linux_runtime must be a mapping, got '2.35'"),
        (
            lambda t: t + "linux_runtime: {glibcx: '3.4.30'}\n",
            11,
            "unknown key 'glibcx' in linux_runtime (did you mean 'glibcxx'?)",
        ),
        (lambda t: t + "linux_runtime: {glibc: '3.1'}\n", 11, "not a glibc release (2.N, like '2.35'): '3.1'"),
        (lambda t: t + "linux_runtime: {glibc: 2.35.1}\n", 11, "not a glibc release"),
        (lambda t: t + "linux_runtime: {glibcxx: '3.4.3o'}\n", 11, "not a plain dotted version: '3.4.3o'"),
        (
            lambda t: t + "linux_runtime:\n  glibc: '2.35'\n  glibcxx: '3.4.34'\n",
            13,
            (
                "GLIBCXX 3.4.34 is not the newest version of any GCC release's libstdc++ (did you mean '3.4.33'?); "
                "known: 3.4.21 (GCC 5.1),"
            ),
        ),
    ],
)
def test_bad_input_exits_2_naming_the_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    edit: object,
    line: int,
    words: str,
) -> None:
    assert callable(edit)
    code, out, err = run_plan(tmp_path, edit(GOOD), capsys)
    assert code == 2
    assert out == ""
    assert f"matrix.yml:{line}: " in err
    assert words in err


def test_every_problem_is_reported_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (
        GOOD.replace('"0.19.8"', '"0.19.9"').replace("cu126, cu130", "cu126, cu999").replace("platforms:", "platfroms:")
    )
    code, _out, err = run_plan(tmp_path, text, capsys)
    assert code == 2
    assert "has 4 problems" in err  # unknown version, unknown variant, unknown key + missing platforms
    assert "0.19.9" in err
    assert "cu999" in err
    assert "platfroms" in err


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("deepspeed: [0.19.8\n", "not valid YAML"),
        ("", "the file is empty"),
        ("- a\n- b\n", "the matrix file must be a mapping"),
    ],
)
def test_malformed_files(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, words: str) -> None:
    code, _out, err = run_plan(tmp_path, text, capsys)
    assert code == 2
    assert words in err


def test_missing_matrix_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", "--matrix", str(tmp_path / "nope.yml")])
    assert code == 2
    assert "no matrix file at" in capsys.readouterr().err


def test_source_overrides_are_parsed_per_os() -> None:
    sha = "a" * 64
    text = GOOD.replace(
        'deepspeed: ["0.19.8"]',
        f"deepspeed:\n  - version: '0.19.8'\n    source: {{windows: {{sha256: '{sha}'}}}}",
    )
    spec = parse_matrix(text, "m.yml", COMPAT)
    assert spec.sources[((0, 19, 8), "windows")].sha256 == sha
    assert ((0, 19, 8), "linux") not in spec.sources
    with pytest.raises(ConfigError) as info:
        parse_matrix(text.replace(sha, "abc"), "m.yml", COMPAT)
    assert "sha256 must be 64 hex digits" in (info.value.details or "")


def test_linux_runtime_overrides_the_promise_key_by_key() -> None:
    spec = parse_matrix(GOOD + 'linux_runtime: {glibc: "2.31", glibcxx: "3.4.28"}\n', "m.yml", COMPAT)
    assert spec.linux_runtime is not None
    assert (spec.linux_runtime.glibc, spec.linux_runtime.glibcxx, spec.linux_runtime.cxxabi) == (
        (2, 31),
        (3, 4, 28),
        (1, 3, 12),  # CXXABI follows from the libstdc++ of GCC 9.3
    )
    only_glibc = parse_matrix(GOOD + "linux_runtime: {glibc: '2.36'}\n", "m.yml", COMPAT).linux_runtime
    assert only_glibc is not None
    assert only_glibc.glibc == (2, 36)
    assert only_glibc.glibcxx == COMPAT.linux_runtime_floor.glibcxx
    assert parse_matrix(GOOD, "m.yml", COMPAT).linux_runtime is None  # compat.yml's promise applies
