"""Refit dswheels/compile_times.yml from real build manifests: `nox -s costs -- WHEELHOUSE_OR_MANIFEST...`.

Each manifest records every op's translation units with their compile seconds (ninja's log).
Builds whose compiler cache served anything are left out: a unit from the cache measures a lookup,
not a compile. Every op found gets the median of its builds (dswheels.core.workflow.costs.refit_op); the
other ops keep their lines. Run it on the manifests of a release's wheelhouse (the workflow's
artifacts) to fit the model to the runners that built it.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

from dswheels.core.wheel.manifest import parse_manifest
from dswheels.core.workflow.costs import OpSample, refit_op, replace_op_lines

DATA = Path(__file__).resolve().parents[1] / "dswheels" / "compile_times.yml"


def _manifests(args: list[str]) -> list[Path]:
    found: list[Path] = []
    for arg in args:
        path = Path(arg)
        found += sorted(path.rglob("*.manifest.json")) if path.is_dir() else [path]
    return found


def main(argv: list[str]) -> int:
    data = DATA
    if argv[:1] == ["--data"]:  # another copy of the file (the tests)
        data, argv = Path(argv[1]), argv[2:]
    paths = _manifests(argv)
    if not paths:
        print("usage: nox -s costs -- WHEELHOUSE_OR_MANIFEST...  (directories are searched for *.manifest.json)")
        return 2
    samples: dict[str, list[OpSample]] = defaultdict(list)
    for path in paths:
        manifest = parse_manifest(path.read_text(encoding="utf-8"))
        hits = manifest.compiler_cache.get("hits")
        if isinstance(hits, int) and hits > 0:
            print(f"skipped {path.name}: its compiler cache served {hits} unit(s)")
            continue
        archs = len([t for t in manifest.arch_list.split(";") if t])
        threads = int(manifest.env.get("DS_NVCC_THREADS", "1") or 1)
        for op in manifest.ops_built:
            if op.units:
                samples[op.name].append(OpSample(op.name, op.units, archs, threads, manifest.cell_id))
    if not samples:
        print("no manifest with per-unit compile times and a cold compiler cache: nothing to refit")
        return 1
    fitted = {name: refit_op(found) for name, found in sorted(samples.items())}
    for name, cost in fitted.items():
        print(f"{name}: host {cost.host:g} s, device {cost.device:g} s per arch, {cost.units} units ({cost.source})")
    data.write_text(replace_op_lines(data.read_text(encoding="utf-8"), fitted), encoding="utf-8")
    print(f"rewrote {data}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
