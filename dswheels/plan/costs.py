"""What a job costs in runner time: a model fed by measured figures (compile_times.yml).

A job runs its fixed steps (checkout, Pythons, dswheels, the CUDA toolkit), then each cell, one
after the other: a venv with its torch, the compile, post-processing and verify. The compile is
where the hours go. Each translation unit of an op has a **scope** (dswheels.plan.scopes,
probed from DeepSpeed's sources): a unit that reaches a Python header is compiled for every
Python; one that reaches only torch's headers once per torch minor of the job; one that reaches
neither once per job (every torch and Python of the toolkit). A unit the job compiled before
comes from the compiler cache at a small lookup cost.

Within one cell the build runs its ops longest first (by this model), every unit of every op
drawing on one pool of compile slots, the runner's cores (a jobserver: dswheels.building.effects.jobserver):
:func:`compile_makespan` simulates that schedule, and the job's compile is the sum over its cells.

Every figure says where it comes from (:class:`Figure`): ``measured`` (a real build or run, and
where), ``probed`` (DeepSpeed's own op builders, from its sources), ``documented`` (a published
limit), ``chosen`` (this project's budget), or ``assumed``. Pure: the caller loads
``compile_times.yml`` (:func:`parse_costs`) and passes the model in.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

import yaml

from dswheels.kernel.errors import ConfigError
from dswheels.kernel.model import PlannedCell, Platform
from dswheels.plan.scopes import Scope

__all__ = [
    "CAP_MINUTES",
    "STATUSES",
    "CostModel",
    "Figure",
    "JobEstimate",
    "OpCost",
    "OpSample",
    "RunnerCost",
    "Units",
    "WorkflowCost",
    "cell_units",
    "compile_makespan",
    "estimate_job",
    "load_costs",
    "op_order",
    "parse_costs",
    "refit_op",
    "render_op_line",
    "replace_op_lines",
]

# GitHub ends a hosted job at 6 hours; the plan keeps every job well under it (compile_times.yml's
# workflow.job_budget): a slow runner, a re-run and the steps after the build still fit.
CAP_MINUTES = 360
# where a figure comes from, in the order a reader trusts them
STATUSES = ("measured", "probed", "documented", "chosen", "assumed")


@dataclass(frozen=True, slots=True)
class Figure:
    """One number of the model with where it comes from."""

    value: float
    status: str  # one of STATUSES
    source: str

    def describe(self) -> str:
        return f"{self.status}: {self.source}"


@dataclass(frozen=True, slots=True)
class Units:
    """An op's translation units by kind (C++ ``host``, ``.cu`` ``device``) and scope."""

    host: Mapping[Scope, int]
    device: Mapping[Scope, int]
    status: str = "assumed"
    source: str = ""

    @property
    def host_count(self) -> int:
        return sum(self.host.values())

    @property
    def device_count(self) -> int:
        return sum(self.device.values())

    @property
    def count(self) -> int:
        return self.host_count + self.device_count


@dataclass(frozen=True, slots=True)
class Seconds:
    """An op's compile seconds on one core: ``host`` all its C++ units, ``device`` all its .cu units for ONE arch."""

    host: float
    device: float
    status: str
    source: str


@dataclass(frozen=True, slots=True)
class OpCost:
    linux: Seconds
    units: Units
    windows: Seconds | None = None  # measured on Windows (else the Linux seconds times the runner's speed)

    def seconds(self, os: str, runner: RunnerCost) -> tuple[float, float]:
        """(host, device per arch) seconds of one core of ``os``'s runner."""
        if os == "windows" and self.windows is not None:
            return self.windows.host, self.windows.device
        return self.linux.host * runner.speed.value, self.linux.device * runner.speed.value


NO_CONTAINER = Figure(0.0, "chosen", "no job on this runner runs in a container")


@dataclass(frozen=True, slots=True)
class RunnerCost:
    cores: Figure  # compile slots
    setup: Figure  # seconds: the job's fixed steps (checkout, Pythons, dswheels, MSVC)
    cuda_setup: Figure  # seconds: the CUDA toolkit install
    per_cell: Figure  # seconds: a cell's venv with its torch, post-processing and verify
    speed: Figure  # compile seconds here per Linux second (ops without their own figures for this OS)
    cached_unit: Figure  # seconds: a translation unit taken from the compiler cache
    container_setup: Figure = NO_CONTAINER  # seconds: a job's container (pulled, its gcc-toolset installed)

    def figures(self) -> dict[str, Figure]:
        names = ("cores", "setup", "cuda_setup", "per_cell", "speed", "cached_unit", "container_setup")
        return {name: getattr(self, name) for name in names}


@dataclass(frozen=True, slots=True)
class WorkflowCost:
    """What surrounds the build jobs of a release (wheels.yml), and the limits they run under."""

    concurrent_jobs: Figure  # jobs GitHub runs at once for the repository
    plan: Figure  # seconds: the plan job
    release: Figure  # seconds: the release job (attest and publish)
    pages: Figure  # seconds: the pages job (index every release, deploy)
    job_budget: Figure  # minutes: no job is planned longer
    tag_budget: Figure  # minutes: a tag's wheels, tag to index, by the model

    def figures(self) -> dict[str, Figure]:
        names = ("concurrent_jobs", "plan", "release", "pages", "job_budget", "tag_budget")
        return {name: getattr(self, name) for name in names}


@dataclass(frozen=True, slots=True)
class CostModel:
    ops: Mapping[str, OpCost]
    default: OpCost
    runners: Mapping[str, RunnerCost]  # by platform (linux_aarch64), else by OS: linux, windows
    workflow: WorkflowCost

    def op(self, name: str) -> OpCost:
        return self.ops.get(name, self.default)

    def runner_key(self, platform: Platform) -> str:
        """compile_times.yml's runner of ``platform``'s jobs: its own (``linux_aarch64``: the arm64 runners), else
        its OS's."""
        return platform.value if platform.value in self.runners else platform.os.value

    def runner(self, platform: Platform) -> RunnerCost:
        return self.runners[self.runner_key(platform)]

    @property
    def budget_minutes(self) -> float:
        return self.workflow.job_budget.value


@dataclass(frozen=True, slots=True)
class JobEstimate:
    minutes: float  # the whole job
    compile_minutes: float
    cells: int
    first_compile_minutes: float  # the first cell (every unit compiled)
    later_compile_minutes: float  # each later cell, on average
    work_minutes: float = 0.0  # the compile's work over the runner's slots: what a perfect schedule takes
    setup_minutes: float = 0.0  # the fixed steps and the toolkit
    checks_minutes: float = 0.0  # the cells' venvs, post-processing and verify

    def describe(self) -> str:
        return f"~{self.minutes:.0f} min (compile {self.compile_minutes:.0f})"


# --- reading compile_times.yml ------------------------------------------------------------------


def as_mapping(value: object, where: str) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
    return {str(k): v for k, v in value.items()}


def _number(value: object, where: str, *, least: float = 0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < least:
        raise ConfigError(f"{where}: must be a number >= {least:g}, got {value!r}")
    return float(value)


def _status(data: Mapping[str, object], where: str) -> tuple[str, str]:
    """The one status key of a figure (measured, probed, documented or assumed) and its source."""
    found = [(key, data[key]) for key in STATUSES if key in data]
    if len(found) != 1 or not isinstance(found[0][1], str) or not found[0][1].strip():
        raise ConfigError(
            f"{where}: needs exactly one of {', '.join(STATUSES)} saying where it comes from",
            hint='e.g. `measured: "this machine, 2 cores: ..."` or `assumed: "not yet measured"`',
        )
    return found[0][0], str(found[0][1])


def _figure(value: object, where: str, *, least: float = 0) -> Figure:
    data = as_mapping(value, where)
    status, source = _status(data, where)
    return Figure(_number(data.get("value"), f"{where}.value", least=least), status, source)


def _seconds(value: object, where: str) -> Seconds:
    data = as_mapping(value, where)
    status, source = _status(data, where)
    return Seconds(
        _number(data.get("host"), f"{where}.host"), _number(data.get("device"), f"{where}.device"), status, source
    )


def _scopes(value: object, where: str) -> dict[Scope, int]:
    data = as_mapping(value or {}, where)
    out: dict[Scope, int] = {}
    for key, count in data.items():
        try:
            scope = Scope(key)
        except ValueError:
            raise ConfigError(f"{where}: {key!r} is no scope (cell, torch, toolkit)") from None
        out[scope] = int(_number(count, f"{where}.{key}"))
    return out


def _units(value: object, where: str) -> Units:
    data = as_mapping(value, where)
    status, source = _status(data, where)
    units = Units(
        _scopes(data.get("host"), f"{where}.host"), _scopes(data.get("device"), f"{where}.device"), status, source
    )
    if units.count < 1:
        raise ConfigError(f"{where}: an op has at least one translation unit")
    return units


def _op_cost(value: object, where: str) -> OpCost:
    data = as_mapping(value, where)
    windows = data.get("windows")
    return OpCost(
        linux=_seconds(data, where),
        units=_units(data.get("units"), f"{where}.units"),
        windows=_seconds(windows, f"{where}.windows") if windows is not None else None,
    )


def _runner(value: object, where: str) -> RunnerCost:
    data = as_mapping(value, where)
    return RunnerCost(
        cores=_figure(data.get("cores"), f"{where}.cores", least=1),
        setup=_figure(data.get("setup"), f"{where}.setup"),
        cuda_setup=_figure(data.get("cuda_setup"), f"{where}.cuda_setup"),
        per_cell=_figure(data.get("per_cell"), f"{where}.per_cell"),
        speed=_figure(data.get("speed"), f"{where}.speed"),
        cached_unit=_figure(data.get("cached_unit"), f"{where}.cached_unit"),
        container_setup=(
            _figure(data["container_setup"], f"{where}.container_setup") if "container_setup" in data else NO_CONTAINER
        ),
    )


def _workflow(value: object, where: str) -> WorkflowCost:
    data = as_mapping(value, where)
    return WorkflowCost(
        concurrent_jobs=_figure(data.get("concurrent_jobs"), f"{where}.concurrent_jobs", least=1),
        plan=_figure(data.get("plan"), f"{where}.plan"),
        release=_figure(data.get("release"), f"{where}.release"),
        pages=_figure(data.get("pages"), f"{where}.pages"),
        job_budget=_figure(data.get("job_budget"), f"{where}.job_budget", least=1),
        tag_budget=_figure(data.get("tag_budget"), f"{where}.tag_budget", least=1),
    )


def parse_costs(data: object, *, where: str = "compile_times.yml") -> CostModel:
    """The model from compile_times.yml's parsed YAML."""
    top = as_mapping(data, where)
    if top.get("schema") != 2:
        raise ConfigError(f"{where}: schema must be 2")
    runners = {str(k): _runner(v, f"{where}: runners.{k}") for k, v in as_mapping(top.get("runners"), where).items()}
    if not {"linux", "windows"} <= set(runners):
        raise ConfigError(f"{where}: runners needs linux and windows")
    ops = {str(k): _op_cost(v, f"{where}: ops.{k}") for k, v in as_mapping(top.get("ops"), where).items()}
    return CostModel(
        ops=ops,
        default=_op_cost(top.get("default"), f"{where}: default"),
        runners=runners,
        workflow=_workflow(top.get("workflow"), f"{where}: workflow"),
    )


@cache
def load_costs() -> CostModel:
    """The shipped figures (package data ``compile_times.yml``), parsed once per process."""
    text = resources.files("dswheels").joinpath("compile_times.yml").read_text(encoding="utf-8")
    return parse_costs(yaml.safe_load(text))


# --- one cell's compile: units, order, schedule -------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Unit:
    op: str
    seconds: float


def cell_units(
    item: PlannedCell, model: CostModel, *, ops: Sequence[str] = (), have: frozenset[Scope] = frozenset()
) -> dict[str, list[float]]:
    """Each op's translation units for ``item`` in seconds of one core: compiled, or looked up in the cache.

    ``have``: the scopes the job compiled before this cell (``torch``: an earlier Python of the same
    torch; ``toolkit``: an earlier torch of the same toolkit, archs and compiler); their units come
    from the cache.
    """
    os = item.cell.platform.os
    runner = model.runner(item.cell.platform)
    archs = len(item.toolchain.arch_list)
    out: dict[str, list[float]] = {}
    for name in list(ops) or list(item.ops.build_names):
        cost = model.op(name)
        host, device = cost.seconds(os, runner)
        per_host = host / max(1, cost.units.host_count)
        per_device = device * archs / max(1, cost.units.device_count)
        units: list[float] = []
        # a CPU cell builds the CPU accelerator's ops: C++ only (its fused_adam has no .cu); the build starts an
        # op's .cu units first (dswheels.building.patches)
        kinds_of = (
            ((cost.units.device, per_device), (cost.units.host, per_host)) if archs else ((cost.units.host, per_host),)
        )
        for kinds, each in kinds_of:
            for scope, count in kinds.items():
                cached = scope in have
                units += [runner.cached_unit.value if cached else each] * count
        out[name] = units
    return out


def op_order(units: Mapping[str, Sequence[float]]) -> list[str]:
    """The ops longest first (the order a build starts them in), by their units' seconds."""
    return sorted(units, key=lambda name: (-sum(units[name]), name))


def compile_makespan(units: Mapping[str, Sequence[float]], slots: int) -> float:
    """Seconds the build's schedule takes: ops started longest first, units drawn from ``slots`` tokens.

    The build's shape (dswheels.building.effects.jobserver): one thread per op up to ``slots``, each
    holding a token while its op builds (its ninja's first job runs on it); every further unit of
    a running op takes a token of the same pool. A free token starts the next op first, then
    another unit of the running ops, the op started first first; an op's units start in the order
    given (the build starts the ``.cu`` units first).

    >>> compile_makespan({"a": [4, 4, 4, 4], "b": [2]}, 2)  # b's slot takes a's units once b is done
    10.0
    >>> compile_makespan({"a": [10]}, 4)
    10.0
    """
    slots = max(1, slots)
    queue = [name for name in op_order(units) if units[name]]
    pending = {name: list(units[name]) for name in queue}
    queue.reverse()  # pop() takes the longest
    running: list[tuple[float, int, str]] = []  # (end, order, op) heap
    active: list[str] = []  # ops started, in start order, with units still pending or running
    busy = dict.fromkeys(pending, 0)
    free, threads = slots, min(slots, len(queue))
    now, order = 0.0, 0
    while queue or running:
        # start ops on idle threads, then more units of the running ops, while tokens last
        while free and threads and queue:
            name = queue.pop()
            active.append(name)
            free -= 1
            threads -= 1
            heapq.heappush(running, (now + pending[name].pop(0), order, name))
            busy[name] += 1
            order += 1
        for name in active:
            while free and pending[name]:
                free -= 1
                heapq.heappush(running, (now + pending[name].pop(0), order, name))
                busy[name] += 1
                order += 1
        if not running:
            break
        now, _, name = heapq.heappop(running)
        busy[name] -= 1
        free += 1  # an extra unit's token, or (below) the op's own
        if busy[name] == 0 and not pending[name]:
            active.remove(name)
            threads += 1  # its thread's token is the one freed above
        elif busy[name] == 0:
            free -= 1  # the op keeps its own token for its next unit
            heapq.heappush(running, (now + pending[name].pop(0), order, name))
            busy[name] += 1
            order += 1
    return now


# --- a job --------------------------------------------------------------------------------------


def _group_key(item: PlannedCell) -> tuple[object, ...]:
    cell = item.cell
    return (cell.deepspeed, cell.torch, cell.variant, cell.platform)


def _toolkit_key(item: PlannedCell) -> tuple[object, ...]:
    cell, tc = item.cell, item.toolchain
    return (cell.deepspeed, cell.variant, cell.platform, tc.cuda_toolkit, tc.arch_list, tc.host_compiler)


def estimate_job(
    items: Sequence[PlannedCell],
    model: CostModel,
    *,
    ops: Sequence[str] = (),
    cached: bool = False,
) -> JobEstimate:
    """Runner minutes of one job building ``items`` in order (their planned ops, or just ``ops``).

    ``cached``: every unit comes from the compiler cache (a job that finishes what part jobs
    compiled).
    """
    runner = model.runner(items[0].cell.platform)
    slots = int(runner.cores.value)
    setup = runner.setup.value + (runner.cuda_setup.value if any(i.cell.variant.is_cuda for i in items) else 0.0)
    if items[0].toolchain.container:  # a Linux job in its floor's container (manylinux_2_28): pulled, set up
        setup += runner.container_setup.value
    groups: set[tuple[object, ...]] = set()
    toolkits: set[tuple[object, ...]] = set()
    compile_seconds = work = first = later = 0.0
    n_later = 0
    everything = frozenset(Scope)
    for index, item in enumerate(items):
        if cached:
            have = everything
        else:
            have = frozenset(
                [Scope.TORCH] * (_group_key(item) in groups) + [Scope.TOOLKIT] * (_toolkit_key(item) in toolkits)
            )
            if Scope.TORCH in have:
                have |= {Scope.TOOLKIT}
        groups.add(_group_key(item))
        toolkits.add(_toolkit_key(item))
        units = cell_units(item, model, ops=ops, have=have)
        seconds = compile_makespan(units, slots)
        compile_seconds += seconds
        work += sum(sum(u) for u in units.values()) / slots
        if index == 0:
            first = seconds
        else:
            later += seconds
            n_later += 1
    checks = runner.per_cell.value * len(items)
    return JobEstimate(
        minutes=(setup + checks + compile_seconds) / 60,
        compile_minutes=compile_seconds / 60,
        cells=len(items),
        first_compile_minutes=first / 60,
        later_compile_minutes=(later / n_later / 60) if n_later else 0.0,
        work_minutes=work / 60,
        setup_minutes=setup / 60,
        checks_minutes=checks / 60,
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
    cpu_share: float = 1.0  # the share of a core each compile had (a shared machine: its cores over its load)
    scopes: Mapping[str, str] = field(default_factory=dict)  # source -> scope, as the build probed it


def refit_op(samples: Sequence[OpSample], *, measured_on: str = "") -> tuple[Seconds, Units | None]:
    """An op's seconds from samples: the median over builds of host seconds and of .cu seconds per arch,
    and its units by scope when the builds probed them.

    nvcc compiles ``nvcc_threads`` archs of one unit at once, so a unit's wall seconds times its
    threads, over its archs, is what one arch costs one core; on a shared machine, times the
    share of a core each compile had.

    >>> s = OpSample("fused_adam", (("a.cpp", 51.0), ("k.cu", 52.0)), archs=1, nvcc_threads=1, where="x")
    >>> refit_op([s])[0]
    Seconds(host=51.0, device=52.0, status='measured', source='refit from 1 build(s): x')
    """
    hosts, devices = [], []
    for sample in samples:
        threads = max(1, min(sample.nvcc_threads, sample.archs))
        hosts.append(sample.cpu_share * sum(s for src, s in sample.units if not src.endswith(".cu")))
        cu = sum(s for src, s in sample.units if src.endswith(".cu"))
        devices.append(sample.cpu_share * cu * threads / sample.archs if sample.archs else 0.0)

    def median(values: list[float]) -> float:
        ordered = sorted(values)
        mid = len(ordered) // 2
        return round(ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2, 1)

    names = sorted({s.where for s in samples})
    source = f"refit from {len(samples)} build(s): {', '.join(names[:3])}{' ...' if len(names) > 3 else ''}"
    shares = sorted({round(s.cpu_share, 2) for s in samples if s.cpu_share < 1})
    if shares:
        source += f", seconds x {'/'.join(f'{s:g}' for s in shares)} (the share of a core each compile had)"
    if measured_on:
        source += f"; {measured_on}"
    seconds = Seconds(host=median(hosts), device=median(devices), status="measured", source=source)
    probed = next((s for s in samples if s.scopes), None)
    units = None
    if probed is not None:
        host: dict[Scope, int] = {}
        device: dict[Scope, int] = {}
        for src, scope in probed.scopes.items():
            kinds = device if src.endswith(".cu") else host
            kinds[Scope(scope)] = kinds.get(Scope(scope), 0) + 1
        units = Units(host, device, "probed", f"DeepSpeed's op builders in {probed.where}")
    return seconds, units


def _scope_map(counts: Mapping[Scope, int]) -> str:
    return "{" + ", ".join(f"{scope.value}: {n}" for scope, n in sorted(counts.items()) if n) + "}"


def _quote(text: str) -> str:
    return '"' + text.replace('"', "'") + '"'


def _units_text(units: Units) -> str:
    parts = [f"host: {_scope_map(units.host)}"] if units.host_count else []
    parts += [f"device: {_scope_map(units.device)}"] if units.device_count else []
    return "{" + ", ".join([*parts, f"{units.status}: {_quote(units.source)}"]) + "}"


def render_op_line(name: str, cost: OpCost) -> str:
    """One ``ops:`` line of compile_times.yml."""
    s = cost.linux
    text = f"  {name}: {{host: {s.host:g}, device: {s.device:g}, {s.status}: {_quote(s.source)}, "
    text += f"units: {_units_text(cost.units)}"
    if cost.windows is not None:
        w = cost.windows
        text += f", windows: {{host: {w.host:g}, device: {w.device:g}, {w.status}: {_quote(w.source)}}}"
    return text + "}"


def _op_lines(lines: Sequence[str]) -> tuple[int, int]:
    start = lines.index("ops:")
    end = next((i for i in range(start + 1, len(lines)) if lines[i] and not lines[i].startswith(" ")), len(lines))
    return start, end


def replace_op_lines(text: str, fitted: Mapping[str, OpCost]) -> str:
    """compile_times.yml with the lines of the ``fitted`` ops replaced (new ops added at the end of ``ops:``)."""
    lines = text.splitlines()
    start, end = _op_lines(lines)
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


def figures_used(model: CostModel, ops: Iterable[str], runners: Iterable[str]) -> list[tuple[str, Figure]]:
    """Every figure an estimate of these ops on these runners (:meth:`CostModel.runner_key`) reads, named as
    compile_times.yml names it."""
    used: list[tuple[str, Figure]] = [(f"workflow.{k}", v) for k, v in model.workflow.figures().items()]
    oses = sorted(set(runners))
    for os in oses:
        used += [(f"runners.{os}.{k}", v) for k, v in model.runners[os].figures().items()]
    for name in sorted(set(ops)):
        cost = model.op(name)
        key = f"ops.{name}" if name in model.ops else f"default (for {name})"
        s = cost.linux
        used.append((f"{key} seconds", Figure(s.host + s.device, s.status, s.source)))
        if "windows" in oses and cost.windows is not None:
            w = cost.windows
            used.append((f"{key}.windows seconds", Figure(w.host + w.device, w.status, w.source)))
        used.append((f"{key}.units", Figure(cost.units.count, cost.units.status, cost.units.source)))
    return used
