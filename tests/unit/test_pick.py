"""Reading a PEP 503 project page and picking the wheel of an environment."""

from __future__ import annotations

import itertools

import pytest
from packaging.utils import parse_wheel_filename

from dswheels.doctor.pick import Wanted, nearest, pick_wheel
from dswheels.kernel.index_files import IndexFile, parse_project_page
from dswheels.kernel.model import Cell, Platform, Python, Variant
from dswheels.kernel.naming import try_parse_wheel, wheel_filename
from dswheels.kernel.versions import TorchMinor

CELLS = [
    Cell(deepspeed=ds, torch=TorchMinor(torch), variant=Variant.parse(v), python=Python.parse(py), platform=pl)
    for ds, torch, v, py, pl in itertools.product(
        [(0, 19, 8), (0, 16, 5)],
        [(2, 9), (2, 14)],
        ["cu128", "cpu", "cu130"],
        ["3.10", "3.13t", "3.14"],
        list(Platform),
    )
]


@pytest.mark.parametrize("cell", CELLS[::7])
def test_the_wheel_name_parser_inverts_wheel_filename(cell: Cell) -> None:
    wheel = try_parse_wheel(wheel_filename(cell))
    assert wheel is not None
    assert wheel.cell == cell


@pytest.mark.parametrize(
    "name",
    [
        "deepspeed-0.19.8.tar.gz",
        "deepspeed-0.19.8-py3-none-any.whl",
        "deepspeed-0.16.5-cp312-cp312-win_amd64.whl",  # DeepSpeed's own Windows wheel: no label
        "deepspeed-0.19.8+cu128.torch2.7-cp311-cp311-linux_x86_64.whl",  # another labelling scheme
        "deepspeed-0.19.8+cu128torch2.9-cp312-cp311-win_amd64.whl",  # inconsistent tags
        "deepspeed-0.19.8+cu128torch2.9-cp312-cp312-macosx_14_0_arm64.whl",
        "torch-2.9.1+cu128-cp312-cp312-win_amd64.whl",
    ],
)
def test_foreign_files_have_no_cell(name: str) -> None:
    assert try_parse_wheel(name) is None
    assert IndexFile(filename=name, url=name, wheel=try_parse_wheel(name)).cell is None


PAGE = (
    (
        """<!DOCTYPE html>
<html><head><meta name="pypi:repository-version" content="1.0"><title>Links for deepspeed</title></head>
<body><h1>Links for deepspeed</h1>
<a href="../../files/deepspeed-0.19.8%2Bcu128torch2.9-cp312-cp312-win_amd64.whl#sha256=HASH1"
   data-requires-python="&gt;=3.9">deepspeed-0.19.8+cu128torch2.9-cp312-cp312-win_amd64.whl</a><br>
<a href="https://cdn.example.org/deepspeed-0.19.7%2Bcu128torch2.9-cp312-cp312-win_amd64.whl#sha256=HASH2"
   data-yanked="broken">deepspeed-0.19.7+cu128torch2.9-cp312-cp312-win_amd64.whl</a><br>
<a href="../../files/deepspeed-0.19.8.tar.gz">deepspeed-0.19.8.tar.gz</a>
</body></html>
"""
    )
    .replace("HASH1", "AB12" * 16)
    .replace("HASH2", "cd34" * 16)
)


def test_parse_project_page() -> None:
    files = parse_project_page(PAGE, "https://example.org/dswheels/simple/deepspeed/")
    assert [f.filename for f in files] == [
        "deepspeed-0.19.8+cu128torch2.9-cp312-cp312-win_amd64.whl",
        "deepspeed-0.19.7+cu128torch2.9-cp312-cp312-win_amd64.whl",
        "deepspeed-0.19.8.tar.gz",
    ]
    first, yanked, sdist = files
    assert first.url == "https://example.org/dswheels/files/deepspeed-0.19.8%2Bcu128torch2.9-cp312-cp312-win_amd64.whl"
    assert first.sha256 == "ab12" * 16
    assert first.url_with_hash.endswith(".whl#sha256=" + "ab12" * 16)
    assert first.requires_python == ">=3.9"
    assert yanked.is_yanked
    assert yanked.yanked == "broken"
    assert sdist.cell is None
    assert sdist.url_with_hash == sdist.url
    # the yanked 0.19.7 is never picked, even when asked for
    wanted = Wanted(
        torch=TorchMinor((2, 9)),
        variant=Variant.parse("cu128"),
        python=Python.parse("3.12"),
        platform=Platform.WIN_AMD64,
    )
    assert pick_wheel(wanted, files) == first
    yanked_one = Wanted(
        torch=TorchMinor((2, 9)),
        variant=wanted.variant,
        python=wanted.python,
        platform=wanted.platform,
        deepspeed=(0, 19, 7),
    )
    assert pick_wheel(yanked_one, files) is None


def test_page_with_base_href() -> None:
    page = (
        '<html><head><base href="https://mirror.example.org/pkgs/"></head><body><a href="x.whl">x.whl</a></body></html>'
    )
    (only,) = parse_project_page(page, "https://example.org/simple/deepspeed/")
    assert only.url == "https://mirror.example.org/pkgs/x.whl"


def _files(*names: str) -> tuple[IndexFile, ...]:
    return tuple(IndexFile(filename=n, url=n, wheel=try_parse_wheel(n)) for n in names)


WANT = Wanted(
    torch=TorchMinor((2, 13)), variant=Variant.parse("cpu"), python=Python.parse("3.11"), platform=Platform.LINUX_X86_64
)


def test_pick_newest_or_requested_deepspeed() -> None:
    files = _files(
        "deepspeed-0.19.7+cputorch2.13-cp311-cp311-linux_x86_64.whl",
        "deepspeed-0.19.8+cputorch2.13-cp311-cp311-linux_x86_64.whl",
        "deepspeed-0.19.8+cputorch2.13-cp312-cp312-linux_x86_64.whl",
    )
    picked = pick_wheel(WANT, files)
    assert picked is not None
    assert parse_wheel_filename(picked.filename)[1].public == "0.19.8"
    exact = Wanted(
        torch=WANT.torch, variant=WANT.variant, python=WANT.python, platform=WANT.platform, deepspeed=(0, 19, 7)
    )
    picked = pick_wheel(exact, files)
    assert picked is not None
    assert picked.filename.startswith("deepspeed-0.19.7+")
    missing = Wanted(
        torch=WANT.torch, variant=WANT.variant, python=WANT.python, platform=WANT.platform, deepspeed=(0, 19, 6)
    )
    assert pick_wheel(missing, files) is None
    assert nearest(missing, files) == (
        "DeepSpeed 0.19.6 has no wheel for this environment; wheels exist for DeepSpeed 0.19.7 and 0.19.8",
    )


def test_nearest_when_nothing_is_close() -> None:
    assert nearest(WANT, _files("deepspeed-0.19.8+cu128torch2.9-cp312-cp312-win_amd64.whl")) == (
        "the index has no linux_x86_64 wheels at all",
    )
    assert nearest(WANT, _files("deepspeed-0.19.8+cu128torch2.9-cp311-cp311-linux_x86_64.whl")) == (
        "for Python 3.11 on linux_x86_64 the index has torch 2.9 cu128",
    )
    assert nearest(WANT, _files("deepspeed-0.19.8+cu128torch2.9-cp312-cp312-linux_x86_64.whl")) == (
        "the index has no Python 3.11 wheels for linux_x86_64 (it has Python 3.12)",
    )
