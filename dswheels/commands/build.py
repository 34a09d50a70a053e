"""``dswheels build``: compile every planned op of each selected cell into a verified wheel."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from dswheels.commands.common import DEFAULT_MATRIX, Subparsers, formatter, load_matrix
from dswheels.commands.plan import add_selection_arguments, compute_plan
from dswheels.core.buildreport import CellOutcome, render_results_markdown, render_results_table
from dswheels.core.compat import Compat, load_compat
from dswheels.core.config import MatrixSpec, parse_matrix
from dswheels.core.model import PlannedCell, Platform, Python, Variant
from dswheels.core.naming import cell_id, parse_cell_id
from dswheels.core.plan import Combo, LocalHost, plan
from dswheels.core.sources import TorchSource
from dswheels.core.versions import format_version, parse_version
from dswheels.effects import proc
from dswheels.effects.build import BuildOptions, CellResult, build_cell
from dswheels.effects.gha import in_ci, in_github_actions, write_summary
from dswheels.effects.interpreter import find_uv, probe_python
from dswheels.effects.sources import env_cache_dir
from dswheels.effects.toolchain import detect_host
from dswheels.errors import ConfigError, EnvironmentMismatchError
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

With no selection, builds for this environment: the torch installed here, its CUDA, the
nvcc found, the newest DeepSpeed dswheels knows (or --deepspeed).

examples:
  dswheels build                                    # this environment's torch, newest DeepSpeed
  dswheels build --deepspeed 0.19.8 --install       # ... and install the wheel here
  dswheels build --cell ds0.19.8-torch2.14-cu130-cp311-linux_x86_64
  dswheels build --cell "$CELLS" --keep-going       # the workflow: several ids in one value
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
    p.add_argument("--out", type=Path, default=Path("wheelhouse"), metavar="DIR", help="output (default: %(default)s)")
    p.add_argument("--keep-going", action="store_true", help="build the other cells after a failure; report all")
    p.add_argument(
        "--torch-index",
        metavar="URL|DIR|pip",
        help="where torch comes from: an index URL, a directory of wheels, or 'pip' for the indexes pip is "
        "configured with (default: the plan's, https://download.pytorch.org/whl/<variant>)",
    )
    p.add_argument(
        "--interpreter",
        choices=("auto", "current", "venv"),
        default="auto",
        help="auto: this interpreter when it has the cell's torch, else a venv (default); current; venv",
    )
    p.add_argument("--install", action="store_true", help="install the built wheel into this interpreter")
    p.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1, metavar="N", help="parallel compile jobs")
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
    p.add_argument("--pypi", metavar="URL", help="PyPI JSON API URL for DeepSpeed (default: compat.yml's)")
    p.add_argument(
        "--lock",
        type=Path,
        metavar="FILE",
        help="sha256 lock for sources PyPI does not vouch for (default: sources.lock.json beside the matrix)",
    )
    p.add_argument(
        "--record-sources",
        action="store_true",
        help="record the sha256 of unpinned sources in the lock on first download (always allowed outside CI)",
    )
    p.add_argument("--verbose", "-v", action="store_true", help="show the compiler output (always in the log)")
    p.set_defaults(func=run)


def _split_cells(values: Sequence[str]) -> list[str]:
    return [cid for value in values for cid in value.split()]


def _torch_source(text: str | None) -> TorchSource:
    if text is None:
        return TorchSource("plan")
    if text == "pip":
        return TorchSource("pip")
    if "://" in text and not text.startswith("file://"):
        return TorchSource("index", text)
    path = Path(text.removeprefix("file://")).expanduser()
    if not path.exists():
        raise ConfigError(f"--torch-index {text}: no such directory", hint="give an index URL, a directory, or 'pip'")
    if (path / "torch").is_dir() or (path / "index.html").exists():
        return TorchSource("index", path.resolve().as_uri())
    return TorchSource("links", str(path.resolve()))


def _plan_cells(args: argparse.Namespace, compat: Compat) -> list[PlannedCell]:
    cells = _split_cells(args.cell)
    combo_given = any(getattr(args, key) for key in ("torch", "cuda", "python", "platform"))
    if cells:
        if args.only or combo_given or args.deepspeed:
            raise ConfigError(
                "--cell names complete cells; it cannot be combined with --only or --deepspeed/--torch/..."
            )
        spec = _spec(args, compat)
        planned: list[PlannedCell] = []
        problems: list[str] = []
        for text in cells:
            try:
                cell = parse_cell_id(text)
            except ValueError as exc:
                problems.append(str(exc))
                continue
            combo = Combo(
                deepspeed=cell.deepspeed,
                torch=cell.torch,
                variant=cell.variant,
                python=cell.python,
                platform=cell.platform,
            )
            nvcc = parse_version(args.nvcc)[:2] if args.nvcc else None
            result = plan(spec, compat, combo=combo, nvcc=nvcc)
            planned.extend(result.planned)
        if problems:
            raise ConfigError("bad --cell value", details="\n".join(problems))
        return planned
    if args.only or combo_given:
        return list(compute_plan(args, compat).planned)
    return [_plan_local(args, compat)]


def _spec(args: argparse.Namespace, compat: Compat) -> MatrixSpec:
    return load_matrix(args.matrix, compat)


def _plan_local(args: argparse.Namespace, compat: Compat) -> PlannedCell:
    """This environment as a cell: its Python, torch and CUDA; the host's compiler and nvcc."""
    info = probe_python(sys.executable)
    if info.torch is None:
        raise EnvironmentMismatchError(
            "no torch in this environment to build for",
            hint="install torch here, or name a cell: dswheels build --cell ds0.19.8-torch2.14-cu130-cp312-linux_x86_64"
            " (a venv with that torch is made for it)",
        )
    platform = {"linux-x86_64": Platform.LINUX_X86_64, "win-amd64": Platform.WIN_AMD64}.get(info.platform)
    if platform is None:
        raise EnvironmentMismatchError(f"dswheels builds for linux_x86_64 and win_amd64, this is {info.platform}")
    torch = parse_version(".".join(info.torch.split("+")[0].split(".")[:2]))
    variant = Variant.parse(info.torch_cuda) if info.torch_cuda else Variant.parse("cpu")
    python = Python.parse(".".join(info.python.split(".")[:2]) + ("t" if info.gil_disabled else ""))
    deepspeed = parse_version(args.deepspeed) if args.deepspeed else compat.deepspeed_releases[-1]
    host_tools = detect_host()
    nvcc = host_tools.nvcc
    if args.nvcc:
        nvcc = parse_version(args.nvcc)[:2]
    if variant.is_cuda and nvcc is None:
        raise EnvironmentMismatchError(
            f"torch {info.torch} is a CUDA {info.torch_cuda} build and no CUDA toolkit (nvcc) was found",
            hint=f"install CUDA {info.torch_cuda} and set CUDA_HOME",
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
    get_reporter().info(
        f"building for this environment: Python {python}, torch {info.torch}"
        + (f", nvcc {format_version(nvcc)}" if nvcc else "")
        + f" -> {cell_id(result.planned[0].cell)}",
    )
    return result.planned[0]


def _lock_path(args: argparse.Namespace, cache_dir: Path) -> Path:
    if args.lock is not None:
        return Path(args.lock)
    matrix = Path(args.matrix)
    if matrix.exists():
        return matrix.parent / "sources.lock.json"
    return cache_dir / "sources.lock.json"


def _install(wheel: Path) -> None:
    uv = find_uv()
    proc.run(
        [uv, "pip", "install", "--python", sys.executable, "--reinstall-package", "deepspeed", str(wheel)],
        error=EnvironmentMismatchError,
        what="installing the wheel",
    )


def run(args: argparse.Namespace) -> int:
    if args.jobs < 1:
        raise ConfigError("--jobs must be at least 1")
    compat = load_compat()
    planned = _plan_cells(args, compat)
    cache_dir = (args.cache_dir or env_cache_dir()).expanduser().resolve()
    opts = BuildOptions(
        out_dir=args.out.resolve(),
        cache_dir=cache_dir,
        work_root=(args.work_dir or cache_dir / "w").expanduser().resolve(),
        compat=compat,
        jobs=args.jobs,
        interpreter=args.interpreter,
        torch_source=_torch_source(args.torch_index),
        compiler_cache=args.compiler_cache,
        debug_symbols=args.debug_symbols,
        keep_work=args.keep_work,
        pypi_json=args.pypi or compat.sdist_json,
        lock_path=_lock_path(args, cache_dir).resolve(),
        allow_unpinned=args.record_sources or not in_ci(),
        verbose=args.verbose or in_github_actions(),
    )
    if args.install and len(planned) != 1:
        raise ConfigError("--install builds exactly one cell (this environment's)")
    reporter = get_reporter()
    reporter.info(f"{len(planned)} cell(s) to build into {opts.out_dir}")
    results: list[CellResult] = []
    for item in planned:
        result = build_cell(item, opts)
        results.append(result)
        if result.error is not None:
            if not args.keep_going:
                _report(results, planned)
                raise result.error
            reporter.error(f"{result.cell_id}: {result.error.message}")
            sys.stderr.write(result.error.render() + "\n")
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
    )


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _report(results: Sequence[CellResult], planned: Sequence[PlannedCell]) -> None:
    rows = [_outcome(r) for r in results]
    skipped = [cell_id(p.cell) for p in planned[len(results) :]]
    sys.stdout.write(render_results_table(rows, skipped=skipped))
    write_summary(render_results_markdown(rows, skipped=skipped))
