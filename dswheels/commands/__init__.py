"""One module per subcommand; each has ``register(subparsers)`` and a ``run(args) -> int``.

Commands parse arguments, call the library, and print; they hold no logic of their own.
"""

from __future__ import annotations

from dswheels.commands import build, ci, doctor, facts, index, inspect, install, plan, publish, smoke, verify

__all__ = ["COMMANDS"]

# order = the order `dswheels --help` lists them
COMMANDS = (plan, build, verify, inspect, smoke, publish, index, doctor, install, facts, ci)
