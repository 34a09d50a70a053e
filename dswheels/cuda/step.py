"""The cuda install step: a CUDA toolkit from NVIDIA's redistributable archives (wheels.yml's build jobs)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dswheels.cuda.effects.install_toolkit import CudaInstallOptions, InstalledCuda, install_cuda
from dswheels.cuda.redist import REDIST_URL
from dswheels.host.cache import CacheLayout
from dswheels.host.gha import add_path, write_env
from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.model import Platform

__all__ = ["CudaStepOptions", "install_toolkit"]


@dataclass(frozen=True, kw_only=True, slots=True)
class CudaStepOptions:
    toolkit: str
    platform: Platform  # whose archives
    dest: Path | None = None
    redist_url: str = REDIST_URL
    redist_sha256: str = ""
    github_env: bool = False  # CUDA_HOME/CUDA_PATH and bin/ for the job's later steps
    retries: int = 5


def install_toolkit(options: CudaStepOptions, cache: CacheLayout) -> InstalledCuda:
    """The toolkit assembled (its downloads and root in ``cache``), and announced to the job."""
    installed = install_cuda(
        load_compat(),
        CudaInstallOptions(
            toolkit=options.toolkit,
            platform=options.platform,
            cache=cache,
            dest=options.dest,
            redist_url=options.redist_url,
            redist_sha256=options.redist_sha256,
            retries=options.retries,
        ),
    )
    if options.github_env:
        home = str(installed.root)
        bin_dir = str(installed.root / "bin")
        if not (write_env("CUDA_HOME", home) and write_env("CUDA_PATH", home) and add_path(bin_dir)):
            raise ConfigError(
                "--github-env: $GITHUB_ENV and $GITHUB_PATH are not set (this is not a GitHub Actions step)",
                hint="set CUDA_HOME to the root printed above yourself",
            )
    return installed
