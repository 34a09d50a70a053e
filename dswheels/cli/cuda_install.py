"""``dswheels cuda install``: a CUDA toolkit from NVIDIA's redistributable archives, sha256-checked."""

from __future__ import annotations

import argparse
from pathlib import Path

from dswheels.cli.parsing import Subparsers, add_command, add_env_option
from dswheels.cli.shared import add_report_argument
from dswheels.cuda.redist import REDIST_URL
from dswheels.host.log import get_reporter
from dswheels.host.machine import host_os
from dswheels.kernel.model import Platform
from dswheels.kernel.platform_traits import traits
from dswheels.kernel.result import Done

__all__ = ["register", "run_install"]

DESCRIPTION = """\
Assemble the CUDA toolkit RELEASE from NVIDIA's redistributable archives into one CUDA root
that torch's cpp_extension accepts as CUDA_HOME, on Linux and Windows alike, with no installer:
exactly the components of compat.yml's list (cuda_components) for the toolkit's minor, each
archive checked against the size and sha256 of NVIDIA's redistrib_RELEASE.json, that JSON
checked against the sha256 compat.yml pins (cuda.<X.Y>.redist_sha256). Downloads are retried
and resumed; the root is cached under DSWHEELS_CACHE by the JSON's digest, so a second install
downloads nothing. A failure leaves no half-installed root. The last line printed is
CUDA_HOME=<root>.

examples:
  dswheels cuda install --toolkit 13.0.3
  dswheels cuda install --toolkit 13.0.3 --platform win_amd64 --dest C:/cuda   # a Windows root
  dswheels cuda install --toolkit "$CUDA_TOOLKIT" --github-env                  # wheels.yml's build jobs"""

_PLATFORMS = {p.value: p.os for p in Platform}


def register(sub: Subparsers[argparse.ArgumentParser]) -> None:
    p = add_command(
        sub,
        "install",
        help="assemble a CUDA toolkit from NVIDIA's redistributable archives (sha256-checked)",
        description=DESCRIPTION,
    )
    p.add_argument(
        "--toolkit", required=True, metavar="RELEASE", help="the toolkit release, e.g. 13.0.3 (a plan's cuda_toolkit)"
    )
    p.add_argument(
        "--platform",
        choices=sorted(_PLATFORMS),
        default=traits(host_os()).platform.value,
        help="whose archives (default: this machine's, %(default)s)",
    )
    p.add_argument(
        "--dest", type=Path, metavar="DIR", help="the root (default: under DSWHEELS_CACHE, by the JSON's digest)"
    )
    add_env_option(
        p,
        "--redist-url",
        env="DSWHEELS_CUDA_REDIST_URL",
        default=REDIST_URL,
        metavar="URL",
        help="NVIDIA's redist folder, or a mirror of it",
    )
    add_env_option(
        p,
        "--redist-sha256",
        env="DSWHEELS_CUDA_REDIST_SHA256",
        default="",
        metavar="HEX",
        help="the sha256 of redistrib_RELEASE.json when it is not compat.yml's pin (a release compat.yml does not "
        "pin, a mirror's own JSON); check the JSON before you pin it",
    )
    p.add_argument(
        "--github-env",
        action="store_true",
        help="set CUDA_HOME and CUDA_PATH to the root, and put its bin/ on PATH, for the job's later steps "
        "($GITHUB_ENV, $GITHUB_PATH)",
    )
    add_report_argument(p)
    p.set_defaults(func=run_install)


def run_install(args: argparse.Namespace) -> Done:
    from dswheels.cuda.step import CudaStepOptions, install_toolkit  # noqa: PLC0415 - keeps --help fast
    from dswheels.host.cache import CacheLayout  # noqa: PLC0415 - keeps --help fast

    installed = install_toolkit(
        CudaStepOptions(
            toolkit=args.toolkit,
            os=_PLATFORMS[args.platform],
            dest=args.dest,
            redist_url=args.redist_url,
            redist_sha256=args.redist_sha256,
            github_env=args.github_env,
        ),
        CacheLayout.here(),
    )
    how = "already assembled" if installed.reused else f"assembled from NVIDIA's archives ({installed.json_from})"
    reporter = get_reporter()
    reporter.aside(f"CUDA {installed.release} ({installed.platform}), {how}:")
    for component, archive in zip(installed.components, installed.archives, strict=True):
        reporter.aside(f"  {component.name:<13} {archive.component} {archive.version}  sha256 {archive.sha256}")
    reporter.emit(f"CUDA_HOME={installed.root}\n")
    return Done(
        data={
            "release": installed.release,
            "platform": installed.platform,
            "root": str(installed.root),
            "reused": installed.reused,
            "archives": [
                {"component": a.component, "version": a.version, "sha256": a.sha256} for a in installed.archives
            ],
        }
    )
