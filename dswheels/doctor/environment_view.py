"""The facts seen as doctor judges them: platform, Python, torch variant, GPUs, toolkits, CUDA_HOME.

:func:`derive_env` reads the raw facts once (parsing tool output, resolving which toolkit torch
would use); every check, the verdict and the guidance then work from the :class:`Env`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from packaging.version import InvalidVersion, Version

from dswheels.doctor.machine_facts import (
    Facts,
    Gpu,
    PythonFacts,
    ToolkitView,
    TorchFacts,
    VsInstall,
    parse_nvidia_smi,
    parse_vswhere,
    toolkit_view,
)
from dswheels.doctor.per_os import words_for
from dswheels.kernel.compat import Compat
from dswheels.kernel.model import Platform, Python, Variant
from dswheels.kernel.platform_traits import conventions
from dswheels.kernel.versions import TorchMinor, VersionTuple, parse_version

__all__ = ["Env", "best_toolkit", "derive_env", "env_kind", "gcc_major"]


def env_kind(facts: Facts) -> str:
    """``conda``, ``venv`` or ``system``: decides where CUDA_HOME is best set."""
    py = facts.python
    if py is None:
        return "system"
    if py.conda:
        return "conda"
    if py.prefix != py.base_prefix:
        return "venv"
    return "system"


def _norm(os: str, path: str) -> str:
    """A path as ``os`` compares it (Windows: case-insensitive, either slash)."""
    return conventions(os).norm_path(path)


@dataclass
class Env:
    """The facts as doctor reads them; ``problems`` says why a part (python, torch) could not be read."""

    facts: Facts
    compat: Compat
    platform: Platform | None = None
    python: Python | None = None
    torch_minor: TorchMinor | None = None
    variant: Variant | None = None
    gpus: tuple[Gpu, ...] = ()
    driver: str = ""
    views: tuple[ToolkitView, ...] = ()
    cuda_home: str | None = None  # what torch's extension builds will use
    cuda_home_how: str = ""
    cuda_home_view: ToolkitView | None = None
    vs: tuple[VsInstall, ...] = ()
    problems: dict[str, str] = field(default_factory=dict)

    def view_for(self, path: str) -> ToolkitView | None:
        key = _norm(self.facts.os, path)
        for view in self.views:
            spellings = (view.root, *view.toolkit.aliases)
            if any(_norm(self.facts.os, s) == key for s in spellings):
                return view
        return None


def derive_env(facts: Facts, compat: Compat) -> Env:
    """Parse and resolve the facts once: every check, the verdict and the guidance read the result."""
    env = Env(facts=facts, compat=compat)
    if facts.python is not None:
        _read_python(env, facts.python)
    torch = facts.torch
    if torch is not None:
        _read_torch(env, torch)
    if facts.nvidia_smi:
        env.gpus, env.driver = parse_nvidia_smi(facts.nvidia_smi)
    if not env.gpus and torch is not None and torch.devices:
        env.gpus = torch.devices
    env.views = tuple(toolkit_view(t, facts.os) for t in facts.toolkits)
    env.cuda_home, env.cuda_home_how = _torch_cuda_home(facts)
    env.cuda_home_view = env.view_for(env.cuda_home) if env.cuda_home else None
    if facts.visual_studio is not None:
        env.vs = parse_vswhere(facts.visual_studio)
    return env


def _read_python(env: Env, py: PythonFacts) -> None:
    env.platform = Platform.from_sysconfig(py.platform)
    try:
        major, minor = parse_version(py.version)[:2]
        env.python = Python(version=(major, minor), free_threaded=py.free_threaded)
    except ValueError:
        env.problems["python"] = f"cannot read the Python version {py.version!r}"


def _read_torch(env: Env, torch: TorchFacts) -> None:
    """torch's MAJOR.MINOR and its variant (cpu or cuXYZ); a ROCm torch is a problem, not a variant."""
    try:
        env.torch_minor = TorchMinor(Version(torch.version).release[:2])
    except InvalidVersion:
        env.problems["torch"] = f"cannot read the torch version {torch.version!r}"
    if torch.hip:
        env.problems["torch"] = f"this is a ROCm build of torch (HIP {torch.hip}); dswheels builds for CUDA and CPU"
    elif torch.cuda:
        try:
            env.variant = Variant.parse(torch.cuda)
        except ValueError:
            env.problems["torch"] = f"cannot read torch.version.cuda {torch.cuda!r}"
    else:
        env.variant = Variant(name="cpu", cuda=None)


def _torch_cuda_home(facts: Facts) -> tuple[str | None, str]:
    """Where torch's cpp_extension (and so DeepSpeed) looks for CUDA, and why.

    torch's ``_find_cuda_home``: ``CUDA_HOME``, else ``CUDA_PATH``, else the parent of the
    directory of ``nvcc`` on PATH, else the first ``C:/Program Files/NVIDIA GPU Computing
    Toolkit/CUDA/v*.*`` (Windows) or ``/usr/local/cuda`` (Linux) if it exists.
    """
    env = facts.env
    how = ""
    if env.get("CUDA_HOME"):
        guess, how = env["CUDA_HOME"], "CUDA_HOME"
    elif env.get("CUDA_PATH"):
        guess, how = env["CUDA_PATH"], "CUDA_PATH"
    elif facts.path_nvcc:
        paths = conventions(facts.os)
        guess, how = paths.dirname(paths.dirname(facts.path_nvcc)), f"nvcc on PATH ({facts.path_nvcc})"
    else:
        guess = None
        fallback = words_for(facts.os).torch_fallback  # None: any toolkit in the standard place
        for toolkit in facts.toolkits:
            if "standard location" in toolkit.found_via:
                spelled = [
                    a for a in toolkit.aliases if fallback and a.replace("\\", "/").rstrip("/").endswith(fallback)
                ]
                if fallback is None or spelled:
                    guess, how = (spelled[0] if spelled else toolkit.root), "the standard location"
                    break
    reported = facts.torch.cuda_home if facts.torch is not None else None
    if facts.torch is not None and not facts.torch.cuda_home_error:
        # torch's own answer wins: it ran in the target interpreter with the same environment
        if reported and guess and _norm(facts.os, reported) == _norm(facts.os, guess):
            return reported, how
        return reported, "torch.utils.cpp_extension.CUDA_HOME"
    return guess, how


def best_toolkit(env: Env) -> ToolkitView | None:
    """The toolkit a build should use: torch's CUDA exactly, else the same major, newest first."""
    usable = [v for v in env.views if v.is_toolkit and v.nvcc]
    if not usable:
        return None
    torch_cuda = env.variant.cuda if env.variant else None

    def rank(view: ToolkitView) -> tuple[int, VersionTuple]:
        nvcc = view.nvcc or (0, 0)
        if torch_cuda is None:
            return (0, nvcc)
        if nvcc == torch_cuda:
            return (3, nvcc)
        if nvcc[0] == torch_cuda[0]:
            return (2 if nvcc > torch_cuda else 1, nvcc)
        return (0, nvcc)

    best = max(usable, key=rank)
    if torch_cuda is not None and rank(best)[0] == 0:
        return None
    return best


def gcc_major(facts: Facts) -> str:
    if not facts.gcc:
        return ""
    match = re.match(r"([0-9]+)", facts.gcc.strip())
    return match.group(1) if match else ""
