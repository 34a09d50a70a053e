"""Plain numeric versions and ranges, fast enough to judge tens of thousands of cells.

Everything this project compares (DeepSpeed ``0.19.8``, torch ``2.9``, CUDA ``12.8``,
Python ``3.12``, MSVC ``14.44``) is a dotted run of integers, so a tuple of ints orders it
correctly and costs nothing to compare. ``packaging`` stays in charge of wheel names and
local labels (see :mod:`dswheels.kernel.naming`).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import NewType

from dswheels.kernel.numbers import SPACE

__all__ = [
    "Range",
    "TorchMinor",
    "TorchVersion",
    "VersionTuple",
    "format_version",
    "parse_nvcc_version",
    "parse_range",
    "parse_torch_minor",
    "parse_torch_release",
    "parse_version",
]

VersionTuple = tuple[int, ...]
# torch is named two ways, never interchangeably: a wheel is built for a torch minor, pip
# installs an exact release. Distinct types, so one cannot be passed where the other is meant.
TorchMinor = NewType("TorchMinor", VersionTuple)
"""torch's MAJOR.MINOR, e.g. ``(2, 14)``: what a cell and a wheel are built for."""
TorchVersion = NewType("TorchVersion", str)
"""An exact torch release ``X.Y.Z``, e.g. ``"2.14.1"``: what pip installs."""

# ASCII digits only (never \d, which takes every script's digits: 0.١٩.8 is not 0.19.8), at most 9 a part
_VERSION_RE = re.compile(r"[0-9]{1,9}(?:\.[0-9]{1,9})*")
_NVCC_RELEASE_RE = re.compile(r"release ([0-9]{1,9})\.([0-9]{1,9})")
_CLAUSE_RE = re.compile(r"\s*(>=|<=|==|!=|>|<)\s*([0-9]+(?:\.[0-9]+)*)(\.\*)?\s*", re.ASCII)

_OPS: dict[str, Callable[[VersionTuple, VersionTuple], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
    "==": operator.eq,
    "!=": operator.ne,
}


@cache
def parse_version(text: str) -> VersionTuple:
    """``"0.19.8"`` -> ``(0, 19, 8)``.

    >>> parse_version("12.8")
    (12, 8)
    """
    text = text.strip(SPACE)
    if not _VERSION_RE.fullmatch(text):
        msg = f"not a plain dotted version: {text!r}"
        raise ValueError(msg)
    return tuple(int(part) for part in text.split("."))


def _dotted(text: str) -> VersionTuple:
    try:
        return parse_version(text)
    except ValueError:
        return ()


def parse_torch_minor(text: str) -> TorchMinor:
    """torch's MAJOR.MINOR: what a wheel is built for (``--torch`` of plan and build).

    >>> parse_torch_minor("2.14")
    (2, 14)
    >>> parse_torch_minor("2.14.1")
    Traceback (most recent call last):
    ValueError: give MAJOR.MINOR (e.g. '2.14'), not '2.14.1': a wheel is built for a torch minor (verify's \
--torch-version takes an exact release)
    """
    version = _dotted(text)
    if len(version) == 2:
        return TorchMinor(version)
    if len(version) > 2:
        msg = (
            f"give MAJOR.MINOR (e.g. {format_version(version[:2])!r}), not {text!r}: a wheel is built for a torch "
            "minor (verify's --torch-version takes an exact release)"
        )
    else:
        msg = f"give MAJOR.MINOR (e.g. '2.14'), not {text!r}"
    raise ValueError(msg)


def parse_torch_release(text: str) -> TorchVersion:
    """An exact torch release ``X.Y.Z``, what pip installs (``verify --torch-version``).

    >>> parse_torch_release("2.14.1")
    '2.14.1'
    >>> parse_torch_release("2.14")
    Traceback (most recent call last):
    ValueError: give an exact torch release X.Y.Z (e.g. '2.14.1'), not '2.14': pip installs a release, not a minor
    """
    version = _dotted(text)
    if len(version) == 3:
        return TorchVersion(format_version(version))
    msg = f"give an exact torch release X.Y.Z (e.g. '2.14.1'), not {text!r}"
    if len(version) == 2:
        msg += ": pip installs a release, not a minor"
    raise ValueError(msg)


@cache
def format_version(version: VersionTuple) -> str:
    """``(2, 9)`` -> ``"2.9"``."""
    return ".".join(str(part) for part in version)


@dataclass(frozen=True, slots=True)
class Range:
    """A conjunction of clauses such as ``>=0.19.5,<0.20``; ``==2.9.*`` matches by prefix."""

    text: str
    clauses: tuple[tuple[str, VersionTuple, bool], ...]

    def __contains__(self, version: VersionTuple) -> bool:
        for op, bound, prefix in self.clauses:
            if prefix:
                if (op == "==") != (version[: len(bound)] == bound):
                    return False
            elif len(version) == len(bound):
                if not _OPS[op](version, bound):
                    return False
            elif not _OPS[op](_pad(version, bound), _pad(bound, version)):
                return False
        return True

    def __str__(self) -> str:
        return self.text


def _pad(version: VersionTuple, other: VersionTuple) -> VersionTuple:
    """Compare ``2.9`` with ``2.9.0`` as equal: pad the shorter with zeros."""
    if len(version) >= len(other):
        return version
    return version + (0,) * (len(other) - len(version))


@cache
def parse_range(text: str) -> Range:
    """Parse ``">=2.9,<2.12"``; an empty string matches everything.

    >>> (2, 10) in parse_range(">=2.9,<2.12")
    True
    >>> (0, 19, 4) in parse_range(">=0.19.5")
    False
    """
    clauses: list[tuple[str, VersionTuple, bool]] = []
    for raw in text.split(","):
        if not raw.strip():
            continue
        match = _CLAUSE_RE.fullmatch(raw)
        if not match:
            msg = f"not a version range clause: {raw.strip()!r} (use e.g. '>=2.9,<2.12')"
            raise ValueError(msg)
        op, bound, star = match.groups()
        if star and op not in ("==", "!="):
            msg = f"'.*' only works with == and !=: {raw.strip()!r}"
            raise ValueError(msg)
        clauses.append((op, parse_version(bound), bool(star)))
    return Range(text=text, clauses=tuple(clauses))


def parse_nvcc_version(output: str) -> VersionTuple | None:
    """The ``release X.Y`` of ``nvcc --version`` output; None when it has none.

    >>> parse_nvcc_version("Cuda compilation tools, release 13.0, V13.0.88")
    (13, 0)
    >>> parse_nvcc_version("Cuda compilation tools, release 12.1, V12.1.105")
    (12, 1)
    """
    match = _NVCC_RELEASE_RE.search(output)
    return (int(match.group(1)), int(match.group(2))) if match else None
