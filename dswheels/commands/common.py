"""Helpers shared by the subcommands: help formatting, option values and loading the matrix."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dswheels.core.compat import Compat
from dswheels.core.locations import MATRIX
from dswheels.core.matrix.parse import parse_matrix
from dswheels.core.matrix.spec import MatrixSpec
from dswheels.core.versions import VersionTuple, parse_version
from dswheels.effects.files import read_bounded
from dswheels.errors import ConfigError

__all__ = [
    "DEFAULT_MATRIX",
    "ENV_DEFAULTS",
    "Subparsers",
    "add_command_group",
    "add_env_flag",
    "add_env_option",
    "add_matrix_argument",
    "add_torch_index_argument",
    "apply_env_defaults",
    "formatter",
    "load_matrix",
    "parse_bool",
    "parse_nvcc_option",
]

DEFAULT_MATRIX = MATRIX  # the name the commands know it by (dswheels.core.locations defines every default)
MAX_MATRIX_BYTES = 1024**2  # a matrix is a few KB; YAML that large is a mistake (or an attack)

Subparsers = argparse._SubParsersAction  # noqa: SLF001 - argparse exposes no public name for it


def formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)


def add_command_group(
    sub: Subparsers[argparse.ArgumentParser],
    name: str,
    *,
    help: str,  # noqa: A002 - argparse's own name for it
    description: str,
) -> Subparsers[argparse.ArgumentParser]:
    """``dswheels NAME COMMAND``: a command whose subcommands are registered on what this returns."""
    parser = sub.add_parser(name, help=help, description=description, formatter_class=formatter)
    return parser.add_subparsers(title=f"{name} commands", metavar="COMMAND", required=True)


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


# Options a workflow may set through the environment (README: repository variables). Each is
# declared once, here, with its variable; the CLI fills them in before a command runs
# (dswheels.cli.main calls apply_env_defaults): a flag on the command line wins, then a non-empty
# variable, then the option's own default.
ENV_DEFAULTS = "env_defaults"


@dataclass(frozen=True, slots=True)
class EnvDefault:
    variable: str
    parse: Callable[[str], object]
    fallback: object  # the value when neither the flag nor the variable is given


def parse_bool(text: str) -> bool:
    """``true``/``false`` as GitHub passes a boolean input (any case)."""
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return value == "true"


# a parser or one of its argument groups (a group shares its parser's defaults)
Container = argparse._ActionsContainer  # noqa: SLF001 - argparse exposes no public name for it


def _register_env_default(p: Container, dest: str, default: EnvDefault) -> None:
    current: dict[str, EnvDefault] = dict(p.get_default(ENV_DEFAULTS) or {})
    current[dest] = default
    p.set_defaults(**{ENV_DEFAULTS: current})


def add_env_option(
    p: Container,
    flag: str,
    *,
    env: str,
    help: str,  # noqa: A002 - argparse's own name for it
    default: object = None,
    parse: Callable[[str], object] = str,
    **kwargs: Any,  # noqa: ANN401 - passed through to argparse
) -> None:
    """``flag`` whose value, when not given, comes from ``$env`` (then ``default``)."""
    dest = flag.removeprefix("--").replace("-", "_")
    shown = f", else {default}" if default not in (None, "", False) else ""
    p.add_argument(flag, dest=dest, default=None, help=f"{help} (default: ${env}{shown})", **kwargs)
    choices = kwargs.get("choices")
    _register_env_default(
        p, dest, EnvDefault(variable=env, parse=_one_of(parse, choices) if choices else parse, fallback=default)
    )


def _one_of(parse: Callable[[str], object], choices: Sequence[object]) -> Callable[[str], object]:
    """``parse`` that also holds a variable's value to the option's choices, as argparse does the flag's."""

    def checked(text: str) -> object:
        value = parse(text)
        if value not in choices:
            raise argparse.ArgumentTypeError(f"expected one of {', '.join(map(str, choices))}")
        return value

    return checked


def add_env_flag(p: Container, flag: str, *, env: str, help: str) -> None:  # noqa: A002
    """A boolean ``--flag``/``--no-flag`` whose value, when neither is given, is ``$env`` (true|false)."""
    dest = flag.removeprefix("--").replace("-", "_")
    p.add_argument(flag, dest=dest, action=argparse.BooleanOptionalAction, default=None, help=f"{help} (${env})")
    _register_env_default(p, dest, EnvDefault(variable=env, parse=parse_bool, fallback=False))


def apply_env_defaults(args: argparse.Namespace, env: Mapping[str, str]) -> None:
    """Fill every option left unset from its variable, else its default; a bad value is a ConfigError."""
    defaults: dict[str, EnvDefault] = getattr(args, ENV_DEFAULTS, None) or {}
    for dest, default in defaults.items():
        if getattr(args, dest, None) is not None:
            continue
        text = env.get(default.variable, "")
        if not text:
            setattr(args, dest, default.fallback)
            continue
        try:
            setattr(args, dest, default.parse(text))
        except (ValueError, argparse.ArgumentTypeError) as exc:
            raise ConfigError(f"${default.variable}={text!r}: {exc}") from None


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


def add_matrix_argument(p: argparse.ArgumentParser) -> None:
    """``--matrix PATH``, the matrix file; ``DSWHEELS_MATRIX`` (the repository variable) is its default."""
    add_env_option(
        p,
        "--matrix",
        env="DSWHEELS_MATRIX",
        default=DEFAULT_MATRIX,
        parse=Path,
        type=Path,
        metavar="PATH",
        help="matrix file",
    )
