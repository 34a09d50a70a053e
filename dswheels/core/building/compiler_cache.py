"""Where sccache keeps what it compiled: a remote bucket, GitHub's Actions cache, or the local disk.

Pure: the builder passes the settings (``dswheels build --sccache-*``, whose defaults are the
``DSWHEELS_SCCACHE_*`` repository variables) and the environment in, and starts sccache's server
with the result. The choice, in order (docs/costs.md, "The compiler cache in CI"):

0. backend ``local``: the local disk whatever else is set (a job shares nothing: its Pythons still
   do, through the one disk cache of the job).
1. a bucket: an S3 bucket, or any S3-compatible store with an endpoint; credentials as sccache
   reads them (``AWS_ACCESS_KEY_ID``, ...).
2. GitHub's Actions cache, when the job exposes it to the build (``ACTIONS_RESULTS_URL`` and
   ``ACTIONS_RUNTIME_TOKEN``, which Mozilla-Actions/sccache-action exports).
3. The local disk (sccache's own default, or ``SCCACHE_DIR``).

Every entry is written as soon as its object is compiled, so a job cut off at its time limit
loses only the objects that were compiling: a re-run compiles only what is missing.
The namespace names the key space (wheels.yml: one per workflow and ref). Variables the caller
already set for sccache itself (``SCCACHE_*``) win.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

__all__ = ["SCCACHE_BACKENDS", "CacheTool", "SccacheSettings", "sccache_backend"]

SCCACHE_BACKENDS = ("auto", "local")  # auto: a bucket when named, else GitHub's cache when exposed, else disk


class CacheTool(str, Enum):
    """The compiler caches dswheels drives (``--compiler-cache``)."""

    CCACHE = "ccache"  # C++ through a masquerade directory of compiler-named links, nvcc through ccache
    SCCACHE = "sccache"  # C++ through a CXX script, nvcc through sccache

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, kw_only=True, slots=True)
class SccacheSettings:
    """Where sccache keeps its objects (``dswheels build --sccache-*``)."""

    backend: str = "auto"  # one of SCCACHE_BACKENDS
    bucket: str = ""
    endpoint: str = ""
    region: str = ""
    namespace: str = "dswheels"


def sccache_backend(settings: SccacheSettings, env: Mapping[str, str], *, base_dir: str) -> tuple[dict[str, str], str]:
    """(the variables sccache's server starts with, a description of the backend).

    >>> sccache_backend(SccacheSettings(bucket="b", namespace="wheels-v1"), {}, base_dir="/w")[1]
    'S3 bucket b, prefix wheels-v1'
    >>> gha = {"ACTIONS_RESULTS_URL": "u", "ACTIONS_RUNTIME_TOKEN": "t"}
    >>> sccache_backend(SccacheSettings(), gha, base_dir="/w")[0]["SCCACHE_GHA_ENABLED"]
    'on'
    >>> sccache_backend(SccacheSettings(backend="local"), gha, base_dir="/w")[0]
    {'SCCACHE_BASEDIRS': '/w'}
    >>> sccache_backend(SccacheSettings(), {}, base_dir="/w")
    ({'SCCACHE_BASEDIRS': '/w'}, 'local disk (sccache default directory)')
    """
    namespace = settings.namespace or "dswheels"
    out = {"SCCACHE_BASEDIRS": base_dir}
    bucket = settings.bucket
    if settings.backend == "local":
        what = f"local disk ({env.get('SCCACHE_DIR') or 'sccache default directory'}; --sccache-backend local)"
    elif bucket:
        out["SCCACHE_BUCKET"] = bucket
        out["SCCACHE_S3_KEY_PREFIX"] = namespace
        if settings.endpoint:
            out["SCCACHE_ENDPOINT"] = settings.endpoint
        if settings.region:
            out["SCCACHE_REGION"] = settings.region
        what = f"S3 bucket {bucket}, prefix {namespace}"
    elif env.get("ACTIONS_RESULTS_URL") and env.get("ACTIONS_RUNTIME_TOKEN"):
        out["SCCACHE_GHA_ENABLED"] = "on"
        out["SCCACHE_GHA_VERSION"] = namespace
        what = f"GitHub Actions cache, namespace {namespace}"
    else:
        what = f"local disk ({env.get('SCCACHE_DIR') or 'sccache default directory'})"
    return {k: v for k, v in out.items() if k not in env}, what
