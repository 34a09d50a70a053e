"""The commands ``dswheels --help`` lists, in its order: each a :class:`~dswheels.cli.command.Command` of its
module here (``cli/<command>.py``).

A command declares its flags (:mod:`dswheels.cli.flags`), makes its stage's options from them, calls the
stage's entry (``<stage>/step.py``), and renders what it returns through the reporter; it holds no logic
of its own and imports no other command. Flags that several commands take are defined once, in
:mod:`dswheels.cli.shared`.
"""

from __future__ import annotations

from dswheels.cli import (
    build,
    ci_measure,
    ci_plan,
    cuda_install,
    doctor,
    facts_check,
    facts_follow,
    facts_refit,
    index,
    inspect,
    install,
    plan,
    publish,
    request,
    smoke,
    verify,
)
from dswheels.cli.command import CommandGroup

__all__ = ["COMMANDS"]

# order = the order `dswheels --help` lists them
COMMANDS = (
    plan.COMMAND,
    build.COMMAND,
    verify.COMMAND,
    inspect.COMMAND,
    smoke.COMMAND,
    publish.COMMAND,
    index.COMMAND,
    doctor.COMMAND,
    install.COMMAND,
    CommandGroup(
        name="facts",
        help="check compat.yml against its sources; follow upstream releases; refit the cost model after one",
        description="Check dswheels' compatibility facts against their sources, follow upstream, and refit the "
        "cost model from what a release measured.",
        members=(facts_check.COMMAND, *facts_follow.COMMANDS, *facts_refit.COMMANDS),
    ),
    CommandGroup(
        name="cuda",
        help="a CUDA toolkit from NVIDIA's redistributable archives (the build jobs' install)",
        description="The CUDA toolkit a build needs, from NVIDIA's own archives: `dswheels cuda install --help`.",
        members=(cuda_install.COMMAND,),
    ),
    CommandGroup(
        name="request",
        help="answer wheel-request issues, and build what a maintainer's label asks for (requests.yml)",
        description="The request workflow's steps: `dswheels request answer|build|indexed --help`.",
        members=request.COMMANDS,
    ),
    CommandGroup(
        name="ci",
        help="what a CI run builds and publishes (the wheels workflow's plan job), and what its jobs measured",
        description="The wheels workflow's own steps: `dswheels ci plan --help`, `dswheels ci measure --help`.",
        members=(ci_plan.COMMAND, ci_measure.COMMAND),
    ),
)
