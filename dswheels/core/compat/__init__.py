"""Typed view of ``dswheels/compat.yml``: the facts every planning decision comes from.

The file is package data and part of this project, so a malformed entry is a bug: loading
fails loudly (``CompatDataError``) and a unit test loads it on every run.

Import from here: :mod:`._entries` holds one type per kind of entry (a torch release, a
CUDA toolkit, a rule, ...), :mod:`._table` the whole file typed (:class:`Compat`) and its
lookups, :mod:`._read` the reading of the YAML into them.
"""

from __future__ import annotations

from dswheels.core.compat._entries import (
    OSES,
    ArchListRow,
    Condition,
    CpuBaseline,
    CudaToolkit,
    MismatchRow,
    OpInfo,
    Rule,
    RunnerImage,
    TorchRelease,
    Workaround,
)
from dswheels.core.compat._read import CompatDataError, load_compat, parse_compat
from dswheels.core.compat._table import Compat, describe_versions

__all__ = [
    "OSES",
    "ArchListRow",
    "Compat",
    "CompatDataError",
    "Condition",
    "CpuBaseline",
    "CudaToolkit",
    "MismatchRow",
    "OpInfo",
    "Rule",
    "RunnerImage",
    "TorchRelease",
    "Workaround",
    "describe_versions",
    "load_compat",
    "parse_compat",
]
