"""dswheels' cache directory, and every area in it, named in one place.

A command makes the layout once (:meth:`CacheLayout.here`: ``--cache-dir``, else ``DSWHEELS_CACHE``,
else the user cache directory) and hands it to the entry of a stage that works under the cache
(build, verify, smoke, ``cuda install``, ``facts check``), which hands it on. No other module spells
an area's folder name (``tests/unit/test_host_rule.py``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from dswheels.host.destinations import judge_destination
from dswheels.host.environ import read_variable
from dswheels.kernel.envvars import plain_path

__all__ = ["CacheLayout", "env_cache_dir"]


@dataclass(frozen=True, slots=True)
class CacheLayout:
    """Where each kind of cached thing lives under ``root`` (absolute)."""

    root: Path

    @classmethod
    def here(cls, given: Path | None = None) -> CacheLayout:
        """This machine's: ``given`` (``--cache-dir``), else :func:`env_cache_dir`; absolute. Judged a folder
        dswheels may write into before anything else (:func:`~dswheels.host.destinations.judge_destination`)."""
        root = judge_destination(
            (given or env_cache_dir()).expanduser(), what="the cache directory (--cache-dir, $DSWHEELS_CACHE)"
        )
        return cls(root.resolve())

    @property
    def sources(self) -> Path:
        """Verified source archives by sha256 (DeepSpeed's sdists, the facts' upstream files)."""
        return self.root / "sources"

    @property
    def downloads(self) -> Path:
        """Other verified downloads by sha256 (the Windows CPython the Wine host takes)."""
        return self.root / "downloads"

    @property
    def venvs(self) -> Path:
        """The build interpreters, one per Python and torch."""
        return self.root / "venvs"

    @property
    def work(self) -> Path:
        """The build trees (a one-letter name: Windows paths are short)."""
        return self.root / "w"

    @property
    def verify(self) -> Path:
        """verify's fresh venvs and logs."""
        return self.root / "verify"

    @property
    def smoke(self) -> Path:
        """smoke's venvs and logs."""
        return self.root / "smoke"

    @property
    def cuda_downloads(self) -> Path:
        """NVIDIA's archives while ``cuda install`` assembles a root."""
        return self.root / "cuda" / "downloads"

    def cuda_root(self, key: str) -> Path:
        """A CUDA root ``cuda install`` assembled (``key``: toolkit, platform and the JSON's digest)."""
        return self.root / "cuda" / key

    @property
    def wine_prefix(self) -> Path:
        """The Wine prefix the Windows builds on Linux share."""
        return self.root / "wine" / "prefix"

    def wine_cuda(self, key: str) -> Path:
        """The Windows CUDA toolkit the Wine host takes (``key``: toolkit and what it holds)."""
        return self.root / "wine" / f"cuda-{key}"

    def wine_torch(self, key: str) -> Path:
        """torch's win_amd64 wheel unpacked for the Wine host (``key``: torch and Python)."""
        return self.root / "wine" / f"torch-{key}"

    def qemu_root(self, key: str) -> Path:
        """An arm64 Linux root the qemu host made (``key``: the suite and what it holds)."""
        return self.root / "qemu" / key

    @property
    def emulated(self) -> CacheLayout:
        """The cache of the builds that run in an emulated machine: its own, another CPU's venvs and objects
        (the machine sees it at the same path)."""
        return CacheLayout(self.root / "qemu" / "cache")

    @property
    def uv(self) -> Path:
        """uv's download cache for the commands run in an emulated machine with this layout."""
        return self.root / "uv"

    def wine_python(self, key: str) -> Path:
        """The Windows CPython (headers, libs) the Wine host builds against (``key``: version and sha256)."""
        return self.root / "wine" / f"python-{key}"


def env_cache_dir() -> Path:
    """``DSWHEELS_CACHE``, else the platform's user cache directory + ``dswheels``. A relative
    ``XDG_CACHE_HOME`` or ``LOCALAPPDATA`` is ignored (the XDG Base Directory rule)."""
    if value := read_variable("DSWHEELS_CACHE", plain_path):
        return Path(value)
    if os.name == "nt":
        base = _absolute(read_variable("LOCALAPPDATA", plain_path)) or Path.home() / "AppData" / "Local"
        return base / "dswheels"
    return (_absolute(read_variable("XDG_CACHE_HOME", plain_path)) or Path.home() / ".cache") / "dswheels"


def _absolute(value: str | None) -> Path | None:
    return Path(value) if value and Path(value).is_absolute() else None
