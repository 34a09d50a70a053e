"""Names derived from a cell: its id, the local version label and the wheel filename; and back.

The id (``ds0.19.8-torch2.9-cu128-cp312-win_amd64``) is what users select with
``--only``, what log groups and reports show, and what the workflow matrix carries.
Labels use only ``[a-z0-9.]`` so that ``packaging`` and every installer parse them.

Wheel file names are read here only, with ``packaging`` underneath: :func:`parse_wheel_name`
takes any DeepSpeed wheel (DeepSpeed's own have no label), :func:`parse_wheel` only the names
``dswheels build`` gives, exactly (the inverse of :func:`wheel_filename`, a build tag allowed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.tags import Tag
from packaging.utils import parse_wheel_filename
from packaging.version import Version

from dswheels.kernel.model import Cell, Platform, Python, Variant
from dswheels.kernel.numbers import SPACE
from dswheels.kernel.versions import TorchMinor, format_version, parse_version

__all__ = [
    "MAX_WHEEL_NAME",
    "PROJECT",
    "PublishedWheel",
    "WheelName",
    "WheelNameError",
    "build_string",
    "canonical_filename",
    "cell_id",
    "check_names",
    "local_label",
    "parse_cell_id",
    "parse_wheel",
    "parse_wheel_name",
    "partition",
    "try_parse_wheel",
    "wheel_filename",
    "wheel_version",
]

PROJECT = "deepspeed"

_ID_RE = re.compile(
    r"^ds(?P<ds>[0-9]+\.[0-9]+\.[0-9]+)-torch(?P<torch>[0-9]+\.[0-9]+)-(?P<variant>cpu|cu[0-9]{2,3})"
    r"-(?P<python>cp[0-9]{2,3}t?)-(?P<platform>[a-z0-9_]+)$",
)


def cell_id(cell: Cell) -> str:
    """The stable, selectable id of a cell.

    >>> from dswheels.kernel.model import Variant, Python, Platform
    >>> cell_id(Cell((0, 19, 8), (2, 9), Variant.parse("cu128"), Python.parse("3.12"), Platform.WIN_AMD64))
    'ds0.19.8-torch2.9-cu128-cp312-win_amd64'
    """
    return (
        f"ds{format_version(cell.deepspeed)}-torch{format_version(cell.torch)}"
        f"-{cell.variant.name}-{cell.python.tag}-{cell.platform.value}"
    )


def parse_cell_id(text: str) -> Cell:
    """Inverse of :func:`cell_id`; raises ``ValueError`` with the expected shape."""
    match = _ID_RE.match(text.strip(SPACE))
    if not match:
        msg = (
            f"not a cell id: {text!r} (expected e.g. 'ds0.19.8-torch2.9-cu128-cp312-win_amd64': "
            "ds<version>-torch<M.m>-<cuXYZ|cpu>-<cpXY>-<win_amd64|linux_x86_64|linux_aarch64>)"
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
        torch=TorchMinor(parse_version(match["torch"])),
        variant=Variant.parse(match["variant"]),
        python=Python.parse(match["python"]),
        platform=platform,
    )


def local_label(cell: Cell) -> str:
    """``cu128torch2.9``: the PEP 440 local version label.

    >>> from dswheels.kernel.model import Variant, Python, Platform
    >>> local_label(Cell((0, 19, 8), (2, 13), Variant.parse("cpu"), Python.parse("3.11"), Platform.LINUX_X86_64))
    'cputorch2.13'
    """
    return f"{cell.variant.name}torch{format_version(cell.torch)}"


def partition(cell: Cell) -> str:
    """The index partition a cell's wheel is published in: ``cu128-torch2.9``.

    One partition per (variant, torch minor): pip and uv pick the highest local label
    among the versions they see, so a user must only ever see wheels for their own torch.

    >>> from dswheels.kernel.model import Variant, Python, Platform
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


def wheel_filename(cell: Cell, platform_tag: str | None = None) -> str:
    """The cell's wheel filename: the one ``python -m build`` produces, or with ``platform_tag``, the one a Linux
    wheel gets once its floor is judged (``manylinux_2_28_x86_64``: :mod:`dswheels.kernel.manylinux`).

    >>> from dswheels.kernel.model import Variant, Python, Platform
    >>> wheel_filename(Cell((0, 19, 8), (2, 9), Variant.parse("cu128"), Python.parse("3.12"), Platform.WIN_AMD64))
    'deepspeed-0.19.8+cu128torch2.9-cp312-cp312-win_amd64.whl'
    >>> wheel_filename(Cell((0, 19, 8), (2, 9), Variant.parse("cpu"), Python.parse("3.12"), Platform.LINUX_X86_64),
    ...                "manylinux_2_28_x86_64")
    'deepspeed-0.19.8+cputorch2.9-cp312-cp312-manylinux_2_28_x86_64.whl'
    """
    py = cell.python
    return f"{PROJECT}-{wheel_version(cell)}-{py.interpreter_tag}-{py.tag}-{platform_tag or cell.platform.value}.whl"


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


# --- wheel file names, read back ----------------------------------------------------------------

# A wheel name goes into paths, URLs, HTML and HTTP headers: the build tag (PEP 427: starts with
# a digit) may hold only what needs no escaping anywhere, and the whole name, with the longest
# suffix dswheels adds (".manifest.json" in place of ".whl", a temporary prefix), fits in 255 bytes.
MAX_WHEEL_NAME = 160
_BUILD_TAG_RE = re.compile(r"^[0-9]+[a-z0-9_.]*$")


class WheelNameError(ValueError):
    """A file name that is not a DeepSpeed wheel's (or, for :func:`parse_wheel`, not a dswheels one)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class WheelName:
    """Any DeepSpeed wheel's file name, read by ``packaging``: one tag triple."""

    filename: str
    version: Version
    build: str  # the optional build tag ("" when absent)
    tag: Tag

    @property
    def label(self) -> str:
        """The local version label (``cu128torch2.9``; "" for DeepSpeed's own wheels)."""
        return self.version.local or ""


def parse_wheel_name(filename: str) -> WheelName:
    """A DeepSpeed wheel's name, whoever built it; :class:`WheelNameError` says what is off.

    >>> w = parse_wheel_name("deepspeed-0.16.5-cp311-cp311-win_amd64.whl")
    >>> str(w.version), w.label, str(w.tag)
    ('0.16.5', '', 'cp311-cp311-win_amd64')
    """
    try:
        name, version, build, tags = parse_wheel_filename(filename)
    except ValueError as exc:  # packaging's InvalidWheelFilename is a ValueError
        msg = f"{filename}: not a wheel filename ({exc})"
        raise WheelNameError(msg) from None
    if name != PROJECT:
        msg = f"{filename} is a wheel of {name}, not of {PROJECT}"
        raise WheelNameError(msg)
    if len(tags) != 1:
        msg = f"{filename}: a DeepSpeed wheel has exactly one tag triple, not {len(tags)}"
        raise WheelNameError(msg)
    (tag,) = tags
    return WheelName(filename=filename, version=version, build="".join(map(str, build)), tag=tag)


@dataclass(frozen=True, kw_only=True, slots=True)
class PublishedWheel:
    """A dswheels wheel filename, understood: the cell it was built for and its partition."""

    filename: str
    cell: Cell
    version: Version
    build: str  # the optional build tag ("" when absent): a re-spin of the same cell
    platform_tag: str = ""  # the wheel's own platform tag (a Linux wheel's floor); "": the cell's platform

    @property
    def partition(self) -> str:
        return partition(self.cell)

    @property
    def canonical(self) -> str:
        """The name ``dswheels build`` gives the cell (no build tag)."""
        return wheel_filename(self.cell, self.platform_tag or None)


def parse_wheel(filename: str) -> PublishedWheel:
    """A wheel name exactly as dswheels gives it (a build tag allowed); :class:`WheelNameError` says what is off.

    >>> w = parse_wheel("deepspeed-0.19.8+cu128torch2.9-cp312-cp312-win_amd64.whl")
    >>> w.partition, w.cell.python.tag, w.build
    ('cu128-torch2.9', 'cp312', '')
    >>> parse_wheel("deepspeed-0.19.8+cputorch2.9-cp312-cp312-manylinux_2_28_x86_64.whl").cell.platform.value
    'linux_x86_64'
    """
    if len(filename.encode("utf-8", "surrogatepass")) > MAX_WHEEL_NAME:
        msg = (
            f"{filename[:60]}...: a name of {len(filename)} characters; a dswheels wheel's name is at most "
            f"{MAX_WHEEL_NAME} (file systems allow 255 bytes, and its .metadata and manifest add to it)"
        )
        raise WheelNameError(msg)
    name = parse_wheel_name(filename)
    variant_text, sep, torch_text = name.label.partition("torch")
    if not sep:
        msg = f"{filename}: the version has no '+<variant>torch<M.m>' label (e.g. 0.19.8+cu128torch2.9)"
        raise WheelNameError(msg)
    if name.build and not _BUILD_TAG_RE.match(name.build):
        msg = f"{filename}: the build tag {name.build} is not digits followed by [a-z0-9_.]"
        raise WheelNameError(msg)
    version = name.version
    try:
        variant = Variant.parse(variant_text)
        torch = parse_version(torch_text)
        python = Python.parse(name.tag.abi)
        platform = Platform.from_tag(name.tag.platform)
    except ValueError as exc:
        msg = f"{filename}: {exc}"
        raise WheelNameError(msg) from None
    if len(torch) != 2 or len(version.release) != 3 or version.is_prerelease or version.is_postrelease:
        msg = f"{filename}: expected <X.Y.Z>+<variant>torch<M.m>, got {version}"
        raise WheelNameError(msg)
    cell = Cell(deepspeed=version.release, torch=TorchMinor(torch), variant=variant, python=python, platform=platform)
    wheel = PublishedWheel(
        filename=filename, cell=cell, version=version, build=name.build, platform_tag=name.tag.platform
    )
    expected = wheel.canonical
    if name.build:
        parts = expected.split("-")
        expected = "-".join([*parts[:2], name.build, *parts[2:]])
    if filename != expected:
        msg = f"{filename}: not in the form dswheels names it ({expected})"
        raise WheelNameError(msg)
    return wheel


def try_parse_wheel(filename: str) -> PublishedWheel | None:
    """:func:`parse_wheel`, or None for a file not named the dswheels way (an sdist, another project).

    >>> try_parse_wheel("deepspeed-0.19.8-py3-none-any.whl") is None
    True
    """
    try:
        return parse_wheel(filename)
    except WheelNameError:
        return None


def canonical_filename(filename: str) -> str | None:
    """The build-tag-free name of a published dswheels wheel; ``None`` for any other file."""
    wheel = try_parse_wheel(filename)
    return wheel.canonical if wheel is not None else None
