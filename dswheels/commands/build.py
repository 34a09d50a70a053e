"""``dswheels build``: compile every planned op of each selected cell into a verified wheel."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from dswheels.commands.common import (
    DEFAULT_MATRIX,
    Subparsers,
    add_env_option,
    add_torch_index_argument,
    formatter,
    load_matrix,
    parse_nvcc_option,
)
from dswheels.commands.selection import COMBO_AXES, add_selection_arguments, cells_of_plan, compute_plan
from dswheels.core.building.compiler_cache import SCCACHE_BACKENDS, SccacheSettings
from dswheels.core.building.parallelism import fit_jobs
from dswheels.core.building.report import CellOutcome, render_results_markdown, render_results_table
from dswheels.core.compat import Compat, load_compat
from dswheels.core.locations import WHEELHOUSE
from dswheels.core.matrix.parse import parse_matrix
from dswheels.core.model import PlannedCell, Platform, Python, Variant
from dswheels.core.naming import cell_id, parse_cell_id
from dswheels.core.plan.planner import Combo, LocalHost, plan
from dswheels.core.sources import TorchSource, TorchSourceKind
from dswheels.core.versions import VersionTuple, format_version, parse_torch_minor, parse_version
from dswheels.core.workflow.canary import restrict_ops
from dswheels.effects import proc
from dswheels.effects.build import BuildOptions, CellResult, build_cell, discard_wheel
from dswheels.effects.gha import in_github_actions, write_summary
from dswheels.effects.interpreter import find_uv, probe_python
from dswheels.effects.machine import available_memory, cpu_count
from dswheels.effects.sources import env_cache_dir
from dswheels.effects.toolchain import detect_host
from dswheels.errors import ConfigError, EnvironmentMismatchError, VerifyError
from dswheels.log import get_reporter

__all__ = ["register", "run"]

DESCRIPTION = """\
Build DeepSpeed wheels with every planned C++/CUDA op precompiled. For each selected cell:
fetch the DeepSpeed source and check its sha256, unpack it into a fresh work directory,
make its CPU code portable (the plan's CPU baseline instead of -march=native), get an
interpreter with the cell's torch (this one if it matches, else a venv made by uv),
compile exactly the planned ops with the plan's nvcc and arch list, check every op landed
in the wheel, strip it, pin torch to the built MAJOR.MINOR, and write the wheel with its
build manifest to OUT/<variant>/. A failed cell leaves no wheel behind.

--plan FILE builds cells of a plan `dswheels plan --format json` (or `dswheels ci plan`)
wrote, exactly as planned, without planning again: all of them, or those --cell/--only name.
With no --plan/--cell/--only/--python/--platform, builds for this machine: this Python and OS,
the torch installed here (or --torch/--cuda; without either, the newest torch for this
Python with the CUDA of the toolkit found, else cpu), the newest DeepSpeed (or --deepspeed).

examples:
  dswheels build                                    # this machine: its Python, torch, CUDA
  dswheels build --deepspeed 0.19.8 --install       # ... and install the wheel here
  dswheels build --torch 2.13 --cuda cpu            # this Python, torch 2.13 CPU (in a venv)
  dswheels build --cell ds0.19.8-torch2.14-cu130-cp311-linux_x86_64
  dswheels build --plan plan/plan.json --cell "$CELLS" --keep-going   # the workflow: the plan job's cells
  dswheels build --only 'ds0.19.8-torch2.13-cpu-*' --torch-index pip
  dswheels build --cell ds0.19.8-torch2.13-cpu-cp311-linux_x86_64 --torch-index ~/wheels"""

# A matrix for local builds when there is no matrix file: only its defaults matter
# (ops: all, cpu_baseline, torch_index); the cell itself comes from this environment.
_LOCAL_MATRIX = """\
schema: 1
deepspeed: ["{deepspeed}"]
torch:
  - {{version: "{torch}", variants: [{variant}]}}
python: ["{python}"]
platforms: [{platform}]
runners:
  {platform}:
    build: [{image}]
    smoke: [self-hosted]
"""


def register(sub: Subparsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "build",
        help="build wheels with every planned op precompiled",
        description=DESCRIPTION,
        formatter_class=formatter,
    )
    add_selection_arguments(p)
    p.add_argument(
        "--cell",
        action="append",
        default=[],
        metavar="ID",
        help="a cell id to build, planned from the rules alone (repeatable; one value may hold several "
        "whitespace-separated ids)",
    )
    p.add_argument(
        "--plan",
        type=Path,
        metavar="FILE",
        help="build cells of this plan (`dswheels plan --format json`) as planned: all, or those --cell/--only name",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=WHEELHOUSE,
        metavar="DIR",
        help="output: DIR/<variant>/ (default: %(default)s, where `dswheels verify` and `dswheels publish` look)",
    )
    p.add_argument("--keep-going", action="store_true", help="build the other cells after a failure; report all")
    p.add_argument(
        "--ops",
        metavar="NAMES",
        help="build only these of the planned ops (comma- or space-separated; the others are left out of the wheel, "
        "with the reason in its manifest); '' or absent: every planned op",
    )
    add_torch_index_argument(p, what="the build interpreter")
    p.add_argument(
        "--interpreter",
        choices=("auto", "current", "venv"),
        default="auto",
        help="auto: this interpreter when it has the cell's torch, else a venv (default); current; venv",
    )
    p.add_argument("--install", action="store_true", help="install the built wheel into this interpreter")
    p.add_argument(
        "--verify",
        action="store_true",
        help="run `dswheels verify` on every built wheel (a fresh venv each); a failing wheel is removed",
    )
    p.add_argument(
        "--jobs",
        "-j",
        type=int,
        metavar="N",
        help="concurrent compiles in all (default: this machine's cores, fewer if its available memory would not "
        "hold them: ~2 GiB per CUDA compile, ~1 GiB per C++ one)",
    )
    p.add_argument(
        "--parallel-ops",
        type=int,
        default=0,
        metavar="N",
        help="extensions built at once, each with JOBS/N compile jobs (default: as many as --jobs)",
    )
    p.add_argument(
        "--debug-symbols",
        action="store_true",
        help="compile with -g and keep the debug info as a separate .debug.tar.gz beside the wheel",
    )
    p.add_argument(
        "--compiler-cache",
        choices=("auto", "ccache", "sccache", "none"),
        default="auto",
        help="ccache/sccache from PATH for C++ and nvcc (default: auto, whichever is installed)",
    )
    _add_sccache_arguments(p)
    p.add_argument(
        "--cache-dir",
        type=Path,
        metavar="DIR",
        help="downloads and venvs (default: DSWHEELS_CACHE or the user cache dir)",
    )
    p.add_argument(
        "--work-dir",
        type=Path,
        metavar="DIR",
        help="where sources are unpacked and built (keep it short on Windows; default: CACHE/w)",
    )
    p.add_argument("--keep-work", action="store_true", help="keep the work directory of successful builds too")
    p.add_argument(
        "--prepare-only",
        action="store_true",
        help="stop before the compile: fetch and verify the source, unpack and patch it for the cell's platform, "
        "get the build interpreter; works for a Windows cell on Linux and the other way round (CI checks the "
        "Windows path this way); prints each prepared source tree",
    )
    p.add_argument("--pypi", metavar="URL", help="PyPI JSON API URL for DeepSpeed (default: compat.yml's)")
    p.add_argument("--verbose", "-v", action="store_true", help="show the compiler output (always in the log)")
    p.set_defaults(func=run)


def _add_sccache_arguments(p: argparse.ArgumentParser) -> None:
    """Where sccache keeps its objects (docs/costs.md); each the repository variable of its name."""
    group = p.add_argument_group("sccache's storage (with --compiler-cache sccache)")
    add_env_option(
        group,
        "--sccache-backend",
        env="DSWHEELS_SCCACHE_BACKEND",
        default="auto",
        choices=SCCACHE_BACKENDS,
        help="auto: the bucket when named, else GitHub's Actions cache when the job exposes it, else the local "
        "disk; local: the local disk only",
    )
    add_env_option(group, "--sccache-bucket", env="DSWHEELS_SCCACHE_BUCKET", metavar="NAME", help="an S3 bucket")
    add_env_option(
        group, "--sccache-endpoint", env="DSWHEELS_SCCACHE_ENDPOINT", metavar="URL", help="an S3-compatible store"
    )
    add_env_option(group, "--sccache-region", env="DSWHEELS_SCCACHE_REGION", metavar="REGION", help="its region")
    add_env_option(
        group,
        "--sccache-namespace",
        env="DSWHEELS_SCCACHE_NAMESPACE",
        default="dswheels",
        metavar="NAME",
        help="the key space (wheels.yml: wheels-<tag or branch>)",
    )


def _sccache_settings(args: argparse.Namespace) -> SccacheSettings:
    return SccacheSettings(
        backend=args.sccache_backend,
        bucket=args.sccache_bucket or "",
        endpoint=args.sccache_endpoint or "",
        region=args.sccache_region or "",
        namespace=args.sccache_namespace,
    )


def _split_cells(values: Sequence[str]) -> list[str]:
    return [cid for value in values for cid in value.split()]


def _torch_source(text: str | None) -> TorchSource:
    if text is None:
        return TorchSource(TorchSourceKind.PLAN)
    if text == "pip":
        return TorchSource(TorchSourceKind.PIP)
    if "://" in text and not text.startswith("file://"):
        return TorchSource(TorchSourceKind.INDEX, text)
    path = Path(text.removeprefix("file://")).expanduser()
    if not path.exists():
        raise ConfigError(f"--torch-index {text}: no such directory", hint="give an index URL, a directory, or 'pip'")
    if (path / "torch").is_dir() or (path / "index.html").exists():
        return TorchSource(TorchSourceKind.INDEX, path.resolve().as_uri())
    return TorchSource(TorchSourceKind.LINKS, str(path.resolve()))


def _plan_cells(args: argparse.Namespace, compat: Compat) -> list[PlannedCell]:
    """--plan's cells; --cell ids; the matrix (--only, or a combination naming --python/--platform); else
    this machine."""
    cells = _split_cells(args.cell)
    combo = any(getattr(args, key) for key in COMBO_AXES)
    if args.plan is not None:
        if combo or args.nvcc:
            raise ConfigError(
                "--plan builds cells as the plan resolved them; it cannot be combined with --deepspeed/--torch/"
                "--cuda/--python/--platform/--nvcc",
                hint="select cells of the plan with --cell or --only",
            )
        return cells_of_plan(args.plan, ids=cells, only=args.only)
    if cells:
        if args.only or combo:
            raise ConfigError(
                "--cell names complete cells; it cannot be combined with --only or --deepspeed/--torch/..."
            )
        return plan_cell_ids(cells, matrix=args.matrix, nvcc=args.nvcc, compat=compat)
    if args.only or args.python or args.platform:
        return list(compute_plan(args, compat).planned)
    return [_plan_local(args, compat)]


def plan_cell_ids(ids: Sequence[str], *, matrix: Path, nvcc: str | None, compat: Compat) -> list[PlannedCell]:
    """Plan cells named by id from the rules alone (the matrix gives ops, arch lists, baseline, index)."""
    spec = load_matrix(matrix, compat)
    nvcc_version = parse_nvcc_option(nvcc)
    cells = []
    problems: list[str] = []
    for text in ids:
        try:
            cells.append(parse_cell_id(text))
        except ValueError as exc:  # noqa: PERF203 - every bad id is reported at once
            problems.append(str(exc))
    if problems:
        raise ConfigError("bad --cell value", details="\n".join(problems))
    planned: list[PlannedCell] = []
    for cell in cells:
        combo = Combo(
            deepspeed=cell.deepspeed, torch=cell.torch, variant=cell.variant, python=cell.python, platform=cell.platform
        )
        planned.extend(plan(spec, compat, combo=combo, nvcc=nvcc_version).planned)
    return planned


def _newest_torch(compat: Compat, python: Python, os_name: str, variant: Variant | None) -> VersionTuple | None:
    for minor in reversed(compat.torch_minors):
        release = compat.torch[minor]
        if python in release.python[os_name] and (variant is None or variant in release.variants_for(os_name)):
            return minor
    return None


def _plan_local(args: argparse.Namespace, compat: Compat) -> PlannedCell:
    """This machine as a cell: its Python and OS; torch and CUDA from this interpreter's torch, else from
    --torch/--cuda, else the newest torch for this Python with the CUDA of the toolkit found (or cpu)."""
    try:
        variant = Variant.parse(args.cuda) if args.cuda else None
    except ValueError as exc:
        raise ConfigError(f"--cuda: {exc}") from None
    try:
        torch = parse_torch_minor(args.torch) if args.torch else None
    except ValueError as exc:
        raise ConfigError(f"--torch: {exc}") from None
    info = probe_python(sys.executable)
    platform = Platform.from_sysconfig(info.platform)
    if platform is None:
        raise EnvironmentMismatchError(f"dswheels builds for linux_x86_64 and win_amd64, this is {info.platform}")
    python = Python.parse(".".join(info.python.split(".")[:2]) + ("t" if info.gil_disabled else ""))
    deepspeed = parse_version(args.deepspeed) if args.deepspeed else compat.deepspeed_releases[-1]
    host_tools = detect_host()
    nvcc = parse_version(args.nvcc)[:2] if args.nvcc else host_tools.nvcc
    here = ""
    if info.torch is not None:
        here_torch = parse_version(".".join(info.torch.split("+")[0].split(".")[:2]))
        here_variant = Variant.parse(info.torch_cuda) if info.torch_cuda else Variant.parse("cpu")
        if (torch in (None, here_torch)) and (variant in (None, here_variant)):
            torch, variant, here = here_torch, here_variant, f"torch {info.torch} of this environment"
    if variant is None:
        toolkit = Variant.parse(format_version(nvcc)) if nvcc else None
        variant = toolkit if toolkit and _newest_torch(compat, python, platform.os, toolkit) else Variant.parse("cpu")
    if torch is None:
        torch = _newest_torch(compat, python, platform.os, variant)
        if torch is None:
            raise EnvironmentMismatchError(f"no torch release has a {variant.name} wheel for Python {python}")
    if variant.is_cuda and nvcc is None:
        raise EnvironmentMismatchError(
            f"a {variant.name} build needs a CUDA toolkit (nvcc), and none was found",
            hint=f"install CUDA {variant.cuda_text} and set CUDA_HOME, or build the CPU variant: --cuda cpu",
        )
    if args.matrix.exists():
        spec = load_matrix(args.matrix, compat)
    else:
        if args.matrix != DEFAULT_MATRIX:
            load_matrix(args.matrix, compat)  # raises the missing-file error
        image = "ubuntu-24.04" if platform is Platform.LINUX_X86_64 else "windows-2022"
        text = _LOCAL_MATRIX.format(
            deepspeed=format_version(deepspeed),
            torch=format_version(torch),
            variant=variant.name,
            python=python,
            platform=platform.value,
            image=image,
        )
        spec = parse_matrix(text, "(local defaults)", compat)
    combo = Combo(deepspeed=deepspeed, torch=torch, variant=variant, python=python, platform=platform)
    host = LocalHost(os=host_tools.os, gcc=host_tools.gcc, msvc=host_tools.msvc, nvcc=nvcc[:2] if nvcc else None)
    result = plan(spec, compat, combo=combo, host=host)
    planned = result.planned[0]
    get_reporter().info(
        f"building for this machine: Python {python}, "
        + (here or f"torch {planned.torch_version} {variant.name}")
        + (f", nvcc {format_version(nvcc)}" if nvcc and variant.is_cuda else "")
        + f" -> {cell_id(planned.cell)}",
    )
    return planned


def _install(wheel: Path) -> None:
    uv = find_uv()
    proc.run(
        [uv, "pip", "install", "--python", sys.executable, "--reinstall-package", "deepspeed", str(wheel)],
        error=EnvironmentMismatchError,
        what="installing the wheel",
    )


def _restrict(planned: list[PlannedCell], ops: str | None) -> list[PlannedCell]:
    names = [name for name in (ops or "").replace(",", " ").split() if name]
    if not names:
        return planned
    restricted = []
    for item in planned:
        try:
            restricted.append(restrict_ops(item, names, why="not selected (--ops)"))
        except ValueError as exc:  # noqa: PERF203 - the first cell that lacks one is the error
            raise ConfigError(f"--ops {ops}: {cell_id(item.cell)}: {exc}") from None
    return restricted


def _jobs(args: argparse.Namespace, planned: Sequence[PlannedCell]) -> int:
    if args.jobs is not None:
        return int(args.jobs)
    jobs, why = fit_jobs(cpu_count(), available_memory(), cuda=any(p.cell.variant.is_cuda for p in planned))
    get_reporter().info(f"{jobs} concurrent compile(s): {why} (--jobs to change)")
    return jobs


def run(args: argparse.Namespace) -> int:
    if (args.jobs is not None and args.jobs < 1) or args.parallel_ops < 0:
        raise ConfigError("--jobs must be at least 1 and --parallel-ops at least 0")
    compat = load_compat()
    planned = _restrict(_plan_cells(args, compat), args.ops)
    cache_dir = (args.cache_dir or env_cache_dir()).expanduser().resolve()
    opts = BuildOptions(
        out_dir=args.out.resolve(),
        cache_dir=cache_dir,
        work_root=(args.work_dir or cache_dir / "w").expanduser().resolve(),
        compat=compat,
        jobs=_jobs(args, planned),
        interpreter=args.interpreter,
        torch_source=_torch_source(args.torch_index),
        compiler_cache=args.compiler_cache,
        sccache=_sccache_settings(args),
        debug_symbols=args.debug_symbols,
        keep_work=args.keep_work,
        pypi_json=args.pypi or compat.sdist_json,
        verbose=args.verbose or in_github_actions(),
        parallel_ops=args.parallel_ops,
        prepare_only=args.prepare_only,
    )
    if args.install and len(planned) != 1:
        raise ConfigError("--install builds exactly one cell (this environment's)")
    if args.prepare_only and (args.install or args.verify):
        raise ConfigError("--prepare-only compiles nothing: it cannot be combined with --install or --verify")
    reporter = get_reporter()
    reporter.info(f"{len(planned)} cell(s) to build into {opts.out_dir}")
    results: list[CellResult] = []
    for item in planned:
        result = build_cell(item, opts)
        results.append(result)
        if result.error is None and args.verify and result.wheel is not None:
            result.error = _verify(result.wheel, args)
        if result.error is not None:
            if not args.keep_going:
                if not args.prepare_only:
                    _report(results, planned)
                raise result.error
            reporter.error(f"{result.cell_id}: {result.error.message}")
            sys.stderr.write(result.error.render() + "\n")
    if args.prepare_only:
        for result in results:
            if result.prepared is not None:
                sys.stdout.write(f"prepared {result.cell_id}: {result.prepared}\n")
    else:
        _report(results, planned)
    failed = [r for r in results if r.error is not None]
    if failed:
        first = failed[0].error
        assert first is not None  # noqa: S101
        sys.stderr.write(f"{len(failed)} of {len(results)} cell(s) failed\n")
        return first.exit_code
    if args.install:
        wheel = results[0].wheel
        assert wheel is not None  # noqa: S101
        _install(wheel)
    return 0


def _verify(wheel: Path, args: argparse.Namespace) -> VerifyError | None:
    """Run ``dswheels verify`` on a fresh wheel; a wheel that fails is removed (it must not be published)."""
    from dswheels.commands.verify import verify_one  # noqa: PLC0415 - verify imports this module

    ns = argparse.Namespace(
        manifest=None,
        matrix=args.matrix,
        static=False,
        python=None,
        torch_index=args.torch_index,
        accelerator="auto",
        torch_version=None,
    )
    static, runtime, _expected = verify_one(wheel, ns)
    failed = [c for c in static + (runtime.checks if runtime else []) if not c.ok]
    if not failed:
        return None
    discard_wheel(wheel)
    return VerifyError(
        f"{wheel.name} failed verification (removed from the output)",
        details="\n".join(f"{c.name}: {c.detail}" for c in failed),
        hint="the wheel builds but does not work as built; see the checks above",
    )


def _outcome(result: CellResult) -> CellOutcome:
    manifest = result.manifest_data
    return CellOutcome(
        cell_id=result.cell_id,
        ok=result.error is None,
        wheel=manifest.wheel.filename if manifest else "",
        size=manifest.wheel.size if manifest else 0,
        sha256=manifest.wheel.sha256 if manifest else "",
        seconds=result.seconds,
        ops=tuple((op.name, op.seconds) for op in manifest.ops_built) if manifest else (),
        cache=str(manifest.compiler_cache.get("tool", "")) if manifest and manifest.compiler_cache else "",
        cache_hits=_int(manifest.compiler_cache.get("hits")) if manifest else None,
        cache_misses=_int(manifest.compiler_cache.get("misses")) if manifest else None,
        error=result.error.message if result.error else "",
        log=str(result.log_path or ""),
        op_outcomes=result.op_outcomes if result.error else (),
        error_lines=tuple((result.error.details or "").splitlines()[:20]) if result.error else (),
    )


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _report(results: Sequence[CellResult], planned: Sequence[PlannedCell]) -> None:
    rows = [_outcome(r) for r in results]
    skipped = [cell_id(p.cell) for p in planned[len(results) :]]
    sys.stdout.write(render_results_table(rows, skipped=skipped))
    write_summary(render_results_markdown(rows, skipped=skipped))
