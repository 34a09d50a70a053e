"""Helpers shared by the subcommands: help formatting and loading the matrix."""

from __future__ import annotations

import argparse
from pathlib import Path

from dswheels.core.compat import Compat
from dswheels.core.config import MatrixSpec, parse_matrix
from dswheels.errors import ConfigError

__all__ = ["DEFAULT_MATRIX", "Subparsers", "formatter", "load_matrix"]

DEFAULT_MATRIX = Path("matrix") / "matrix.yml"

Subparsers = argparse._SubParsersAction  # noqa: SLF001 - argparse exposes no public name for it


def formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)


def load_matrix(path: Path, compat: Compat) -> MatrixSpec:
    """Read and validate a matrix file."""
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
