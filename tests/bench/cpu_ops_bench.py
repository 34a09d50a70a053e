"""``nox -s bench -- cpu_ops``: our prebuilt CPU optimizers against DeepSpeed compiling them for this CPU.

Side by side on this machine, DeepSpeed 0.19.8 with torch 2.13 (CPU) in two venvs:

* ours: the CPU wheel dswheels builds (``nox -s main``'s, found in ``wheelhouse/cpu/``; else built here
  with cpu_adam, cpu_adagrad and cpu_lion), whose ops are compiled once per ISA level and pick one at
  import by torch's CPU capability;
* native (what a user who benchmarks compares with): PyPI's ``deepspeed==0.19.8`` (no prebuilt ops),
  which JIT-compiles each op on first use with ``-march=native`` and the SIMD define of this CPU.

One long-lived worker per venv (:mod:`tests.bench.cpu_ops_worker`) times ``step()`` of
DeepSpeedCPUAdam, DeepSpeedCPUAdagrad and DeepSpeedCPULion on one parameter of ``NUMEL`` elements
(fp32 and bf16), in short turns (``ROUNDS`` turns of ``STEPS`` steps after a warm-up step, each side
going first every other turn); each side's time is the median of all its steps, and the line prints
ours / native (target <= 1.05). On a machine shared with other work the steps vary a lot: the
median of each turn's own ratio (both sides measured seconds apart) is printed beside it. Both run
with the same threads (``OMP_NUM_THREADS``: this process's, else the machine's cores). The bench says
which ISA variant ours loaded, the flags the native JIT build used, and the wheel's size with what
its variants above the baseline add.

``DSWHEELS_BENCH_WORK=DIR`` keeps the venvs and the JIT's build (later runs skip the compile; ours is
reinstalled when the wheel's bytes changed); ``DSWHEELS_BENCH_WHEEL=PATH`` names our wheel.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from dswheels.kernel.isa_variants import DISPATCH_MODULE, extension_levels, parse_variant_table
from tests.bench.common import Result

ROOT = Path(__file__).resolve().parents[2]
PY = f"cp{sys.version_info[0]}{sys.version_info[1]}"
CELL = f"ds0.19.8-torch2.13-cpu-{PY}-linux_x86_64"
OPS = ("cpu_adam", "cpu_adagrad", "cpu_lion")
NUMEL = 16 * 1024**2  # the 16M parameters: the step dominates, far beyond the caches
ROUNDS, STEPS = 24, 3  # short turns: a burst of other work on the machine lands on both sides
CASES = [(opt, dtype) for opt in ("adam", "adagrad", "lion") for dtype in ("fp32", "bf16")]
NAMES = {"adam": "DeepSpeedCPUAdam", "adagrad": "DeepSpeedCPUAdagrad", "lion": "DeepSpeedCPULion"}
WORKER = Path(__file__).with_name("cpu_ops_worker.py")
MARK = "DSWHEELS-BENCH "  # tests.bench.cpu_ops_worker.MARK: the worker runs in another interpreter, by path


def _run(argv: list[str], **kwargs: object) -> None:
    subprocess.run(argv, check=True, **kwargs)  # type: ignore[call-overload]


def _our_wheel(work: Path) -> Path:
    """The wheel to measure: named, nox -s main's, or one built here with the three optimizers."""
    named = os.environ.get("DSWHEELS_BENCH_WHEEL")
    if named:
        return Path(named)
    # a Linux wheel's platform tag is its floor (manylinux_2_N_x86_64), linux_x86_64 where none was judged
    made = sorted((ROOT / "wheelhouse" / "cpu").glob(f"deepspeed-0.19.8+cputorch2.13-{PY}-{PY}-*linux*_x86_64.whl"))
    if made:
        return made[-1]
    out = work / "wheelhouse"
    if not list(out.glob("cpu/*.whl")):
        print(f"building {CELL} with {', '.join(OPS)} (no wheel of nox -s main in wheelhouse/cpu/) ...", flush=True)
        _run(
            [
                sys.executable,
                "-m",
                "dswheels",
                "build",
                "--cell",
                CELL,
                "--ops",
                ",".join(OPS),
                "--torch-index",
                "pip",
                "--out",
                str(out),
            ],
            cwd=ROOT,
        )
    return max(out.glob("cpu/*.whl"))


def _uv() -> str:
    uv = shutil.which("uv")
    if uv is None:
        msg = "uv is needed (the test dependency group installs it)"
        raise RuntimeError(msg)
    return uv


def _venv(path: Path, *requirements: str) -> Path:
    python = path / "bin" / "python"
    if python.exists():
        return python
    uv = _uv()
    _run([uv, "venv", "-q", "--python", sys.executable, str(path)])
    links = ["--find-links", "/opt/wheels"] if Path("/opt/wheels").is_dir() else []
    _run([uv, "pip", "install", "-q", "--python", str(python), *links, "torch==2.13.0", *requirements])
    return python


def _ours(path: Path, wheel: Path) -> Path:
    """Our venv, holding ``wheel`` itself: a kept venv (DSWHEELS_BENCH_WORK) made with another wheel of the
    same name gets this one (else the bench would measure the other build's ops)."""
    fresh = not (path / "bin" / "python").exists()
    python = _venv(path, str(wheel))
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    mark = path / "dswheels-bench-wheel.sha256"
    if not fresh and (not mark.is_file() or mark.read_text().strip() != digest):
        print(f"  {path}: it may hold another {wheel.name}; reinstalling this one", flush=True)
        _run([_uv(), "pip", "install", "-q", "--python", str(python), "--reinstall", "--no-deps", str(wheel)])
    mark.write_text(digest + "\n")
    return python


class _Worker:
    def __init__(self, python: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [str(python), str(WORKER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        self.said: list[str] = []

    def ask(self, request: dict[str, object]) -> dict[str, object]:
        stdin, stdout = self.proc.stdin, self.proc.stdout
        assert stdin is not None
        assert stdout is not None
        stdin.write(json.dumps(request) + "\n")
        stdin.flush()
        while line := stdout.readline():  # DeepSpeed's own output (a JIT compile, its logger) goes on before it
            if line.startswith(MARK):
                answer: dict[str, object] = json.loads(line.removeprefix(MARK))
                return answer
            self.said.append(line.rstrip())
        tail = "\n".join(self.said[-20:])
        msg = f"the worker {self.proc.args!r} ended (exit {self.proc.wait()}):\n{tail}"
        raise RuntimeError(msg)

    def close(self) -> None:
        stdin: IO[str] | None = self.proc.stdin
        if stdin is not None:
            stdin.close()
        self.proc.wait(timeout=120)


@contextmanager
def _workers(ours: Path, native: Path, work: Path) -> Iterator[tuple[_Worker, _Worker]]:
    threads = os.environ.get("OMP_NUM_THREADS") or str(len(os.sched_getaffinity(0)))
    env = {**os.environ, "OMP_NUM_THREADS": threads, "TORCH_EXTENSIONS_DIR": str(work / "jit")}
    env.pop("ATEN_CPU_CAPABILITY", None)
    a, b = _Worker(ours, env), _Worker(native, env)
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def _native_flags(work: Path) -> str:
    """The flags DeepSpeed's JIT compiled cpu_adam with (its build.ninja's cflags)."""
    ninja = work / "jit" / "cpu_adam" / "build.ninja"
    if not ninja.is_file():
        return "?"
    for line in ninja.read_text().splitlines():
        if line.startswith("cflags"):
            return " ".join(f for f in line.split() if f.startswith(("-march", "-D__", "-O")))
    return "?"


def _sizes(wheel: Path) -> str:
    """The wheel's size, and what its ISA variants above the baseline take in it (compressed)."""
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        text = zf.read(DISPATCH_MODULE).decode() if DISPATCH_MODULE in names else ""
        table = parse_variant_table(text) if text else None
        levels = extension_levels(table, names) if table else {}
        baseline = table.levels[0][1] if table else ""
        above = [zf.getinfo(m) for m, level in levels.items() if level != baseline]
    packed, raw = sum(i.compress_size for i in above), sum(i.file_size for i in above)
    return (
        f"wheel {wheel.stat().st_size / 1e6:.2f} MB; its {len(above)} ISA variant extension(s) above the baseline "
        f"take {packed / 1e6:.2f} MB of it ({raw / 1e6:.2f} MB unpacked): without them "
        f"{(wheel.stat().st_size - packed) / 1e6:.2f} MB"
    )


def run() -> list[Result]:
    keep = os.environ.get("DSWHEELS_BENCH_WORK")
    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="dsw-cpu-ops-"))
    work.mkdir(parents=True, exist_ok=True)
    wheel = _our_wheel(work)
    ours = _ours(work / "ours", wheel)
    native = _venv(work / "native", "deepspeed==0.19.8", "ninja")
    results: list[Result] = []
    with _workers(ours, native, work) as (a, b):
        print("  loading each op on both sides (the native side JIT-compiles them: minutes, once per work dir) ...")
        for opt in NAMES:  # before any timing: no step is measured while the other side compiles
            for worker in (a, b):
                worker.ask({"optimizer": opt, "dtype": "fp32", "numel": 1024, "steps": 1})
                worker.ask({"drop": True})
        seen: dict[str, object] = {}
        for opt, dtype in CASES:
            request = {"optimizer": opt, "dtype": dtype, "numel": NUMEL, "steps": STEPS}
            times: dict[str, list[float]] = {"ours": [], "native": []}
            paired: list[float] = []  # each turn's median over the other side's in the same turn
            for turn in range(ROUNDS):
                medians = {}
                for side, worker in (("ours", a), ("native", b)) if turn % 2 else (("native", b), ("ours", a)):
                    answer = worker.ask(request)
                    steps = [float(ms) for ms in answer["ms"]]  # type: ignore[attr-defined]
                    times[side] += steps
                    medians[side] = statistics.median(steps)
                    seen[f"{side} {opt}"] = answer.get("variant") or answer.get("file")
                paired.append(medians["ours"] / medians["native"])
            for worker in (a, b):
                worker.ask({"drop": True})
            name = f"{NAMES[opt]} {dtype} step ({NUMEL // 1024**2}M params)"
            ours_ms, native_ms = statistics.median(times["ours"]), statistics.median(times["native"])
            results.append(Result(name, ours_ms, native_ms, unit="ms", target="<= 1.05"))
            print(
                f"  {name}: ours {min(times['ours']):.1f}-{max(times['ours']):.1f} ms, "
                f"native {min(times['native']):.1f}-{max(times['native']):.1f} ms ({ROUNDS} turns of {STEPS} steps "
                f"each side, alternating who goes first); median of the turns' ratios {statistics.median(paired):.3f}",
                flush=True,
            )
    print(f"  ours: {wheel.name}, variants loaded: {', '.join(f'{k}={v}' for k, v in seen.items() if 'ours' in k)}")
    print(f"  native: deepspeed==0.19.8 from PyPI, JIT-compiled with {_native_flags(work)}")
    print(f"  {_sizes(wheel)}")
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    return results
