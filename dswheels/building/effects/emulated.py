"""A cell built in an emulated machine of its CPU (an arm64 root under qemu): ``dswheels build`` itself, there.

The cell is handed over as the plan made it here: a one-cell plan file (the plan's JSON contract,
docs/plan-json.md), built with ``dswheels build --plan FILE --cell ID`` as wheels.yml's build jobs do on
a runner. The wheel, its manifest and the build's log land in this run's ``--out``, which the machine sees
at the same path; the machine keeps its own cache (another CPU's venvs and objects) under this one's. The
wheel's name there carries the floor auditwheel judged in the machine (``manylinux_2_N_aarch64``), so it is
found by its cell.
"""

from __future__ import annotations

from pathlib import Path

from dswheels import __version__
from dswheels.host.cache import CacheLayout
from dswheels.host.files import write_text_atomic
from dswheels.host.log import get_reporter
from dswheels.kernel.errors import BuildError
from dswheels.kernel.manifest import manifest_name
from dswheels.kernel.model import Plan, PlannedCell
from dswheels.kernel.naming import cell_id, try_parse_wheel
from dswheels.kernel.plan_json import render_json
from dswheels.kernel.sources import TorchSource, TorchSourceKind
from dswheels.platforms.hosts import EmulatedMachine

__all__ = ["PYPI_SIMPLE", "build_in_machine", "inner_argv"]

PYPI_SIMPLE = "https://pypi.org/simple/"


def _torch_index(source: TorchSource) -> tuple[list[str], list[Path]]:
    """``--torch-index`` as the machine's build reads it, and the folder it must see (a directory of wheels)."""
    if source.kind is TorchSourceKind.PLAN:
        return [], []
    if source.kind is TorchSourceKind.PIP:
        # this machine's pip configuration names its own indexes and folders; the machine's pip has none: PyPI
        return ["--torch-index", PYPI_SIMPLE], []
    if source.kind is TorchSourceKind.LINKS and "://" not in source.location:
        return ["--torch-index", source.location], [Path(source.location)]
    return ["--torch-index", source.location], []


def inner_argv(
    plan_file: Path,
    cid: str,
    *,
    out: Path,
    cache: CacheLayout,
    ops: tuple[str, ...],
    jobs: int,
    torch_source: TorchSource,
    debug_symbols: bool,
    pypi: str | None,
) -> tuple[list[str], list[Path]]:
    """The ``dswheels build`` arguments for the machine, and the folders of this one it must see.

    >>> argv, seen = inner_argv(Path("/o/p.json"), "ds0.19.8-torch2.10-cpu-cp311-linux_aarch64", out=Path("/o"),
    ...     cache=CacheLayout(Path("/c")), ops=(), jobs=2, torch_source=TorchSource(TorchSourceKind.PIP),
    ...     debug_symbols=False, pypi=None)
    >>> argv[5:]
    ['--out', '/o', '--cache-dir', '/c', '--jobs', '2', '--torch-index', 'https://pypi.org/simple/']
    """
    argv = ["build", "--plan", str(plan_file), "--cell", cid, "--out", str(out), "--cache-dir", str(cache.root)]
    argv += ["--jobs", str(jobs)]
    index, seen = _torch_index(torch_source)
    argv += index
    if ops:
        argv += ["--ops", ",".join(ops)]
    if debug_symbols:
        argv.append("--debug-symbols")
    if pypi:
        argv += ["--pypi", pypi]
    return argv, [out, plan_file.parent, *seen]


def build_in_machine(
    machine: EmulatedMachine,
    planned: PlannedCell,
    *,
    out: Path,
    cache: CacheLayout,
    ops: tuple[str, ...],
    jobs: int,
    torch_source: TorchSource,
    debug_symbols: bool,
    pypi: str | None,
    log: Path,
) -> tuple[Path, Path]:
    """Build the cell in ``machine``; its wheel and manifest in ``out/<variant>/`` (BuildError when absent)."""
    cid = cell_id(planned.cell)
    out = out.resolve()
    plans = out / "plans"
    plans.mkdir(parents=True, exist_ok=True)
    plan_file = plans / f"{cid}.json"
    plan = Plan(planned=(planned,), dropped=(), matrix="(this run's plan)", mode="combo")
    write_text_atomic(plan_file, render_json(plan, version=__version__))
    inner_cache = cache.emulated
    argv, visible = inner_argv(
        plan_file,
        cid,
        out=out,
        cache=inner_cache,
        ops=ops,
        jobs=jobs,
        torch_source=torch_source,
        debug_symbols=debug_symbols,
        pypi=pypi,
    )
    get_reporter().info(f"building {cid} in {machine.describe()}: dswheels build, natively there")
    machine.run_dswheels(argv, visible=visible, cache=inner_cache, log=log, timeout=None)
    folder = out / planned.cell.variant.name
    wheels = [p for p in sorted(folder.glob("*.whl")) if (w := try_parse_wheel(p.name)) and w.cell == planned.cell]
    manifests = [m for p in wheels if (m := p.with_name(manifest_name(p.name))).is_file()]
    if len(wheels) != 1 or len(manifests) != 1:
        raise BuildError(
            f"the build in the emulated machine ended without one wheel of {cid} and its manifest in {folder} "
            f"(found {', '.join(p.name for p in wheels) or 'none'})",
            hint=f"its log: {log}",
        )
    return wheels[0], manifests[0]
