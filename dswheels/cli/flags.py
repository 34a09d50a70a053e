"""A command's flags, each declared once: its names, help, type and default, the variable that may stand
for it, the field of the stage's options it fills, and what the command does with a path it names.

Three functions serve every command: :func:`add_flags` puts them on its parser, :func:`settle` gives each
flag left off the command line its value (a non-empty variable, else its default), and :func:`fill`
turns what was parsed into the fields of the stage's frozen options. A flag that names a path says what
the command does with it (:class:`PathUse`), and every output is judged against the rest before the
command runs (:mod:`dswheels.cli.paths`).
"""

from __future__ import annotations

import argparse
import enum
from collections.abc import Callable, Iterator, Mapping
from dataclasses import KW_ONLY, dataclass, replace
from pathlib import Path
from typing import Any

from dswheels.kernel.errors import ConfigError
from dswheels.kernel.numbers import ascii_decimal, ascii_int

__all__ = [
    "ENV_SOURCES",
    "Container",
    "Flag",
    "Flags",
    "Nested",
    "OneOf",
    "PathUse",
    "Section",
    "add_flags",
    "choice",
    "each_flag",
    "env_sources_named",
    "fill",
    "parse_bool",
    "settle",
]

# a parser or one of its argument groups
Container = argparse._ActionsContainer  # noqa: SLF001 - argparse exposes no public name for it

ENV_SOURCES = "env_sources"  # flag -> (the variable its value was taken from, the value), for error messages


class PathUse(enum.Enum):
    """What a command does with a path a flag names: the outputs are judged against the rest before it runs."""

    READS = "reads"  # a file (or folder) it reads
    READS_WHEELS = "reads wheels"  # wheels, or folders of them (and one level down), with each one's manifest
    READS_PUBLISHED = "reads published"  # a folder of published files, or a local index (a URL is no path)
    WRITES = "writes"  # a file it writes, replaced in one rename
    WRITES_INTO = "writes into"  # a folder it puts files into
    PUBLISHES_INTO = "publishes into"  # a folder of published files it adds to
    REPLACES = "replaces"  # a folder it replaces whole (the site)


def parse_bool(text: str) -> bool:
    """``true``/``false`` as GitHub passes a boolean input (any case)."""
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return value == "true"


def parse_count(text: str) -> int:
    """A whole number a flag takes (``--jobs 8``): ASCII digits only (``int()`` reads ``٨`` as 8)."""
    try:
        return ascii_int(text, what="a whole number")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_decimal(text: str) -> float:
    """A number a flag takes (``--adam-tolerance 1e-4``): ASCII only, never ``nan``, ``inf`` or another script's
    digits (``float()`` reads them all)."""
    try:
        return ascii_decimal(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


@dataclass(frozen=True)
class Flag:
    """One flag (or positional argument, a name without dashes), declared once.

    ``default`` is its value when neither the flag nor its variable (``env``) is given; ``%(default)s`` in
    ``help`` shows it. ``to`` names the field of the stage's options it fills, through ``parse`` (which
    may raise ConfigError); a flag without ``to`` is read by the command itself. ``path`` says what the
    command does with the path it names (its value is then a Path, unless it may be a URL). ``type``,
    ``metavar``, ``choices``, ``nargs``, ``action`` and ``required`` are argparse's.
    """

    name: str
    _: KW_ONLY
    help: str | None = None
    short: str = ""  # e.g. -j
    dest: str = ""  # (default: the name without dashes, - as _)
    to: str = ""
    parse: Callable[[Any], object] | None = None
    default: object = None
    env: str = ""
    path: PathUse | None = None
    action: str | type[argparse.Action] | None = None
    type: Callable[[str], object] | None = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    nargs: str | None = None
    required: bool = False

    @property
    def key(self) -> str:
        """Where argparse keeps its value."""
        return self.dest or self.name.lstrip("-").replace("-", "_")

    @property
    def value_type(self) -> Callable[[str], object] | None:
        """argparse's ``type``: a flag that names a path takes a Path, but a published place may be a URL."""
        if self.type is None and self.path is not None and self.path is not PathUse.READS_PUBLISHED:
            return Path
        return self.type

    @property
    def positional(self) -> bool:
        return not self.name.startswith("-")

    @property
    def boolean(self) -> bool:
        """``--flag``/``--no-flag``: neither given, its variable (true|false) decides."""
        return self.action is argparse.BooleanOptionalAction

    @property
    def settled(self) -> bool:
        """Whether its value when not given is :func:`settle`'s to decide (argparse's is None)."""
        return not self.positional and self.action in (None, argparse.BooleanOptionalAction)

    def but(self, **changes: Any) -> Flag:  # noqa: ANN401 - any of the fields
        """The same flag with some fields changed (a shared flag's help in one command)."""
        return replace(self, **changes)

    def _help(self) -> str | None:
        if self.help is None:
            return None
        text = self.help.replace("%(default)s", str(self.default))
        if self.env and self.boolean:
            return f"{text} (${self.env})"
        if self.env:
            shown = f", else {self.default}" if self.default not in (None, "", False) else ""
            return f"{text} (default: ${self.env}{shown})"
        return text

    def add_to(self, p: Container) -> None:
        options: dict[str, Any] = {"help": self._help()}
        given = {"type": self.value_type, "metavar": self.metavar, "choices": self.choices, "nargs": self.nargs}
        options |= {key: value for key, value in given.items() if value is not None}
        if self.action is not None:
            options["action"] = self.action
        if self.required:
            options["required"] = True
        if self.positional:
            p.add_argument(self.name, **options)
            return
        if self.settled:
            options["default"] = None  # not given: settle() decides
        elif self.action == "append":
            options["default"] = []
        names = (self.name, self.short) if self.short else (self.name,)
        p.add_argument(*names, dest=self.key, **options)

    def from_env(self, text: str) -> object:
        """The variable's value, read as the flag's would be; a bad one is a ConfigError naming it."""
        try:
            value = parse_bool(text) if self.boolean else (self.value_type or str)(text)
        except (ValueError, argparse.ArgumentTypeError) as exc:
            raise ConfigError(f"${self.env}={text!r}: {exc}") from None
        if self.choices is not None and value not in self.choices:
            raise ConfigError(f"${self.env}={text!r}: expected one of {', '.join(self.choices)}")
        return value


def choice(
    name: str,
    values: type[enum.Enum],
    *,
    help: str,  # noqa: A002 - argparse's own name for it
    to: str = "",
    env: str = "",
) -> Flag:
    """A flag that takes one of the values of ``values`` (default: the first) and fills ``to`` with that member."""
    choices = tuple(str(member.value) for member in values)
    return Flag(name, to=to, parse=values if to else None, choices=choices, default=choices[0], env=env, help=help)


@dataclass(frozen=True, init=False)
class OneOf:
    """Flags that exclude each other; when one is given, the others keep no default."""

    flags: tuple[Flag, ...]

    def __init__(self, *flags: Flag) -> None:
        object.__setattr__(self, "flags", flags)


@dataclass(frozen=True, init=False)
class Nested:
    """Flags that fill options of their own, which fill the field ``to`` (e.g. sccache's storage)."""

    to: str
    options: Callable[..., object]
    flags: tuple[Flag, ...]

    def __init__(self, to: str, options: Callable[..., object], *flags: Flag) -> None:
        object.__setattr__(self, "to", to)
        object.__setattr__(self, "options", options)
        object.__setattr__(self, "flags", flags)


@dataclass(frozen=True, init=False)
class Section:
    """Flags shown under a title of their own in ``--help``."""

    title: str
    flags: tuple[Flag | Nested, ...]

    def __init__(self, title: str, *flags: Flag | Nested) -> None:
        object.__setattr__(self, "title", title)
        object.__setattr__(self, "flags", flags)


Flags = tuple[Flag | OneOf | Nested | Section, ...]


def each_flag(flags: Flags) -> Iterator[Flag]:
    for item in flags:
        if isinstance(item, Flag):
            yield item
        else:
            yield from each_flag(item.flags)


def add_flags(p: Container, flags: Flags) -> None:
    for item in flags:
        if isinstance(item, Flag):
            item.add_to(p)
        elif isinstance(item, OneOf):
            add_flags(p.add_mutually_exclusive_group(), item.flags)
        elif isinstance(item, Section):
            add_flags(p.add_argument_group(item.title), item.flags)
        else:
            add_flags(p, item.flags)


def _given(args: argparse.Namespace, flag: Flag) -> bool:
    return getattr(args, flag.key) not in (None, False, [])


def settle(args: argparse.Namespace, flags: Flags, env: Mapping[str, str]) -> None:
    """Give every flag not on the command line its value: its variable when set and not empty, else its
    default; of flags that exclude each other, only one given keeps no default for the others. Which flag
    took its value from which variable is kept for error messages (:func:`env_sources_named`)."""
    sources: dict[str, tuple[str, str]] = getattr(args, ENV_SOURCES, None) or {}
    setattr(args, ENV_SOURCES, sources)
    excluded = {
        member.key
        for item in flags
        if isinstance(item, OneOf) and any(_given(args, flag) for flag in item.flags)
        for member in item.flags
    }
    for flag in each_flag(flags):
        if not flag.settled or getattr(args, flag.key) is not None:
            continue
        if text := (env.get(flag.env, "") if flag.env else ""):
            setattr(args, flag.key, flag.from_env(text))
            sources[flag.name] = (flag.env, text)
        elif flag.key not in excluded:
            setattr(args, flag.key, flag.default if not flag.boolean else bool(flag.default))


def fill(args: argparse.Namespace, flags: Flags) -> dict[str, Any]:
    """The options' fields the flags fill (``to``), each value through its ``parse``; a flag left at a
    default of None (and without a parse) fills nothing, so the options' own default stands."""
    fields: dict[str, Any] = {}
    for item in flags:
        if isinstance(item, Nested):
            fields[item.to] = item.options(**fill(args, item.flags))
        elif not isinstance(item, Flag):
            fields |= fill(args, item.flags)
        elif item.to:
            value = getattr(args, item.key)
            if item.parse is not None:
                fields[item.to] = item.parse(value)
            elif value is not None or item.default is not None:
                fields[item.to] = value
    return fields


def env_sources_named(args: argparse.Namespace, message: str) -> list[str]:
    """For an error about an option whose value came from its variable (a value checked where it is
    used, not when it is read): ``--index is $DSWHEELS_INDEX``, so the message names what to change."""
    sources: dict[str, tuple[str, str]] = getattr(args, ENV_SOURCES, None) or {}
    return [
        f"{flag} is ${variable}"
        for flag, (variable, text) in sources.items()
        if flag and (flag in message or repr(text) in message or (len(text.strip()) > 1 and text.strip() in message))
    ]
