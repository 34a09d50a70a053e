"""What every parser of the command line shares, and nothing that loads a stage: where the parsed command
line keeps its command, the help's layout, and the group of commands under one name. ``dswheels --help``
imports this and :mod:`dswheels.cli.commands`, no command (:mod:`dswheels.cli.command` judges paths, which
reads what the stores and the index write).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Protocol

__all__ = ["COMMAND_DEST", "REPORT_DEST", "STAGE_DEST", "CommandGroup", "Registers", "Subparsers", "formatter"]

Subparsers = argparse._SubParsersAction  # noqa: SLF001 - argparse exposes no public name for it

COMMAND_DEST = "command"  # the Command a parsed command line runs
STAGE_DEST = "report_stage"  # the command's name in its report, e.g. "facts check"
REPORT_DEST = "stage_report"  # the --report path (not "report": `facts builds` reads a facts report by that name)


def formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)


class Registers(Protocol):
    """A command (or a group of them): it adds its parser(s) to ``sub``."""

    def register(self, sub: Subparsers[argparse.ArgumentParser], /) -> None: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class CommandGroup:
    """``dswheels NAME COMMAND``: the commands of ``members`` under one name."""

    name: str
    help: str
    description: str
    members: tuple[Registers, ...]

    def register(self, sub: Subparsers[argparse.ArgumentParser]) -> None:
        parser = sub.add_parser(self.name, help=self.help, description=self.description, formatter_class=formatter)
        group = parser.add_subparsers(title=f"{self.name} commands", metavar="COMMAND", required=True)
        for member in self.members:
            member.register(group)
