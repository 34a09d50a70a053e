"""The commands ``dswheels --help`` lists, in its order: each a :class:`~dswheels.cli.command.Command` of its
module here (``cli/<command>.py``), or a group of them.

A command declares its flags (:mod:`dswheels.cli.flags`), makes its stage's options from them, calls the
stage's entry (``<stage>/step.py``), and renders what it returns through the reporter; it holds no logic
of its own and imports no other command. Flags that several commands take are defined once, in
:mod:`dswheels.cli.shared`.

The list names each command's module instead of importing it: a command line loads the module of the
command it names and no other (each imports its stage, and the stages together import most of dswheels),
so ``dswheels --help`` and ``dswheels plan`` start as fast as Python allows. The list holds each
command's one-line help, which its module takes from here (:func:`listed_help`).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING

from dswheels.cli.parser import CommandGroup, Registers, Subparsers, formatter

if TYPE_CHECKING:  # a command's module is loaded only when its command runs
    from dswheels.cli.command import Command

__all__ = ["LISTED", "Listed", "listed_help", "named_command"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Listed:
    """``dswheels NAME``: a command (one module's ``COMMAND``) or, with a ``description``, a group of the
    commands of ``modules`` (each module's ``COMMAND`` or ``COMMANDS``)."""

    name: str
    help: str
    modules: tuple[str, ...]  # under dswheels.cli
    description: str = ""  # a group's; a command's own is in its module

    def load(self) -> Registers:
        found: list[Command[object]] = []
        for name in self.modules:
            module = import_module(f"dswheels.cli.{name}")  # lazily: see the module's docstring
            found.extend(getattr(module, "COMMANDS", None) or (module.COMMAND,))
        if not self.description:
            return found[0]
        return CommandGroup(name=self.name, help=self.help, description=self.description, members=tuple(found))

    def register(self, sub: Subparsers[argparse.ArgumentParser], *, load: bool) -> None:
        """Its whole parser when ``load``; otherwise only its line in ``dswheels --help`` (a command line that
        names another command never parses this one's flags)."""
        if load:
            self.load().register(sub)
        else:
            sub.add_parser(self.name, help=self.help, formatter_class=formatter)


# order = the order `dswheels --help` lists them
LISTED = (
    Listed(name="plan", help="expand the matrix into buildable cells with their toolchains", modules=("plan",)),
    Listed(name="build", help="build wheels with every planned op precompiled", modules=("build",)),
    Listed(name="verify", help="prove wheels are what they claim and load without JIT", modules=("verify",)),
    Listed(
        name="inspect",
        help="show the ops, GPU code, CPU level and runtime needs inside DeepSpeed wheels",
        modules=("inspect",),
    ),
    Listed(
        name="smoke", help="train a tiny model with the wheel (CPU anywhere, GPU on a GPU runner)", modules=("smoke",)
    ),
    Listed(
        name="publish", help="publish wheels to a directory, a GitHub Release or an upload server", modules=("publish",)
    ),
    Listed(
        name="index",
        help="write the static index (PEP 503 + per-torch partitions + a page for people)",
        modules=("index",),
    ),
    Listed(
        name="doctor",
        help="check this machine (torch, CUDA, GPU, compilers) and say which wheel fits",
        modules=("doctor",),
    ),
    Listed(
        name="install",
        help="install the published wheel that fits this environment, then verify it",
        modules=("install",),
    ),
    Listed(
        name="facts",
        help="check compat.yml against its sources; follow upstream releases; refit the cost model after one",
        description="Check dswheels' compatibility facts against their sources, follow upstream, and refit the "
        "cost model from what a release measured.",
        modules=("facts_check", "facts_follow", "facts_refit"),
    ),
    Listed(
        name="cuda",
        help="a CUDA toolkit from NVIDIA's redistributable archives (the build jobs' install)",
        description="The CUDA toolkit a build needs, from NVIDIA's own archives: `dswheels cuda install --help`.",
        modules=("cuda_install",),
    ),
    Listed(
        name="request",
        help="answer wheel-request issues, and build what a maintainer's label asks for (requests.yml)",
        description="The request workflow's steps: `dswheels request answer|build|indexed --help`.",
        modules=("request",),
    ),
    Listed(
        name="ci",
        help="what a CI run builds and publishes (the wheels workflow's plan job), and what its jobs measured",
        description="The wheels workflow's own steps: `dswheels ci plan --help`, `dswheels ci measure --help`.",
        modules=("ci_plan", "ci_measure"),
    ),
)


def listed_help(name: str) -> str:
    """The one-line help of the command ``name`` (for its module's :class:`~dswheels.cli.command.Command`)."""
    return next(listed.help for listed in LISTED if listed.name == name)


def named_command(argv: Sequence[str]) -> str | None:
    """The command a command line names: its first word that is not an option (the top-level options take
    no value); ``None`` when it names none (``dswheels --help``).

    >>> named_command(["--debug", "plan", "--matrix", "m.yml"])
    'plan'
    >>> named_command(["--help"]) is None
    True
    """
    return next((word for word in argv if not word.startswith("-")), None)
