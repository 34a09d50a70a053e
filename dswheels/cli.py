"""The ``dswheels`` command line: parse arguments, call one function, map errors to exit codes.

Exit codes: 0 ok, 1 internal error, 2 bad input, 3 nothing to do, 4 source, 5 build,
6 verify, 7 publish, 8 smoke, 9 environment (no wheel fits), 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from dswheels import __version__
from dswheels.core.compat import Compat, load_compat
from dswheels.core.config import MatrixSpec, parse_matrix
from dswheels.core.plan import Plan, combo_from_values, plan
from dswheels.core.render_plan import render_explain, render_github, render_json, render_table
from dswheels.core.versions import parse_version
from dswheels.errors import ConfigError, DswheelsError

__all__ = ["main"]

DEFAULT_MATRIX = Path("matrix") / "matrix.yml"

EPILOG = """\
exit codes: 0 ok, 1 internal error, 2 bad input, 3 nothing to do, 4 source failed,
            5 build failed, 6 verify failed, 7 publish failed, 8 smoke failed,
            9 environment problem, 130 interrupted

Run `dswheels COMMAND --help` for each command. Docs: README.md and docs/."""


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)


def load_matrix(path: Path, compat: Compat) -> MatrixSpec:
    """Read and validate the matrix file (the only file ``plan`` reads besides compat.yml)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"no matrix file at {path}",
            hint=f"run from the repository root (it has {DEFAULT_MATRIX}) or pass --matrix PATH",
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read the matrix file {path}: {exc.strerror}") from None
    return parse_matrix(text, str(path), compat)


# --- plan -------------------------------------------------------------------------------------------

PLAN_DESCRIPTION = """\
Expand the build matrix into cells (one wheel each), drop what the compatibility rules
forbid, and resolve every remaining cell's toolchain: runner image, MSVC toolset or GCC,
nvcc, TORCH_CUDA_ARCH_LIST, the ops to build and the ops left out (with why), workaround
flags and the DS_SKIP_CUDA_CHECK decision.

Select cells of the matrix with --only (ids or globs), or name one combination with
--deepspeed/--torch/--cuda/--python/--platform (axes you leave out come from the matrix);
a named combination is planned whenever the rules allow it, listed in the matrix or not.

examples:
  dswheels plan                                   # table of the shipped matrix
  dswheels plan --explain                         # every dropped cell and the rule why
  dswheels plan --only 'ds0.19.8-torch2.14-*-linux_x86_64'
  dswheels plan --deepspeed 0.15.1 --torch 2.1 --cuda cu121 --python 3.11 --platform win_amd64
  dswheels plan --format github --allow-empty >> "$GITHUB_OUTPUT"   # after `matrix=`"""


def _add_plan(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "plan",
        help="expand the matrix into buildable cells with their toolchains",
        description=PLAN_DESCRIPTION,
        formatter_class=_formatter,
    )
    p.add_argument(
        "--matrix", type=Path, default=DEFAULT_MATRIX, metavar="PATH", help="matrix file (default: %(default)s)"
    )
    p.add_argument(
        "--format",
        choices=("table", "json", "github"),
        default="table",
        help="table (default, for people), json (the contract, docs/plan-json.md), github (jobs for fromJSON)",
    )
    p.add_argument("--explain", action="store_true", help="print every dropped cell and the rule that drops it")
    p.add_argument(
        "--only", action="append", default=[], metavar="ID", help="cell id or glob of the matrix (repeatable)"
    )
    p.add_argument("--deepspeed", metavar="X.Y.Z", help="DeepSpeed version of the combination")
    p.add_argument("--torch", metavar="M.m", help="torch MAJOR.MINOR of the combination")
    p.add_argument("--cuda", metavar="cuXYZ|X.Y|cpu", help="torch variant of the combination (cpu for the CPU build)")
    p.add_argument("--python", metavar="3.X", help="Python version of the combination")
    p.add_argument("--platform", metavar="PLAT", help="win_amd64 or linux_x86_64")
    p.add_argument(
        "--nvcc",
        metavar="X.Y",
        help="plan as if the builder had this nvcc instead of each variant's own CUDA (same major)",
    )
    p.add_argument(
        "--allow-empty", action="store_true", help="exit 0 with an empty job list instead of 3 when nothing is left"
    )
    p.set_defaults(func=_run_plan)


def compute_plan(args: argparse.Namespace, compat: Compat) -> Plan:
    spec = load_matrix(args.matrix, compat)
    combo = combo_from_values(
        {key: getattr(args, key) for key in ("deepspeed", "torch", "cuda", "python", "platform")},
    )
    if combo.given and args.only:
        raise ConfigError("--only selects cells of the matrix; it cannot be combined with --deepspeed/--torch/...")
    nvcc = None
    if args.nvcc is not None:
        try:
            nvcc = parse_version(args.nvcc)[:2]
        except ValueError as exc:
            raise ConfigError(f"--nvcc: {exc}") from None
    return plan(spec, compat, only=args.only, combo=combo, nvcc=nvcc)


def _run_plan(args: argparse.Namespace) -> int:
    compat = load_compat()
    result = compute_plan(args, compat)
    if args.explain:
        sys.stdout.write(render_explain(result))
    elif args.format == "json":
        sys.stdout.write(render_json(result, version=__version__))
    elif args.format == "github":
        sys.stdout.write(render_github(result) + "\n")
    else:
        sys.stdout.write(render_table(result))
    return 0


# --- entry point ------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dswheels",
        description="Build, verify and publish DeepSpeed wheels with every C++/CUDA op precompiled.",
        epilog=EPILOG,
        formatter_class=_formatter,
    )
    parser.add_argument("--version", action="version", version=f"dswheels {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors (or DSWHEELS_DEBUG=1)")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    _add_plan(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    debug = args.debug or os.environ.get("DSWHEELS_DEBUG") == "1"
    try:
        code: int = args.func(args)
    except DswheelsError as exc:
        sys.stdout.flush()
        sys.stderr.write(exc.render() + "\n")
        if debug:
            traceback.print_exc()
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except BrokenPipeError:
        # `dswheels plan | head`: the reader went away; that's not an error of ours
        sys.stderr.close()
        return 0
    return code
