"""``dswheels build``: compile every planned op of each selected cell into a verified wheel."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from dswheels.building.summary import render_results_markdown, render_results_table
from dswheels.cli.command import Command
from dswheels.cli.commands import listed_help
from dswheels.cli.flags import Flag, Flags, Nested, PathUse, Section, choice, fill, parse_count
from dswheels.cli.shared import (
    REPORT,
    SELECTION,
    combo_given,
    combo_of,
    matrix_selection,
    parse_nvcc_option,
    qemu,
    qemu_settings,
    torch_index,
)
from dswheels.cuda.redist import REDIST_URL
from dswheels.host.gha import in_github_actions
from dswheels.host.log import get_reporter
from dswheels.host.venvs import InterpreterMode
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.locations import WHEELHOUSE
from dswheels.kernel.platform_traits import QemuCompilers, WineCudaSource
from dswheels.plan.compiler_cache_keys import CompilerCacheChoice, SccacheBackend, SccacheSettings

if TYPE_CHECKING:  # the build itself is imported when it runs: `dswheels --help` and `build --help` need none of it
    from dswheels.building.effects.cell import CellResult
    from dswheels.building.step import BuildOptions, BuildRun
    from dswheels.plan.effects.selection import CellSelection
    from dswheels.platforms.hosts import HostChoice

__all__ = ["COMMAND"]

HELP = listed_help("build")

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


# Where sccache keeps its objects (docs/costs.md); each the repository variable of its name.
SCCACHE = Nested(
    "sccache",
    SccacheSettings,
    choice(
        "--sccache-backend",
        SccacheBackend,
        to="backend",
        env="DSWHEELS_SCCACHE_BACKEND",
        help="auto: the bucket when named, else the local disk (SCCACHE_DIR: wheels.yml saves it as one Actions "
        "cache entry per job); local: the local disk only. Never sccache's own Actions cache backend: one entry "
        "per object, more than GitHub lets a repository create (docs/costs.md)",
    ),
    Flag("--sccache-bucket", env="DSWHEELS_SCCACHE_BUCKET", metavar="NAME", to="bucket", help="an S3 bucket"),
    Flag(
        "--sccache-endpoint",
        env="DSWHEELS_SCCACHE_ENDPOINT",
        metavar="URL",
        to="endpoint",
        help="an S3-compatible store",
    ),
    Flag("--sccache-region", env="DSWHEELS_SCCACHE_REGION", metavar="REGION", to="region", help="its region"),
    Flag(
        "--sccache-namespace",
        env="DSWHEELS_SCCACHE_NAMESPACE",
        default="dswheels",
        metavar="NAME",
        to="namespace",
        help="the bucket's key space (wheels.yml: wheels-<tag or branch>)",
    ),
)


def _ops(text: str | None) -> tuple[str, ...]:
    return tuple(name for name in (text or "").replace(",", " ").split() if name)


FLAGS: Flags = (
    *SELECTION,
    Flag(
        "--cell",
        action="append",
        metavar="ID",
        help="a cell id to build, planned from the rules alone (repeatable; one value may hold several "
        "whitespace-separated ids)",
    ),
    Flag(
        "--plan",
        metavar="FILE",
        path=PathUse.READS,
        help="build cells of this plan (`dswheels plan --format json`) as planned: all, or those --cell/--only name",
    ),
    Flag(
        "--out",
        to="out_dir",
        default=WHEELHOUSE,
        metavar="DIR",
        path=PathUse.WRITES_INTO,
        help="output: DIR/<variant>/ (default: %(default)s, where `dswheels verify` and `dswheels publish` look)",
    ),
    Flag(
        "--keep-going", to="keep_going", action="store_true", help="build the other cells after a failure; report all"
    ),
    Flag(
        "--ops",
        to="ops",
        parse=_ops,
        metavar="NAMES",
        help="build only these of the planned ops (comma- or space-separated; the others are left out of the wheel, "
        "with the reason in its manifest); '' or absent: every planned op",
    ),
    torch_index(what="the build interpreter"),
    choice(
        "--interpreter",
        InterpreterMode,
        to="interpreter",
        help="auto: this interpreter when it has the cell's torch, else a venv (default); current; venv",
    ),
    Flag("--install", to="install", action="store_true", help="install the built wheel into this interpreter"),
    Flag(
        "--verify",
        action="store_true",
        help="run `dswheels verify` on every built wheel (a fresh venv each); a failing wheel is removed",
    ),
    Flag(
        "--jobs",
        short="-j",
        to="jobs",
        type=parse_count,
        metavar="N",
        help="concurrent compiles in all (default: this machine's cores, fewer if its available memory would not "
        "hold them: ~2 GiB per CUDA compile, ~1 GiB per C++ one): one pool every op's translation units draw on, "
        "the longest op first (a jobserver; docs/build.md#compile-parallelism)",
    ),
    Flag(
        "--parallel-ops",
        to="parallel_ops",
        type=parse_count,
        default=0,
        metavar="N",
        help="extensions built at once, each with JOBS/N compile jobs of its own instead of the shared pool "
        "(default: the pool, as many extensions at once as --jobs)",
    ),
    Flag(
        "--debug-symbols",
        to="debug_symbols",
        action="store_true",
        help="compile with -g and keep the debug info as a separate .debug.tar.gz beside the wheel",
    ),
    choice(
        "--compiler-cache",
        CompilerCacheChoice,
        to="compiler_cache",
        help="ccache/sccache from PATH for C++ and nvcc (default: auto, whichever is installed)",
    ),
    Section("sccache's storage (with --compiler-cache sccache)", SCCACHE),
    Flag(
        "--cache-dir",
        metavar="DIR",
        path=PathUse.WRITES_INTO,
        help="downloads and venvs (default: DSWHEELS_CACHE or the user cache dir)",
    ),
    Flag(
        "--work-dir",
        to="work_dir",
        metavar="DIR",
        path=PathUse.WRITES_INTO,
        help="where sources are unpacked and built (keep it short on Windows; default: CACHE/w)",
    ),
    Flag("--keep-work", to="keep_work", action="store_true", help="keep the work directory of successful builds too"),
    Flag(
        "--prepare-only",
        to="prepare_only",
        action="store_true",
        help="stop before the compile: fetch and verify the source, unpack and patch it for the cell's platform, "
        "get the build interpreter; works for a Windows cell on Linux and the other way round (CI checks the "
        "Windows path this way); prints each prepared source tree",
    ),
    Flag(
        "--msvc-root",
        env="DSWHEELS_MSVC_ROOT",
        metavar="DIR",
        path=PathUse.READS,
        help="build Windows cells on Linux under Wine, with the MSVC toolset and Windows SDK in DIR (made by "
        "msvc-wine's vsdownload.py, which asks you to accept Microsoft's license, or copied from a Visual Studio "
        "Build Tools install); the CUDA components and torch's Windows wheel come from PyPI "
        "(docs/build.md#windows-under-wine)",
    ),
    choice(
        "--wine-cuda",
        WineCudaSource,
        help="under Wine, where the CUDA components come from: NVIDIA's PyPI wheels (pypi), NVIDIA's redistributable "
        "archives as the runners install them (nvidia: compat.yml must pin the release's JSON), or auto: PyPI from "
        "CUDA 13, the archives for 12.x (PyPI's 12.x nvcc wheels carry no nvcc.exe) (default: %(default)s)",
    ),
    Flag(
        "--cuda-redist-url",
        env="DSWHEELS_CUDA_REDIST_URL",
        default=REDIST_URL,
        metavar="URL",
        help="NVIDIA's redist folder, or a mirror of it (--wine-cuda nvidia)",
    ),
    *qemu(what="build"),
    choice(
        "--qemu-compilers",
        QemuCompilers,
        env="DSWHEELS_QEMU_COMPILERS",
        help="under qemu, which GCC compiles: this machine's aarch64 cross GCC of the root's GCC release, run "
        "natively in the root (host: minutes a cell; Debian's g++-aarch64-linux-gnu), the root's own arm64 GCC, "
        "emulated (emulated: about an hour an op on 2 cores), or auto: host where it is installed "
        "(default: %(default)s)",
    ),
    Flag("--pypi", to="pypi", metavar="URL", help="PyPI JSON API URL for DeepSpeed (default: compat.yml's)"),
    Flag("--verbose", short="-v", action="store_true", help="show the compiler output (always in the log)"),
    REPORT,
)


def _split_cells(values: Sequence[str]) -> list[str]:
    return [cid for value in values for cid in value.split()]


def _selection(args: argparse.Namespace) -> CellSelection:
    """--plan's cells; --cell ids; the matrix (--only, or a combination naming --python/--platform); else
    this machine."""
    from dswheels.plan.effects.selection import NamedCells, PlanFileCells, ThisMachine  # noqa: PLC0415 - see above

    cells = tuple(_split_cells(args.cell))
    if args.plan is not None:
        if combo_given(args) or args.nvcc:
            raise ConfigError(
                "--plan builds cells as the plan resolved them; it cannot be combined with --deepspeed/--torch/"
                "--cuda/--python/--platform/--nvcc",
                hint="select cells of the plan with --cell or --only",
            )
        if cells and args.only:
            raise ConfigError("--cell and --only both select cells of the plan: give one")
        return PlanFileCells(path=args.plan, ids=cells, only=tuple(args.only))
    if cells:
        if args.only or combo_given(args):
            raise ConfigError(
                "--cell names complete cells; it cannot be combined with --only or --deepspeed/--torch/..."
            )
        return NamedCells(ids=cells, matrix=args.matrix, nvcc=parse_nvcc_option(args.nvcc))
    if args.only or args.python or args.platform:
        return matrix_selection(args)
    combo = combo_of(args)
    return ThisMachine(
        matrix=args.matrix,
        deepspeed=combo.deepspeed,
        torch=combo.torch,
        variant=combo.variant,
        nvcc=parse_nvcc_option(args.nvcc),
    )


def _options(args: argparse.Namespace) -> BuildOptions:
    if (args.jobs is not None and args.jobs < 1) or args.parallel_ops < 0:
        raise ConfigError("--jobs must be at least 1 and --parallel-ops at least 0")
    if args.prepare_only and (args.install or args.verify):
        raise ConfigError("--prepare-only compiles nothing: it cannot be combined with --install or --verify")
    from dswheels.building.step import BuildOptions  # noqa: PLC0415 - see the imports above
    from dswheels.verify.step import VerifyOptions  # noqa: PLC0415

    fields = fill(args, FLAGS)
    verify = (  # a Windows wheel built under Wine is verified in a Windows CPython made with the same MSVC root
        VerifyOptions(matrix=args.matrix, torch_source=fields["torch_source"], msvc_root=args.msvc_root)
        if args.verify
        else None
    )
    return BuildOptions(
        **fields,
        selection=_selection(args),
        verbose=args.verbose or in_github_actions(),
        verify=verify,
        hosts=_hosts(args),
    )


def _hosts(args: argparse.Namespace) -> HostChoice:
    """The Windows platform's Wine host, when an MSVC root is given (its other flags mean nothing without one);
    the aarch64 platform's qemu host, with --qemu."""
    from dswheels.platforms.hosts import HostChoice, WineSettings  # noqa: PLC0415 - see the imports above

    wine = (
        WineSettings(
            msvc_root=args.msvc_root, cuda_source=WineCudaSource(args.wine_cuda), cuda_redist_url=args.cuda_redist_url
        )
        if args.msvc_root is not None
        else None
    )
    return HostChoice(wine=wine, qemu=qemu_settings(args))


def _show_failure(result: CellResult) -> None:
    assert result.error is not None  # noqa: S101 - only failures are shown
    get_reporter().error(f"{result.cell_id}: {result.error.message}")
    get_reporter().aside(result.error.render())


def _run(options: BuildOptions, args: argparse.Namespace) -> int:
    from dswheels.building.effects.cell import CellStatus  # noqa: PLC0415 - see the imports above
    from dswheels.building.step import build_cells, install_here  # noqa: PLC0415
    from dswheels.host.cache import CacheLayout  # noqa: PLC0415

    result = build_cells(options, CacheLayout.here(args.cache_dir), on_failure=_show_failure)
    if result.stopped_by is not None:
        if not options.prepare_only:
            _report(result)
        raise result.stopped_by
    if options.prepare_only:
        for cell in result.results:
            if cell.status is CellStatus.PREPARED:
                get_reporter().emit(f"prepared {cell.cell_id}: {cell.prepared}\n")
    else:
        _report(result)
    if result.failed:
        get_reporter().aside(f"{len(result.failed)} of {len(result.results)} cell(s) failed")
        first = result.failed[0].error
        return first.exit_code if first else 1
    if options.install:
        wheel = result.results[0].wheel
        assert wheel is not None  # noqa: S101 - a cell built without error has its wheel
        install_here(wheel)
    return 0


def _report(result: BuildRun) -> None:
    from dswheels.building.step import outcome_of  # noqa: PLC0415 - see the imports above

    rows = [outcome_of(r) for r in result.results]
    get_reporter().emit(render_results_table(rows, skipped=result.not_built))
    get_reporter().summary(render_results_markdown(rows, skipped=result.not_built))


COMMAND = Command("build", HELP, DESCRIPTION, FLAGS, _options, _run)
