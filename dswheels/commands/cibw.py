"""``dswheels cibw``: the cibuildwheel configuration of a Windows job, and its wheels' manifests after."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import dswheels
from dswheels import __version__
from dswheels.commands.build import _split_cells, plan_cell_ids
from dswheels.commands.common import Subparsers, formatter
from dswheels.core.buildenv import BuildSetup, build_env
from dswheels.core.cibw import (
    CibwError,
    before_build,
    build_identifiers,
    describe_job,
    job_record,
    render_cibw_config,
)
from dswheels.core.compat import load_compat
from dswheels.core.model import PlannedCell
from dswheels.effects.build import patch_tree
from dswheels.effects.cibw import JOB_FILE, finish_wheelhouse
from dswheels.effects.clock import utc_now
from dswheels.effects.files import write_text_atomic
from dswheels.effects.gha import in_ci
from dswheels.effects.interpreter import BUILD_REQUIREMENTS
from dswheels.effects.sources import Downloader, env_cache_dir, extract_archive, fetch_source
from dswheels.errors import ConfigError
from dswheels.log import get_reporter

__all__ = ["register", "run"]

DESCRIPTION = """\
Write the cibuildwheel configuration for one Windows build job: the Pythons of one
DeepSpeed x torch x variant. cibuildwheel then builds each Python in its own environment
with the variant's torch (before-build), python -m build --no-isolation, the environment
dswheels computes for the cell (DS_BUILD_* per planned op, DS_ACCELERATOR=cuda,
TORCH_CUDA_ARCH_LIST, CUDA_HOME=$CUDA_PATH, DS_BUILD_STRING, DISTUTILS_USE_SDK, ninja),
no repair, and `dswheels verify {wheel}` (against the plan, in the test venv) as the test.
Unless --no-source, the verified and patched DeepSpeed source (the GitHub tag archive) is
prepared in OUT/src. OUT/job.json records the job (cells, environment, verified source).

cibuildwheel writes no build manifest. After it ran, `--finish WHEELHOUSE` (same --cell,
--matrix and --out) writes <wheel>.manifest.json beside each of the job's wheels, as
`dswheels build` does: the plan, job.json, what the wheel says (installed_ops, accelerator,
torch_info, each op's extension and size, sha256; on Linux the glibc/libstdc++ floor) and
the toolchain found on the builder (nvcc, the active MSVC toolset). Compile times were not
observed (null). A wheel missing a planned op gets no manifest and the command fails.

examples:
  dswheels cibw --cell "ds0.19.8-torch2.14-cu130-cp311-win_amd64 ds0.19.8-torch2.14-cu130-cp312-win_amd64"
  cibuildwheel cibw/src --platform windows --config-file "$PWD/cibw/cibuildwheel.toml" --output-dir wheelhouse/cu130
  dswheels cibw --cell "<the same ids>" --finish wheelhouse/cu130     # then: the manifests
  dswheels cibw --cell ds0.19.8-torch2.14-cu130-cp311-win_amd64 --no-source    # config only"""


def register(sub: Subparsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "cibw",
        help="write the cibuildwheel configuration of a Windows job",
        description=DESCRIPTION,
        formatter_class=formatter,
    )
    p.add_argument(
        "--cell",
        action="append",
        default=[],
        metavar="ID",
        required=True,
        help="cell ids of the job (repeatable; whitespace-separated ids in one value)",
    )
    p.add_argument(
        "--matrix",
        type=Path,
        default=Path("matrix") / "matrix.yml",
        metavar="PATH",
        help="matrix file for ops, arch lists, baseline and torch index (default: %(default)s)",
    )
    p.add_argument("--nvcc", metavar="X.Y", help="plan as if the runner had this nvcc")
    p.add_argument("--out", type=Path, default=Path("cibw"), metavar="DIR", help="output (default: %(default)s)")
    p.add_argument("--no-source", action="store_true", help="write the configuration only")
    p.add_argument("--jobs", type=int, default=2, metavar="N", help="MAX_JOBS on the runner (default: %(default)s)")
    p.add_argument("--torch-index", metavar="URL", help="index for torch (default: the plan's)")
    p.add_argument(
        "--test-requires",
        metavar="SPEC",
        help="how the test environment gets dswheels (default: this dswheels' source tree, or dswheels==VERSION)",
    )
    p.add_argument(
        "--lock",
        type=Path,
        metavar="FILE",
        help="sha256 lock for the tag archive (default: sources.lock.json beside the matrix)",
    )
    p.add_argument("--record-sources", action="store_true", help="record an unpinned archive's sha256 (not in CI)")
    p.add_argument(
        "--finish",
        type=Path,
        metavar="WHEELHOUSE",
        help="after cibuildwheel: write the build manifest of each of the job's wheels in this directory "
        "(its --output-dir); reads OUT/job.json",
    )
    p.set_defaults(func=run)


def _default_test_requires() -> str:
    root = Path(dswheels.__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file():
        return str(root)
    return f"dswheels=={__version__}"


def _env(cells: list[PlannedCell], jobs: int) -> dict[str, str]:
    first = cells[0]
    setup = BuildSetup(
        os=first.cell.platform.os,
        path="$PATH",
        path_sep=";",
        jobs=jobs,
        cuda_home="$CUDA_PATH" if first.cell.variant.is_cuda else None,  # set by NVIDIA's installer on the runner
        nvcc=None,
        cache=None,
        compilers=None,
        extra_config=None,
    )
    return build_env(first, setup)


def _finish(args: argparse.Namespace, cells: list[PlannedCell]) -> int:
    written = finish_wheelhouse(cells, wheelhouse=args.finish, job_dir=args.out.resolve(), compat=load_compat())
    for path in written:
        sys.stdout.write(f"{path}\n")
    return 0


def run(args: argparse.Namespace) -> int:
    compat = load_compat()
    cells = plan_cell_ids(_split_cells(args.cell), matrix=args.matrix, nvcc=args.nvcc, compat=compat)
    if args.finish is not None:
        return _finish(args, cells)
    env = _env(cells, args.jobs)
    try:
        config = render_cibw_config(
            cells,
            env=env,
            before=before_build(
                cells[0], index_url=args.torch_index or cells[0].torch_index, requirements=BUILD_REQUIREMENTS
            ),
            # no manifest exists yet inside cibuildwheel: verify against the plan, in its test venv
            test_command=f'dswheels verify {{wheel}} --python current --matrix "{args.matrix.resolve()}"',
            test_requires=[args.test_requires or _default_test_requires()],
            generator=f"dswheels {__version__}",
        )
    except CibwError as exc:
        raise ConfigError(str(exc), hint="run one `dswheels cibw` per job (`dswheels plan --format github`)") from None
    out = args.out.resolve()
    config_path = out / "cibuildwheel.toml"
    write_text_atomic(config_path, config)
    reporter = get_reporter()
    reporter.info(f"{describe_job(cells)}: {', '.join(build_identifiers(cells))}")
    reporter.info(f"wrote {config_path}")
    project = out / "src"
    source: dict[str, str] | None = None
    if not args.no_source:
        cache = env_cache_dir()
        lock = args.lock or (args.matrix.parent / "sources.lock.json")
        with Downloader(cache / "sources") as downloader:
            fetched = fetch_source(
                cells[0],
                downloader=downloader,
                pypi_json=compat.sdist_json,
                lock_path=lock.resolve(),
                allow_unpinned=args.record_sources or not in_ci(),
            )
        extract_archive(fetched.path, project)
        for note in patch_tree(project, cells[0], compat, debug_symbols=False):
            reporter.info(note)
        source = {
            "kind": fetched.kind,
            "url": fetched.url,
            "sha256": fetched.sha256,
            "verified_by": fetched.verified_by,
        }
    write_text_atomic(
        out / JOB_FILE,
        job_record(cells, env=env, source=source, created=utc_now().strftime("%Y-%m-%dT%H:%M:%SZ")),
    )
    reporter.info(
        f"after cibuildwheel, write the build manifests: dswheels cibw --cell ... --out {out} "
        f"--finish <its --output-dir>",
    )
    sys.stdout.write(
        f"cibuildwheel {project} --platform {'windows' if cells[0].cell.platform.os == 'windows' else 'linux'} "
        f"--config-file {config_path} --output-dir wheelhouse/{cells[0].cell.variant.name}\n",
    )
    return 0
