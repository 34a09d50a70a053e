from __future__ import annotations

import pytest
from hypothesis import given
from packaging.utils import parse_wheel_filename
from packaging.version import Version

from dswheels.kernel.model import Cell, Platform, Python, Variant
from dswheels.kernel.naming import (
    build_string,
    cell_id,
    check_names,
    local_label,
    parse_cell_id,
    partition,
    wheel_filename,
    wheel_version,
)
from dswheels.kernel.versions import TorchMinor
from tests.unit.strategies import any_cells


@given(any_cells)
def test_cell_id_round_trips(cell: Cell) -> None:
    assert parse_cell_id(cell_id(cell)) == cell


@given(any_cells)
def test_names_parse_back_with_packaging(cell: Cell) -> None:
    check_names(cell)
    name, version, build, tags = parse_wheel_filename(wheel_filename(cell))
    assert name == "deepspeed"
    assert build == ()
    assert version == Version(wheel_version(cell))
    assert version.local == local_label(cell)
    assert [str(t) for t in tags] == [f"{cell.python.interpreter_tag}-{cell.python.tag}-{cell.platform.value}"]
    assert set(local_label(cell)) <= set("abcdefghijklmnopqrstuvwxyz0123456789.")


def test_the_design_examples() -> None:
    cell = parse_cell_id("ds0.19.8-torch2.9-cu128-cp312-win_amd64")
    assert wheel_filename(cell) == "deepspeed-0.19.8+cu128torch2.9-cp312-cp312-win_amd64.whl"
    assert build_string(cell) == "+cu128torch2.9"
    assert partition(cell) == "cu128-torch2.9"
    cpu = Cell((0, 19, 8), TorchMinor((2, 13)), Variant.parse("cpu"), Python.parse("3.11"), Platform.LINUX_X86_64)
    assert cell_id(cpu) == "ds0.19.8-torch2.13-cpu-cp311-linux_x86_64"
    assert wheel_filename(cpu) == "deepspeed-0.19.8+cputorch2.13-cp311-cp311-linux_x86_64.whl"


def test_free_threaded_wheel_tags() -> None:
    cell = parse_cell_id("ds0.19.8-torch2.14-cu130-cp314t-linux_x86_64")
    assert wheel_filename(cell) == "deepspeed-0.19.8+cu130torch2.14-cp314-cp314t-linux_x86_64.whl"


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ("ds0.19-torch2.9-cu128-cp312-win_amd64", "not a cell id"),
        ("ds0.19.8-torch2.9.1-cu128-cp312-win_amd64", "not a cell id"),
        ("ds0.19.8-torch2.9-cuda128-cp312-win_amd64", "not a cell id"),
        ("ds0.19.8-torch2.9-cu128-cp312-macosx_arm64", "unknown platform"),
    ],
)
def test_bad_cell_ids_say_what_is_expected(bad: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_cell_id(bad)


@pytest.mark.parametrize(
    ("text", "name", "cuda"), [("cu128", "cu128", (12, 8)), ("12.8", "cu128", (12, 8)), ("CPU", "cpu", None)]
)
def test_variant_spellings(text: str, name: str, cuda: tuple[int, int] | None) -> None:
    variant = Variant.parse(text)
    assert (variant.name, variant.cuda) == (name, cuda)


@pytest.mark.parametrize("bad", ["cuda", "cu1", "12.10", "rocm6.2"])
def test_bad_variants(bad: str) -> None:
    with pytest.raises(ValueError, match="not a torch variant"):
        Variant.parse(bad)


@pytest.mark.parametrize(("text", "tag"), [("3.12", "cp312"), ("cp310", "cp310"), ("3.13t", "cp313t")])
def test_python_spellings(text: str, tag: str) -> None:
    assert Python.parse(text).tag == tag
