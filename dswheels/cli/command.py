"""A command, declared once: its name, help and description, its flags (:mod:`dswheels.cli.flags`), how they
make the stage's frozen options, and what runs with them. Every command is registered, settled, judged
and run by the same few lines here; a command module holds only what is its own.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from dswheels.cli.flags import Flags, add_flags, settle
from dswheels.cli.parser import COMMAND_DEST, STAGE_DEST, Subparsers, formatter
from dswheels.cli.paths import judge_paths
from dswheels.kernel.result import Done

__all__ = ["Command"]

Options = TypeVar("Options")


@dataclass(frozen=True)
class Command(Generic[Options]):
    """``dswheels NAME``: ``--help`` shows ``description`` (what it does, what it reads and needs), so every
    command has one. ``options`` makes the stage's frozen options from the parsed flags (mostly
    :func:`~dswheels.cli.flags.fill`); ``run`` calls the stage's entry with them and renders the result."""

    name: str
    help: str
    description: str
    flags: Flags
    options: Callable[[argparse.Namespace], Options]
    run: Callable[[Options, argparse.Namespace], Done | int]

    def register(self, sub: Subparsers[argparse.ArgumentParser]) -> None:
        p = sub.add_parser(self.name, help=self.help, description=self.description, formatter_class=formatter)
        add_flags(p, self.flags)
        p.set_defaults(**{COMMAND_DEST: self, STAGE_DEST: p.prog.removeprefix("dswheels ")})

    def settle(self, args: argparse.Namespace, env: Mapping[str, str]) -> None:
        """Every flag not given takes its variable's value or its default; then every path the flags name is
        judged (:func:`~dswheels.cli.paths.judge_paths`) before anything is written."""
        settle(args, self.flags, env)
        judge_paths(args, self.flags)

    def __call__(self, args: argparse.Namespace) -> Done | int:
        return self.run(self.options(args), args)
