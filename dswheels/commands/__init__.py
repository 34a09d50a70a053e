"""One module per subcommand; each has ``register(subparsers)`` and a ``run(args) -> int``.

A command parses its flags into the options of one step (:mod:`dswheels.effects.steps`), calls
it, and renders what it returns; it holds no logic of its own and imports no other command.
Flags that several commands take are defined once, in :mod:`dswheels.commands.flags`.
"""

from __future__ import annotations

from dswheels.commands import (
    build,
    ci,
    cuda,
    doctor,
    facts,
    follow,
    index,
    inspect,
    install,
    plan,
    publish,
    smoke,
    verify,
)
from dswheels.commands.common import CommandGroup

__all__ = ["COMMANDS"]

# order = the order `dswheels --help` lists them
COMMANDS = (
    plan,
    build,
    verify,
    inspect,
    smoke,
    publish,
    index,
    doctor,
    install,
    CommandGroup(
        name="facts",
        help="check compat.yml against its sources; follow upstream releases",
        description="Check dswheels' compatibility facts against their sources, and follow upstream.",
        members=(facts, follow),
    ),
    CommandGroup(
        name="cuda",
        help="a CUDA toolkit from NVIDIA's redistributable archives (the build jobs' install)",
        description="The CUDA toolkit a build needs, from NVIDIA's own archives: `dswheels cuda install --help`.",
        members=(cuda,),
    ),
    CommandGroup(
        name="ci",
        help="what a CI run builds and publishes (the wheels workflow's plan job)",
        description="The steps of the wheels workflow that decide; `dswheels ci plan --help`.",
        members=(ci,),
    ),
)
