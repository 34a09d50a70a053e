"""Names derived from a cell: its id, the local version label and the wheel filename.

The id (``ds0.19.8-torch2.9-cu128-cp312-win_amd64``) is what users select with
``--only``, what log groups and reports show, and what the workflow matrix carries.
Labels use only ``[a-z0-9.]`` so that ``packaging`` and every installer parse them.
"""

from __future__ import annotations

import re

from packaging.utils import parse_wheel_filename
from packaging.version import Version

from dswheels.core.model import Cell, Platform, Python, Variant
from dswheels.core.versions import format_version, parse_version

__all__ = [
    "PROJECT",
    "build_string",
    "cell_id",
    "check_names",
    "local_label",
    "parse_cell_id",
    "partition",
    "wheel_filename",
    "wheel_version",
]

PROJECT = "deepspeed"

_ID_RE = re.compile(
    r"^ds(?P<ds>\d+\.\d+\.\d+)-torch(?P<torch>\d+\.\d+)-(?P<variant>cpu|cu\d{2,3})"
    r"-(?P<python>cp\d{2,3}t?)-(?P<platform>[a-z0-9_]+)$",
)


def cell_id(cell: Cell) -> str:
    """The stable, selectable id of a cell.

    >>> from dswheels.core.model import Variant, Python, Platform
    >>> cell_id(Cell((0, 19, 8), (2, 9), Variant.parse("cu128"), Python.parse("3.12"), Platform.WIN_AMD64))
    'ds0.19.8-torch2.9-cu128-cp312-win_amd64'
    """
    return (
        f"ds{format_version(cell.deepspeed)}-torch{format_version(cell.torch)}"
        f"-{cell.variant.name}-{cell.python.tag}-{cell.platform.value}"
    )


def parse_cell_id(text: str) -> Cell:
    """Inverse of :func:`cell_id`; raises ``ValueError`` with the expected shape."""
    match = _ID_RE.match(text.strip())
    if not match:
        msg = (
            f"not a cell id: {text!r} (expected e.g. 'ds0.19.8-torch2.9-cu128-cp312-win_amd64': "
            "ds<version>-torch<M.m>-<cuXYZ|cpu>-<cpXY>-<win_amd64|linux_x86_64>)"
        )
        raise ValueError(msg)
    try:
        platform = Platform(match["platform"])
    except ValueError:
        choices = ", ".join(p.value for p in Platform)
        msg = f"unknown platform {match['platform']!r} in cell id {text!r} (known: {choices})"
        raise ValueError(msg) from None
    return Cell(
        deepspeed=parse_version(match["ds"]),
        torch=parse_version(match["torch"]),
        variant=Variant.parse(match["variant"]),
        python=Python.parse(match["python"]),
        platform=platform,
    )


def local_label(cell: Cell) -> str:
    """``cu128torch2.9``: the PEP 440 local version label.

    >>> from dswheels.core.model import Variant, Python, Platform
    >>> local_label(Cell((0, 19, 8), (2, 13), Variant.parse("cpu"), Python.parse("3.11"), Platform.LINUX_X86_64))
    'cputorch2.13'
    """
    return f"{cell.variant.name}torch{format_version(cell.torch)}"


def partition(cell: Cell) -> str:
    """The index partition a cell's wheel is published in: ``cu128-torch2.9``.

    One partition per (variant, torch minor): pip and uv pick the highest local label
    among the versions they see, so a user must only ever see wheels for their own torch.

    >>> from dswheels.core.model import Variant, Python, Platform
    >>> partition(Cell((0, 19, 8), (2, 9), Variant.parse("cu128"), Python.parse("3.12"), Platform.WIN_AMD64))
    'cu128-torch2.9'
    """
    return f"{cell.variant.name}-torch{format_version(cell.torch)}"


def build_string(cell: Cell) -> str:
    """What DeepSpeed's setup.py appends to version.txt (``DS_BUILD_STRING``)."""
    return f"+{local_label(cell)}"


def wheel_version(cell: Cell) -> str:
    """``0.19.8+cu128torch2.9``: already in PEP 440 normal form (see :func:`check_names`)."""
    return f"{format_version(cell.deepspeed)}+{local_label(cell)}"


def wheel_filename(cell: Cell) -> str:
    """The filename ``python -m build`` produces for the cell.

    >>> from dswheels.core.model import Variant, Python, Platform
    >>> wheel_filename(Cell((0, 19, 8), (2, 9), Variant.parse("cu128"), Python.parse("3.12"), Platform.WIN_AMD64))
    'deepspeed-0.19.8+cu128torch2.9-cp312-cp312-win_amd64.whl'
    """
    py = cell.python
    return f"{PROJECT}-{wheel_version(cell)}-{py.interpreter_tag}-{py.tag}-{cell.platform.value}.whl"


def check_names(cell: Cell) -> None:
    """Prove with ``packaging`` that the names of a cell parse back to what we meant.

    The planner formats names directly (it names tens of thousands of cells); the property
    tests call this for every kind of cell, so a label ``packaging`` would rewrite (a ``-``,
    an upper-case letter) cannot slip in.
    """
    version = wheel_version(cell)
    if str(Version(version)) != version:
        msg = f"local version {version!r} is not in PEP 440 normal form ({Version(version)})"
        raise ValueError(msg)
    name, parsed_version, _build, tags = parse_wheel_filename(wheel_filename(cell))
    if name != PROJECT or str(parsed_version) != version:
        msg = f"wheel filename of {cell_id(cell)} parses as {name} {parsed_version}"
        raise ValueError(msg)
    expected = {f"{cell.python.interpreter_tag}-{cell.python.tag}-{cell.platform.value}"}
    if {str(t) for t in tags} != expected:
        msg = f"wheel tags of {cell_id(cell)} parse as {sorted(map(str, tags))}, expected {expected}"
        raise ValueError(msg)
