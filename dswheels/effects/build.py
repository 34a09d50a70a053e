"""Build one planned cell into a verified, post-processed wheel with its manifest.

The steps, each a reporter group: fetch and verify the source, unpack it into a fresh short
work directory, patch the op builder (portable CPU baseline, no ``-g``), get an interpreter
with the cell's torch, find the toolchain (the plan's nvcc, compilers, compiler cache),
check with DeepSpeed's own op builders that every planned op exists and is compatible, run
``python -m build --wheel --no-isolation`` with per-op progress, check that every planned op
is in ``installed_ops`` with its extension, post-process (strip, CPU baseline proof, torch
pin, RECORD), then move the wheel and its manifest into ``<out>/<variant>/``.

A failure anywhere raises the right :mod:`dswheels.errors` class naming the op, the log
tail and the log path, and leaves no wheel of this cell in ``<out>``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dswheels import __version__
from dswheels.core.binaries.fatbin import GpuCode, arch_number
from dswheels.core.binaries.linux_runtime import RuntimeFloor, exceeds, floor_of
from dswheels.core.building.compiler_cache import CacheTool, SccacheSettings, sccache_backend
from dswheels.core.building.env import BuildSetup, CompilerCache, baseline_flag, build_env, dist_extra_config
from dswheels.core.building.log import (
    CacheStats,
    OpSources,
    extension_started,
    failing_ops,
    failure_excerpt,
    parse_ccache_stats_log,
    parse_ninja_log,
    parse_sccache_stats,
    unit_seconds,
)
from dswheels.core.building.parallelism import split_parallelism
from dswheels.core.building.patches import (
    BUILDER_FILES,
    DEBUG_FLAG_FILES,
    PatchError,
    patch_debug_flags,
    patch_parallel_extensions,
    patch_portable_cpu,
    patch_torch_requirement,
)
from dswheels.core.building.report import OpOutcome, op_outcomes
from dswheels.core.compat import Compat
from dswheels.core.model import PlannedCell
from dswheels.core.naming import cell_id, wheel_filename
from dswheels.core.sources import TorchSource, TorchSourceKind
from dswheels.core.versions import format_version
from dswheels.core.wheel.contents import check_ops, extension_for_module, torch_pin
from dswheels.core.wheel.manifest import BuiltOp, FileInfo, Manifest, manifest_name, render_manifest
from dswheels.effects import proc
from dswheels.effects.clock import monotonic, utc_now
from dswheels.effects.files import exclusive, sha256_file, write_text_atomic
from dswheels.effects.interpreter import Interpreter, prepare_interpreter
from dswheels.effects.opflags import apply_flag_patches, check_tree_flags
from dswheels.effects.postprocess import postprocess_wheel
from dswheels.effects.sources import Downloader, FetchedSource, extract_archive, fetch_source
from dswheels.effects.toolchain import (
    CudaInstall,
    MsvcEnv,
    check_msvc,
    check_msvc_link,
    cuda_header_dirs,
    find_compiler_cache,
    find_cuda,
    pick_compilers,
    restart_sccache,
    tool_version,
)
from dswheels.effects.wheel import read_wheel
from dswheels.effects.workdir import group_id, link_site, set_aside, settle_header_times, wipe, work_dir_for
from dswheels.errors import BuildError, DswheelsError, EnvironmentMismatchError
from dswheels.log import format_duration, get_reporter
from dswheels.probes import op_sources

__all__ = ["BuildOptions", "CellResult", "build_cell", "discard_wheel", "patch_tree"]

OP_SOURCES_SCRIPT = Path(op_sources.__file__)

# Variables an outer environment may carry that would change which ops DeepSpeed builds or how:
# the plan decides them, so inherited values are dropped.
_SCRUB_PREFIXES = ("DS_BUILD_",)
_SCRUB = (
    "DS_ACCELERATOR",
    "DS_SKIP_CUDA_CHECK",
    "DS_ENABLE_NINJA",
    "DS_NVCC_THREADS",
    "TORCH_CUDA_ARCH_LIST",
    "NVCC_APPEND_FLAGS",
    "PYTORCH_NVCC",
    "CCACHE_STATSLOG",
    "DIST_EXTRA_CONFIG",
    "MAX_JOBS",
    "CC",
    "CXX",
)


@dataclass(frozen=True)
class BuildOptions:
    out_dir: Path
    cache_dir: Path
    work_root: Path
    compat: Compat
    jobs: int
    interpreter: str = "auto"  # auto | current | venv
    torch_source: TorchSource = field(default_factory=lambda: TorchSource(TorchSourceKind.PLAN))
    compiler_cache: str = "auto"  # auto | ccache | sccache | none
    sccache: SccacheSettings = field(default_factory=SccacheSettings)  # where sccache keeps its objects
    debug_symbols: bool = False
    keep_work: bool = False
    pypi_json: str = "https://pypi.org/pypi/deepspeed/json"
    verbose: bool = False  # stream the compiler output (always in the log file)
    parallel_ops: int = 0  # extensions built at once (0: as many as --jobs allows)
    prepare_only: bool = False  # stop before the compile: source, patches, interpreter (any OS)


@dataclass
class CellResult:
    cell_id: str
    planned: PlannedCell
    ok: bool = False
    wheel: Path | None = None
    manifest: Path | None = None
    manifest_data: Manifest | None = None
    error: DswheelsError | None = None
    log_path: Path | None = None
    seconds: float = 0.0
    prepared: Path | None = None  # --prepare-only: the patched source tree, ready to compile
    op_outcomes: tuple[OpOutcome, ...] = ()  # after a compile: each op's fate


class _OpTracker:
    """Per-op progress from the build's output: start lines, and extension files as they appear."""

    def __init__(self, ops: Sequence[OpSources], src: Path) -> None:
        self.ops = {op.module: op for op in ops}
        self.src = src
        self.started: list[str] = []
        self.start_wall: dict[str, float] = {}
        self.done: dict[str, float] = {}
        self.lines: list[str] = []
        self._last_check = 0.0
        self._lock = threading.Lock()
        # on_line runs in proc's reader thread, which does not see the context's reporter
        self._reporter = get_reporter()

    def _built_file(self, module: str) -> Path | None:
        folder = module.rpartition(".")[0].replace(".", "/")
        leaf = module.rpartition(".")[2]
        for lib in self.src.glob("build/lib*"):
            for path in (lib / folder).glob(f"{leaf}.*"):
                if path.suffix in (".so", ".pyd"):
                    return path
        return None

    def on_line(self, line: str) -> None:
        reporter = self._reporter
        with self._lock:
            self.lines.append(line)
            module = extension_started(line)
            if module is not None:
                self.started.append(module)
                self.start_wall[module] = time.time()
                op = self.ops.get(module)
                name = op.name if op else module
                reporter.info(f"  [{len(self.started)}/{len(self.ops)}] compiling {name} ...")
            now = time.time()
            if self.started and now - self._last_check >= 1.0:
                self._last_check = now
                self._poll()

    def _poll(self) -> None:
        for module in self.started:
            if module in self.done:
                continue
            path = self._built_file(module)
            if path is not None:
                seconds = max(0.0, path.stat().st_mtime - self.start_wall[module])
                self.done[module] = seconds
                op = self.ops.get(module)
                self._reporter.info(f"  {op.name if op else module} compiled in {format_duration(seconds)}")

    def finish(self) -> dict[str, float]:
        with self._lock:
            self._poll()
            return dict(self.done)


def _write_log_header(log: Path, planned: PlannedCell, lines: Sequence[str]) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"# dswheels {__version__} build of {cell_id(planned.cell)}, started {utc_now():%Y-%m-%dT%H:%M:%SZ}\n")
        for line in lines:
            fh.write(f"# {line}\n")


def _log_note(log: Path, text: str) -> None:
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"[{utc_now():%H:%M:%S}] dswheels: {text}\n")


def _add_windows_files(src: Path, files: Mapping[str, str]) -> list[str]:
    """Write what DeepSpeed's setup.py needs on win32 and its sdist leaves out (compat.yml ``windows_files``).

    Byte for byte as in DeepSpeed's git; a file the source already has (a git archive) is kept.
    """
    notes: list[str] = []
    for rel, text in files.items():
        path = src / rel
        if path.exists():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
        notes.append(f"added {rel} ({len(text.encode())} bytes): in DeepSpeed's git, not in its sdist; win32 needs it")
    return notes


def patch_tree(
    src: Path, planned: PlannedCell, compat: Compat, *, debug_symbols: bool, parallel: bool = False
) -> list[str]:
    """Apply the source patches; returns notes for the log (``parallel``: per-extension build dirs)."""
    baseline = compat.cpu_baselines[planned.toolchain.cpu_baseline]
    os_name = planned.cell.platform.os
    notes: list[str] = []
    seen: set[Path] = set()
    for rel in BUILDER_FILES:
        path = src / rel
        if not path.exists():
            continue
        real = path.resolve()
        if real in seen:
            continue
        seen.add(real)
        try:
            text = patch_portable_cpu(
                real.read_text(encoding="utf-8"),
                arch_flag=baseline_flag(baseline, os_name),
                simd_flag=baseline.simd,
                filename=rel,
            )
        except PatchError as exc:
            raise BuildError(
                f"cannot make DeepSpeed {format_version(planned.cell.deepspeed)}'s CPU code portable: {exc}",
                hint="this DeepSpeed's op_builder differs from 0.14-0.19; the cpu_arch/simd_width patch needs updating",
            ) from None
        real.write_text(text, encoding="utf-8")
        notes.append(
            f"patched {rel}: cpu_arch() -> {baseline_flag(baseline, os_name)!r}, simd_width() -> {baseline.simd!r}"
        )
    if not seen:
        raise BuildError(f"{src} has no op_builder/builder.py: not a DeepSpeed source tree")
    if os_name == "windows":
        notes += _add_windows_files(src, compat.windows_files)
    if parallel:
        setup_py = src / "setup.py"
        try:
            setup_py.write_text(patch_parallel_extensions(setup_py.read_text(encoding="utf-8")), encoding="utf-8")
            notes.append("setup.py: one build directory per extension (parallel extension builds)")
        except (PatchError, OSError) as exc:
            raise BuildError(
                f"cannot prepare DeepSpeed {format_version(planned.cell.deepspeed)}'s setup.py for parallel "
                f"extension builds: {exc}",
                hint="build with --parallel-ops 1",
            ) from None
    notes += apply_flag_patches(src, planned)
    requirements = src / "requirements" / "requirements.txt"
    if requirements.is_file():
        pin = torch_pin(planned.cell.torch)
        text, count = patch_torch_requirement(requirements.read_text(encoding="utf-8"), pin)
        requirements.write_text(text, encoding="utf-8")
        notes.append(f"requirements/requirements.txt: torch -> {pin} ({count} line(s))")
    if not debug_symbols:
        changed = 0
        seen.clear()
        for rel in DEBUG_FLAG_FILES:
            path = src / rel
            if not path.exists() or path.resolve() in seen:
                continue
            seen.add(path.resolve())
            text, count = patch_debug_flags(path.read_text(encoding="utf-8"))
            if count:
                path.write_text(text, encoding="utf-8")
                changed += count
        notes.append(f"compiling without debug info: {changed} '-g' flag(s) -> '-g0'")
        if not changed:
            get_reporter().warning("found no '-g' flag in the op builders to drop: the build keeps debug info")
    return notes


def _probe_ops(
    planned: PlannedCell, python: Path, src: Path, env: Mapping[str, str], log: Path
) -> tuple[str, list[OpSources]]:
    result = proc.capture(
        [str(python), str(OP_SOURCES_SCRIPT), json.dumps(list(planned.ops.build_names))],
        cwd=src,
        env=env,
        log_file=log,
        error=BuildError,
        what="DeepSpeed's op builders",
    )
    data = proc.marked_json(result.output, op_sources.MARK)
    if not isinstance(data, dict):
        raise BuildError(
            "DeepSpeed's op builders could not be loaded in the build environment",
            details="\n".join(result.tail[-25:]),
            hint=f"full log: {log}",
        )
    accelerator = str(data["accelerator"])
    ops_data: dict[str, dict[str, object]] = data["ops"]
    expected = planned.cell.variant.accelerator
    if accelerator != expected:
        raise BuildError(
            f"DeepSpeed picked the {accelerator} accelerator, the cell needs {expected}",
            hint="DS_ACCELERATOR is set by dswheels; check that torch in the build interpreter is the cell's",
        )
    problems: list[str] = []
    found: list[OpSources] = []
    for name, var in planned.ops.build:
        entry = ops_data.get(name)
        if entry is None:
            problems.append(
                f"{name}: DeepSpeed {format_version(planned.cell.deepspeed)} has no such op "
                f"for the {accelerator} accelerator (it has {', '.join(sorted(ops_data))})"
            )
            continue
        if entry.get("var") != f"DS_BUILD_{var}":
            problems.append(f"{name}: its switch is {entry.get('var')}, the plan says DS_BUILD_{var}")
        raw_sources = entry.get("sources")
        sources = [str(s) for s in raw_sources] if isinstance(raw_sources, list) else []
        messages = str(entry.get("messages", "")).strip()
        if entry.get("error"):
            problems.append(f"{name}: {entry['error']}")
        elif not sources:
            problems.append(f"{name}: has no sources (an empty extension breaks ninja builds)")
        elif not entry.get("compatible"):
            why = messages.splitlines()[-1] if messages else "its is_compatible() is False"
            problems.append(f"{name}: DeepSpeed says it cannot be built here and would skip it silently: {why}")
        found.append(OpSources(name=name, var=f"DS_BUILD_{var}", module=str(entry["module"]), sources=tuple(sources)))
    if problems:
        raise BuildError(
            f"{len(problems)} planned op(s) cannot be built: " + ", ".join(p.split(":", 1)[0] for p in problems),
            details="\n".join(problems),
            hint=f"install what they need on the builder, or leave them out of the matrix's ops; full log: {log}",
        )
    # the flags each op's builder hands cl/g++/nvcc, judged before anything compiles (raises BuildError)
    check_tree_flags(planned, python, src, env, log)
    return accelerator, found


def _cache_stats(cache: CompilerCache, env: Mapping[str, str]) -> CacheStats | None:
    if cache.tool is CacheTool.CCACHE:
        log = Path(cache.stats_log)
        if not log.exists():
            return CacheStats(tool=CacheTool.CCACHE, hits=0, misses=0)
        return parse_ccache_stats_log(log.read_text(encoding="utf-8", errors="replace"), base_dir=cache.base_dir)
    result = proc.run(
        [cache.executable, "--show-stats", "--stats-format=json"],
        env=env,
        capture=True,
        echo=False,
        stream=False,
        heartbeat=None,
        check=False,
    )
    try:
        return parse_sccache_stats(json.loads(result.output))
    except (ValueError, TypeError):
        return None


def _check_gpu_code(
    cid: str, planned: PlannedCell, gpu: Mapping[str, GpuCode], ops: Sequence[OpSources], names: Sequence[str]
) -> None:
    """Every CUDA extension carries SASS only for planned archs (and at least one), PTX only where planned."""
    if not planned.cell.variant.is_cuda:
        return
    tokens = planned.toolchain.arch_list
    sass_ok = {arch_number(t) for t in tokens}
    ptx_ok = {arch_number(t) for t in tokens if t.endswith("+PTX")}
    problems: list[str] = []
    for op in ops:
        ext = extension_for_module(op.module, names)
        code = gpu.get(ext or "")
        if code is None:
            continue
        get_reporter().info(f"  {op.name}: {code.describe()}")
        if not code.sass:
            problems.append(f"{op.name}: no SASS at all")
        if extra := sorted(set(code.sass) - sass_ok):
            problems.append(f"{op.name}: SASS for unplanned sm_{', sm_'.join(map(str, extra))}")
        if extra := sorted(set(code.ptx) - ptx_ok):
            problems.append(f"{op.name}: PTX for unplanned compute_{', compute_'.join(map(str, extra))}")
    if problems:
        raise BuildError(
            f"{cid}: the GPU code does not match the arch list {planned.toolchain.arch_list_text}",
            details="\n".join(problems),
            hint="TORCH_CUDA_ARCH_LIST did not reach nvcc as planned",
        )


def discard_wheel(wheel: Path) -> None:
    """Remove a wheel and what was written beside it (manifest, debug symbols)."""
    for path in (
        wheel,
        wheel.with_name(manifest_name(wheel.name)),
        wheel.with_name(wheel.name.removesuffix(".whl") + ".debug.tar.gz"),
    ):
        path.unlink(missing_ok=True)


def _report_runtime(
    planned: PlannedCell, needs: Mapping[str, Mapping[str, tuple[str, ...]]], compat: Compat
) -> RuntimeFloor:
    """The wheel's glibc/libstdc++ floor, said out loud; a warning when it is above the plan's promise.

    ``dswheels verify`` fails such a wheel; the build still finishes so the wheel can be inspected.
    """
    reporter = get_reporter()
    floor = floor_of(needs.values())
    reporter.info(f"Linux runtime floor: {floor.describe(compat.libstdcxx)}")
    promised = planned.toolchain.linux_runtime
    if promised is not None and (above := exceeds(floor, promised)):
        worst = sorted(
            name.rsplit("/", 1)[-1] for name, per_lib in needs.items() if exceeds(floor_of([per_lib]), promised)
        )
        reporter.warning(
            f"{cell_id(planned.cell)} needs more than the promised {promised.describe(compat.libstdcxx)}: "
            f"{'; '.join(above)} (in {', '.join(worst)}); dswheels verify will fail it. Build on an older image "
            "or with an older GCC (runners in the matrix), or raise linux_runtime",
        )
    return floor


def _remove_stale(out_variant: Path, planned: PlannedCell) -> None:
    name = wheel_filename(planned.cell)
    for path in (
        out_variant / name,
        out_variant / manifest_name(name),
        out_variant / (name.removesuffix(".whl") + ".debug.tar.gz"),
    ):
        if path.exists():
            path.unlink()
            get_reporter().warning(f"removed {path}: it is not the result of this build")


_OWNER = "cell.txt"  # in a work directory: the cell whose build made it


def _work_dir(planned: PlannedCell, opts: BuildOptions) -> Path:
    """One directory for every Python of the group: the same paths, so the compiler cache hits
    (--prepare-only compiles nothing and leaves each cell's tree: one directory per cell)."""
    return work_dir_for(opts.work_root, cell_id(planned.cell) if opts.prepare_only else group_id(planned))


def build_cell(planned: PlannedCell, opts: BuildOptions) -> CellResult:
    """Build one cell; never raises a :class:`DswheelsError` (it is in the result)."""
    cid = cell_id(planned.cell)
    stamp = utc_now().strftime("%Y%m%dT%H%M%SZ")
    log = (opts.out_dir / "logs" / f"{cid}-{stamp}.log").resolve()
    result = CellResult(cell_id=cid, planned=planned, log_path=log)
    start = monotonic()
    out_variant = opts.out_dir / planned.cell.variant.name
    reporter = get_reporter()
    try:
        with reporter.group(f"{cid}: {'prepare' if opts.prepare_only else 'build'}"):
            reporter.info(f"log: {log}")
            # two builds of one group share its work directory: the second waits for the first
            work = _work_dir(planned, opts)
            with exclusive(work.with_name(f".{work.name}.lock"), what=f"building {cid}", error=BuildError):
                try:
                    built = _build(planned, opts, log, start, result)
                except DswheelsError as exc:
                    # the next Python of the group wipes the work directory: keep a failed tree aside
                    owner = work / _OWNER
                    ours = owner.is_file() and owner.read_text(encoding="utf-8") == cid and not opts.prepare_only
                    kept = set_aside(work, planned.cell.python.tag) if ours else None
                    if kept is not None:
                        note = f"the build tree is kept in {kept}"
                        exc.hint = f"{exc.hint}; {note}" if exc.hint else note
                    raise
        if isinstance(built, Path):
            result.prepared = built
        else:
            result.wheel, result.manifest, result.manifest_data = built
        result.ok = True
    except DswheelsError as exc:
        if exc.hint is None or str(log) not in (exc.hint or ""):
            exc.hint = (exc.hint + f"; full log: {log}") if exc.hint else f"full log: {log}"
        result.error = exc
        _remove_stale(out_variant, planned)
        if log.parent.exists():
            _log_note(log, f"FAILED: {exc.message}")
    result.seconds = monotonic() - start
    return result


def _build(
    planned: PlannedCell, opts: BuildOptions, log: Path, start: float, result: CellResult
) -> tuple[Path, Path, Manifest] | Path:
    """The wheel, its manifest path and manifest; with ``prepare_only`` the prepared source tree."""
    reporter = get_reporter()
    cid = cell_id(planned.cell)
    durations: dict[str, float] = {}
    tc = planned.toolchain
    _write_log_header(
        log,
        planned,
        [
            f"wheel {wheel_filename(planned.cell)}",
            f"ops to build: {', '.join(planned.ops.build_names)}",
            (
                f"arch list: {tc.arch_list_text or '-'}; nvcc {format_version(tc.nvcc) if tc.nvcc else '-'}; "
                f"cpu baseline {tc.cpu_baseline}"
            ),
        ],
    )
    # toolchain: the plan's nvcc (and MSVC), checked before anything is downloaded, installed or compiled
    inherited = {k: v for k, v in os.environ.items() if k not in _SCRUB and not k.startswith(_SCRUB_PREFIXES)}
    outer_path = inherited.get("PATH", "")
    here = "windows" if sys.platform == "win32" else "linux"
    foreign = planned.cell.platform.os != here
    if foreign and not opts.prepare_only:
        raise EnvironmentMismatchError(
            f"{cid} is built on {planned.cell.platform.os.capitalize()}, and this machine runs {here.capitalize()}",
            hint="build it on such a machine (wheels.yml does, on GitHub's runners); --prepare-only fetches, checks "
            "and patches its source here without compiling",
        )
    cuda: CudaInstall | None = None
    msvc: MsvcEnv | None = None
    if foreign:
        reporter.info(f"preparing a {planned.cell.platform.value} cell here: its toolchain is not checked")
    else:
        if planned.cell.variant.is_cuda:
            assert tc.nvcc is not None  # noqa: S101 - the plan gives CUDA variants an nvcc
            cuda = find_cuda(tc.nvcc, inherited)
            reporter.info(f"nvcc {format_version(cuda.version)} at {cuda.home} (the plan's {format_version(tc.nvcc)})")
        msvc = check_msvc(planned, inherited) if here == "windows" else None

    work = _work_dir(planned, opts)
    wipe(work)
    work.mkdir(parents=True)
    (work / _OWNER).write_text(cid, encoding="utf-8")  # whose tree it is (set aside if this build fails)
    src = work / "src"

    t0 = monotonic()
    with Downloader(opts.cache_dir / "sources") as downloader:
        fetched: FetchedSource = fetch_source(planned, downloader=downloader, pypi_json=opts.pypi_json)
    extract_archive(fetched.path, src)
    parallelism = split_parallelism(
        opts.jobs, ops=len(planned.ops.build), archs=len(tc.arch_list), parallel=opts.parallel_ops
    )
    at_once = parallelism.at_once
    notes = patch_tree(src, planned, opts.compat, debug_symbols=opts.debug_symbols, parallel=at_once > 1)
    for note in notes:
        _log_note(log, note)
    durations["source"] = monotonic() - t0
    reporter.info(f"source ready in {work} ({fetched.verified_by})")

    t0 = monotonic()
    interp: Interpreter = prepare_interpreter(
        planned,
        mode=opts.interpreter,
        torch_source=opts.torch_source,
        venv_root=opts.cache_dir / "venvs",
        log_file=log,
        foreign=foreign,
    )
    durations["interpreter"] = monotonic() - t0
    if opts.prepare_only:
        # the flags the cell's compilers will get, judged with stand-ins for its machine (raises BuildError)
        check_tree_flags(planned, interp.python, src, inherited, log, stand_in=True)
        _log_note(log, f"prepared {src} with {interp.python}; stopped before the compile (--prepare-only)")
        reporter.info(f"prepared {src}: the source is verified and patched for {planned.cell.platform.value}")
        return src
    # the interpreter's scripts first (its ninja is the one torch finds), then MSVC's own tools
    path = os.pathsep.join([interp.info.scripts, *([msvc.bin_dir] if msvc else []), outer_path])
    # torch (and the nvidia-* wheels beside it) imported through <work>/site: the same header paths
    # for every Python (dswheels/effects/workdir.py)
    site = link_site(work, Path(interp.info.torch_parent or interp.info.purelib))
    if interp.origin.is_venv:
        settle_header_times(site)
    python_path = os.pathsep.join([str(site), *([inherited["PYTHONPATH"]] if inherited.get("PYTHONPATH") else [])])
    include_dirs: list[Path] = []
    if cuda is not None:
        include_dirs, taken, absent = cuda_header_dirs(cuda.home, site)
        if absent:
            raise EnvironmentMismatchError(
                f"the CUDA toolkit at {cuda.home} lacks {', '.join(absent)}, which torch's CUDA headers include",
                hint="install the toolkit's library development packages (cublas, cusparse, cusolver, curand: "
                f"the plan's Windows sub-packages are {', '.join(tc.cuda_subpackages) or 'listed in compat.yml'})",
            )
        if taken:
            reporter.info(
                f"the toolkit at {cuda.home} lacks {', '.join(taken)}: using the headers of the nvidia-* wheels "
                f"torch runs with ({', '.join(str(d) for d in include_dirs)})",
            )
    compilers = pick_compilers(planned, inherited)
    cache = find_compiler_cache(opts.compiler_cache, env=inherited, work_dir=work, compilers=compilers)
    extra_config: str | None = None
    if at_once > 1:
        config_file = work / "dswheels-setup.cfg"
        config_file.write_text(dist_extra_config(at_once), encoding="utf-8")
        extra_config = str(config_file)
    setup = BuildSetup(
        os=planned.cell.platform.os,
        path=path,
        path_sep=os.pathsep,
        jobs=parallelism.ninja_jobs,
        nvcc_threads=parallelism.nvcc_threads,
        cuda_home=str(cuda.home) if cuda else None,
        nvcc=str(cuda.nvcc) if cuda else None,
        cache=cache,
        compilers=compilers,
        extra_config=extra_config,
        include_dirs=tuple(str(d) for d in include_dirs),
        include_var_value=inherited.get("INCLUDE" if planned.cell.platform.os == "windows" else "CPATH", ""),
        debug_symbols=opts.debug_symbols,
        # setuptools replaces Python's CFLAGS with $CFLAGS (84 does) or appends it (older): start from
        # what it would use anyway, so only -g0 is added
        cflags_value=inherited.get("CFLAGS") or interp.info.cflags,
        python_path=python_path,
    )
    dswheels_env = build_env(planned, setup)
    dswheels_env.setdefault("PATH", path)
    env = {**inherited, **dswheels_env}
    if msvc is not None:
        check_msvc_link(env["PATH"], msvc)
    _log_note(log, "environment set by dswheels:\n" + "\n".join(f"  {k}={v}" for k, v in sorted(dswheels_env.items())))
    reporter.info(
        f"building {len(planned.ops.build)} op(s), {parallelism.describe()}"
        + (f", {cache.tool}" if cache else ", no compiler cache")
        + (f", CC/CXX {compilers[0]}/{compilers[1]}" if compilers else ""),
    )

    if cache is not None and cache.tool is CacheTool.SCCACHE:
        backend, where = sccache_backend(opts.sccache, inherited, base_dir=cache.base_dir)
        env.update(backend)
        if restart_sccache(cache, env, backend, log) == "local" and any("GHA" in k or "BUCKET" in k for k in backend):
            where = "local disk: the remote cache did not answer"
        reporter.info(f"sccache: {where}")
        _log_note(log, f"sccache server started: {where}")

    accelerator, op_sources = _probe_ops(planned, interp.python, src, env, log)

    dist = work / "dist"
    tracker = _OpTracker(op_sources, src)
    t0 = monotonic()
    run = proc.run(
        [
            str(interp.python),
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--skip-dependency-check",
            "--outdir",
            str(dist),
            ".",
        ],
        cwd=src,
        env=env,
        log_file=log,
        stream=opts.verbose,
        heartbeat=60.0,
        heartbeat_label=f"compiling {cid}",
        check=False,
        error=BuildError,
        what="python -m build",
        on_line=tracker.on_line,
        timestamps=True,
    )
    op_seconds = tracker.finish()
    durations["compile"] = monotonic() - t0
    blamed = failing_ops(tracker.lines, op_sources, tracker.started) if run.returncode != 0 else []
    result.op_outcomes = op_outcomes(
        [(op.name, op.module) for op in op_sources], done=op_seconds, started=tracker.started, blamed=blamed
    )
    if run.returncode != 0:
        what = f"compiling {', '.join(blamed)} failed" if blamed else "python -m build failed"
        raise BuildError(
            f"{cid}: {what} (exit code {run.returncode})",
            details="\n".join(failure_excerpt(tracker.lines)),
            hint=f"full log: {log}",
        )
    wheels = sorted(dist.glob("*.whl"))
    if len(wheels) != 1:
        raise BuildError(f"{cid}: the build produced {len(wheels)} wheels in {dist}, expected one")
    built = wheels[0]
    expected_name = wheel_filename(planned.cell)
    if built.name != expected_name:
        raise BuildError(
            f"{cid}: the build produced {built.name}, expected {expected_name}",
            hint="a wrong Python or platform in the build interpreter, or DS_BUILD_STRING was not applied",
        )

    # every planned op must really be in the wheel
    contents = read_wheel(built, error=BuildError)
    installed = contents.installed
    if installed.accelerator_name != accelerator:
        raise BuildError(f"{cid}: the wheel says accelerator {installed.accelerator_name!r}, expected {accelerator!r}")
    found = check_ops(
        [op.name for op in op_sources],
        installed=installed,
        modules={op.name: (op.module,) for op in op_sources},
        names=contents.names,
    )
    if found.missing or found.no_file:
        details = []
        if found.missing:
            details.append(f"not in installed_ops: {', '.join(found.missing)} (DeepSpeed skipped them)")
        if found.no_file:
            details.append(f"no extension file in the wheel: {', '.join(found.no_file)}")
        named = [*found.missing, *found.no_file]
        excerpt = [ln for ln in tracker.lines if any(name in ln for name in named)][-20:]
        raise BuildError(
            f"{cid}: planned op(s) missing from the wheel: {', '.join(named)}",
            details="\n".join([*details, "log lines naming them:", *excerpt]),
            hint=f"full log: {log}",
        )

    # post-process into a staging directory, then move into place
    t0 = monotonic()
    baseline = opts.compat.cpu_baselines[tc.cpu_baseline]
    linux = planned.cell.platform.os == "linux"
    with reporter.group(f"{cid}: post-process"):
        pp = postprocess_wheel(
            built,
            staging=work / "staged",
            torch=planned.cell.torch,
            linux=linux and sys.platform != "win32",
            keep_debug=opts.debug_symbols,
            forbidden_registers=baseline.forbidden_registers,
            log_file=log,
        )
        bad = {name: rep for name, rep in pp.isa.items() if not rep.ok}
        if bad:
            raise BuildError(
                f"{cid}: compiled code uses instructions above the {tc.cpu_baseline} baseline",
                details="\n".join(f"{name}: {rep.describe(tc.cpu_baseline)}" for name, rep in bad.items()),
                hint="the portable-CPU patch did not reach this code, or DeepSpeed compiles it for newer CPUs without "
                "checking at run time; do not publish this wheel (leave the op out of the matrix)",
            )
        for name, rep in pp.isa.items():
            if rep.violations:
                reporter.info(f"  {name.rsplit('/', 1)[-1]}: {rep.describe(tc.cpu_baseline)}")
        if pp.isa:
            total = sum(r.instructions for r in pp.isa.values())
            reporter.info(
                f"CPU baseline {tc.cpu_baseline} holds: {total} instructions in {len(pp.isa)} extension(s), "
                "none above it outside run-time dispatched code",
            )
        _check_gpu_code(cid, planned, pp.gpu, op_sources, contents.names)
        runtime = _report_runtime(planned, pp.needs, opts.compat) if linux else None
        if pp.stripped_bytes:
            reporter.info(f"stripped {pp.stripped_bytes / 1e6:.1f} MB of symbols")
    durations["postprocess"] = monotonic() - t0

    stats = _cache_stats(cache, env) if cache else None
    if stats is not None:
        reporter.info(f"compiler cache: {stats.describe()}")

    wheel_sha = sha256_file(pp.wheel)
    debug_info = None
    if pp.debug_archive is not None:
        debug_info = FileInfo(pp.debug_archive.name, pp.debug_archive.stat().st_size, sha256_file(pp.debug_archive))
    outputs: dict[str, float] = {}
    for ninja_log in sorted(src.glob("build/temp*/**/.ninja_log")):
        outputs.update(parse_ninja_log(ninja_log.read_text(encoding="utf-8", errors="replace")))
    built_ops = []
    for op in op_sources:
        ext = extension_for_module(op.module, contents.names) or ""
        built_ops.append(
            BuiltOp(
                name=op.name,
                env=op.var,
                extension=ext,
                module=op.module,
                size=pp.sizes.get(ext, 0),
                seconds=op_seconds.get(op.module),
                units=unit_seconds(op, outputs),
            )
        )
    durations["total"] = monotonic() - start
    toolchain = {
        "python": interp.info.python,
        "torch": interp.info.torch or "",
        "interpreter": f"{interp.origin}: {interp.python}",
        **{name: version or "" for name, version in interp.info.modules.items()},
        "ninja_bin": tool_version(["ninja", "--version"], env),
    }
    if cuda is not None:
        toolchain["nvcc"] = cuda.version_line
        toolchain["cuda_home"] = str(cuda.home)
    if linux:
        toolchain["cxx"] = tool_version([compilers[1] if compilers else "c++", "--version"], env)
    if msvc is not None:
        toolchain["msvc"] = msvc.toolset
    if cache is not None:
        toolchain[cache.tool.value] = tool_version([cache.executable, "--version"], env)
    manifest = Manifest(
        cell_id=cid,
        plan=planned,
        wheel=FileInfo(pp.wheel.name, pp.wheel.stat().st_size, wheel_sha),
        accelerator=accelerator,
        torch_version=interp.info.torch or "",
        torch_cuda=interp.info.torch_cuda,
        python_version=interp.info.python,
        toolchain=toolchain,
        cpu_baseline=tc.cpu_baseline,
        arch_list=tc.arch_list_text,
        env={k: (v.replace(outer_path, "$PATH") if k == "PATH" else v) for k, v in dswheels_env.items()},
        ops_built=tuple(built_ops),
        ops_left_out=dict(planned.ops.left_out),
        durations=durations,
        source={
            "kind": fetched.kind.value,
            "url": fetched.url,
            "sha256": fetched.sha256,
            "verified_by": fetched.verified_by,
        },
        source_changes=tuple(notes),
        created=utc_now().strftime("%Y-%m-%dT%H:%M:%SZ"),
        dswheels=__version__,
        debug_symbols=debug_info,
        compiler_cache=stats.as_json() if stats else {},
        runtime=runtime,
    )

    out_variant = opts.out_dir / planned.cell.variant.name
    out_variant.mkdir(parents=True, exist_ok=True)
    final = out_variant / pp.wheel.name
    manifest_path = out_variant / manifest_name(pp.wheel.name)
    if manifest_path.exists():
        manifest_path.unlink()  # never a manifest beside a wheel it does not describe
    tmp = out_variant / f".{pp.wheel.name}.partial"
    shutil.copyfile(pp.wheel, tmp)
    tmp.replace(final)
    if pp.debug_archive is not None:
        shutil.copyfile(pp.debug_archive, out_variant / pp.debug_archive.name)
    write_text_atomic(manifest_path, render_manifest(manifest))
    _log_note(log, f"wrote {final} ({final.stat().st_size} bytes, sha256 {wheel_sha})")
    if not opts.keep_work:
        shutil.rmtree(work, ignore_errors=True)
    return final, manifest_path, manifest
