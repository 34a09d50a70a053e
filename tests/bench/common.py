"""Timing and reporting shared by the benchmarks."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Result:
    name: str
    ours: float
    naive: float
    unit: str = "s"
    target: str = ""

    @property
    def ratio(self) -> float:
        return self.ours / self.naive if self.naive else float("inf")

    def line(self) -> str:
        target = f"  (target {self.target})" if self.target else ""
        ours = f"ours {self.ours:10.3f}{self.unit}"
        naive = f"naive {self.naive:10.3f}{self.unit}"
        return f"{self.name:48} {ours}  {naive}  ratio {self.ratio:6.3f}{target}"


def best_of(fn: Callable[[], object], *, repeat: int = 3) -> float:
    """The fastest of ``repeat`` runs: the least disturbed by other work on the machine."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best
