"""The parser plumbing every command shares: help formatting, registering a command, and options
whose default comes from the environment. The shared flags themselves are in :mod:`dswheels.cli.shared`."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from dswheels.kernel.errors import ConfigError

__all__ = [
    "ENV_DEFAULTS",
    "CommandGroup",
    "Container",
    "Registers",
    "Subparsers",
    "add_command",
    "add_command_group",
    "add_env_flag",
    "add_env_option",
    "apply_env_defaults",
    "formatter",
    "parse_bool",
]

Subparsers = argparse._SubParsersAction  # noqa: SLF001 - argparse exposes no public name for it


def formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)


def add_command(
    sub: Subparsers[argparse.ArgumentParser],
    name: str,
    *,
    help: str,  # noqa: A002 - argparse's own name for it
    description: str,
) -> argparse.ArgumentParser:
    """``dswheels NAME``: its parser, with the help formatting every command uses; ``--help`` shows the
    ``description`` (what the command does, what it reads and needs), so every command has one."""
    return sub.add_parser(name, help=help, description=description, formatter_class=formatter)


def add_command_group(
    sub: Subparsers[argparse.ArgumentParser],
    name: str,
    *,
    help: str,  # noqa: A002 - argparse's own name for it
    description: str,
) -> Subparsers[argparse.ArgumentParser]:
    """``dswheels NAME COMMAND``: a command whose subcommands are registered on what this returns."""
    parser = add_command(sub, name, help=help, description=description)
    return parser.add_subparsers(title=f"{name} commands", metavar="COMMAND", required=True)


class Registers(Protocol):
    """A command module (or a group of them): it adds its parser(s) to ``sub``."""

    def register(self, sub: Subparsers[argparse.ArgumentParser], /) -> None: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class CommandGroup:
    """``dswheels NAME COMMAND``: the commands of ``members`` under one name."""

    name: str
    help: str
    description: str
    members: tuple[Registers, ...]

    def register(self, sub: Subparsers[argparse.ArgumentParser]) -> None:
        group = add_command_group(sub, self.name, help=self.help, description=self.description)
        for member in self.members:
            member.register(group)


# Options a workflow may set through the environment (README: repository variables). Each is
# declared once, here, with its variable; the CLI fills them in before a command runs
# (dswheels.cli.main calls apply_env_defaults): a flag on the command line wins, then a non-empty
# variable, then the option's own default.
ENV_DEFAULTS = "env_defaults"


ENV_SOURCES = "env_sources"  # flag -> (the variable its value was taken from, the value), for error messages


@dataclass(frozen=True, slots=True)
class EnvDefault:
    variable: str
    parse: Callable[[str], object]
    fallback: object  # the value when neither the flag nor the variable is given
    flag: str = ""  # the option it is the default of, e.g. --index


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
        p,
        dest,
        EnvDefault(variable=env, parse=_one_of(parse, choices) if choices else parse, fallback=default, flag=flag),
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
    _register_env_default(p, dest, EnvDefault(variable=env, parse=parse_bool, fallback=False, flag=flag))


def apply_env_defaults(args: argparse.Namespace, env: Mapping[str, str]) -> None:
    """Fill every option left unset from its variable, else its default; a bad value is a ConfigError."""
    defaults: dict[str, EnvDefault] = getattr(args, ENV_DEFAULTS, None) or {}
    sources: dict[str, tuple[str, str]] = {}
    setattr(args, ENV_SOURCES, sources)
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
        sources[default.flag] = (default.variable, text)


def env_sources_named(args: argparse.Namespace, message: str) -> list[str]:
    """For an error about an option whose value came from its variable (a value checked where it is
    used, not when it is read): ``--index is $DSWHEELS_INDEX``, so the message names what to change."""
    sources: dict[str, tuple[str, str]] = getattr(args, ENV_SOURCES, None) or {}
    return [
        f"{flag} is ${variable}"
        for flag, (variable, text) in sources.items()
        if flag and (flag in message or repr(text) in message or (len(text.strip()) > 1 and text.strip() in message))
    ]
