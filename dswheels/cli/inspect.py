"""``dswheels inspect``: what is inside DeepSpeed wheels, ours or not, Linux or Windows."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from dswheels.cli.command import Command
from dswheels.cli.commands import listed_help
from dswheels.cli.flags import Flag, Flags, PathUse, fill
from dswheels.cli.shared import REPORT, TRUSTED_ROOT
from dswheels.host.files import read_bounded
from dswheels.host.log import get_reporter
from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.result import Done
from dswheels.verify.effects.inspect_wheel import inspect_path
from dswheels.verify.inspection import SCHEMA, render_inspection

__all__ = ["COMMAND"]

HELP = listed_help("inspect")

DESCRIPTION = """\
Show what a DeepSpeed wheel contains, whoever built it: its version and local label, the torch
it pins (Requires-Dist), the accelerator and the torch/CUDA DeepSpeed stamped into it
(torch_info), the installed ops, and per extension file: the op it belongs to, its GPU code
(SASS per architecture, PTX or none), the highest x86-64 level its instructions need (objdump),
and what it needs when it loads: glibc/GLIBCXX versions (Linux) or DLLs, each judged against
what Windows, the Visual C++ runtime, Python and the torch wheel provide (Windows). Warnings say
what would surprise a user at run time. Nothing is installed or run.

Its provenance, when a PEP 740 provenance object (<wheel>.provenance, as the index serves it) or
GitHub's Sigstore bundle (<wheel>.sigstore.json, as the release workflow leaves it) lies beside
it: verified offline against the Sigstore root dswheels pins (or --trusted-root FILE), and who
signed it (the workflow, its ref and commit). Needs the provenance extra.

examples:
  dswheels inspect deepspeed-0.16.5-cp311-cp311-win_amd64.whl
  dswheels inspect wheelhouse/*/*.whl --format json > contents.json"""


@dataclass(frozen=True, kw_only=True, slots=True)
class InspectOptions:
    wheels: tuple[Path, ...]
    trusted_root: Path | None = None  # the Sigstore root a wheel's provenance is verified against (None: pinned)


FLAGS: Flags = (
    Flag("wheels", nargs="+", metavar="WHEEL", to="wheels", parse=tuple, path=PathUse.READS_WHEELS),
    Flag("--format", choices=("text", "json"), default="text", help="output format (default: %(default)s)"),
    TRUSTED_ROOT,
    REPORT,
)


def _options(args: argparse.Namespace) -> InspectOptions:
    return InspectOptions(**fill(args, FLAGS))


def _run(options: InspectOptions, args: argparse.Namespace) -> Done:
    compat = load_compat()
    root = None
    if options.trusted_root is not None:
        try:
            root = read_bounded(options.trusted_root)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"--trusted-root {options.trusted_root}: {exc}") from None
    found = [inspect_path(wheel, compat, trusted_root=root) for wheel in options.wheels]
    document = {"schema": SCHEMA, "wheels": [i.as_json() for i in found]}
    if args.format == "json":
        get_reporter().emit(json.dumps(document, indent=2) + "\n")
    else:
        get_reporter().emit("\n".join(render_inspection(i) for i in found))
    return Done(data=document)


COMMAND = Command("inspect", HELP, DESCRIPTION, FLAGS, _options, _run)
