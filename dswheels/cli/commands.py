"""The commands ``dswheels --help`` lists, in its order: each is a stage's ``command`` module (``<stage>/command.py``),
with ``register(subparsers)`` and a ``run(args)``.

A command parses its flags into its stage's options, calls the stage's entry (``<stage>/step.py``), and renders
what it returns through the reporter; it holds no logic of its own and imports no other command.
Flags that several commands take are defined once, in :mod:`dswheels.cli.shared`.
"""

from __future__ import annotations

from dswheels.cli import build, doctor, index, inspect, install, plan, publish, smoke, verify
from dswheels.cli import ci_plan as ci
from dswheels.cli import cuda_install as cuda
from dswheels.cli import facts_check as facts
from dswheels.cli import facts_follow as follow
from dswheels.cli.parsing import CommandGroup

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
