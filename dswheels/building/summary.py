"""The end-of-run summary of ``dswheels build``: a terminal table and a GitHub job-summary table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from dswheels.kernel.duration import format_duration

__all__ = [
    "CellOutcome",
    "OpOutcome",
    "OpStatus",
    "cache_total",
    "op_outcomes",
    "render_results_markdown",
    "render_results_table",
]


class OpStatus(str, Enum):
    """What became of an op in a compile."""

    OK = "ok"
    FAILED = "failed"
    INTERRUPTED = "interrupted"  # started, not finished (another op's failure stopped the build)
    NOT_STARTED = "not started"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class OpOutcome:
    name: str
    status: OpStatus
    seconds: float | None = None


def op_outcomes(
    ops: Sequence[tuple[str, str]], *, done: Mapping[str, float], started: Sequence[str], blamed: Sequence[str]
) -> tuple[OpOutcome, ...]:
    """Each op's fate in a compile, from ``(name, module)`` pairs and what the build log showed.

    >>> [o.status.value for o in op_outcomes([("a", "m.a"), ("b", "m.b"), ("c", "m.c")], done={"m.a": 3.0},
    ...  started=["m.a", "m.b"], blamed=["b"])]
    ['ok', 'failed', 'not started']
    """
    out = []
    for name, module in ops:
        if module in done:
            out.append(OpOutcome(name, OpStatus.OK, done[module]))
        elif name in blamed:
            out.append(OpOutcome(name, OpStatus.FAILED))
        elif module in started:
            out.append(OpOutcome(name, OpStatus.INTERRUPTED))
        else:
            out.append(OpOutcome(name, OpStatus.NOT_STARTED))
    return tuple(out)


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
    op_outcomes: tuple[OpOutcome, ...] = ()  # a failed compile: every op's fate
    error_lines: tuple[str, ...] = ()  # a failed cell: the compiler's first error lines


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n / 1e3:.0f} kB"


def _cache(o: CellOutcome) -> str:
    if not o.cache:
        return "-"
    if o.cache_hits is None or o.cache_misses is None:
        return o.cache
    return f"{o.cache} {o.cache_hits}/{o.cache_hits + o.cache_misses} hits"


def cache_total(results: Sequence[CellOutcome]) -> str:
    """The job's compiler-cache hit rate over every cell that reports one ("" if none does).

    >>> o = CellOutcome(cell_id="a", ok=True, wheel="", size=0, sha256="", seconds=1.0, ops=(), cache="sccache",
    ...     cache_hits=3, cache_misses=1, error="", log="")
    >>> cache_total([o, o])
    'compiler cache (sccache): 6 of 8 compiles from the cache (75%) in 2 cell(s)'
    """
    counted = [r for r in results if r.cache and r.cache_hits is not None and r.cache_misses is not None]
    if not counted:
        return ""
    hits = sum(r.cache_hits or 0 for r in counted)
    total = hits + sum(r.cache_misses or 0 for r in counted)
    rate = f" ({hits / total:.0%})" if total else ""
    tools = ", ".join(sorted({r.cache for r in counted}))
    return f"compiler cache ({tools}): {hits} of {total} compiles from the cache{rate} in {len(counted)} cell(s)"


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
    if len(results) > 1 and (total := cache_total(results)):
        lines.append(total)
    return "\n".join(lines) + "\n"


def _failure_markdown(r: CellOutcome) -> list[str]:
    """A failed cell's ops and the compiler's first error lines, under the table."""
    lines = ["", f"#### `{r.cell_id}` failed", "", r.error.replace("\n", " ")]
    if r.op_outcomes:
        lines += ["", "| op | outcome |", "|---|---|"]
        for op in r.op_outcomes:
            status = f"**{op.status}**" if op.status is OpStatus.FAILED else op.status.value
            lines.append(f"| {op.name} | {status}{f' ({format_duration(op.seconds)})' if op.seconds else ''} |")
    if r.error_lines:
        lines += ["", "<details open><summary>first compiler errors</summary>", "", "```"]
        lines += [line.replace("```", "` ` `") for line in r.error_lines]
        lines += ["```", "", "</details>"]
    if r.log:
        lines += ["", f"full log: `{r.log}` (in the job's log and artifact)"]
    return lines


def render_results_markdown(results: Sequence[CellOutcome], *, skipped: Sequence[str] = ()) -> str:
    """A GitHub job-summary table (cibuildwheel's shape: wheel, size, sha256, time), then each failure."""
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
    if total := cache_total(results):
        lines += ["", total]
    for r in results:
        if not r.ok:
            lines += _failure_markdown(r)
    return "\n".join(lines) + "\n"
