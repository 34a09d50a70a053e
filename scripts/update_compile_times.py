"""Refit dswheels/compile_times.yml from real builds: `nox -s costs -- [OPTIONS] WHEELHOUSE_OR_MANIFEST...`.

Each manifest records every op's translation units with their compile seconds (ninja's log) and,
since issue 23, each unit's scope (which builds share its object). Builds whose compiler cache
served anything are left out: a unit from the cache measures a lookup, not a compile. Linux
manifests refit an op's seconds, Windows manifests (a windows-2022 runner, or the Wine host) its
``windows`` seconds; every op found gets the median of its builds
(dswheels.plan.costs.refit_op), its units by scope when the builds probed them, and the
other ops keep their lines. With Windows and Linux figures both measured for some ops, the Windows
runner's ``speed`` (for the ops with no Windows figures) becomes the median of their ratios.

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
import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import yaml

from dswheels.building.effects.op_sources_asked import OP_SOURCES_SCRIPT, unit_scopes
from dswheels.building.output_reading import OpSources
from dswheels.kernel.manifest import Manifest, parse_manifest
from dswheels.plan.costs import (
    CostModel,
    Figure,
    OpCost,
    OpSample,
    Units,
    parse_costs,
    refit_op,
    replace_op_lines,
)
from dswheels.plan.scopes import Scope
from dswheels.probes import op_sources

DATA = Path(__file__).resolve().parents[1] / "dswheels" / "compile_times.yml"


def _manifests(args: Sequence[str]) -> list[Path]:
    found: list[Path] = []
    for arg in args:
        path = Path(arg)
        found += sorted(path.rglob("*.manifest.json")) if path.is_dir() else [path]
    return found


def _os(manifest: Manifest) -> str:
    return "windows" if manifest.cell_id.endswith("win_amd64") else "linux"


def _shape(manifest: Manifest) -> tuple[object, ...]:
    """What a build compiled, but for its platform: two builds of one shape differ only by their OS."""
    return (manifest.cell_id.rsplit("-", 1)[0], manifest.arch_list, tuple(sorted(manifest.ops)))


def _pairs(manifests: Sequence[Manifest]) -> list[tuple[Manifest, Manifest]]:
    """(Linux, Windows) builds of one shape: measured side by side, their compiles' ratio is Windows' speed."""
    by_shape: dict[tuple[object, ...], dict[str, Manifest]] = defaultdict(dict)
    for manifest in manifests:
        by_shape[_shape(manifest)].setdefault(_os(manifest), manifest)
    return [(both["linux"], both["windows"]) for both in by_shape.values() if set(both) == {"linux", "windows"}]


def _slots(manifest: Manifest) -> int | None:
    """The build's compile slots: its jobserver's (MAKEFLAGS -jN), None when it had none."""
    match = re.search(r"-j(\d+)", manifest.env.get("MAKEFLAGS", ""))
    return int(match.group(1)) if match else None


def _measured_share(manifest: Manifest) -> float | None:
    """The share of a core each compile had, from the build's own CPU seconds (None: not recorded): its CPU
    seconds over what its slots could have used in its compile's wall time (every slot busy: a pooled build)."""
    cpu, wall, slots = manifest.durations.get("compile_cpu"), manifest.durations.get("compile"), _slots(manifest)
    if cpu is None or not wall or slots is None:
        return None
    return min(1.0, cpu / (slots * wall))


def _samples(
    manifests: Sequence[Manifest], cpu_share: float, model: CostModel
) -> dict[tuple[str, str], list[OpSample]]:
    """(os, op) -> its samples from the manifests with a cold compiler cache."""
    samples: dict[tuple[str, str], list[OpSample]] = defaultdict(list)
    for manifest in manifests:
        archs = len([t for t in manifest.arch_list.split(";") if t])
        threads = int(manifest.env.get("DS_NVCC_THREADS", "1") or 1)
        share = _measured_share(manifest)
        if share is not None:
            print(f"{manifest.cell_id}: each compile had {share:.2f} of a core (its CPU seconds over its slots')")
        for op in manifest.ops_built:
            if manifest.accelerator == "cpu" and model.op(op.name).units.device_count:
                # the CPU accelerator's op of that name (fused_adam) is another one: C++ only
                print(f"skipped {op.name} of {manifest.cell_id}: the CPU accelerator's, not the CUDA op the model has")
                continue
            if op.units:
                samples[(_os(manifest), op.name)].append(
                    OpSample(
                        op.name,
                        op.units,
                        archs,
                        threads,
                        manifest.cell_id,
                        cpu_share=share if share is not None else cpu_share,
                        scopes=dict(op.scopes),
                    )
                )
    return samples


def _pair_speed(pairs: Sequence[tuple[Manifest, Manifest]], measured_on: str) -> Figure | None:
    """Windows' speed from builds of one shape on both: the median ratio of their compiles' seconds (a Windows
    compile's link does what MSVC's /GL left to it, which no unit's seconds hold)."""
    if not pairs:
        return None
    ratios = sorted(w.durations["compile"] / lx.durations["compile"] for lx, w in pairs)
    mid = len(ratios) // 2
    median = ratios[mid] if len(ratios) % 2 else (ratios[mid - 1] + ratios[mid]) / 2
    shown = "; ".join(
        f"{', '.join(lx.ops)} for {lx.arch_list or 'the CPU'}: Windows {w.durations['compile']:.0f} s, Linux "
        f"{lx.durations['compile']:.0f} s"
        for lx, w in pairs
    )
    where = f" ({measured_on})" if measured_on else ""
    both = "the same builds for Windows (under Wine: MSVC's cl and link, Windows nvcc) and Linux, one after the other"
    both += where
    return Figure(round(median, 2), "measured", f"{both}: {shown}")


def _cache_hits(manifest: Manifest) -> int:
    hits = manifest.compiler_cache.get("hits")
    return hits if isinstance(hits, int) else 0


def _refit(model: CostModel, samples: Mapping[tuple[str, str], list[OpSample]], measured_on: str) -> dict[str, OpCost]:
    fitted: dict[str, OpCost] = {}
    for (os_name, name), found in sorted(samples.items()):
        seconds, units = refit_op(found, measured_on=measured_on)
        cost = fitted.get(name) or model.op(name)
        cost = replace(cost, windows=seconds) if os_name == "windows" else replace(cost, linux=seconds)
        if units is not None:
            cost = replace(cost, units=units)
        fitted[name] = cost
        print(
            f"{name} ({os_name}): host {seconds.host:g} s, device {seconds.device:g} s per arch, "
            f"{cost.units.count} units ({seconds.source})"
        )
    return fitted


def _windows_speed(ops: Mapping[str, OpCost]) -> Figure | None:
    """The median ratio of Windows to Linux seconds over the ops measured on both (None: no such op)."""
    pairs = sorted(
        (name, (c.windows.host + c.windows.device) / (c.linux.host + c.linux.device))
        for name, c in ops.items()
        if c.windows is not None and c.windows.status == c.linux.status == "measured" and c.linux.host + c.linux.device
    )
    if not pairs:
        return None
    ratios = sorted(r for _, r in pairs)
    mid = len(ratios) // 2
    median = ratios[mid] if len(ratios) % 2 else (ratios[mid - 1] + ratios[mid]) / 2
    names = ", ".join(f"{n} {r:.2f}" for n, r in pairs)
    return Figure(
        round(median, 2), "measured", f"median of the Windows/Linux ratio of the ops measured on both: {names}"
    )


def replace_runner_figure(text: str, os_name: str, key: str, figure: Figure) -> str:
    """compile_times.yml with ``runners.<os>.<key>`` replaced."""
    lines = text.splitlines()
    start = lines.index("runners:")
    at = next(i for i in range(start + 1, len(lines)) if lines[i] == f"  {os_name}:")
    end = next((i for i in range(at + 1, len(lines)) if not lines[i].startswith("    ")), len(lines))
    source = figure.source.replace('"', "'")
    line = f'    {key}: {{value: {figure.value:g}, {figure.status}: "{source}"}}'
    for i in range(at + 1, end):
        if re.match(rf"^    {re.escape(key)}:", lines[i]):
            lines[i] = line
            break
    else:
        lines.insert(end, line)
    return "\n".join(lines) + "\n"


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
    cold = [m for m in manifests if not _cache_hits(m)]
    for manifest in manifests:
        if manifest not in cold:
            print(f"skipped {manifest.cell_id}: its compiler cache served {_cache_hits(manifest)} unit(s)")
    if not paths:
        print("usage: nox -s costs -- [--cpu-share F] [--measured-on TEXT] WHEELHOUSE_OR_MANIFEST... (or --units TREE)")
        return 2
    if not 0 < args.cpu_share <= 1:
        print(f"--cpu-share {args.cpu_share}: a share of a core is in (0, 1]")
        return 2
    pairs = _pairs(cold)
    paired = {id(m) for pair in pairs for m in pair if _os(m) == "windows"}  # their figure is the speed
    samples = _samples([m for m in cold if id(m) not in paired], args.cpu_share, model)
    if not samples and not pairs:
        print("no manifest with per-unit compile times and a cold compiler cache: nothing to refit")
        return 1
    fitted = _refit(model, samples, args.measured_on)
    text = replace_op_lines(text, fitted)
    speed = _pair_speed(pairs, args.measured_on) or _windows_speed({**model.ops, **fitted})
    if speed is not None:
        text = replace_runner_figure(text, "windows", "speed", speed)
        print(f"windows speed: {speed.value:g} ({speed.source})")
    parse_costs(yaml.safe_load(text))  # what is written reads back
    args.data.write_text(text, encoding="utf-8")
    print(f"rewrote {args.data}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
