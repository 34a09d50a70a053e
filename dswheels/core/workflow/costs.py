"""What a job costs in runner time: a model fed by measured compile seconds (compile_times.yml).

A job runs its fixed steps (checkout, Pythons, dswheels, the CUDA toolkit), then each cell: a
venv with its torch, the compile, post-processing and verify. The compile is where the hours
go, and most of it does not depend on Python: an op's ``.cu`` translation units include no
Python header, so in a job that builds several Pythons of one (DeepSpeed, torch, variant,
platform) only the first compiles them, once per arch; the later Pythons take them from the
compiler cache and compile only the C++ units (docs/costs.md). The work is spread over the
runner's cores, never faster than the longest op on its own units.

Pure: the caller loads ``compile_times.yml`` (:func:`parse_costs`) and passes the model in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

import yaml

from dswheels.core.model import PlannedCell
from dswheels.errors import ConfigError

__all__ = [
    "CAP_MINUTES",
    "CostModel",
    "JobEstimate",
    "OpCost",
    "OpSample",
    "RunnerCost",
    "estimate_job",
    "load_costs",
    "parse_costs",
    "refit_op",
    "render_op_line",
    "replace_op_lines",
]

# GitHub ends a hosted job at 6 hours; a job is planned to finish well before (the workflow's
# timeout-minutes is 355), leaving room for a slow runner and the steps after the build.
CAP_MINUTES = 360
BUDGET_MINUTES = 300
# A translation unit the compiler cache serves (a job that finishes from the cache): seconds
CACHED_UNIT = 2.0


@dataclass(frozen=True, slots=True)
class OpCost:
    host: float  # seconds of its C++ units, per Python
    device: float  # seconds of its .cu units for one arch, per cell group
    units: int  # translation units
    source: str = ""


@dataclass(frozen=True, slots=True)
class RunnerCost:
    cores: int
    setup: float  # seconds: the job's fixed steps
    cuda_setup: float  # seconds: the CUDA toolkit install
    per_cell: float  # seconds: a cell's venv, post-processing and verify
    speed: float  # compile seconds here per reference second
    source: str = ""


@dataclass(frozen=True, slots=True)
class CostModel:
    ops: Mapping[str, OpCost]
    default: OpCost
    runners: Mapping[str, RunnerCost]  # by OS: linux, windows
    budget_minutes: float = BUDGET_MINUTES

    def op(self, name: str) -> OpCost:
        return self.ops.get(name, self.default)


@dataclass(frozen=True, slots=True)
class JobEstimate:
    minutes: float  # the whole job
    compile_minutes: float
    cells: int
    first_compile_minutes: float  # the first cell of each group (every unit compiled)
    later_compile_minutes: float  # each later Python of a group, on average (C++ units only)

    def describe(self) -> str:
        return f"~{self.minutes:.0f} min (compile {self.compile_minutes:.0f})"


def as_mapping(value: object, where: str) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
    return {str(k): v for k, v in value.items()}


def _num(data: Mapping[str, object], key: str, where: str, *, least: float = 0) -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < least:
        raise ConfigError(f"{where}: {key} must be a number >= {least:g}, got {value!r}")
    return float(value)


def _op_cost(value: object, where: str) -> OpCost:
    data = as_mapping(value, where)
    return OpCost(
        host=_num(data, "host", where),
        device=_num(data, "device", where),
        units=int(_num(data, "units", where, least=1)),
        source=str(data.get("from", "")),
    )


def _runner(value: object, where: str) -> RunnerCost:
    data = as_mapping(value, where)
    return RunnerCost(
        cores=int(_num(data, "cores", where, least=1)),
        setup=_num(data, "setup", where),
        cuda_setup=_num(data, "cuda_setup", where),
        per_cell=_num(data, "per_cell", where),
        speed=_num(data, "speed", where),
        source=str(data.get("from", "")),
    )


def parse_costs(data: object, *, where: str = "compile_times.yml") -> CostModel:
    """The model from compile_times.yml's parsed YAML."""
    top = as_mapping(data, where)
    if top.get("schema") != 1:
        raise ConfigError(f"{where}: schema must be 1")
    runners = {str(k): _runner(v, f"{where}: runners.{k}") for k, v in as_mapping(top["runners"], where).items()}
    ops = {str(k): _op_cost(v, f"{where}: ops.{k}") for k, v in as_mapping(top["ops"], where).items()}
    return CostModel(ops=ops, default=_op_cost(top["default"], f"{where}: default"), runners=runners)


@cache
def load_costs() -> CostModel:
    """The shipped measurements (package data ``compile_times.yml``), parsed once per process."""
    text = resources.files("dswheels").joinpath("compile_times.yml").read_text(encoding="utf-8")
    return parse_costs(yaml.safe_load(text))


def _group_key(item: PlannedCell) -> tuple[object, ...]:
    cell = item.cell
    return (cell.deepspeed, cell.torch, cell.variant, cell.platform)


def estimate_job(
    items: Sequence[PlannedCell],
    model: CostModel,
    *,
    ops: Sequence[str] = (),
    cached: bool = False,
) -> JobEstimate:
    """Runner minutes of one job building ``items`` (their planned ops, or just ``ops``).

    ``cached``: every unit comes from the compiler cache (a job that finishes what part jobs
    compiled). Cells of one group share their ``.cu`` units: the first compiles them.
    """
    runner = model.runners[items[0].cell.platform.os]
    setup = runner.setup + (runner.cuda_setup if any(i.cell.variant.is_cuda for i in items) else 0.0)
    seen: set[tuple[object, ...]] = set()
    work = longest = first = later = 0.0
    n_later = 0
    for item in items:
        names = list(ops) or list(item.ops.build_names)
        archs = len(item.toolchain.arch_list)
        is_first = _group_key(item) not in seen
        seen.add(_group_key(item))
        cell_work = 0.0
        for name in names:
            cost = model.op(name)
            if cached:
                op_work = CACHED_UNIT * cost.units
            else:
                op_work = (cost.host + (cost.device * archs if is_first else 0.0)) * runner.speed
            cell_work += op_work
            slots = min(runner.cores, cost.units * max(1, archs))
            longest = max(longest, op_work / slots)
        work += cell_work
        if is_first:
            first = max(first, cell_work / runner.cores)
        else:
            later += cell_work / runner.cores
            n_later += 1
    compile_seconds = max(work / runner.cores, longest)
    total = setup + runner.per_cell * len(items) + compile_seconds
    return JobEstimate(
        minutes=total / 60,
        compile_minutes=compile_seconds / 60,
        cells=len(items),
        first_compile_minutes=first / 60,
        later_compile_minutes=(later / n_later / 60) if n_later else 0.0,
    )


# --- refitting from real build manifests --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OpSample:
    """One op's compile in one real build: its units' seconds, the archs, nvcc's arch threads."""

    op: str
    units: tuple[tuple[str, float], ...]  # (source, seconds)
    archs: int
    nvcc_threads: int
    where: str  # which build (the cell id)


def refit_op(samples: Sequence[OpSample]) -> OpCost:
    """An op's cost from samples: the median over builds of host seconds and of .cu seconds per arch.

    nvcc compiles ``nvcc_threads`` archs of one unit at once, so a unit's wall seconds times its
    threads, over its archs, is what one arch costs one core.

    >>> s = OpSample("fused_adam", (("a.cpp", 51.0), ("k.cu", 52.0)), archs=1, nvcc_threads=1, where="x")
    >>> refit_op([s])
    OpCost(host=51.0, device=52.0, units=2, source='refit from 1 build(s): x')
    """
    hosts, devices = [], []
    for sample in samples:
        threads = max(1, min(sample.nvcc_threads, sample.archs))
        hosts.append(sum(s for src, s in sample.units if not src.endswith(".cu")))
        cu = sum(s for src, s in sample.units if src.endswith(".cu"))
        devices.append(cu * threads / sample.archs if sample.archs else 0.0)

    def median(values: list[float]) -> float:
        ordered = sorted(values)
        mid = len(ordered) // 2
        return round(ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2, 1)

    names = sorted({s.where for s in samples})
    return OpCost(
        host=median(hosts),
        device=median(devices),
        units=max(len(s.units) for s in samples),
        source=f"refit from {len(samples)} build(s): {', '.join(names[:3])}{' ...' if len(names) > 3 else ''}",
    )


def render_op_line(name: str, cost: OpCost) -> str:
    """One ``ops:`` line of compile_times.yml."""
    source = cost.source.replace('"', "'")
    return f'  {name}: {{host: {cost.host:g}, device: {cost.device:g}, units: {cost.units}, from: "{source}"}}'


def replace_op_lines(text: str, fitted: Mapping[str, OpCost]) -> str:
    """compile_times.yml with the lines of the ``fitted`` ops replaced (new ops added at the end of ``ops:``)."""
    lines = text.splitlines()
    start = lines.index("ops:")
    end = next((i for i in range(start + 1, len(lines)) if lines[i] and not lines[i].startswith(" ")), len(lines))
    todo = dict(fitted)
    for i in range(start + 1, end):
        name = lines[i].strip().split(":", 1)[0]
        if lines[i].startswith("  ") and not lines[i].startswith("   ") and name in todo:
            lines[i] = render_op_line(name, todo.pop(name))
    added = [render_op_line(name, cost) for name, cost in sorted(todo.items())]
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    lines[end:end] = added
    return "\n".join(lines) + "\n"
