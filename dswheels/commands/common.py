"""Helpers shared by the subcommands: help formatting, option values and loading the matrix."""

from __future__ import annotations

import argparse
from pathlib import Path

from dswheels.core.compat import Compat
from dswheels.core.config import MatrixSpec, parse_matrix
from dswheels.core.locations import MATRIX
from dswheels.core.versions import VersionTuple, parse_version
from dswheels.effects.files import read_bounded
from dswheels.errors import ConfigError

__all__ = ["DEFAULT_MATRIX", "Subparsers", "formatter", "load_matrix", "parse_nvcc_option"]

DEFAULT_MATRIX = MATRIX  # the name the commands know it by (dswheels.core.locations defines every default)
MAX_MATRIX_BYTES = 1024**2  # a matrix is a few KB; YAML that large is a mistake (or an attack)

Subparsers = argparse._SubParsersAction  # noqa: SLF001 - argparse exposes no public name for it


def formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)


def parse_nvcc_option(text: str | None) -> VersionTuple | None:
    """``--nvcc X.Y`` as (X, Y); None when not given."""
    if text is None:
        return None
    try:
        return parse_version(text)[:2]
    except ValueError as exc:
        raise ConfigError(f"--nvcc: {exc}") from None


def load_matrix(path: Path, compat: Compat) -> MatrixSpec:
    """Read and validate a matrix file."""
    try:
        text = read_bounded(path, limit=MAX_MATRIX_BYTES).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"the matrix file {path} is not UTF-8 text ({exc.reason} at byte {exc.start})",
            hint="save it as UTF-8",
        ) from None
    except ValueError as exc:
        raise ConfigError(str(exc), hint="pass the matrix file (a few KB of YAML) with --matrix") from None
    except FileNotFoundError:
        raise ConfigError(
            f"no matrix file at {path}",
            hint=f"run from the repository root (it has {DEFAULT_MATRIX}) or pass --matrix PATH",
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read the matrix file {path}: {exc.strerror}") from None
    return parse_matrix(text, str(path), compat)


# Options a workflow may set through the environment (README: repository variables); the CLI
# fills them in before a command runs (dswheels.cli.main), a flag on the command line wins.
ENV_DEFAULTS = "env_defaults"


def add_torch_index_argument(p: argparse.ArgumentParser, *, what: str) -> None:
    """``--torch-index URL|DIR|pip`` with one meaning everywhere; ``DSWHEELS_TORCH_INDEX`` is its default."""
    p.add_argument(
        "--torch-index",
        metavar="URL|DIR|pip",
        help=f"where {what} gets torch: an index URL, a directory of wheels, or 'pip' for the indexes pip is "
        "configured with (default: $DSWHEELS_TORCH_INDEX, else the plan's https://download.pytorch.org/whl/<variant>)",
    )
    p.set_defaults(**{ENV_DEFAULTS: {"torch_index": "DSWHEELS_TORCH_INDEX"}})
