"""Read a matrix file: bounded, UTF-8, validated (:func:`dswheels.plan.matrix.parse.parse_matrix`)."""

from __future__ import annotations

from pathlib import Path

from dswheels.host.files import read_bounded
from dswheels.kernel.compat import Compat
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.locations import MATRIX
from dswheels.plan.matrix.parse import parse_matrix
from dswheels.plan.matrix.spec import MatrixSpec

__all__ = ["MAX_MATRIX_BYTES", "load_matrix"]

MAX_MATRIX_BYTES = 1024**2  # a matrix is a few KB; YAML that large is a mistake (or an attack)


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
            hint=f"run from the repository root (it has {MATRIX}) or pass --matrix PATH",
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read the matrix file {path}: {exc.strerror}") from None
    return parse_matrix(text, str(path), compat)
