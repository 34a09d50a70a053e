"""The end-of-run summary of ``dswheels build``: a terminal table and a GitHub job-summary table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dswheels.core.duration import format_duration

__all__ = ["CellOutcome", "render_results_markdown", "render_results_table"]


@dataclass(frozen=True, slots=True)
class CellOutcome:
    cell_id: str
    ok: bool
    wheel: str
    size: int
    sha256: str
    seconds: float
    ops: tuple[tuple[str, float | None], ...]  # op, compile seconds
    cache: str  # "ccache" | "sccache" | ""
    cache_hits: int | None
    cache_misses: int | None
    error: str
    log: str


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n / 1e3:.0f} kB"


def _cache(o: CellOutcome) -> str:
    if not o.cache:
        return "-"
    if o.cache_hits is None or o.cache_misses is None:
        return o.cache
    return f"{o.cache} {o.cache_hits}/{o.cache_hits + o.cache_misses} hits"


def _ops(o: CellOutcome) -> str:
    return ", ".join(f"{name} {format_duration(s)}" if s is not None else name for name, s in o.ops)


def render_results_table(results: Sequence[CellOutcome], *, skipped: Sequence[str] = ()) -> str:
    """Plain text for the terminal.

    >>> o = CellOutcome(cell_id="ds0.19.8-torch2.13-cpu-cp311-linux_x86_64", ok=True, wheel="w.whl", size=2_300_000,
    ...     sha256="ab" * 32, seconds=75.0, ops=(("cpu_adam", 60.0),), cache="ccache", cache_hits=0, cache_misses=2,
    ...     error="", log="")
    >>> print(render_results_table([o]), end="")
    <BLANKLINE>
    built 1 of 1 cell(s)
      ok  ds0.19.8-torch2.13-cpu-cp311-linux_x86_64  1m15s  2.3 MB  ccache 0/2 hits
          w.whl
          ops: cpu_adam 1m00s
    """
    ok = sum(1 for r in results if r.ok)
    lines = ["", f"built {ok} of {len(results) + len(skipped)} cell(s)"]
    for r in results:
        if r.ok:
            lines.append(f"  ok  {r.cell_id}  {format_duration(r.seconds)}  {_size(r.size)}  {_cache(r)}")
            lines.append(f"      {r.wheel}")
            lines.append(f"      ops: {_ops(r)}")
        else:
            lines.append(f"  FAILED  {r.cell_id}  after {format_duration(r.seconds)}: {r.error}")
            if r.log:
                lines.append(f"      log: {r.log}")
    lines.extend(f"  not built  {cid} (stopped after a failure; --keep-going builds the rest)" for cid in skipped)
    return "\n".join(lines) + "\n"


def render_results_markdown(results: Sequence[CellOutcome], *, skipped: Sequence[str] = ()) -> str:
    """A GitHub job-summary table (cibuildwheel's shape: wheel, size, sha256, time)."""
    lines = [
        "### dswheels build",
        "",
        "| cell | result | wheel | size | time | ops (compile time) | compiler cache |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if r.ok:
            lines.append(
                f"| `{r.cell_id}` | ok | `{r.wheel}`<br>sha256 `{r.sha256[:16]}…` | {_size(r.size)} | "
                f"{format_duration(r.seconds)} | {_ops(r)} | {_cache(r)} |",
            )
        else:
            error = r.error.replace("|", "\\|").replace("\n", " ")
            lines.append(f"| `{r.cell_id}` | **failed** | {error} | | {format_duration(r.seconds)} | | |")
    lines.extend(f"| `{cid}` | not built | | | | | |" for cid in skipped)
    return "\n".join(lines) + "\n"
