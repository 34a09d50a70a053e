"""``dswheels cuda install``: a CUDA toolkit from NVIDIA's redistributable archives, sha256-checked."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from dswheels.cli.command import Command
from dswheels.cli.flags import Flag, Flags, PathUse, fill
from dswheels.cli.shared import REPORT
from dswheels.cuda.redist import REDIST_URL
from dswheels.host.log import get_reporter
from dswheels.host.machine import host_platform
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.model import Platform, parse_platform
from dswheels.kernel.result import Done

if TYPE_CHECKING:
    from dswheels.cuda.step import CudaStepOptions

__all__ = ["COMMAND"]

HELP = "assemble a CUDA toolkit from NVIDIA's redistributable archives (sha256-checked)"

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
  dswheels cuda install --toolkit 13.0.3 --platform linux_aarch64              # an arm64 server's (linux-sbsa)
  dswheels cuda install --toolkit "$CUDA_TOOLKIT" --github-env                  # wheels.yml's build jobs"""


def _platform(text: str) -> Platform:
    """``--platform``, checked when the command runs (wheels.yml passes it through a variable: no choices)."""
    try:
        return parse_platform(text)
    except ValueError as exc:
        raise ConfigError(f"--platform: {exc}") from None


FLAGS: Flags = (
    Flag(
        "--toolkit",
        to="toolkit",
        required=True,
        metavar="RELEASE",
        help="the toolkit release, e.g. 13.0.3 (a plan's cuda_toolkit)",
    ),
    Flag(
        "--platform",
        to="platform",
        parse=_platform,
        metavar="PLAT",
        default=(host_platform() or Platform.LINUX_X86_64).value,
        help=f"whose archives: {', '.join(sorted(p.value for p in Platform))} (default: this machine's, %(default)s; "
        "wheels.yml passes the plan's)",
    ),
    Flag(
        "--dest",
        to="dest",
        metavar="DIR",
        path=PathUse.WRITES_INTO,
        help="the root (default: under DSWHEELS_CACHE, by the JSON's digest)",
    ),
    Flag(
        "--redist-url",
        to="redist_url",
        env="DSWHEELS_CUDA_REDIST_URL",
        default=REDIST_URL,
        metavar="URL",
        help="NVIDIA's redist folder, or a mirror of it",
    ),
    Flag(
        "--redist-sha256",
        to="redist_sha256",
        env="DSWHEELS_CUDA_REDIST_SHA256",
        default="",
        metavar="HEX",
        help="the sha256 of redistrib_RELEASE.json when it is not compat.yml's pin (a release compat.yml does not "
        "pin, a mirror's own JSON); check the JSON before you pin it",
    ),
    Flag(
        "--github-env",
        to="github_env",
        action="store_true",
        help="set CUDA_HOME and CUDA_PATH to the root, and put its bin/ on PATH, for the job's later steps "
        "($GITHUB_ENV, $GITHUB_PATH)",
    ),
    REPORT,
)


def _options(args: argparse.Namespace) -> CudaStepOptions:
    from dswheels.cuda.step import CudaStepOptions  # noqa: PLC0415 - keeps --help fast

    return CudaStepOptions(**fill(args, FLAGS))


def _run(options: CudaStepOptions, _args: argparse.Namespace) -> Done:
    from dswheels.cuda.step import install_toolkit  # noqa: PLC0415 - keeps --help fast
    from dswheels.host.cache import CacheLayout  # noqa: PLC0415 - keeps --help fast

    installed = install_toolkit(options, CacheLayout.here())
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


COMMAND = Command("install", HELP, DESCRIPTION, FLAGS, _options, _run)
