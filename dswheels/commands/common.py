"""Helpers shared by the subcommands: help formatting, option values and loading the matrix."""

from __future__ import annotations

import argparse
from pathlib import Path

from dswheels.core.compat import Compat
from dswheels.core.config import MatrixSpec, parse_matrix
from dswheels.core.versions import VersionTuple, parse_version
from dswheels.effects.files import read_bounded
from dswheels.errors import ConfigError

__all__ = ["DEFAULT_MATRIX", "Subparsers", "formatter", "load_matrix", "parse_nvcc_option"]

DEFAULT_MATRIX = Path("matrix") / "matrix.yml"
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
