"""``python -m build --wheel --no-isolation`` for one cell, with per-op progress.

setup.py says when it starts an extension and nothing when one is done, so progress comes from
two places: the output (``[2/6] compiling cpu_adam ...``) and the build directory, where an
extension's file appears once it is linked (``cpu_adam compiled in 1m12s``). Each op's fate
(built, failed, not reached) is kept for the build's report; a failed compile is blamed on the
ops its errors name (:func:`dswheels.building.output_reading.failing_ops`).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dswheels.building.output_reading import OpSources, extension_started, failing_ops, failure_excerpt
from dswheels.building.summary import OpOutcome, op_outcomes
from dswheels.host import proc
from dswheels.host.log import format_duration, get_reporter
from dswheels.kernel.errors import BuildError
from dswheels.kernel.model import PlannedCell
from dswheels.kernel.naming import cell_id, wheel_filename
from dswheels.kernel.wheel_contents import EXTENSION_SUFFIXES

__all__ = ["Compiled", "children_cpu_seconds", "compile_wheel", "the_wheel"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Compiled:
    returncode: int
    dist: Path  # where python -m build wrote the wheel
    lines: tuple[str, ...]  # the whole output
    op_seconds: Mapping[str, float]  # extension module -> seconds, for each extension that was linked
    blamed: tuple[str, ...]  # the ops a failed compile is blamed on
    outcomes: tuple[OpOutcome, ...]  # each op's fate
    # CPU seconds the compile's processes used (None: not measurable here, Windows): against the units'
    # wall seconds it says what share of a core each compile had (a machine shared with other work)
    cpu_seconds: float | None = None


class _OpTracker:
    """Per-op progress from the build's output: start lines, and extension files as they appear."""

    def __init__(self, ops: Sequence[OpSources], src: Path) -> None:
        self.ops = {module: op for op in ops for module in op.extension_modules}  # an op per ISA level: several
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
                if path.suffix in EXTENSION_SUFFIXES:
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
                name = op.label(module) if op else module
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
                self._reporter.info(f"  {op.label(module) if op else module} compiled in {format_duration(seconds)}")

    def finish(self) -> dict[str, float]:
        with self._lock:
            self._poll()
            return dict(self.done)


def compile_wheel(
    planned: PlannedCell,
    *,
    python: Path,
    src: Path,
    dist: Path,
    ops: Sequence[OpSources],
    env: Mapping[str, str],
    log: Path,
    verbose: bool,
) -> Compiled:
    """Compile the tree ``src`` into a wheel in ``dist``; a failure is in the result (:func:`the_wheel` raises)."""
    tracker = _OpTracker(ops, src)
    cpu_before = children_cpu_seconds()
    run = proc.run(
        [
            str(python),
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
        stream=verbose,
        heartbeat=60.0,
        heartbeat_label=f"compiling {cell_id(planned.cell)}",
        check=False,
        error=BuildError,
        what="python -m build",
        on_line=tracker.on_line,
        timestamps=True,
    )
    op_seconds = tracker.finish()
    cpu_after = children_cpu_seconds()
    blamed = failing_ops(tracker.lines, ops, tracker.started) if run.returncode != 0 else []
    return Compiled(
        returncode=run.returncode,
        dist=dist,
        lines=tuple(tracker.lines),
        op_seconds=op_seconds,
        blamed=tuple(blamed),
        outcomes=op_outcomes(
            [(op.name, op.module) for op in ops],
            done={op.module: s for op in ops if (s := op.seconds(op_seconds)) is not None},
            started=[op.module for op in ops if set(op.extension_modules) & set(tracker.started)],
            blamed=blamed,
        ),
        cpu_seconds=None if cpu_before is None or cpu_after is None else cpu_after - cpu_before,
    )


def children_cpu_seconds() -> float | None:
    """User + system CPU seconds of every child process waited for so far (and theirs); None on Windows."""
    seconds = None
    if sys.platform != "win32":  # not an early return: mypy --platform win32 would call the rest unreachable
        import resource  # noqa: PLC0415 - POSIX only

        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        seconds = usage.ru_utime + usage.ru_stime
    return seconds


def the_wheel(compiled: Compiled, planned: PlannedCell, log: Path) -> Path:
    """The one wheel the compile produced, under the name the plan gives it; BuildError otherwise."""
    cid = cell_id(planned.cell)
    if compiled.returncode != 0:
        what = f"compiling {', '.join(compiled.blamed)} failed" if compiled.blamed else "python -m build failed"
        raise BuildError(
            f"{cid}: {what} (exit code {compiled.returncode})",
            details="\n".join(failure_excerpt(compiled.lines)),
            hint=f"full log: {log}",
        )
    wheels = sorted(compiled.dist.glob("*.whl"))
    if len(wheels) != 1:
        raise BuildError(f"{cid}: the build produced {len(wheels)} wheels in {compiled.dist}, expected one")
    built = wheels[0]
    expected_name = wheel_filename(planned.cell)
    if built.name != expected_name:
        raise BuildError(
            f"{cid}: the build produced {built.name}, expected {expected_name}",
            hint="a wrong Python or platform in the build interpreter, or DS_BUILD_STRING was not applied",
        )
    return built
