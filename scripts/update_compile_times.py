"""Refit dswheels/compile_times.yml from real builds: `nox -s costs -- [OPTIONS] WHEELHOUSE_OR_MANIFEST...`.

Each manifest records every op's translation units with their compile seconds (ninja's log) and,
since issue 23, each unit's scope (which builds share its object). Builds whose compiler cache
served anything are left out: a unit from the cache measures a lookup, not a compile. Linux
manifests refit an op's seconds, Windows manifests (a windows-2022 runner, or the Wine host) its
``windows`` seconds; every op found gets the median of its builds
(dswheels.plan.costs.refit_op), its units by scope when the builds probed them, and the
other ops keep their lines. With Windows and Linux figures both measured for some ops, the Windows
runner's ``speed`` (for the ops with no Windows figures) becomes the median of their ratios.
The fitting is dswheels.plan.refit's, which follow.yml also runs on a release's own records
(`dswheels facts refit`, which refits the runners' figures too).

Options:
  --cpu-share F      the share of a core each compile had where the manifests were built: their
                     seconds times F are one core's (a machine shared with other builds: its cores
                     over its load average, e.g. 2 cores at load 10: 0.2). Default 1 (a runner).
                     A manifest that records its compile's CPU seconds (durations.compile_cpu) and
                     its slots (a jobserver's MAKEFLAGS -jN) gives its own share: its CPU seconds
                     over its slots times its compile's seconds.

A Linux and a Windows build of the same cell shape (the same ops and arch list; built one after the
other on one machine, e.g. the Wine host) give the Windows runner's speed: the ratio of their
compiles' seconds, which holds what no unit's seconds do (MSVC's /GL leaves code generation to the
link); the Windows build of such a pair refits no op.
  --measured-on TEXT where and how they were built (the machine, its cores and load), written
                     into every refit figure's source.
  --units TREE --python PY
                     instead of manifests: probe a DeepSpeed source tree's ops with its own op
                     builders (dswheels' op sources probe, run by PY, an interpreter with torch)
                     and write every op's translation units by scope.
  --data FILE        another copy of compile_times.yml (the tests).

Run it on the manifests of a release's wheelhouse (the workflow's artifacts) to fit the model to
the runners that built it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import yaml

from dswheels.building.effects.op_sources_asked import OP_SOURCES_SCRIPT, unit_scopes
from dswheels.building.output_reading import OpSources
from dswheels.kernel.manifest import parse_manifest
from dswheels.plan.costs import Units, parse_costs, replace_op_lines
from dswheels.plan.refit import refit_manifests
from dswheels.plan.scopes import Scope
from dswheels.probes import op_sources

DATA = Path(__file__).resolve().parents[1] / "dswheels" / "compile_times.yml"


def _manifests(args: Sequence[str]) -> list[Path]:
    found: list[Path] = []
    for arg in args:
        path = Path(arg)
        found += sorted(path.rglob("*.manifest.json")) if path.is_dir() else [path]
    return found


def _probe(tree: Path, python: str, accelerator: str) -> dict[str, object]:
    env = {**os.environ, "DS_ACCELERATOR": accelerator}
    wanted = json.dumps(["*"])
    done = subprocess.run(
        [python, str(OP_SOURCES_SCRIPT), wanted], cwd=tree, env=env, capture_output=True, text=True, check=False
    )
    for line in done.stdout.splitlines():
        if line.startswith(op_sources.MARK):
            data = json.loads(line[len(op_sources.MARK) :])
            if isinstance(data, dict):
                return data
    raise SystemExit(f"the op sources probe found no ops in {tree} with {python}:\n{done.stdout[-2000:]}{done.stderr}")


def _units_of(tree: Path, python: str) -> dict[str, Units]:
    """Every op's translation units by scope, as DeepSpeed's builders (CUDA first, then the CPU ones) list them."""
    version = (tree / "version.txt").read_text(encoding="utf-8").strip() if (tree / "version.txt").is_file() else "?"
    found: dict[str, Units] = {}
    for accelerator in ("cuda", "cpu"):
        data = _probe(tree, python, accelerator)
        dirs, ops = data.get("include") or {}, data.get("ops") or {}
        if not isinstance(dirs, dict) or not isinstance(ops, dict):
            raise SystemExit(f"the op sources probe answered no ops: {data}")
        torch = "torch's headers" if dirs.get("torch") else "no torch headers (torch/ATen/c10 judged by name)"
        for name, entry in ops.items():
            sources = entry.get("sources") or []
            if name in found or not sources:
                continue
            op = OpSources(
                name=name,
                var="",
                module="",
                sources=tuple(sources),
                include_paths=tuple(entry.get("include_paths") or ()),
            )
            host: dict[Scope, int] = {}
            device: dict[Scope, int] = {}
            for source, scope in unit_scopes(op, tree, dirs):
                kinds = device if source.endswith(".cu") else host
                kinds[Scope(scope)] = kinds.get(Scope(scope), 0) + 1
            builders = f"DeepSpeed {version}'s op builders ({accelerator}; the op sources probe)"
            found[name] = Units(host, device, "probed", f"{builders} and the #include graph, {torch}")
    return found


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="update_compile_times.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--cpu-share", type=float, default=1.0)
    parser.add_argument("--measured-on", default="")
    parser.add_argument("--units", type=Path, metavar="TREE")
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args(argv)
    text = args.data.read_text(encoding="utf-8")
    model = parse_costs(yaml.safe_load(text))
    if args.units is not None:
        units = _units_of(args.units, args.python)
        fitted = {name: replace(model.op(name), units=u) for name, u in units.items() if name in model.ops}
        for name in sorted(fitted):
            print(f"{name}: {fitted[name].units.count} units ({fitted[name].units.source})")
        args.data.write_text(replace_op_lines(text, fitted), encoding="utf-8")
        print(f"rewrote {args.data}")
        return 0
    paths = _manifests(args.paths)
    manifests = [parse_manifest(path.read_text(encoding="utf-8")) for path in paths]
    if not paths:
        print("usage: nox -s costs -- [--cpu-share F] [--measured-on TEXT] WHEELHOUSE_OR_MANIFEST... (or --units TREE)")
        return 2
    if not 0 < args.cpu_share <= 1:
        print(f"--cpu-share {args.cpu_share}: a share of a core is in (0, 1]")
        return 2
    refit = refit_manifests(text, model, manifests, cpu_share=args.cpu_share, measured_on=args.measured_on)
    for line in refit.notes:
        print(line)
    if not refit.fitted:
        print("no manifest with per-unit compile times and a cold compiler cache: nothing to refit")
        return 1
    parse_costs(yaml.safe_load(refit.text))  # what is written reads back
    args.data.write_text(refit.text, encoding="utf-8")
    print(f"rewrote {args.data}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
