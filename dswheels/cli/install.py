"""``dswheels install``: install the exact published wheel for this environment, then verify it."""

from __future__ import annotations

import argparse
import shlex

from dswheels.cli.command import Command
from dswheels.cli.commands import listed_help
from dswheels.cli.flags import Flag, Flags, choice, fill
from dswheels.cli.shared import REPORT, TARGET, TRUSTED_ROOT
from dswheels.host.log import get_reporter
from dswheels.install.effects.install_wheel import Installer
from dswheels.install.step import InstallOptions, install_published
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.result import Done
from dswheels.kernel.urls import shell_word

__all__ = ["COMMAND"]

HELP = listed_help("install")

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

With --require-provenance, the wheel's PEP 740 provenance (served beside it, named by
data-provenance on its link) must verify before anything of the wheel is downloaded: a Sigstore
signature checked offline against the trusted root dswheels pins (--trusted-root FILE: another),
made by the repository's .github/workflows/wheels.yml (--provenance-repository OWNER/REPO; by
default the repository of the GitHub Pages site --index is), over exactly this wheel's
name and sha256. Otherwise nothing is installed: exit 11 (no provenance, or its signature does not
verify), 12 (the wheel is not the attested bytes), 13 (the attestation is for another file), 14
(signed by another identity). It needs the provenance extra: pip install "dswheels[provenance]".

When no wheel fits, it says why and lists the nearest published cells (e.g. "torch 2.6 is
installed; wheels exist for torch 2.5 and 2.7 with cu124") and exits with code 9; when the
one wheel that fits is yanked, it says so and why.

examples:
  dswheels install --index https://example.org/dswheels
  dswheels install --index https://example.org/dswheels --python .venv/bin/python
  dswheels install --index ./site --deepspeed 0.19.7 --dry-run
  DSWHEELS_INDEX=https://example.org/dswheels dswheels install
  dswheels install --index https://OWNER.github.io/dswheels/ --require-provenance"""


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
    Flag(
        "--require-provenance",
        action="store_true",
        help="install only a wheel whose PEP 740 provenance verifies (Sigstore, offline), signed by the "
        "publishing repository's wheels.yml",
    ),
    Flag(
        "--provenance-repository",
        metavar="OWNER/REPO",
        help="the repository whose wheels.yml must have signed the provenance (default: the repository of "
        "the GitHub Pages site --index names)",
    ),
    TRUSTED_ROOT,
    REPORT,
)


def _options(args: argparse.Namespace) -> InstallOptions:
    if not args.index:
        raise ConfigError(
            "no index given",
            hint="pass --index URL (the published site's base URL or directory) or set DSWHEELS_INDEX",
        )
    # --require-provenance takes the repository --provenance-repository names ("": the Pages site's)
    repository = (args.provenance_repository or "") if args.require_provenance else None
    return InstallOptions(**fill(args, FLAGS), verify=not args.no_verify, require_provenance=repository)


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
            "provenance": outcome.provenance,
        }
    )


COMMAND = Command("install", HELP, DESCRIPTION, FLAGS, _options, _run)
