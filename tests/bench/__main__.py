"""``nox -s bench``: dswheels' build of DeepSpeed 0.19.8's full CPU op set against the naive way.

Side by side on this machine, the same DeepSpeed sdist and the same torch 2.13 CPU interpreter:

* naive (what people run, and what dswheels' seed ran):
  ``DS_BUILD_OPS=1 DS_BUILD_CCL_COMM=0 python setup.py bdist_wheel`` in a fresh tree
* dswheels, cold: ``dswheels build --cell ds0.19.8-torch2.13-cpu-cp311-linux_x86_64`` with every
  shippable CPU op and an empty compiler cache
* dswheels, warm: the same build again (fresh work directory, warm compiler cache)

Prints the wall ratio (target <= 0.5), the warm rebuild ratio (warm / naive, target <= 0.1)
and the wheel size ratio (target <= 0.2). ``--naive-json FILE`` reuses an earlier naive run
(7-16 minutes on 2 cores, depending on what else runs); results go to ``bench-results.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

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


def _dswheels(work: Path, out: str, env: dict[str, str]) -> tuple[float, dict[str, object]]:
    start = time.monotonic()
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
            "ccache",
        ],
        check=True,
        env=env,
        cwd=work,
    )
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
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DS_", "CCACHE", "TORCH_", "MAX_JOBS"))}
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="nox -s bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--naive-json", type=Path, help="reuse the naive measurement saved in this file")
    parser.add_argument("--work", type=Path, help="work directory (default: a temporary one)")
    parser.add_argument("--results", type=Path, default=Path("bench-results.json"))
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="dswheels-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    (work / "matrix.yml").write_text(MATRIX)
    env = dict(os.environ)
    env.setdefault("DSWHEELS_CACHE", str(work / "cache"))
    ccache_dir = work / "ccache"
    shutil.rmtree(ccache_dir, ignore_errors=True)
    env["CCACHE_DIR"] = str(ccache_dir)  # an empty compiler cache: the cold build is really cold
    for key in [k for k in env if k.startswith("GITHUB_")]:
        del env[key]

    print(f"== dswheels cold (load {_load()})", flush=True)
    cold, manifest = _dswheels(work, "wh-cold", env)
    print(f"== dswheels warm (load {_load()})", flush=True)
    warm, warm_manifest = _dswheels(work, "wh-warm", env)
    python = str(manifest["toolchain"]["interpreter"]).split(": ", 1)[1]  # type: ignore[index]
    sdist = Path(env["DSWHEELS_CACHE"]) / "sources" / "sha256" / str(manifest["source"]["sha256"])  # type: ignore[index]
    if args.naive_json:
        naive = json.loads(args.naive_json.read_text())
    else:
        naive = _naive(python, sdist, work)
        (work / "naive.json").write_text(json.dumps(naive, indent=2))
    size = int(manifest["wheel"]["size"])  # type: ignore[index]
    ops = [str(op["name"]) for op in manifest["ops"]["built"]]  # type: ignore[index]
    naive_seconds, naive_size = float(naive["seconds"]), float(naive["size"])
    wall_ratio, warm_ratio, size_ratio = cold / naive_seconds, warm / naive_seconds, size / naive_size
    results = {
        "machine": {"cpus": os.cpu_count(), "load_after": _load()},
        "naive": naive,
        "dswheels_cold": {"seconds": cold, "size": size, "ops": ops},
        "dswheels_warm": {"seconds": warm, "compiler_cache": warm_manifest["compiler_cache"]},
        "wall_ratio": wall_ratio,
        "warm_ratio": warm_ratio,
        "size_ratio": size_ratio,
    }
    args.results.write_text(json.dumps(results, indent=2) + "\n")

    def row(name: str, value: float, target: float) -> str:
        return f"  {name:<22} {value:6.3f}   (target <= {target})  {'ok' if value <= target else 'MISSED'}"

    print()
    print(f"DeepSpeed 0.19.8, full CPU op set, {os.cpu_count()} cores")
    print(f"  naive                  {naive_seconds:7.1f}s  {naive_size / 1e6:5.1f} MB  ({naive['wheel']})")
    print(f"  dswheels cold          {cold:7.1f}s  {size / 1e6:5.1f} MB  ops: {', '.join(ops)}")
    print(f"  dswheels warm rebuild  {warm:7.1f}s  compiler cache {warm_manifest['compiler_cache']}")
    print(row("wall ratio", wall_ratio, 0.5))
    print(row("warm rebuild ratio", warm_ratio, 0.1))
    print(row("wheel size ratio", size_ratio, 0.2))
    print(f"results: {args.results.resolve()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
