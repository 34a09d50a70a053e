"""What doctor reports: each check with its status and fix, the verdict, and the whole report."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from dswheels.kernel.index_files import IndexFile
from dswheels.kernel.model import Cell, Reason, Toolchain
from dswheels.kernel.naming import cell_id

__all__ = ["Check", "IndexView", "LocalBuild", "Report", "Status", "Verdict"]


class Status(str, Enum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"

    def __str__(self) -> str:
        return self.value.upper()


@dataclass(frozen=True, slots=True)
class Check:
    id: str
    status: Status
    title: str
    detail: str = ""
    fix: str = ""


@dataclass(frozen=True, slots=True)
class IndexView:
    """The published index as doctor/install saw it."""

    url: str
    files: tuple[IndexFile, ...] = ()
    error: str = ""


@dataclass(frozen=True, slots=True)
class LocalBuild:
    """Would ``dswheels build`` (DeepSpeed's own setup.py) work here, and how."""

    status: Status  # OK: works as is; WARN: works with the workarounds; FAIL: blocked
    blockers: tuple[str, ...] = ()
    workarounds: tuple[str, ...] = ()  # what must be set or switched for the build to pass
    environment: tuple[tuple[str, str], ...] = ()  # variables for the build, in order
    toolchain: Toolchain | None = None
    ops: tuple[str, ...] = ()
    left_out: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Verdict:
    cell: Cell | None
    no_cell: str  # why no cell could be named ("" when cell is set)
    rules: tuple[Reason, ...]  # rules that forbid the cell outright
    index: IndexView | None
    wheel: IndexFile | None
    nearest: tuple[str, ...]
    local: LocalBuild

    @property
    def cell_id(self) -> str:
        return cell_id(self.cell) if self.cell else ""


@dataclass(frozen=True, slots=True)
class Report:
    checks: tuple[Check, ...]
    verdict: Verdict
    guidance: tuple[str, ...]  # CUDA_HOME setup for this kind of environment
    env_kind: str  # "venv" | "conda" | "system"

    @property
    def worst(self) -> Status:
        statuses = {c.status for c in self.checks}
        for status in (Status.FAIL, Status.WARN):
            if status in statuses:
                return status
        return Status.OK
