"""``dswheels facts issue`` and ``dswheels facts dispatch`` (work in progress)."""

from __future__ import annotations

import argparse

from dswheels.commands.common import Subparsers

__all__ = ["register"]


def register(sub: Subparsers[argparse.ArgumentParser]) -> None:
    del sub
