"""A verify check as a named unit: one function, registered with what it judges, whether it reads the
wheel's bytes or the wheel loaded, and the exit code its failure gives.

A check module makes a :class:`Registry` for the facts it reads and decorates each check with
:meth:`Registry.check`; :mod:`dswheels.verify.checks` puts the registries in their order, runs them
and renders them for ``docs/verify.md``. A check yields :class:`Verdict` s, one (the check's own
name) or one per extension or op (``<name> <subject>``): the registry names each result, so every
result of ``dswheels verify`` is a name the page lists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Generic, TypeVar

from dswheels.kernel.errors import DswheelsError, VerifyError

__all__ = ["Check", "Registry", "Stage", "Verdict", "VerifyCheck"]

F = TypeVar("F")


class Stage(str, Enum):
    """What a check reads."""

    STATIC = "static"  # the wheel's bytes: its files, metadata and extension binaries; nothing installed
    LOADED = "loaded"  # the wheel installed in an interpreter with the cell's torch, its ops loaded

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class Check:
    """One result: a check's name (and subject), whether it passed, and a sentence a person can act on."""

    name: str
    ok: bool
    detail: str

    def as_json(self) -> dict[str, object]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a check function yields; the registry names it (``subject``: the extension or op, or none)."""

    ok: bool
    detail: str
    subject: str = ""


Judge = Callable[[F], Iterable[Verdict]]


@dataclass(frozen=True, kw_only=True, slots=True)
class VerifyCheck(Generic[F]):
    name: str  # its results are named this, or "<name> <subject>"
    judges: str  # what it judges, one sentence (docs/verify.md)
    stage: Stage
    judge: Judge[F]
    gate: bool = False  # a failure ends its stage's checks: those after it read what it could not
    error: type[DswheelsError] = VerifyError  # what a failure makes the command raise

    @property
    def exit_code(self) -> int:
        return self.error.exit_code

    def results(self, facts: F) -> list[Check]:
        return [
            Check(f"{self.name} {v.subject}" if v.subject else self.name, v.ok, v.detail) for v in self.judge(facts)
        ]


class Registry(Generic[F]):
    """The checks of one stage that read facts ``F``, in the order they run and are listed."""

    def __init__(self, stage: Stage, checks: Iterable[VerifyCheck[F]] = ()) -> None:
        self.stage = stage
        self._checks: list[VerifyCheck[F]] = list(checks)

    def check(self, name: str, *, judges: str, gate: bool = False) -> Callable[[Judge[F]], Judge[F]]:
        """Register the decorated function as the check ``name``; a name is registered once."""

        def register(judge: Judge[F]) -> Judge[F]:
            if any(c.name == name for c in self._checks):
                msg = f"the verify check {name!r} is registered twice"
                raise ValueError(msg)
            self._checks.append(VerifyCheck(name=name, judges=judges, stage=self.stage, judge=judge, gate=gate))
            return judge

        return register

    def __iter__(self) -> Iterator[VerifyCheck[F]]:
        return iter(tuple(self._checks))

    def __add__(self, other: Registry[F]) -> Registry[F]:
        return Registry(self.stage, [*self._checks, *other._checks])

    def run(self, facts: F) -> list[Check]:
        """Every check's results, in order; after a gate that failed, none of the rest."""
        results: list[Check] = []
        for check in self._checks:
            found = check.results(facts)
            results += found
            if check.gate and not all(c.ok for c in found):
                break
        return results
