"""The default locations (dswheels/kernel/locations.py): build, verify, publish and index with no
path flags pick up each other's outputs, and every command's --help names its defaults.

The real chain (a real build, publish, index, the site served and pip installing from it) is
tests/integration/test_chain.py; here the same commands run in-process on small wheels.
"""

from __future__ import annotations

import argparse
import html
import re
from pathlib import Path

import pytest

from dswheels.cli import build_parser, main
from dswheels.cli.flags import settle
from dswheels.cli.parser import COMMAND_DEST
from dswheels.host.wheelhouse import find_wheels
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.locations import LOCAL_SITE_URL, MATRIX, PUBLISHED, SITE, WHEELHOUSE
from tests.support.wheels import write_deepspeed_wheel


@pytest.fixture
def clone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory, as a fresh clone is for these commands."""
    monkeypatch.chdir(tmp_path)
    for name in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "DSWHEELS_TORCH_INDEX"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def _help(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    return " ".join(capsys.readouterr().out.split())


def _settled(*argv: str) -> argparse.Namespace:
    """The command line parsed, and each flag not given settled (with no variable set: its default)."""
    args = build_parser().parse_args(argv)
    settle(args, getattr(args, COMMAND_DEST).flags, {})
    return args


def test_the_flags_default_to_the_chain(capsys: pytest.CaptureFixture[str]) -> None:
    assert _settled("build").out == WHEELHOUSE
    verify = _settled("verify")
    assert verify.wheels == []
    assert verify.matrix == MATRIX  # --matrix, like every command's, may come from $DSWHEELS_MATRIX
    assert (_settled("publish").paths, _settled("publish").dir) == ([], PUBLISHED)
    assert _settled("publish", "--github", "o/r").dir is None  # another target given: no directory
    index = _settled("index")
    assert (index.source, index.out, index.site_url) == (PUBLISHED, SITE, None)
    assert "default: wheelhouse, where `dswheels verify` and `dswheels publish` look" in _help("build", capsys)
    assert "(default: wheelhouse/, what `dswheels build` wrote)" in _help("verify", capsys)
    publish = _help("publish", capsys)
    assert "(default: wheelhouse/, what `dswheels build` wrote)" in publish
    assert "(the default: published/)" in publish
    index_help = _help("index", capsys)
    assert "(default: published, where `dswheels publish` copies them)" in index_help
    assert "site directory (default: site)" in index_help
    assert f"else {LOCAL_SITE_URL}, where the serve command printed at the end serves --out" in index_help


def test_with_no_wheel_named_the_commands_take_what_build_wrote(clone: Path) -> None:
    cpu = write_deepspeed_wheel(clone / "wheelhouse" / "cpu", variant="cpu", torch="2.13")
    cuda = write_deepspeed_wheel(clone / "wheelhouse" / "cu130", variant="cu130", torch="2.14")
    (clone / "wheelhouse" / "logs").mkdir()
    (clone / "wheelhouse" / "logs" / "x.log").write_text("not a wheel")
    built = sorted([cpu, cuda])
    assert sorted(p.resolve() for p in find_wheels([])) == built
    assert sorted(p.resolve() for p in find_wheels([Path("wheelhouse")])) == built  # a directory: one level down too
    assert [p.resolve() for p in find_wheels([Path("wheelhouse/cpu")])] == [cpu]
    assert find_wheels([Path("no/such.whl")]) == [Path("no/such.whl")]  # the reader says what is wrong with it


def test_nothing_built_says_what_to_do(clone: Path) -> None:
    with pytest.raises(ConfigError, match=r"no wheels given, and none in wheelhouse/ here") as info:
        find_wheels([])
    assert "dswheels build" in (info.value.hint or "")
    (clone / "empty").mkdir()
    with pytest.raises(ConfigError, match="no wheels in empty"):
        find_wheels([Path("empty")])


def test_verify_with_nothing_built_exits_2_with_the_hint(clone: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--static"]) == 2
    err = capsys.readouterr().err
    assert "none in wheelhouse/ here (where `dswheels build` writes them)" in err
    assert "hint: build one first (`dswheels build`)" in err


def test_publish_then_index_chain_and_the_install_lines_are_those_of_the_served_site(
    clone: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = write_deepspeed_wheel(clone / "wheelhouse" / "cpu", variant="cpu", torch="2.13")
    assert main(["publish"]) == 0
    assert (clone / "published" / wheel.name).read_bytes() == wheel.read_bytes()
    assert capsys.readouterr().out.splitlines()[-1] == "next: dswheels index   (reads published/, writes site/)"
    assert main(["index"]) == 0
    out = capsys.readouterr().out
    assert "serve it: python3 -m http.server --bind 127.0.0.1 --directory site 8000\n" in out
    printed = re.findall(r"^  (pip install .*)$", out, re.MULTILINE)
    page = html.unescape((clone / "site" / "index.html").read_text(encoding="utf-8"))
    assert len(printed) == 1
    assert printed[0] in page
    assert "--extra-index-url http://127.0.0.1:8000/whl/cpu-torch2.13/simple/" in printed[0]
    assert "file://" not in page


def test_a_site_for_elsewhere_says_where_to_deploy_it(clone: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_deepspeed_wheel(clone / "dist", variant="cpu", torch="2.13")
    assert main(["publish", "dist", "--dir", "out"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "next: dswheels index --from out   (writes site/)"
    assert main(["index", "--from", "out", "--site-url", "https://wheels.example.org/"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == (
        "deploy site to https://wheels.example.org/: the install lines are on https://wheels.example.org/index.html#install"
    )
    assert "serve it" not in out


def test_many_partitions_point_to_the_page(clone: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for variant, torch in (("cpu", "2.13"), ("cu130", "2.14"), ("cu126", "2.14"), ("cpu", "2.14")):
        write_deepspeed_wheel(clone / "wheelhouse" / variant, variant=variant, torch=torch)
    assert main(["publish"]) == 0
    assert main(["index"]) == 0
    out = capsys.readouterr().out
    assert out.endswith("with its partition's line on http://127.0.0.1:8000/index.html#install\n"), out
    assert "pip install" not in out
