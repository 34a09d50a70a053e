"""The commands ``dswheels --help`` lists, in its order: each is a stage's ``command`` module (``<stage>/command.py``),
with ``register(subparsers)`` and a ``run(args)``.

A command parses its flags into its stage's options, calls the stage's entry (``<stage>/step.py``), and renders
what it returns through the reporter; it holds no logic of its own and imports no other command.
Flags that several commands take are defined once, in :mod:`dswheels.arguments.shared`.
"""

from __future__ import annotations

from dswheels.arguments.parsing import CommandGroup
from dswheels.building import command as build
from dswheels.cuda import command as cuda
from dswheels.doctor import command as doctor
from dswheels.facts import command as facts
from dswheels.facts import follow_command as follow
from dswheels.index import command as index
from dswheels.install import command as install
from dswheels.plan import ci_command as ci
from dswheels.plan import command as plan
from dswheels.publish import command as publish
from dswheels.smoke import command as smoke
from dswheels.verify import command as verify
from dswheels.verify import inspect_command as inspect

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
