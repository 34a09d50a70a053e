"""Environment variables are input: each one dswheels reads is checked as a flag is (exit 2 naming it).

``SOURCE_DATE_EPOCH`` of ``²``, 17 digits or Arabic-Indic digits ended ``facts check`` in a
traceback; a token with a newline or a non-Latin-1 character, or a ``GITHUB_API_URL`` that is no
http(s) URL, ended ``index --github`` in one; ``GITHUB_OUTPUT`` naming a folder ended ``publish``
in one after it had published. Every variable the source reads is listed, with its rule, in
docs/hostile-input.md (checked here against the source).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dswheels.cli import main
from dswheels.host.cache import env_cache_dir
from tests.conftest import DATA, ROOT
from tests.support.wheels import write_deepspeed_wheel

MATRIX = str(DATA / "matrix-cpu.yml")
NO_SOURCES = [
    "--skip",
    "pypi-deepspeed",
    "--skip",
    "pypi-torch",
    "--skip",
    "torch-index",
    "--skip",
    "cuda-action",
    "--skip",
    "deepspeed-sdists",
    "--skip",
    "runner-images",
]


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GITHUB_ACTIONS", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "DSWHEELS_DEBUG", "SOURCE_DATE_EPOCH"):
        monkeypatch.delenv(name, raising=False)


def _bad(capsys: pytest.CaptureFixture[str], args: list[str], words: str) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert words in err, err
    return err


@pytest.mark.parametrize("value", ["²", "12345678901234567", "١٢٣", "-5", "1e9", " 12", "0x10", "12.5"])
def test_source_date_epoch_that_is_no_ascii_number_of_seconds(
    value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", value)
    _bad(capsys, ["facts", "check", *NO_SOURCES], f"bad input: $SOURCE_DATE_EPOCH={value!r}: ")
    _bad(capsys, ["plan", "--matrix", MATRIX], "$SOURCE_DATE_EPOCH")  # before any command does anything


def test_source_date_epoch_fixes_the_date(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from dswheels.host.clock import today

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "253402300799")
    assert today() == "9999-12-31"
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "")  # empty: not given
    assert main(["facts", "check", *NO_SOURCES]) == 0
    capsys.readouterr()


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("DSWHEELS_DEBUG", "yes", "$DSWHEELS_DEBUG='yes': expected 1 or 0"),
        ("GITHUB_OUTPUT", "/", "$GITHUB_OUTPUT='/': a folder"),
        ("GITHUB_STEP_SUMMARY", "/no/such/folder/summary.md", "its folder /no/such/folder does not exist"),
        ("GITHUB_OUTPUT", "/tmp/out\nx", "$GITHUB_OUTPUT='/tmp/out\\nx': has a control character"),
    ],
)
def test_variables_every_command_reads(
    name: str, value: str, words: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(name, value)
    _bad(capsys, ["plan", "--matrix", MATRIX], words)


@pytest.mark.parametrize(
    "case",
    [
        ("GITHUB_TOKEN", "a\nb", "$GITHUB_TOKEN: not a token"),
        ("GITHUB_TOKEN", "ghp_a€b", "$GITHUB_TOKEN: not a token"),
        ("GH_TOKEN", "two words", "$GH_TOKEN: not a token"),
        ("GITHUB_API_URL", "http://[x", "$GITHUB_API_URL='http://[x': not a URL"),
        ("GITHUB_API_URL", "file:///etc", "expected an http(s) URL with a host"),
        ("GITHUB_API_URL", "https://api.example/ x", "has a space"),
    ],
)
def test_github_variables(
    case: tuple[str, str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    name, value, words = case
    monkeypatch.setenv(name, value)
    monkeypatch.setenv("GITHUB_API_URL" if name != "GITHUB_API_URL" else "GITHUB_TOKEN", "http://127.0.0.1:9")
    if name == "GITHUB_API_URL":
        monkeypatch.delenv("GITHUB_TOKEN")
    err = _bad(capsys, ["index", "--github", "owner/repo", "--out", str(tmp_path / "site")], words)
    if name.endswith("TOKEN"):
        assert value not in err  # a secret is never shown


@pytest.mark.parametrize(
    "case",
    [
        ("DSWHEELS_UPLOAD_USERNAME", "alice:x", "has a ':', which ends a user name"),
        ("TWINE_USERNAME", "al\nice", "has a control character"),
        ("DSWHEELS_UPLOAD_PASSWORD", "pa€s", "$DSWHEELS_UPLOAD_PASSWORD: has a control character, or one HTTP basic"),
        ("TWINE_PASSWORD", "p\x01", "$TWINE_PASSWORD: has a control character"),
    ],
)
def test_upload_credentials(
    case: tuple[str, str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    name, value, words = case
    monkeypatch.setenv(name, value)
    wheel = write_deepspeed_wheel(tmp_path)
    err = _bad(capsys, ["publish", "--repository-url", "http://127.0.0.1:9/", str(wheel)], words)
    if "PASSWORD" in name:
        assert value not in err


def test_cache_folders(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    monkeypatch.setenv("DSWHEELS_CACHE", "/tmp/a\x01b")
    _bad(capsys, ["facts", "check", *NO_SOURCES], "$DSWHEELS_CACHE='/tmp/a\\x01b': has a control character")
    monkeypatch.delenv("DSWHEELS_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # the XDG rule: a relative path is ignored
    assert env_cache_dir() == Path.home() / ".cache" / "dswheels"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert env_cache_dir() == tmp_path / "dswheels"


def test_an_option_taken_from_its_variable_is_named_when_its_value_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("GITHUB_EVENT_NAME", "push")
    monkeypatch.setenv("GITHUB_REF_NAME", "v\n1")
    args = ["ci", "plan", "--matrix", MATRIX, "--publish-dir", str(tmp_path / "p"), "--out", str(tmp_path / "o")]
    _bad(capsys, args, "(--ref-name is $GITHUB_REF_NAME)")


def test_a_summary_that_cannot_be_written_is_a_warning_and_an_output_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from dswheels.host.gha import write_output, write_summary
    from dswheels.kernel.errors import ConfigError

    folder = tmp_path / "gone"
    folder.mkdir()
    env = {"GITHUB_STEP_SUMMARY": str(folder), "GITHUB_OUTPUT": str(folder)}  # became a folder after the start
    assert not write_summary("text", env)
    with pytest.raises(ConfigError, match="cannot append the step output x to \\$GITHUB_OUTPUT"):
        write_output("x", "1", env)
    capsys.readouterr()


# --- every variable the source reads is documented with its rule -------------------------------------

_READS = re.compile(
    r"""\.get\(\s*f?"([A-Z][A-Za-z0-9_()]+)|read_variable\(\s*"([A-Z][A-Za-z0-9_]+)"|env="([A-Z][A-Z0-9_]+)\""""
    r"""|\[\s*"([A-Z][A-Za-z0-9_()]+)"\s*\](?!\s*=[^=])|startswith\("([A-Z][A-Z0-9_]+)"\)"""
)
# read the same way and no environment variables: DeepSpeed's builder attributes, our own names,
# HTTP headers (Content-Length, Retry-After), a symbol-version prefix; a module's one-name __all__
_NOT_VARIABLES = {
    "BUILD_VAR",
    "NAME",
    "COMMAND",
    "COMMANDS",
    "Checker",
    "Host",
    "STATIC",
    "Untyped",
    "UnderQemu",
    "Content",
    "Retry",
    "GLIBC_",
}


def test_every_variable_the_source_reads_is_in_the_docs() -> None:
    read: set[str] = set()
    for path in (ROOT / "dswheels").rglob("*.py"):
        for match in _READS.finditer(path.read_text(encoding="utf-8")):
            read.update(name for name in match.groups() if name)
    read -= _NOT_VARIABLES
    docs = (ROOT / "docs" / "hostile-input.md").read_text(encoding="utf-8")
    section = docs.split("## Environment variables", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`([A-Z][A-Za-z0-9_()]+)\*?`", section))
    assert read <= documented, sorted(read - documented)
    assert {"SOURCE_DATE_EPOCH", "GITHUB_TOKEN", "DSWHEELS_DEBUG", "CUDA_PATH_V"} <= read
