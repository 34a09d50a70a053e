"""Where sccache keeps what it compiled (a remote bucket or the local disk), and how a workflow job's
local cache is saved and restored: as ONE entry of GitHub's Actions cache per job.

Pure: the builder passes the settings (``dswheels build --sccache-*``, whose defaults are the
``DSWHEELS_SCCACHE_*`` repository variables) and the environment in, and starts sccache's server
with the result. The choice, in order (docs/costs.md, "The compiler cache in CI"):

0. backend ``local``: the local disk whatever else is set.
1. a bucket: an S3 bucket, or any S3-compatible store with an endpoint; credentials as sccache
   reads them (``AWS_ACCESS_KEY_ID``, ...). Every object is written as soon as it is compiled.
2. The local disk (``SCCACHE_DIR``, or sccache's default directory). wheels.yml restores it before
   the build and saves it after, whatever the build's outcome, as one Actions cache entry
   (:func:`cache_keys`).

Never sccache's own GitHub Actions cache backend, even where a job exposes the cache to processes
(``ACTIONS_RESULTS_URL`` and ``ACTIONS_RUNTIME_TOKEN``): it creates one cache entry per object,
GitHub allows a repository 200 new entries a minute (changelog 2026-01-16, mozilla/sccache#2730),
and sccache drops the writes it is refused (mozilla/sccache#2821): at a release's scale most
objects were never stored. The namespace names a bucket's key space (wheels.yml: one per ref).
Variables the caller already set for sccache itself (``SCCACHE_*``) win.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from dswheels.kernel.model import PlannedCell
from dswheels.kernel.versions import format_version

__all__ = [
    "CacheKeys",
    "CacheTool",
    "CompilerCacheChoice",
    "SccacheBackend",
    "SccacheSettings",
    "cache_keys",
    "compile_family",
    "sccache_backend",
]


class SccacheBackend(str, Enum):
    """Where sccache keeps its objects (``--sccache-backend``)."""

    AUTO = "auto"  # a bucket when named, else the local disk (saved by the workflow)
    LOCAL = "local"  # the local disk only

    def __str__(self) -> str:
        return self.value


class CacheTool(str, Enum):
    """The compiler caches dswheels drives (``--compiler-cache``)."""

    CCACHE = "ccache"  # C++ through a masquerade directory of compiler-named links, nvcc through ccache
    SCCACHE = "sccache"  # C++ through a CXX script, nvcc through sccache

    def __str__(self) -> str:
        return self.value


class CompilerCacheChoice(str, Enum):
    """``--compiler-cache``: one of the tools, whichever is installed, or none."""

    AUTO = "auto"  # ccache, else sccache, else none
    CCACHE = "ccache"
    SCCACHE = "sccache"
    NONE = "none"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, kw_only=True, slots=True)
class SccacheSettings:
    """Where sccache keeps its objects (``dswheels build --sccache-*``)."""

    backend: SccacheBackend = SccacheBackend.AUTO
    bucket: str = ""
    endpoint: str = ""
    region: str = ""
    namespace: str = "dswheels"


def sccache_backend(settings: SccacheSettings, env: Mapping[str, str], *, base_dir: str) -> tuple[dict[str, str], str]:
    """(the variables sccache's server starts with, a description of the backend).

    >>> sccache_backend(SccacheSettings(bucket="b", namespace="wheels-v1"), {}, base_dir="/w")[1]
    'S3 bucket b, prefix wheels-v1'
    >>> sccache_backend(SccacheSettings(), {"SCCACHE_DIR": "/t/sccache"}, base_dir="/w")
    ({'SCCACHE_BASEDIRS': '/w'}, 'local disk (/t/sccache)')
    """
    namespace = settings.namespace or "dswheels"
    out = {"SCCACHE_BASEDIRS": base_dir}
    bucket = settings.bucket
    if settings.backend is SccacheBackend.LOCAL:
        what = f"local disk ({env.get('SCCACHE_DIR') or 'sccache default directory'}; --sccache-backend local)"
    elif bucket:
        out["SCCACHE_BUCKET"] = bucket
        out["SCCACHE_S3_KEY_PREFIX"] = namespace
        if settings.endpoint:
            out["SCCACHE_ENDPOINT"] = settings.endpoint
        if settings.region:
            out["SCCACHE_REGION"] = settings.region
        what = f"S3 bucket {bucket}, prefix {namespace}"
    else:
        what = f"local disk ({env.get('SCCACHE_DIR') or 'sccache default directory'})"
    return {k: v for k, v in out.items() if k not in env}, what


@dataclass(frozen=True, slots=True)
class CacheKeys:
    """A workflow job's Actions cache entry (wheels.yml): the key it saves, the prefixes it restores from."""

    family: str  # every job of one toolkit, arch list, compiler and runner image: they share objects
    job: str  # this job within its family (its group, and its part)

    @property
    def restore_keys(self) -> tuple[str, str]:
        """Newest first: this job's own last entry (a re-run), else the newest of its family."""
        return (f"{self.family}-{self.job}-", f"{self.family}-")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", text)


def compile_family(planned: PlannedCell) -> str:
    """What a cell's objects depend on besides its sources: the runner image, the CUDA toolkit, the host
    compiler and the arch list; not the DeepSpeed version, torch or Python. The cells of one family
    compile in one work directory (dswheels.building.effects.workdir), so a unit compiled for one is the same
    compile, paths and all, for every other: a compiler cache can serve it.

    >>> from dswheels.kernel.model import *
    >>> from dswheels.kernel.naming import parse_cell_id
    >>> tc = Toolchain(runner_image="manylinux_2_28", runs_on=(), host_compiler=HostCompiler("gcc", "12", ""),
    ...     nvcc=(13, 0), cuda_toolkit="13.0.3", arch_list=("8.0", "9.0+PTX"), skip_cuda_check=False, cuda_check="",
    ...     nvcc_flags=(), cpu_baseline="x86-64-v2", cuda_components=(), notes=())
    >>> compile_family(PlannedCell(cell=parse_cell_id("ds0.19.8-torch2.14-cu130-cp311-linux_x86_64"),
    ...     torch_version="2.14.1", torch_index="", toolchain=tc, ops=OpPlan(build=(), left_out=()),
    ...     source=Source(SourceKind.SDIST, "", ""), smoke_runs_on=()))
    'manylinux_2_28-cuda13.0.3-gcc12-8.0_9.0+PTX'
    """
    tc = planned.toolchain
    toolkit = f"cuda{tc.cuda_toolkit}" if tc.cuda_toolkit else "cpu"
    archs = "_".join(tc.arch_list) or "noarch"
    if len(archs) > 60:  # cache keys are at most 512 characters; a long list goes by its digest
        archs = hashlib.sha256(archs.encode()).hexdigest()[:12]
    return _slug(f"{tc.runner_image}-{toolkit}-{tc.host_compiler.kind}{tc.host_compiler.version}-{archs}")


def cache_keys(cells: Sequence[PlannedCell], *, part: str = "") -> CacheKeys:
    """The Actions cache keys of a job building ``cells`` (``part``: "2/3" for a part job).

    The family leaves out what the objects do not depend on: the DeepSpeed version (a unit whose
    source did not change is the same object), torch (a unit that reaches no torch header is the
    same for every torch: dswheels.plan.scopes) and Python. What they depend on is in it:
    the runner image, the CUDA toolkit, the host compiler and the arch list. The saved key adds the
    run and attempt (wheels.yml), so every save is a new entry and a restore takes the newest.

    >>> from dswheels.kernel.model import *
    >>> from dswheels.kernel.naming import parse_cell_id
    >>> tc = Toolchain(runner_image="manylinux_2_28", runs_on=(), host_compiler=HostCompiler("gcc", "12", ""),
    ...     nvcc=(13, 0), cuda_toolkit="13.0.3", arch_list=("8.0", "9.0+PTX"), skip_cuda_check=False, cuda_check="",
    ...     nvcc_flags=(), cpu_baseline="x86-64-v2", cuda_components=(), notes=())
    >>> cell = PlannedCell(cell=parse_cell_id("ds0.19.8-torch2.14-cu130-cp311-linux_x86_64"), torch_version="2.14.1",
    ...     torch_index="", toolchain=tc, ops=OpPlan(build=(), left_out=()), source=Source(SourceKind.SDIST, "", ""),
    ...     smoke_runs_on=())
    >>> keys = cache_keys([cell])
    >>> keys.family, keys.job
    ('sccache-manylinux_2_28-cuda13.0.3-gcc12-8.0_9.0+PTX', 'ds0.19.8-torch2.14-cu130-linux_x86_64')
    >>> keys.restore_keys[1]
    'sccache-manylinux_2_28-cuda13.0.3-gcc12-8.0_9.0+PTX-'
    """
    first = cells[0]
    family = f"sccache-{compile_family(first)}"
    cell = first.cell
    torches = "+".join(sorted({format_version(i.cell.torch) for i in cells}))
    variants = "+".join(sorted({i.cell.variant.name for i in cells}))
    job = f"ds{format_version(cell.deepspeed)}-torch{torches}-{variants}-{cell.platform.value}"
    if part:
        job += f"-part{part.split('/', maxsplit=1)[0]}"
    return CacheKeys(family=family, job=_slug(job))
