"""``dswheels install``: install the exact published wheel for this environment, then verify it."""

from __future__ import annotations

import argparse
import shlex

from dswheels.cli.command import Command
from dswheels.cli.flags import Flag, Flags, choice, fill
from dswheels.cli.shared import REPORT, TARGET
from dswheels.host.log import get_reporter
from dswheels.install.effects.install_wheel import Installer
from dswheels.install.step import InstallOptions, install_published
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.result import Done
from dswheels.kernel.urls import shell_word

__all__ = ["COMMAND"]

HELP = "install the published wheel that fits this environment, then verify it"

DESCRIPTION = """\
Detect the environment (the Python that will use DeepSpeed: this interpreter or --python):
its Python, platform, torch MAJOR.MINOR and torch's CUDA. Pick the one wheel of the index
built for exactly that (version and label, e.g. deepspeed-0.19.8+cu128torch2.9-cp312-cp312-
win_amd64.whl), install it with pip (or uv), then verify it: every op the wheel marks as
prebuilt must load without JIT compilation.

On Linux, the wheel's build manifest (beside it in the index) says which glibc and libstdc++
symbol versions its extensions need; a wheel that needs more than the environment loads is
not installed (exit 9, with what to do), --dry-run included. Without a manifest the install
goes on with a notice.

Before pip sees the downloaded wheel (its sha256 checked against the index), it must be
what its name says (METADATA's version and label, its torch pin, its WHEEL tags) and install
only DeepSpeed's files (the deepspeed package, its .dist-info, DeepSpeed's own scripts);
otherwise nothing is installed (exit 4), with or without --no-verify. Credentials in
--index (user:password@ before its host) go only to that host and are never printed.

When no wheel fits, it says why and lists the nearest published cells (e.g. "torch 2.6 is
installed; wheels exist for torch 2.5 and 2.7 with cu124") and exits with code 9; when the
one wheel that fits is yanked, it says so and why.

examples:
  dswheels install --index https://example.org/dswheels
  dswheels install --index https://example.org/dswheels --python .venv/bin/python
  dswheels install --index ./site --deepspeed 0.19.7 --dry-run
  DSWHEELS_INDEX=https://example.org/dswheels dswheels install"""


FLAGS: Flags = (
    *TARGET,
    choice(
        "--installer",
        Installer,
        to="installer",
        help="pip in the target environment, or uv (auto: pip when the target has it, else uv)",
    ),
    Flag("--dry-run", to="dry_run", action="store_true", help="pick the wheel and print the install command only"),
    Flag("--no-verify", action="store_true", help="skip loading the ops after installing"),
    REPORT,
)


def _options(args: argparse.Namespace) -> InstallOptions:
    if not args.index:
        raise ConfigError(
            "no index given",
            hint="pass --index URL (the published site's base URL or directory) or set DSWHEELS_INDEX",
        )
    return InstallOptions(**fill(args, FLAGS), verify=not args.no_verify)


def _run(options: InstallOptions, _args: argparse.Namespace) -> Done:
    outcome = install_published(options)
    if not outcome.installed:
        # the URL is the index's: one shell word, whatever the page put in it
        get_reporter().emit(f"# download {shell_word(outcome.wheel.url)} (sha256 {outcome.wheel.sha256}), then:\n")
        get_reporter().emit(shlex.join(outcome.command) + "\n")
    elif outcome.loaded is None:
        get_reporter().info(f"installed deepspeed {outcome.version} (not verified: --no-verify)")
    else:
        ops = ", ".join(outcome.loaded) or "none"
        get_reporter().info(
            f"installed deepspeed {outcome.version} into {outcome.python}: {len(outcome.loaded)} prebuilt ops "
            f"load without JIT ({ops})",
        )
    return Done(
        data={
            "wheel": outcome.wheel.filename,
            "sha256": outcome.wheel.sha256,
            "version": outcome.version,
            "python": outcome.python,
            "installed": outcome.installed,
            "loaded": None if outcome.loaded is None else list(outcome.loaded),
        }
    )


COMMAND = Command("install", HELP, DESCRIPTION, FLAGS, _options, _run)
