"""Build one planned cell into a verified, post-processed wheel with its manifest.

The steps, in order, each in the module that owns it:

1. check the toolchain on the host the cell's platform chose for this machine: the plan's nvcc, and MSVC on
   Windows, or Wine and its MSVC root (:mod:`dswheels.platforms.hosts`);
2. fetch and verify the source, unpack it into a fresh short work directory and patch it
   (portable CPU baseline, no ``-g``, the files win32 needs; :mod:`~dswheels.building.effects.source_tree`);
3. get an interpreter with the cell's torch (:mod:`~dswheels.host.venvs`);
4. let the host put together what it runs (Wine's Windows toolchain), and set up the compile's environment:
   PATH, compilers, compiler cache (:mod:`~dswheels.building.effects.compile_tools`);
5. check with DeepSpeed's own op builders that every planned op exists, is compatible and has
   flags the compilers accept (:mod:`~dswheels.building.effects.op_sources_asked`);
6. run ``python -m build --wheel --no-isolation`` with per-op progress (:mod:`~dswheels.building.effects.compile`);
7. check that every planned op is in ``installed_ops`` with its extension, post-process (strip,
   torch pin, RECORD; :mod:`~dswheels.building.effects.postprocess`) and check the code against the CPU
   baseline and the arch list (:mod:`~dswheels.building.effects.wheel_checks`);
8. assemble the manifest (:mod:`~dswheels.building.effects.manifest_assembly`) and move the wheel and its manifest
   into ``<out>/<variant>/`` (:mod:`~dswheels.host.wheelhouse`).

With ``prepare_only`` the build stops after step 3. A failure anywhere raises the right
:mod:`dswheels.kernel.errors` class naming the op, the log tail and the log path, and leaves no wheel
of this cell in ``<out>``. The cache is the one the command made (:class:`~dswheels.host.cache.CacheLayout`);
the environment is read once per cell.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from dswheels.building.effects.cell_log import log_note, write_log_header
from dswheels.building.effects.compile import compile_wheel, the_wheel
from dswheels.building.effects.compile_tools import CompileEnv, compile_environment, inherited_env
from dswheels.building.effects.compiler_cache import cache_stats
from dswheels.building.effects.emulated import build_in_machine
from dswheels.building.effects.floor_tag import as_built_here, tag_with_floor
from dswheels.building.effects.jobserver import jobserver, ninja_joins_jobservers
from dswheels.building.effects.manifest_assembly import assemble_manifest
from dswheels.building.effects.op_flags_asked import check_tree_flags
from dswheels.building.effects.op_sources_asked import probe_ops
from dswheels.building.effects.postprocess import Postprocessed, postprocess_wheel
from dswheels.building.effects.source_tree import patch_tree, prepare_source
from dswheels.building.effects.wheel_checks import check_planned_ops, check_postprocessed
from dswheels.building.effects.workdir import set_aside, wipe, work_dir_for
from dswheels.building.output_reading import OpSources
from dswheels.building.parallelism import Parallelism, pooled_parallelism, split_parallelism
from dswheels.building.summary import OpOutcome
from dswheels.host.clock import monotonic, utc_now
from dswheels.host.files import exclusive, read_bounded
from dswheels.host.log import get_reporter
from dswheels.host.machine import host_machine, host_os
from dswheels.host.venvs import Interpreter, InterpreterMode, prepare_interpreter, torch_index_args
from dswheels.host.wheel_file import WheelContents
from dswheels.host.wheelhouse import discard_wheel, place_wheel, remove_stale_of_cell
from dswheels.kernel.binaries.linux_runtime import RuntimeFloor
from dswheels.kernel.compat import Compat
from dswheels.kernel.errors import BuildError, DswheelsError
from dswheels.kernel.isa_variants import extension_levels
from dswheels.kernel.locations import WHEELHOUSE
from dswheels.kernel.manifest import Manifest, ManifestError, parse_manifest
from dswheels.kernel.model import PlannedCell
from dswheels.kernel.naming import cell_id
from dswheels.kernel.platform_traits import traits
from dswheels.kernel.sources import TorchSource, TorchSourceKind
from dswheels.kernel.versions import format_version
from dswheels.plan.compiler_cache_keys import CacheTool, CompilerCacheChoice, SccacheSettings, compile_family
from dswheels.plan.costs import cell_units, load_costs, op_order
from dswheels.platforms import platform_module
from dswheels.platforms.hosts import EmulatedMachine, HostChoice, HostKind, PlatformHost
from dswheels.stores.wheel_ref import MAX_MANIFEST_BYTES

if TYPE_CHECKING:
    from dswheels.host.cache import CacheLayout
    from dswheels.plan.effects.selection import CellSelection
    from dswheels.verify.step import VerifyOptions

# patch_tree, discard_wheel and work_dir_for are imported from here by the commands and the tests
__all__ = [
    "BuildOptions",
    "CellResult",
    "CellStatus",
    "build_cell",
    "cell_work_dir",
    "discard_wheel",
    "patch_tree",
    "work_dir_for",
    "work_root",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class BuildOptions:
    """``dswheels build``'s options, made once from its arguments; the run (building/step.py) and every
    cell's build read them as they are."""

    selection: CellSelection
    ops: tuple[str, ...] = ()  # build only these of the planned ops; (): every planned op
    out_dir: Path = WHEELHOUSE  # wheels go to OUT/<variant>/
    work_dir: Path | None = None  # sources unpacked and built (None: CACHE/w)
    jobs: int | None = None  # concurrent compiles in all (None: what this machine holds)
    parallel_ops: int = 0  # extensions built at once (0: as many as --jobs allows)
    interpreter: InterpreterMode = InterpreterMode.AUTO
    torch_source: TorchSource = field(default_factory=lambda: TorchSource(TorchSourceKind.PLAN))
    compiler_cache: CompilerCacheChoice = CompilerCacheChoice.AUTO
    sccache: SccacheSettings = field(default_factory=SccacheSettings)  # where sccache keeps its objects
    debug_symbols: bool = False
    keep_work: bool = False
    prepare_only: bool = False  # stop before the compile: source, patches, interpreter (any OS)
    pypi: str | None = None  # PyPI JSON API for DeepSpeed (None: compat.yml's)
    verbose: bool = False  # stream the compiler output (always in the log file)
    keep_going: bool = False  # build the other cells after a failure
    verify: VerifyOptions | None = None  # verify every built wheel (a failing one is removed)
    install: bool = False  # the one cell will be installed here (install_here)
    hosts: HostChoice = field(default_factory=HostChoice)  # how other OSes' cells are built here (Wine): unread


class CellStatus(Enum):
    """How one cell's build ended."""

    BUILT = "built"  # its wheel and manifest are in OUT/<variant>/
    PREPARED = "prepared"  # --prepare-only: its source tree is ready to compile
    FAILED = "failed"  # ``error`` says why; no wheel of the cell is left in OUT


@dataclass(frozen=True, kw_only=True, slots=True)
class CellResult:
    """One cell's build: its status, why it failed, how long it took, and what it left."""

    cell_id: str
    planned: PlannedCell
    status: CellStatus
    duration: float  # seconds
    error: DswheelsError | None = None  # status FAILED: the reason
    log_path: Path | None = None
    wheel: Path | None = None  # status BUILT
    manifest: Path | None = None
    manifest_data: Manifest | None = None
    prepared: Path | None = None  # status PREPARED: the patched source tree, ready to compile
    op_outcomes: tuple[OpOutcome, ...] = ()  # after a compile: each op's fate

    @property
    def ok(self) -> bool:
        return self.status is not CellStatus.FAILED

    @property
    def reason(self) -> str:
        return self.error.message if self.error is not None else ""


@dataclass(slots=True)
class _Progress:
    """What a build learnt before it ended, failed or not: each op's fate once the compile ran."""

    op_outcomes: tuple[OpOutcome, ...] = ()


def work_root(options: BuildOptions, cache: CacheLayout) -> Path:
    """Where the work directories are: ``--work-dir``, else the cache's."""
    return (options.work_dir or cache.work).expanduser().resolve()


_OWNER = "cell.txt"  # in a work directory: the cell whose build made it


@dataclass(frozen=True, slots=True)
class _Cell:
    """One cell's build: the run's options and cache, the environment it inherits, and what the run resolved
    once for all its cells."""

    planned: PlannedCell
    options: BuildOptions
    cache: CacheLayout
    environ: Mapping[str, str]  # read once, when the cell's build starts
    compat: Compat
    jobs: int
    work_root: Path
    platform_host: PlatformHost  # where the cell's platform builds it from this machine

    def monotonic(self) -> float:
        return monotonic()


def cell_work_dir(planned: PlannedCell, root: Path, *, prepare_only: bool) -> Path:
    """One directory for every cell of the compile family (every DeepSpeed, torch and Python of one
    toolkit, compiler and arch list): the same paths, so the compiler cache hits (--prepare-only
    compiles nothing and leaves each cell's tree: one directory per cell)."""
    return work_dir_for(root, cell_id(planned.cell) if prepare_only else compile_family(planned))


def _work_dir(cell: _Cell) -> Path:
    return cell_work_dir(cell.planned, cell.work_root, prepare_only=cell.options.prepare_only)


def build_cell(
    planned: PlannedCell, options: BuildOptions, cache: CacheLayout, *, compat: Compat, jobs: int
) -> CellResult:
    """Build one cell with ``jobs`` concurrent compiles; never raises a :class:`DswheelsError` (it is in the
    result)."""
    environ = MappingProxyType(dict(os.environ))
    planned = as_built_here(planned, environ)  # a container cell built elsewhere keeps only its own tag
    platform_host = platform_module(planned.cell.platform).host(options.hosts, here=host_os(), machine=host_machine())
    cell = _Cell(planned, options, cache, environ, compat, jobs, work_root(options, cache), platform_host)
    cid = cell_id(planned.cell)
    stamp = utc_now().strftime("%Y%m%dT%H%M%SZ")
    log = (options.out_dir / "logs" / f"{cid}-{stamp}.log").resolve()
    progress = _Progress()
    start = cell.monotonic()
    reporter = get_reporter()

    def ended(status: CellStatus) -> CellResult:
        """What every outcome says: the cell, its status, its log and how long it took."""
        return CellResult(cell_id=cid, planned=planned, status=status, duration=cell.monotonic() - start, log_path=log)

    try:
        with reporter.group(f"{cid}: {'prepare' if options.prepare_only else 'build'}"):
            reporter.info(f"log: {log}")
            # a cell of another CPU is built whole in an emulated machine of it (qemu), by dswheels there
            machine = None if options.prepare_only else platform_host.machine(cache=cache, log=log)
            built: tuple[Path, Path, Manifest] | Path
            if machine is not None:
                built = _build_in(cell, machine, log)
            else:
                # two builds of one family share its work directory: the second waits for the first
                work = _work_dir(cell)
                with exclusive(work.with_name(f".{work.name}.lock"), what=f"building {cid}", error=BuildError):
                    built = _build_keeping_failed_tree(cell, log, start, progress)
    except DswheelsError as raised:
        exc = raised if str(log) in (raised.hint or "") else raised.with_hint(f"full log: {log}")
        remove_stale_of_cell(options.out_dir / planned.cell.variant.name, planned.cell)
        if log.parent.exists():
            log_note(log, f"FAILED: {exc.message}")
        return replace(ended(CellStatus.FAILED), error=exc, op_outcomes=progress.op_outcomes)
    if isinstance(built, Path):
        return replace(ended(CellStatus.PREPARED), prepared=built)
    wheel, manifest, manifest_data = built
    return replace(
        ended(CellStatus.BUILT),
        wheel=wheel,
        manifest=manifest,
        manifest_data=manifest_data,
        op_outcomes=progress.op_outcomes,
    )


def _build_in(cell: _Cell, machine: EmulatedMachine, log: Path) -> tuple[Path, Path, Manifest]:
    """The cell built in ``machine`` (:mod:`dswheels.building.effects.emulated`): its wheel and manifest."""
    log.parent.mkdir(parents=True, exist_ok=True)
    write_log_header(log, cell.planned)
    opts = cell.options
    wheel, manifest = build_in_machine(
        machine,
        cell.planned,
        out=opts.out_dir,
        cache=cell.cache,
        ops=opts.ops,
        jobs=cell.jobs,
        torch_source=opts.torch_source,
        debug_symbols=opts.debug_symbols,
        pypi=opts.pypi,
        log=log,
    )
    try:
        data = parse_manifest(read_bounded(manifest, limit=MAX_MANIFEST_BYTES).decode("utf-8"))
    except (ManifestError, OSError, ValueError) as exc:
        raise BuildError(f"{manifest}: {exc}", hint=f"the build in the emulated machine logged to {log}") from None
    return wheel, manifest, data


def _build_keeping_failed_tree(
    cell: _Cell, log: Path, start: float, progress: _Progress
) -> tuple[Path, Path, Manifest] | Path:
    """:func:`_build`; when it fails, the next cell of the family would wipe the work directory: keep it aside."""
    planned = cell.planned
    try:
        return _build(cell, log, start, progress)
    except DswheelsError as exc:
        work = _work_dir(cell)
        owner = work / _OWNER
        ours = (
            owner.is_file()
            and owner.read_text(encoding="utf-8") == cell_id(planned.cell)
            and not cell.options.prepare_only
        )
        tag = f"torch{format_version(planned.cell.torch)}-{planned.cell.python.tag}"  # a cell of the family
        kept = set_aside(work, tag) if ours else None
        if kept is not None:
            noted = exc.with_hint(f"the build tree is kept in {kept}")
            raise noted.with_traceback(exc.__traceback__) from exc.__cause__
        raise
    finally:
        cell.platform_host.finish(cache=cell.cache, env=cell.environ)


def _build(cell: _Cell, log: Path, start: float, progress: _Progress) -> tuple[Path, Path, Manifest] | Path:
    """The wheel, its manifest path and manifest; with ``prepare_only`` the prepared source tree."""
    planned, opts, cache = cell.planned, cell.options, cell.cache
    reporter = get_reporter()
    durations: dict[str, float] = {}
    write_log_header(log, planned)
    # toolchain: the plan's nvcc (and MSVC), checked before anything is downloaded, installed or compiled
    inherited = inherited_env(cell.environ)
    tools = cell.platform_host.check(planned, inherited, prepare_only=opts.prepare_only, cache=cache)
    work = _work_dir(cell)
    wipe(work)
    work.mkdir(parents=True)
    (work / _OWNER).write_text(cell_id(planned.cell), encoding="utf-8")  # whose tree it is (set aside if it fails)
    parallelism = split_parallelism(
        cell.jobs, ops=len(planned.ops.build), archs=len(planned.toolchain.arch_list), parallel=opts.parallel_ops
    )

    t0 = cell.monotonic()
    source = prepare_source(
        planned,
        src=work / "src",
        compat=cell.compat,
        cache=cache,
        pypi_json=opts.pypi or cell.compat.sdist_json,
        debug_symbols=opts.debug_symbols,
        parallel=parallelism.at_once > 1,
        log=log,
    )
    durations["source"] = cell.monotonic() - t0
    reporter.info(f"source ready in {work} ({source.fetched.verified_by})")

    t0 = cell.monotonic()
    interp: Interpreter = prepare_interpreter(
        planned,
        mode=opts.interpreter,
        torch_source=opts.torch_source,
        venv_root=cache.venvs,
        log_file=log,
        # under Wine the build interpreter is Linux CPython answering as Windows: its platform differs
        foreign=tools.foreign_interpreter,
    )
    durations["interpreter"] = cell.monotonic() - t0
    if opts.prepare_only:
        # the flags the cell's compilers will get, judged with stand-ins for its machine (raises BuildError)
        check_tree_flags(planned, interp.python, source.src, inherited, log, stand_in=True)
        log_note(log, f"prepared {source.src} with {interp.python}; stopped before the compile (--prepare-only)")
        reporter.info(f"prepared {source.src}: the source is verified and patched for {planned.cell.platform.value}")
        return source.src

    parallelism = _pooled(parallelism, cell, interp)
    cross = tools.assemble(
        planned,
        compat=cell.compat,
        work=work,
        cache=cache,
        interp=interp,
        index_args=torch_index_args(opts.torch_source, planned.torch_index),
        log=log,
    )
    setup = compile_environment(
        planned,
        interp=interp,
        work=work,
        inherited=inherited,
        tools=tools,
        parallelism=parallelism,
        compiler_cache=opts.compiler_cache,
        sccache=opts.sccache,
        debug_symbols=opts.debug_symbols,
        log=log,
        cross=cross,
    )
    # the interpreter the build's scripts run in: under Wine, the build interpreter answering as Windows
    python = cross.python if cross is not None else interp.python
    accelerator, ops = probe_ops(planned, python, source.src, setup.env, log)

    t0 = cell.monotonic()
    with jobserver(parallelism.pool, work) if parallelism.pool else nullcontext() as pool:
        setup = _scheduled(setup, planned, ops, pool.env() if pool else {}, log)
        compiled = compile_wheel(
            planned,
            python=python,
            src=source.src,
            dist=work / "dist",
            ops=ops,
            env=setup.env,
            log=log,
            verbose=opts.verbose,
        )
    durations["compile"] = cell.monotonic() - t0
    if compiled.cpu_seconds is not None and not (setup.cache and setup.cache.tool is CacheTool.SCCACHE):
        # (sccache's server, not the build, runs the compilers: their CPU seconds are not the build's children's)
        durations["compile_cpu"] = compiled.cpu_seconds
    progress.op_outcomes = compiled.outcomes
    built = the_wheel(compiled, planned, log)
    # every planned op must really be in the wheel
    contents = check_planned_ops(planned, built, ops=ops, accelerator=accelerator, lines=compiled.lines, log=log)

    t0 = cell.monotonic()
    pp, runtime = _postprocess(cell, built, work=work, ops=ops, contents=contents, log=log)
    durations["postprocess"] = cell.monotonic() - t0

    stats = cache_stats(setup.cache, setup.env) if setup.cache else None
    if stats is not None:
        reporter.info(f"compiler cache: {stats.describe()}")
    durations["total"] = cell.monotonic() - start
    manifest = assemble_manifest(
        planned,
        source=source,
        interp=interp,
        setup=setup,
        accelerator=accelerator,
        ops=ops,
        names=contents.names,
        op_seconds=compiled.op_seconds,
        pp=pp,
        durations=durations,
        stats=stats,
        runtime=runtime,
    )
    final, manifest_path = place_wheel(
        opts.out_dir / planned.cell.variant.name, pp.wheel, debug_archive=pp.debug_archive, manifest=manifest
    )
    log_note(log, f"wrote {final} ({final.stat().st_size} bytes, sha256 {manifest.wheel.sha256})")
    if not opts.keep_work:
        shutil.rmtree(work, ignore_errors=True)
    return final, manifest_path, manifest


def _pooled(parallelism: Parallelism, cell: _Cell, interp: Interpreter) -> Parallelism:
    """One pool of slots for every op's units when the build's ninja joins a jobserver (>= 1.13) and
    ``--parallel-ops`` asks for nothing else."""
    if cell.options.parallel_ops:
        return parallelism
    scripts = {"PATH": os.pathsep.join([interp.info.scripts, cell.environ.get("PATH", "")])}
    if not ninja_joins_jobservers(scripts):
        return parallelism
    return pooled_parallelism(cell.jobs, ops=len(cell.planned.ops.build))


def _scheduled(
    setup: CompileEnv, planned: PlannedCell, ops: list[OpSources], pool: Mapping[str, str], log: Path
) -> CompileEnv:
    """The compile's environment with the order its extensions start in (longest first, by the cost model) and
    the jobserver they share (``pool``: its variables, or none)."""
    work = cell_units(planned, load_costs(), ops=[op.name for op in ops])
    modules = {op.name: op.extension_modules for op in ops}  # an op built per ISA level: its levels, best last
    longest = [m for name in op_order(work) if name in modules for m in reversed(modules[name])]
    order = {"DSWHEELS_EXT_ORDER": ",".join(longest), **pool}
    log_note(log, "compile order and slots:\n" + "\n".join(f"  {k}={v}" for k, v in order.items()))
    return replace(setup, env={**setup.env, **order}, set_by_dswheels={**setup.set_by_dswheels, **order})


def _postprocess(
    cell: _Cell,
    built: Path,
    *,
    work: Path,
    ops: list[OpSources],
    contents: WheelContents,
    log: Path,
) -> tuple[Postprocessed, RuntimeFloor | None]:
    """Strip, pin torch and rewrite RECORD into a staging directory, then check what the wheel's code needs."""
    planned, opts, reporter = cell.planned, cell.options, get_reporter()
    baseline = cell.compat.cpu_baselines[planned.toolchain.cpu_baseline]
    names = contents.names
    levels = extension_levels(contents.variants, names)  # each ISA variant is judged at its own level
    with reporter.group(f"{cell_id(planned.cell)}: post-process"):
        pp = postprocess_wheel(
            built,
            staging=work / "staged",
            torch=planned.cell.torch,
            strip=cell.platform_host.strips_symbols,
            keep_debug=opts.debug_symbols,
            forbidden_registers=baseline.forbidden_registers,
            variant_registers={m: cell.compat.cpu_baselines[level].forbidden_registers for m, level in levels.items()},
            forbidden_features=baseline.forbidden_features,
            log_file=log,
        )
        runtime = check_postprocessed(planned, pp, ops=ops, names=names, compat=cell.compat, levels=levels)
        # a Linux cell built natively: auditwheel (Linux only) judges its floor
        if traits(planned.cell.platform).runtime_floor and cell.platform_host.kind is HostKind.NATIVE:
            pp, _verdict = tag_with_floor(planned, pp, cell.compat, log=log)  # the floor in its tag (auditwheel)
        # an earlier build of the cell may have left its wheel under another tag
        remove_stale_of_cell(opts.out_dir / planned.cell.variant.name, planned.cell, keep=pp.wheel.name)
        if pp.stripped_bytes:
            reporter.info(f"stripped {pp.stripped_bytes / 1e6:.1f} MB of symbols")
    return pp, runtime
