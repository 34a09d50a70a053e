"""The flags more than one command takes: each defined once, with one meaning, next to what turns
its value into the typed value a step's options hold (bad values and bad combinations: exit 2)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from dswheels.cli.parsing import Container, add_env_option
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.locations import MATRIX
from dswheels.kernel.sources import TorchSource, TorchSourceKind
from dswheels.kernel.versions import VersionTuple, parse_version
from dswheels.plan.planner import Combo, combo_from_values

if TYPE_CHECKING:  # imported when a command runs: `dswheels --help` needs neither the stores nor compat.yml
    from dswheels.plan.effects.published import PublishedAt
    from dswheels.plan.effects.selection import MatrixCells

__all__ = [
    "COMBO_AXES",
    "REPORT_DEST",
    "STAGE_DEST",
    "add_deepspeed_argument",
    "add_github_argument",
    "add_interpreter_argument",
    "add_matrix_argument",
    "add_published_arguments",
    "add_report_argument",
    "add_selection_arguments",
    "add_target_arguments",
    "add_torch_index_argument",
    "combo_given",
    "combo_of",
    "matrix_selection",
    "parse_deepspeed",
    "parse_interpreter",
    "parse_nvcc_option",
    "parse_torch_source",
    "published_at",
]

COMBO_AXES = ("deepspeed", "torch", "cuda", "python", "platform")


# --- the matrix, and which of its cells ----------------------------------------------------------


def add_matrix_argument(
    p: Container,
    *,
    help: str = "matrix file",  # noqa: A002 - argparse's name
    default: Path | None = MATRIX,
) -> None:
    """``--matrix PATH``, the matrix file; ``DSWHEELS_MATRIX`` (the repository variable) is its default,
    then ``default`` (None: the command finds the repository's own)."""
    add_env_option(
        p, "--matrix", env="DSWHEELS_MATRIX", default=default, parse=Path, type=Path, metavar="PATH", help=help
    )


def add_deepspeed_argument(p: Container, *, help: str) -> None:  # noqa: A002 - argparse's name
    """``--deepspeed X.Y.Z``: a DeepSpeed release (:func:`parse_deepspeed`)."""
    p.add_argument("--deepspeed", metavar="X.Y.Z", help=help)


def parse_deepspeed(text: str | None) -> VersionTuple | None:
    if text is None:
        return None
    try:
        version = parse_version(text)
    except ValueError as exc:
        raise ConfigError(f"--deepspeed: {exc}") from None
    if len(version) != 3:
        raise ConfigError(f"--deepspeed: give X.Y.Z (e.g. '0.19.8'), not {text!r}")
    return version


def add_selection_arguments(p: argparse.ArgumentParser) -> None:
    """--matrix, --only and the combination flags: shared by every command that takes cells."""
    add_matrix_argument(p)
    p.add_argument(
        "--only", action="append", default=[], metavar="ID", help="cell id or glob of the matrix (repeatable)"
    )
    add_deepspeed_argument(p, help="DeepSpeed version of the combination")
    p.add_argument(
        "--torch", metavar="M.m", help="torch MAJOR.MINOR of the combination, as in the label (2.14, not 2.14.1)"
    )
    p.add_argument("--cuda", metavar="cuXYZ|X.Y|cpu", help="torch variant of the combination (cpu for the CPU build)")
    p.add_argument("--python", metavar="3.X", help="Python version of the combination")
    p.add_argument("--platform", metavar="PLAT", help="win_amd64 or linux_x86_64")
    p.add_argument(
        "--nvcc",
        metavar="X.Y",
        help="plan as if the builder had this nvcc instead of each variant's own CUDA (same major)",
    )


def parse_nvcc_option(text: str | None) -> VersionTuple | None:
    """``--nvcc X.Y`` as (X, Y); None when not given."""
    if text is None:
        return None
    try:
        return parse_version(text)[:2]
    except ValueError as exc:
        raise ConfigError(f"--nvcc: {exc}") from None


def combo_given(args: argparse.Namespace) -> bool:
    """Whether any combination flag (--deepspeed ... --platform) is on the command line."""
    return any(getattr(args, key) for key in COMBO_AXES)


def combo_of(args: argparse.Namespace) -> Combo:
    """The combination flags, parsed; one ConfigError names every bad one."""
    return combo_from_values({key: getattr(args, key) for key in COMBO_AXES})


def matrix_selection(args: argparse.Namespace) -> MatrixCells:
    """The cells of --matrix that --only or the combination flags select (never both)."""
    from dswheels.plan.effects.selection import MatrixCells  # noqa: PLC0415 - see the imports above

    combo = combo_of(args)
    if combo.given and args.only:
        raise ConfigError("--only selects cells of the matrix; it cannot be combined with --deepspeed/--torch/...")
    return MatrixCells(matrix=args.matrix, only=tuple(args.only), combo=combo, nvcc=parse_nvcc_option(args.nvcc))


# --- where torch and the interpreter come from ----------------------------------------------------


def add_torch_index_argument(p: argparse.ArgumentParser, *, what: str) -> None:
    """``--torch-index URL|DIR|pip`` with one meaning everywhere; ``DSWHEELS_TORCH_INDEX`` is its default."""
    add_env_option(
        p,
        "--torch-index",
        env="DSWHEELS_TORCH_INDEX",
        metavar="URL|DIR|pip",
        help=f"where {what} gets torch: an index URL, a directory of wheels, or 'pip' for the indexes pip is "
        "configured with; unset: the plan's https://download.pytorch.org/whl/<variant>",
    )


def parse_torch_source(text: str | None) -> TorchSource:
    """``--torch-index``: the plan's index (unset), pip's, an index URL, or a directory (an index or wheels)."""
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


def add_interpreter_argument(p: argparse.ArgumentParser, *, help: str) -> None:  # noqa: A002 - argparse's name
    """``--python PATH|current``: the interpreter of the environment a command works in."""
    p.add_argument("--python", metavar="PATH|current", help=help)


def parse_interpreter(text: str | None) -> Path | None:
    """``--python``: None when not given; ``current`` is the interpreter running dswheels."""
    if not text:
        return None
    return Path(sys.executable) if text == "current" else Path(text)


def add_target_arguments(p: argparse.ArgumentParser) -> None:
    """--python, --index and --deepspeed: the environment `dswheels doctor` and `dswheels install` judge."""
    add_interpreter_argument(p, help="interpreter of the environment to inspect (default: the one running dswheels)")
    add_env_option(
        p,
        "--index",
        env="DSWHEELS_INDEX",
        metavar="URL",
        help="published index: its base URL or directory, as in docs/index-layout.md",
    )
    add_deepspeed_argument(
        p,
        help="DeepSpeed version to judge (default: the newest published for this environment, "
        "else the installed one, else the newest the rules allow)",
    )


# --- where wheels are published, and reports ---------------------------------------------------


def add_published_arguments(p: argparse.ArgumentParser) -> None:
    """Where the wheels are published (the workflows' repository variables): a directory, else an index."""
    add_env_option(
        p, "--publish-dir", env="DSWHEELS_PUBLISH_DIR", metavar="DIR", help="publish into this directory, not a release"
    )
    add_env_option(p, "--index-url", env="DSWHEELS_INDEX_URL", metavar="URL", help="where the index is served")
    add_env_option(
        p,
        "--repository",
        env="GITHUB_REPOSITORY",
        metavar="OWNER/NAME",
        help="gives the default --index-url, https://OWNER.github.io/NAME/",
    )


def published_at(args: argparse.Namespace) -> PublishedAt:
    from dswheels.plan.effects.published import PublishedAt  # noqa: PLC0415 - see the imports above

    return PublishedAt(
        publish_dir=args.publish_dir or "", index_url=args.index_url or "", repository=args.repository or ""
    )


def add_github_argument(p: Container, *, help: str) -> None:  # noqa: A002 - argparse's name
    """``--github OWNER/REPO``: the repository whose releases hold the published wheels."""
    p.add_argument("--github", metavar="OWNER/REPO", help=help)


REPORT_DEST = "stage_report"  # the --report path (not "report": `facts builds` reads a facts report by that name)
STAGE_DEST = "report_stage"  # the command's name in its report, e.g. "facts check"


def add_report_argument(
    p: argparse.ArgumentParser,
    *,
    help: str = "write the result (status, reason, duration and what the command found) as JSON",  # noqa: A002
) -> None:
    """``--report FILE``: where the CLI writes the command's result as JSON (:mod:`dswheels.kernel.result`),
    whether it succeeds or fails; the command only returns its data."""
    p.add_argument("--report", dest=REPORT_DEST, type=Path, metavar="FILE", help=help)
    p.set_defaults(**{STAGE_DEST: p.prog.removeprefix("dswheels ")})
