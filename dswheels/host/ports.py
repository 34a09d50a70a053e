"""The effects a stage works through, passed in rather than reached for (as pypa/build's
``ProjectBuilder(runner=...)``).

A command makes one :class:`Host` with :meth:`Host.real` (the environment read once: the cache
directory, the GitHub token when the command needs one) and hands it to its stage's entry; a test
hands a :class:`Host` whose ``run`` records the commands and whose clock it sets.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import requests

from dswheels.host import http, proc
from dswheels.host.clock import SYSTEM_CLOCK, Clock
from dswheels.host.downloads import env_cache_dir
from dswheels.host.github import token_from_env

__all__ = ["Host"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Host:
    """Processes, HTTP, the environment, the clock and the cache directory, as one stage sees them."""

    cache_dir: Path  # downloads, venvs, work directories: absolute
    run: proc.Runner = proc.run
    capture: proc.Capturer = proc.capture
    http: Callable[[], requests.Session] = http.session  # every session with the one timeout policy (http.TIMEOUTS)
    environ: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    clock: Clock = SYSTEM_CLOCK
    github_token: str | None = None  # GITHUB_TOKEN or GH_TOKEN, read once (Host.real(github=True))

    @classmethod
    def real(cls, *, cache_dir: Path | None = None, github: bool = False) -> Host:
        """This machine: ``cache_dir`` (``--cache-dir``) or ``DSWHEELS_CACHE`` or the user cache directory;
        the token only for a command that talks to GitHub (a malformed one is an error there, and only there)."""
        return cls(
            cache_dir=(cache_dir or env_cache_dir()).expanduser().resolve(),
            environ=MappingProxyType(dict(os.environ)),
            github_token=token_from_env() if github else None,
        )
