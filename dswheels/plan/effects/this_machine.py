"""This machine as one planned cell: what ``dswheels build`` builds when no cells are named.

Its Python and OS; torch and CUDA from this interpreter's torch, else from the axes asked for,
else the newest torch for this Python with the CUDA of the toolkit found (or cpu); the newest
DeepSpeed unless one is asked for.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from dswheels.host.log import get_reporter
from dswheels.host.venvs import PythonInfo, probe_python
from dswheels.kernel.compat import Compat
from dswheels.kernel.errors import EnvironmentMismatchError
from dswheels.kernel.locations import MATRIX
from dswheels.kernel.model import Cell, PlannedCell, Platform, Python, Variant
from dswheels.kernel.naming import cell_id
from dswheels.kernel.platform_traits import traits
from dswheels.kernel.versions import TorchMinor, VersionTuple, format_version, parse_version
from dswheels.plan.effects.matrix_file import load_matrix
from dswheels.plan.matrix.parse import parse_matrix
from dswheels.plan.matrix.spec import MatrixSpec, cell_values
from dswheels.plan.planner import Combo, plan
from dswheels.plan.toolchain import LocalHost
from dswheels.platforms import detect_host

__all__ = ["ThisMachine", "plan_this_machine"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ThisMachine:
    """This machine as a cell; the axes given here replace what it has or would pick."""

    matrix: Path  # its defaults (ops, cpu_baseline, torch_index) when it exists
    deepspeed: VersionTuple | None = None
    torch: TorchMinor | None = None
    variant: Variant | None = None
    nvcc: VersionTuple | None = None  # instead of the toolkit found


# A matrix for local builds when there is no matrix file: only its defaults matter
# (ops: all, cpu_baseline, torch_index); the cell itself comes from this environment.
_LOCAL_MATRIX = """\
schema: 1
deepspeed: ["{deepspeed}"]
torch:
  - {{version: "{torch}", variants: [{variant}]}}
python: ["{python}"]
platforms: [{platform}]
runners:
  {platform}:
    build: [{image}]
    smoke: [self-hosted]
"""


def _newest_torch(compat: Compat, python: Python, os_name: str, variant: Variant | None) -> VersionTuple | None:
    for minor in reversed(compat.torch_minors):
        release = compat.torch[minor]
        if python in release.python.get(os_name, ()) and (
            variant is None or (os_name in release.variants and variant in release.variants_for(os_name))
        ):
            return minor
    return None


def _interpreter(info: PythonInfo) -> tuple[Platform, Python]:
    platform = Platform.from_sysconfig(info.platform)
    if platform is None:
        known = ", ".join(p.value for p in Platform)
        raise EnvironmentMismatchError(f"dswheels builds for {known}; this is {info.platform}")
    return platform, Python.parse(".".join(info.python.split(".")[:2]) + ("t" if info.gil_disabled else ""))


def _torch_here(info: PythonInfo, request: ThisMachine) -> tuple[TorchMinor | None, Variant | None, str]:
    """This interpreter's torch and variant when they fit what was asked (and words that say so), else
    what was asked."""
    if info.torch is None:
        return request.torch, request.variant, ""
    here_torch = TorchMinor(parse_version(".".join(info.torch.split("+")[0].split(".")[:2])))
    here_variant = Variant.parse(info.torch_cuda) if info.torch_cuda else Variant.parse("cpu")
    if request.torch in (None, here_torch) and request.variant in (None, here_variant):
        return here_torch, here_variant, f"torch {info.torch} of this environment"
    return request.torch, request.variant, ""


def _toolkit_variant(compat: Compat, python: Python, platform: Platform, nvcc: VersionTuple | None) -> Variant:
    """The CUDA variant of the toolkit found when a torch for this Python has it, else cpu."""
    toolkit = Variant.parse(format_version(nvcc)) if nvcc else None
    key = traits(platform).compat_key
    return toolkit if toolkit and _newest_torch(compat, python, key, toolkit) else Variant.parse("cpu")


def _newest_torch_for(compat: Compat, python: Python, platform: Platform, variant: Variant) -> TorchMinor:
    torch = _newest_torch(compat, python, traits(platform).compat_key, variant)
    if torch is None:
        raise EnvironmentMismatchError(f"no torch release has a {variant.name} wheel for Python {python}")
    return TorchMinor(torch)


def _local_spec(matrix: Path, compat: Compat, cell: Cell) -> MatrixSpec:
    """The matrix file when there is one, else a matrix of ``cell`` alone with the defaults."""
    if matrix.exists():
        return load_matrix(matrix, compat)
    if matrix != MATRIX:
        load_matrix(matrix, compat)  # raises the missing-file error
    image = traits(cell.platform).runner_image  # any image of the OS: a local plan compiles with this machine's
    return parse_matrix(_LOCAL_MATRIX.format(**cell_values(cell), image=image), "(local defaults)", compat)


def plan_this_machine(request: ThisMachine, compat: Compat) -> PlannedCell:
    """This machine as a planned cell (see the module's docstring); the reporter says which."""
    info = probe_python(sys.executable)
    platform, python = _interpreter(info)
    deepspeed = request.deepspeed or compat.deepspeed_releases[-1]
    host_tools = detect_host()
    nvcc = request.nvcc or host_tools.nvcc
    torch, variant, here = _torch_here(info, request)
    if variant is None:
        variant = _toolkit_variant(compat, python, platform, nvcc)
    if torch is None:
        torch = _newest_torch_for(compat, python, platform, variant)
    if variant.is_cuda and nvcc is None:
        raise EnvironmentMismatchError(
            f"a {variant.name} build needs a CUDA toolkit (nvcc), and none was found",
            hint=f"install CUDA {variant.cuda_text} and set CUDA_HOME, or build the CPU variant: --cuda cpu",
        )
    cell = Cell(deepspeed=deepspeed, torch=torch, variant=variant, python=python, platform=platform)
    spec = _local_spec(request.matrix, compat, cell)
    combo = Combo(deepspeed=deepspeed, torch=torch, variant=variant, python=python, platform=platform)
    host = LocalHost(os=host_tools.os, gcc=host_tools.gcc, msvc=host_tools.msvc, nvcc=nvcc[:2] if nvcc else None)
    planned = plan(spec, compat, combo=combo, host=host).planned[0]
    get_reporter().info(
        f"building for this machine: Python {python}, "
        + (here or f"torch {planned.torch_version} {variant.name}")
        + (f", nvcc {format_version(nvcc)}" if nvcc and variant.is_cuda else "")
        + f" -> {cell_id(planned.cell)}",
    )
    return planned
