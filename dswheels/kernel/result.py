"""What a stage hands back when it ends: one frozen result, the same shape for every command.

A command returns :class:`Done` (its data, its exit code, and the error to raise once the result
is recorded); the CLI times the run and turns it, or the error that ended it, into a
:class:`StageResult`, which ``--report FILE`` writes as JSON (:func:`dswheels.host.stage_report.write_report`).
The report's common fields sit at the top level beside the stage's own data, so reports that had a
schema of their own before (``dswheels.verify/1``, ``dswheels.smoke/2``) keep every key they had.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from dswheels.kernel.errors import DswheelsError, NothingToDoError

__all__ = ["COMMON_FIELDS", "REPORT_SCHEMA", "Done", "StageResult", "StageStatus", "failed_result"]

REPORT_SCHEMA = "dswheels.stage/1"  # the schema of a stage whose data has none of its own

# the keys every report has; a stage's data never uses them
COMMON_FIELDS = ("schema", "dswheels", "stage", "status", "reason", "duration_s", "exit_code")


class StageStatus(str, Enum):
    OK = "ok"
    FAILED = "failed"
    NOTHING_TO_DO = "nothing-to-do"  # a valid request that leaves nothing to do (exit 3)
    INTERRUPTED = "interrupted"  # Ctrl-C or SIGTERM


@dataclass(frozen=True, kw_only=True, slots=True)
class Done:
    """What a command's ``run`` returns: ``data`` for the report, its exit code, and a failure the CLI
    raises after the report is written (so a failed stage's report still holds what it found)."""

    data: Mapping[str, object] = field(default_factory=dict)
    exit_code: int = 0
    reason: str = ""
    error: DswheelsError | None = None

    def __post_init__(self) -> None:
        clash = sorted(set(self.data) & (set(COMMON_FIELDS) - {"schema", "dswheels"}))
        if clash:
            msg = f"a stage's data may not use the report's common fields: {', '.join(clash)}"
            raise ValueError(msg)

    def result(self, stage: str, duration_s: float) -> StageResult:
        code = self.error.exit_code if self.error is not None else self.exit_code
        reason = self.reason or (self.error.message if self.error is not None else "")
        return StageResult(
            stage=stage,
            status=_status(code, self.error),
            reason=reason,
            duration_s=duration_s,
            exit_code=code,
            data=self.data,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class StageResult:
    """One stage's run: its status and why, how long it took, and what it found (``data``, JSON-able)."""

    stage: str  # the command, e.g. "plan", "facts check"
    status: StageStatus
    reason: str = ""
    duration_s: float = 0.0
    exit_code: int = 0
    data: Mapping[str, object] = field(default_factory=dict)

    def as_json(self, *, version: str) -> dict[str, object]:
        """The report: the common fields, then the stage's data (its own ``schema`` wins).

        >>> r = StageResult(stage="plan", status=StageStatus.OK, duration_s=0.1234, data={"cells": 2})
        >>> r.as_json(version="1.0")
        {'schema': 'dswheels.stage/1', 'dswheels': '1.0', 'stage': 'plan', 'status': 'ok', 'reason': '', \
'duration_s': 0.123, 'exit_code': 0, 'cells': 2}
        """
        common: dict[str, object] = {
            "schema": REPORT_SCHEMA,
            "dswheels": version,
            "stage": self.stage,
            "status": self.status.value,
            "reason": self.reason,
            "duration_s": round(self.duration_s, 3),
            "exit_code": self.exit_code,
        }
        return {**common, **self.data}


def failed_result(stage: str, error: BaseException, duration_s: float, *, exit_code: int) -> StageResult:
    """The result of a stage that an error or an interruption ended before it returned."""
    if isinstance(error, DswheelsError):
        return Done(error=error).result(stage, duration_s)
    return StageResult(
        stage=stage,
        status=StageStatus.INTERRUPTED,
        reason="terminated" if exit_code == 143 else "interrupted",
        duration_s=duration_s,
        exit_code=exit_code,
    )


def _status(code: int, error: DswheelsError | None) -> StageStatus:
    if isinstance(error, NothingToDoError) or code == NothingToDoError.exit_code:
        return StageStatus.NOTHING_TO_DO
    return StageStatus.OK if code == 0 else StageStatus.FAILED
