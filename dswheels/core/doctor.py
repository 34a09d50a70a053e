"""``dswheels doctor``: judge a machine from collected facts, and say what to fix.

Pure: :mod:`dswheels.effects.probe` collects :class:`~dswheels.core.facts.Facts` (raw tool output included, so
tests feed recordings from real machines); :func:`diagnose` turns them into checks
(OK / WARN / FAIL, each with a concrete fix) and a :class:`Verdict`: the cell this environment
is, whether a published wheel fits, and whether a local build would work. The local-build
judgement is the planner's own (:func:`dswheels.core.plan.resolve_cell` with a
:class:`~dswheels.core.plan.LocalHost`), so doctor and ``dswheels plan`` never disagree.
"""

from __future__ import annotations

import dataclasses
import ntpath
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

from packaging.version import InvalidVersion, Version

from dswheels.core.compat import Compat
from dswheels.core.config import MatrixSpec
from dswheels.core.facts import (
    DEV_LIBRARIES,
    DevLibrary,
    Facts,
    Gpu,
    ToolkitView,
    VsInstall,
    lib_paths,
    ops_linking,
    parse_nvidia_smi,
    parse_vswhere,
    toolkit_view,
    toolset_minor,
)
from dswheels.core.model import Cell, DroppedCell, Platform, Python, Reason, Toolchain, Variant
from dswheels.core.naming import cell_id
from dswheels.core.pick import IndexFile, Wanted, nearest, pick_wheel
from dswheels.core.plan import LocalHost, check_cell, resolve_cell
from dswheels.core.versions import VersionTuple, format_version, parse_version

__all__ = [
    "Check",
    "IndexView",
    "LocalBuild",
    "Report",
    "Status",
    "Verdict",
    "diagnose",
    "env_kind",
]

# --- report types -------------------------------------------------------------------------------


class Status(str, Enum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"

    def __str__(self) -> str:
        return self.value.upper()


@dataclass(frozen=True, slots=True)
class Check:
    id: str
    status: Status
    title: str
    detail: str = ""
    fix: str = ""


@dataclass(frozen=True, slots=True)
class IndexView:
    """The published index as doctor/install saw it."""

    url: str
    files: tuple[IndexFile, ...] = ()
    error: str = ""


@dataclass(frozen=True, slots=True)
class LocalBuild:
    """Would ``dswheels build`` (DeepSpeed's own setup.py) work here, and how."""

    status: Status  # OK: works as is; WARN: works with the workarounds; FAIL: blocked
    blockers: tuple[str, ...] = ()
    workarounds: tuple[str, ...] = ()  # what must be set or switched for the build to pass
    environment: tuple[tuple[str, str], ...] = ()  # variables for the build, in order
    toolchain: Toolchain | None = None
    ops: tuple[str, ...] = ()
    left_out: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Verdict:
    cell: Cell | None
    no_cell: str  # why no cell could be named ("" when cell is set)
    rules: tuple[Reason, ...]  # rules that forbid the cell outright
    index: IndexView | None
    wheel: IndexFile | None
    nearest: tuple[str, ...]
    local: LocalBuild

    @property
    def cell_id(self) -> str:
        return cell_id(self.cell) if self.cell else ""


@dataclass(frozen=True, slots=True)
class Report:
    checks: tuple[Check, ...]
    verdict: Verdict
    guidance: tuple[str, ...]  # CUDA_HOME setup for this kind of environment
    env_kind: str  # "venv" | "conda" | "system"

    @property
    def worst(self) -> Status:
        statuses = {c.status for c in self.checks}
        for status in (Status.FAIL, Status.WARN):
            if status in statuses:
                return status
        return Status.OK


# --- derived view of the facts ----------------------------------------------------------------


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
    if os == "windows":
        return ntpath.normpath(path).lower()
    return posixpath.normpath(path)


@dataclass
class _Env:
    facts: Facts
    compat: Compat
    platform: Platform | None = None
    python: Python | None = None
    torch_minor: VersionTuple | None = None
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


def _derive(facts: Facts, compat: Compat) -> _Env:
    env = _Env(facts=facts, compat=compat)
    py = facts.python
    if py is not None:
        env.platform = Platform.from_sysconfig(py.platform)
        try:
            major, minor = parse_version(py.version)[:2]
            env.python = Python(version=(major, minor), free_threaded=py.free_threaded)
        except ValueError:
            env.problems["python"] = f"cannot read the Python version {py.version!r}"
    torch = facts.torch
    if torch is not None:
        try:
            env.torch_minor = Version(torch.version).release[:2]
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
        mod = ntpath if facts.os == "windows" else posixpath
        guess, how = mod.dirname(mod.dirname(facts.path_nvcc)), f"nvcc on PATH ({facts.path_nvcc})"
    else:
        guess = None
        for toolkit in facts.toolkits:
            if "standard location" in toolkit.found_via:
                spelled = [a for a in toolkit.aliases if a.replace("\\", "/").rstrip("/").endswith("/usr/local/cuda")]
                if facts.os == "windows" or spelled:
                    guess, how = (spelled[0] if spelled else toolkit.root), "the standard location"
                    break
    reported = facts.torch.cuda_home if facts.torch is not None else None
    if facts.torch is not None and not facts.torch.cuda_home_error:
        # torch's own answer wins: it ran in the target interpreter with the same environment
        if reported and guess and _norm(facts.os, reported) == _norm(facts.os, guess):
            return reported, how
        return reported, "torch.utils.cpp_extension.CUDA_HOME"
    return guess, how


# --- checks -------------------------------------------------------------------------------------


def _pip_torch_command(torch_version: str, variant: str, compat: Compat, os: str) -> str:
    index = compat.torch_index.format(variant=variant)
    minor = parse_version(torch_version)[:2]
    if os == "linux" and compat.torch_pypi_linux_variant.get(minor) == variant:
        return f"pip install torch=={torch_version}"
    return f"pip install torch=={torch_version} --index-url {index}"


def _check_platform(env: _Env) -> Check:
    facts = env.facts
    if env.platform is not None:
        return Check("platform", Status.OK, f"{facts.os} {facts.machine} ({env.platform.value} wheels)")
    py = facts.python
    if py is not None and facts.os == "windows" and py.platform == "win32":
        return Check(
            "platform",
            Status.FAIL,
            f"32-bit Python on Windows ({py.executable})",
            detail="torch and DeepSpeed ship win_amd64 wheels only",
            fix="install 64-bit Python from python.org (the 'Windows installer (64-bit)') and create the venv with it",
        )
    where = f"{facts.os} {facts.machine}" + (f" (Python platform {py.platform})" if py else "")
    return Check(
        "platform",
        Status.FAIL,
        f"unsupported platform: {where}",
        detail="dswheels publishes win_amd64 and linux_x86_64 wheels; DeepSpeed's CUDA ops need an x86-64 "
        "Windows or Linux machine",
        fix="use Windows x64 or Linux x86_64 (WSL2 counts as Linux)",
    )


def _check_python(env: _Env) -> Check:
    facts = env.facts
    py = facts.python
    if py is None:
        return Check(
            "python",
            Status.FAIL,
            "cannot run the target Python",
            detail=facts.python_error,
            fix="pass --python with the interpreter of your environment "
            "(e.g. .venv/bin/python, .venv\\Scripts\\python.exe)",
        )
    kind = env_kind(facts)
    threading = ", free-threaded" if py.free_threaded else ""
    title = f"Python {py.version} ({py.implementation}, {py.bits}-bit{threading}) [{kind}]"
    if py.implementation != "cpython":
        return Check(
            "python",
            Status.FAIL,
            title,
            detail="torch and DeepSpeed wheels are built for CPython",
            fix="use CPython",
        )
    if env.python is not None and env.platform is not None:
        os = env.platform.os
        supported = sorted({p for t in env.compat.torch.values() for p in t.python[os]})
        if env.python not in supported:
            newest = ", ".join(str(p) for p in supported if not p.free_threaded)
            return Check(
                "python",
                Status.FAIL,
                title,
                detail=f"no torch release has wheels for Python {env.python} on {env.platform.value}",
                fix=f"use one of Python {newest}",
            )
    return Check("python", Status.OK, title, detail=py.executable)


def _variant_for_toolkit(env: _Env, minor: VersionTuple, os: str) -> str | None:
    """A CUDA variant of torch ``minor`` matching a toolkit on this machine, if any."""
    variants = list(env.compat.torch[minor].variants[os])
    toolkit_versions = {v.nvcc for v in env.views if v.nvcc}
    for variant in reversed(variants):
        if variant.cuda in toolkit_versions:
            return variant.name
    for variant in reversed(variants):
        if variant.cuda and any(t[0] == variant.cuda[0] for t in toolkit_versions):
            return variant.name
    return None


def _check_torch(env: _Env) -> Check:
    facts = env.facts
    torch = facts.torch
    os = env.platform.os if env.platform else facts.os
    if torch is None:
        newest = _newest_torch_for(env)
        fix = "install torch first"
        if newest:
            variant = _default_variant(env, newest, os)
            fix = _pip_torch_command(env.compat.torch[newest].latest, variant, env.compat, os)
        not_installed = facts.torch_error in ("", "not installed")
        return Check(
            "torch",
            Status.FAIL,
            "torch is not installed" if not_installed else "torch does not import",
            detail="" if not_installed else facts.torch_error,
            fix=fix if not_installed else "reinstall torch in this environment (" + fix + ")",
        )
    if "torch" in env.problems:
        return Check("torch", Status.FAIL, f"torch {torch.version}", detail=env.problems["torch"])
    title = f"torch {torch.version} ({'CUDA ' + torch.cuda if torch.cuda else 'CPU build'})"
    minor = env.torch_minor
    if minor is not None and minor not in env.compat.torch:
        known = format_version(env.compat.torch_minors[-1])
        return Check(
            "torch",
            Status.WARN,
            title,
            detail=f"torch {format_version(minor)} is not in dswheels' compatibility data (it knows up to {known}): "
            "no wheel is planned for it",
            fix=f"use a released torch <= {known}, or update dswheels",
        )
    if torch.cuda is None and env.gpus and minor is not None:
        variant = _variant_for_toolkit(env, minor, os) or _default_variant(env, minor, os)
        why = "PyPI's Windows torch wheels are all CPU builds" if os == "windows" else "this is a CPU build"
        return Check(
            "torch",
            Status.FAIL,
            title,
            detail=f"an NVIDIA GPU is present but torch cannot use it: {why}; DeepSpeed would run its CPU "
            "accelerator and no CUDA op",
            fix=_pip_torch_command(env.compat.torch[minor].latest, variant, env.compat, os)
            + " (in this environment; add --force-reinstall if pip says it is satisfied)",
        )
    detail = ""
    if torch.cuda is None:
        detail = "CPU build: DeepSpeed uses its CPU accelerator (cpu_adam, fused_adam on CPU, ...)"
    return Check("torch", Status.OK, title, detail=detail)


def _newest_torch_for(env: _Env) -> VersionTuple | None:
    if env.python is None or env.platform is None:
        return None
    fits = [m for m in env.compat.torch_minors if env.python in env.compat.torch[m].python[env.platform.os]]
    released = [m for m in fits if not env.compat.torch[m].inferred] or fits
    return released[-1] if released else None


def _default_variant(env: _Env, minor: VersionTuple, os: str) -> str:
    """The CUDA variant to suggest: one matching a toolkit here, else PyPI's Linux default."""
    match = _variant_for_toolkit(env, minor, os)
    if match:
        return match
    variants = [v.name for v in env.compat.torch[minor].variants[os]]
    pypi = env.compat.torch_pypi_linux_variant.get(minor)
    if pypi is not None and pypi in variants:
        return pypi
    return variants[-1] if variants else "cpu"


def _check_gpu(env: _Env) -> Check:
    facts = env.facts
    torch = facts.torch
    if not env.gpus:
        why = facts.nvidia_smi_error or ("nvidia-smi not found" if facts.nvidia_smi is None else "it lists no GPU")
        cuda_torch = torch is not None and torch.cuda
        detail = f"{why}. DeepSpeed will pick its CPU accelerator"
        if cuda_torch:
            detail += "; the ops of a CUDA wheel load only with DS_ACCELERATOR=cuda"
        return Check(
            "gpu",
            Status.WARN,
            "no NVIDIA GPU visible",
            detail=detail,
            fix="on a GPU machine install the NVIDIA driver (nvidia-smi must list the GPU); fine for CPU-only use",
        )
    names = "; ".join(
        f"{g.name} (sm_{g.capability.replace('.', '')}{f', {g.memory_mib} MiB' if g.memory_mib else ''})"
        if g.capability
        else g.name
        for g in env.gpus
    )
    title = f"{len(env.gpus)} GPU{'s' if len(env.gpus) > 1 else ''}: {names}" + (
        f", driver {env.driver}" if env.driver else ""
    )
    if torch is not None and torch.cuda and not torch.cuda_available:
        return Check(
            "gpu",
            Status.FAIL,
            title,
            detail=f"torch (CUDA {torch.cuda}) cannot use the GPU: torch.cuda.is_available() is False",
            fix=f"update the NVIDIA driver to one that supports CUDA {torch.cuda} "
            "(nvidia-smi shows the highest CUDA it supports), or install a torch variant for an older CUDA",
        )
    if torch is not None and torch.arch_list:
        missing = [g for g in env.gpus if g.capability and not _arch_covers(torch.arch_list, g.capability)]
        if missing:
            gpu = missing[0]
            return Check(
                "gpu",
                Status.FAIL,
                title,
                detail=f"torch {torch.version} has no kernels for sm_{gpu.capability.replace('.', '')} "
                f"(its arch list: {' '.join(torch.arch_list)})",
                fix="install a torch variant built for this GPU (e.g. cu128 or newer for RTX 50 / sm_120)",
            )
    return Check("gpu", Status.OK, title)


def _arch_covers(arch_list: Sequence[str], capability: str) -> bool:
    """Whether torch's ``get_arch_list()`` (``sm_86``, ``compute_90``) has code for ``capability``.

    CUDA's compatibility rules: SASS for X.y runs on X.z with z >= y (same major); the
    arch-specific ``a``/``f`` variants only on their own arch; PTX (``compute_XY``) is
    JIT-compiled by the driver for any newer GPU.

    >>> _arch_covers(["sm_80", "sm_86", "sm_90"], "8.9")
    True
    >>> _arch_covers(["sm_70", "sm_75"], "6.1")
    False
    >>> _arch_covers(["sm_90", "compute_90"], "12.0")
    True
    """
    want = parse_version(capability)[:2]
    for arch in arch_list:
        kind, _, code = arch.partition("_")
        digits = code.rstrip("af")
        if not digits.isdigit() or len(digits) < 2:
            continue
        have = (int(digits[:-1]), int(digits[-1]))
        if kind == "compute" and have <= want:
            return True
        if kind == "sm" and (have == want or (digits == code and have[0] == want[0] and have[1] <= want[1])):
            return True
    return False


def _check_cuda_home(env: _Env) -> Check:
    facts = env.facts
    cuda_torch = facts.torch is not None and facts.torch.cuda is not None
    home, how = env.cuda_home, env.cuda_home_how
    best = _best_toolkit(env)
    set_fix = _set_cuda_home_fix(env, best.root) if best else ""
    if not home and facts.torch is not None and not cuda_torch:
        return Check("cuda_home", Status.OK, "CUDA_HOME: not used (torch is a CPU build)")
    if not home:
        status = Status.WARN if cuda_torch else Status.OK
        return Check(
            "cuda_home",
            status,
            "CUDA_HOME: not set, and torch finds no toolkit",
            detail="torch's cpp_extension (and DeepSpeed's op builds and JIT) will report CUDA_HOME=None",
            fix=set_fix or "install a CUDA toolkit (see the toolkit check), then set CUDA_HOME",
        )
    view = env.cuda_home_view
    title = f"CUDA_HOME -> {home} (via {how})"
    if view is None or not view.is_toolkit:
        what = "has no nvcc" if view is None or not view.has_nvcc else "has no include/cuda_runtime.h"
        return Check(
            "cuda_home",
            Status.WARN if cuda_torch else Status.OK,
            title,
            detail=f"{home} {what}: it is not a CUDA toolkit root"
            + (
                " (a wrapper script or symlink in bin/ makes torch guess its parent)"
                if how.startswith(("nvcc on PATH", "torch.utils"))
                else ""
            ),
            fix=set_fix or "point CUDA_HOME at the toolkit root (the directory holding bin/nvcc and include/)",
        )
    torch_cuda = env.variant.cuda if env.variant else None
    if torch_cuda and view.nvcc and view.nvcc[0] != torch_cuda[0]:
        return Check(
            "cuda_home",
            Status.WARN,
            title + f" = CUDA {format_version(view.nvcc)}",
            detail=f"torch is CUDA {format_version(torch_cuda)}: torch refuses to build extensions (and DeepSpeed "
            "to JIT-compile ops) with a different CUDA major",
            fix=set_fix if best and best.nvcc and best.nvcc[0] == torch_cuda[0] else _install_toolkit_fix(env),
        )
    suffix = f" = CUDA {format_version(view.nvcc)}" if view.nvcc else ""
    if how == "torch.utils.cpp_extension.CUDA_HOME" or how.startswith(("nvcc on PATH", "the standard")):
        detail = "found by torch's guess; setting CUDA_HOME explicitly keeps it stable"
        return Check("cuda_home", Status.OK, title + suffix, detail=detail, fix=set_fix)
    return Check("cuda_home", Status.OK, title + suffix)


def _best_toolkit(env: _Env) -> ToolkitView | None:
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


def _install_toolkit_fix(env: _Env) -> str:
    variant = env.variant
    if variant is None or variant.cuda is None:
        return ""
    info = env.compat.cuda.get(variant.cuda)
    release = info.install if info else variant.cuda_text
    os = env.platform.os if env.platform else env.facts.os
    if os == "windows":
        packages = env.compat.subpackages_for(variant.cuda)
        extra = f" (installer components: {', '.join(packages)})" if packages else ""
        return (
            f"install the CUDA {release} toolkit from https://developer.nvidia.com/cuda-toolkit-archive{extra}; "
            "it sets CUDA_PATH"
        )
    return (
        f"install the CUDA {release} toolkit (https://developer.nvidia.com/cuda-toolkit-archive, or "
        f"conda install -c nvidia cuda-toolkit={variant.cuda_text}) and set CUDA_HOME to it"
    )


def _set_cuda_home_fix(env: _Env, root: str) -> str:
    kind = env_kind(env.facts)
    if env.facts.os == "windows":
        if kind == "conda":
            return f'conda env config vars set CUDA_HOME="{root}" (then conda deactivate && conda activate)'
        return f'setx CUDA_HOME "{root}" (new terminals), or $env:CUDA_HOME = "{root}" for this PowerShell'
    if kind == "conda":
        return f"conda env config vars set CUDA_HOME={root} (then conda deactivate && conda activate)"
    return f"export CUDA_HOME={root}"


def _check_toolkits(env: _Env) -> list[Check]:
    checks = _toolkit_checks(env)
    if env.variant is not None and not env.variant.is_cuda:
        # a CPU torch builds and loads no CUDA op: what a toolkit lacks does not matter here
        return [
            dataclasses.replace(c, status=Status.OK, detail=f"not used by a CPU torch. {c.detail}".strip(), fix="")
            if c.status is Status.WARN
            else c
            for c in checks
        ]
    return checks


def _toolkit_checks(env: _Env) -> list[Check]:
    facts = env.facts
    cuda_torch = env.variant is not None and env.variant.is_cuda
    if not env.views:
        looked = (
            "CUDA_HOME, CUDA_PATH, CUDA_PATH_V*, nvcc on PATH, C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA"
            if facts.os == "windows"
            else "CUDA_HOME, CUDA_PATH, nvcc on PATH, /usr/local/cuda*, /opt/cuda, $CONDA_PREFIX"
        )
        return [
            Check(
                "toolkit",
                Status.WARN if cuda_torch else Status.OK,
                "no CUDA toolkit found",
                detail=f"looked at {looked}. Prebuilt wheels do not need one; local builds and JIT-compiled ops do",
                fix=_install_toolkit_fix(env) if cuda_torch else "",
            ),
        ]
    checks: list[Check] = []
    for view in env.views:
        via = ", ".join(view.toolkit.found_via)
        title = f"{view.label()} [{via}]"
        if not view.has_nvcc:
            checks.append(
                Check("toolkit", Status.WARN, title, detail="no bin/nvcc: not a toolkit (runtime only?)", fix=""),
            )
            continue
        if view.nvcc is None:
            checks.append(
                Check(
                    "toolkit",
                    Status.WARN,
                    title,
                    detail="nvcc --version did not print a release: "
                    + (view.toolkit.nvcc_output.strip().splitlines() or ["(no output)"])[-1],
                    fix="reinstall the toolkit",
                ),
            )
            continue
        runtime = DEV_LIBRARIES[0]
        if runtime in view.missing_headers:
            best = _best_toolkit(env)
            checks.append(
                Check(
                    "toolkit",
                    Status.WARN,
                    f"{view.root} has bin/nvcc (CUDA {format_version(view.nvcc)}) but no include/: not a toolkit root "
                    f"[{via}]",
                    detail="its nvcc is a wrapper script or a link into a toolkit elsewhere; torch takes this "
                    "directory for CUDA_HOME when CUDA_HOME and CUDA_PATH are unset",
                    fix=_set_cuda_home_fix(env, best.root) if best else "set CUDA_HOME to the real toolkit root",
                ),
            )
            continue
        problems: list[str] = []
        fixes: list[str] = []
        if view.missing_headers:
            names = ", ".join(f"{lib.name} ({lib.header})" for lib in view.missing_headers)
            problems.append(f"missing headers: {names}")
            pip = _pip_include_for(env, view.missing_headers)
            if pip:
                fixes.append(f"CUDA_INC_PATH={pip} adds the headers torch's pip CUDA packages ship")
            fixes.append(_dev_packages_fix(env, view))
        if view.targets_only_headers and not view.missing_headers:
            include = f"{view.root}/targets/x86_64-linux/include"
            problems.append("headers only under targets/x86_64-linux/include (conda layout)")
            fixes.append(f"CUDA_INC_PATH={include}")
        if view.missing_libs:
            names = ", ".join(f"{lib.name} ({lib_paths(facts.os, lib.link)[0]})" for lib in view.missing_libs)
            problems.append(f"missing link libraries: {names}: the ops that link them fail to build")
            if not view.missing_headers:
                fixes.append(_dev_packages_fix(env, view))
        if problems:
            checks.append(
                Check(
                    "toolkit",
                    Status.WARN,
                    title,
                    detail="; ".join(problems),
                    fix="; or ".join(dict.fromkeys(f for f in fixes if f)),
                ),
            )
        else:
            checks.append(
                Check("toolkit", Status.OK, title, detail="nvcc and the cuBLAS/cuSPARSE/cuSOLVER/cuRAND dev files")
            )
    return checks


def _pip_include_for(env: _Env, libs: Sequence[DevLibrary]) -> str:
    wanted = {lib.header for lib in libs}
    for directory, headers in env.facts.pip_cuda_headers.items():
        if wanted <= set(headers):
            return directory
    return ""


def _dev_packages_fix(env: _Env, view: ToolkitView) -> str:
    nvcc = view.nvcc
    if nvcc is None:
        return ""
    if env.facts.os == "windows":
        packages = env.compat.subpackages_for(nvcc)
        return f"re-run the CUDA {format_version(nvcc)} installer with the components {', '.join(packages)}"
    dashed = f"{nvcc[0]}-{nvcc[1]}"
    return (
        f"install the dev packages: apt install cuda-libraries-dev-{dashed} (NVIDIA's apt repository), or "
        f"conda install -c nvidia libcublas-dev libcurand-dev libcusparse-dev libcusolver-dev"
    )


def _gcc_major(facts: Facts) -> str:
    if not facts.gcc:
        return ""
    match = re.match(r"(\d+)", facts.gcc.strip())
    return match.group(1) if match else ""


def _check_compiler(env: _Env) -> list[Check]:
    facts = env.facts
    if facts.os == "linux":
        major = _gcc_major(facts)
        if not major:
            return [
                Check(
                    "compiler",
                    Status.WARN,
                    "no gcc on PATH",
                    detail="needed to build DeepSpeed's ops (locally or JIT), not to install a prebuilt wheel",
                    fix="apt install build-essential (or your distribution's gcc/g++)",
                ),
            ]
        return [Check("compiler", Status.OK, f"gcc {facts.gcc}")]
    if facts.os != "windows" or facts.visual_studio is None:
        return []
    if facts.visual_studio.vswhere is None:
        return [
            Check(
                "msvc",
                Status.WARN,
                "no Visual Studio found (vswhere.exe is missing)",
                detail="MSVC is needed to build DeepSpeed's ops (locally or JIT), not to install a prebuilt wheel",
                fix="install Visual Studio 2022 Build Tools with 'Desktop development with C++' "
                "(https://aka.ms/vs/17/release/vs_BuildTools.exe)",
            ),
        ]
    if not env.vs:
        return [
            Check(
                "msvc",
                Status.WARN,
                "vswhere lists no Visual Studio installation",
                fix="install Visual Studio 2022 Build Tools with 'Desktop development with C++'",
            ),
        ]
    checks = []
    for install in env.vs:
        title = f"{install.name} {install.version}"
        if not install.toolsets:
            checks.append(
                Check(
                    "msvc",
                    Status.WARN,
                    title + ": no MSVC toolset",
                    detail=f"{install.path} has no VC\\Tools\\MSVC: the C++ workload is not installed",
                    fix=f'"C:\\Program Files (x86)\\Microsoft Visual Studio\\Installer\\setup.exe" modify '
                    f'--installPath "{install.path}" --add Microsoft.VisualStudio.Workload.VCTools '
                    "--includeRecommended (elevated), or add 'Desktop development with C++' in the Visual Studio "
                    "Installer",
                ),
            )
            continue
        default = toolset_minor(install.default) if install.default else ""
        sets = ", ".join(
            toolset_minor(t) + (" (default)" if default and toolset_minor(t) == default else "")
            for t in install.toolsets
        )
        status = Status.OK if install.complete else Status.WARN
        checks.append(
            Check(
                "msvc",
                status,
                f"{title}: MSVC {sets}",
                detail=install.path if install.complete else f"{install.path}: the installation is incomplete",
                fix="" if install.complete else "repair it in the Visual Studio Installer",
            ),
        )
    return checks


def _check_long_paths(env: _Env) -> list[Check]:
    if env.facts.os != "windows":
        return []
    enabled = env.facts.long_paths
    if enabled:
        return [Check("long_paths", Status.OK, "long paths enabled (LongPathsEnabled=1)")]
    return [
        Check(
            "long_paths",
            Status.WARN,
            "long paths are not enabled" if enabled is False else "long paths: could not read the registry",
            detail="builds unpack DeepSpeed's sources into deep trees; paths over 260 characters fail without it",
            fix="as administrator: reg add HKLM\\SYSTEM\\CurrentControlSet\\Control\\FileSystem /v LongPathsEnabled "
            "/t REG_DWORD /d 1 /f ; and git config --global core.longpaths true",
        ),
    ]


def _check_ninja(env: _Env) -> Check:
    if env.facts.ninja:
        return Check("ninja", Status.OK, f"ninja {env.facts.ninja}")
    return Check(
        "ninja",
        Status.WARN,
        "ninja not found",
        detail="DeepSpeed JIT-compiles ops missing from a wheel with ninja, and parallel builds use it",
        fix="pip install ninja (in this environment)",
    )


def _check_deepspeed(env: _Env) -> Check:
    ds = env.facts.deepspeed
    if ds is None:
        return Check("deepspeed", Status.OK, "DeepSpeed is not installed", fix="dswheels install --index URL")
    if ds.error:
        return Check(
            "deepspeed",
            Status.WARN,
            f"DeepSpeed {ds.version}: cannot read its build info",
            detail=ds.error,
            fix="reinstall DeepSpeed from a wheel (dswheels install)",
        )
    prebuilt = sorted(name for name, on in ds.installed_ops.items() if on)
    title = f"DeepSpeed {ds.version} ({ds.accelerator} accelerator, {len(prebuilt)} prebuilt ops)"
    detail = "prebuilt: " + (", ".join(prebuilt) if prebuilt else "none")
    torch = env.facts.torch
    if torch is not None and env.torch_minor is not None and ds.torch_version:
        built = ds.torch_version
        if built != format_version(env.torch_minor):
            return Check(
                "deepspeed",
                Status.FAIL,
                title,
                detail=f"built with torch {built}, torch {torch.version} is installed: loading any prebuilt op "
                "raises 'PyTorch version mismatch'. " + detail,
                fix=f"install the DeepSpeed wheel for torch {format_version(env.torch_minor)} (dswheels install), or "
                f"torch {built}",
            )
    if torch is not None and torch.cuda and ds.accelerator == "cuda" and ds.cuda_version not in ("", "0.0"):
        torch_cuda = ".".join(torch.cuda.split(".")[:2])
        if ds.cuda_version != torch_cuda:
            return Check(
                "deepspeed",
                Status.WARN,
                title,
                detail=f"built with CUDA {ds.cuda_version}, torch is CUDA {torch_cuda}: DeepSpeed refuses to load "
                "prebuilt CUDA ops on a GPU when the CUDA major.minor differ. " + detail,
                fix=f"install the wheel for torch {torch.version} (dswheels install)",
            )
    if not prebuilt:
        return Check(
            "deepspeed",
            Status.WARN,
            title,
            detail="no op is prebuilt: every op JIT-compiles on first use (needs a toolkit, a compiler and ninja)",
            fix="dswheels install --index URL installs a wheel with the ops prebuilt",
        )
    if torch is not None and torch.cuda and ds.accelerator != "cuda" and env.gpus:
        return Check(
            "deepspeed",
            Status.WARN,
            title,
            detail=f"built for the {ds.accelerator} accelerator but this machine runs CUDA: DeepSpeed JIT-compiles "
            "every CUDA op. " + detail,
            fix="dswheels install --index URL (a CUDA wheel)",
        )
    return Check("deepspeed", Status.OK, title, detail=detail)


def _check_index(verdict: Verdict) -> list[Check]:
    index = verdict.index
    if index is None:
        return []
    if index.error:
        return [Check("index", Status.WARN, f"cannot read the index {index.url}", detail=index.error)]
    if verdict.cell is None:
        return []
    if verdict.wheel is not None:
        return [Check("index", Status.OK, f"published: {verdict.wheel.filename}", detail=verdict.wheel.url)]
    return [
        Check(
            "index",
            Status.WARN,
            f"no published wheel for {verdict.cell_id}",
            detail="; ".join(verdict.nearest),
            fix="see the verdict: change torch to a published combination, or build locally",
        ),
    ]


# --- the verdict ------------------------------------------------------------------------------


def _wanted(env: _Env) -> Wanted | str:
    facts = env.facts
    if env.platform is None:
        return "this platform has no wheels (see the platform check)"
    if env.python is None:
        return "the target Python could not be read"
    if facts.torch is None:
        return "torch is not installed: a DeepSpeed wheel is specific to the torch MAJOR.MINOR and its CUDA"
    if env.torch_minor is None or env.variant is None:
        return env.problems.get("torch", "torch's version could not be read")
    return Wanted(torch=env.torch_minor, variant=env.variant, python=env.python, platform=env.platform)


def _choose_deepspeed(
    env: _Env, wanted: Wanted, requested: VersionTuple | None, files: Sequence[IndexFile]
) -> VersionTuple:
    if requested is not None:
        return requested
    published = pick_wheel(wanted, files)
    if published is not None and published.cell is not None:
        return published.cell.deepspeed
    ds = env.facts.deepspeed
    if ds is not None:
        try:
            release = Version(ds.version).release
        except InvalidVersion:
            release = ()
        if release in env.compat.deepspeed_releases:
            return release
    for version in reversed(env.compat.deepspeed_releases):
        cell = Cell(
            deepspeed=version,
            torch=wanted.torch,
            variant=wanted.variant,
            python=wanted.python,
            platform=wanted.platform,
        )
        if not check_cell(cell, env.compat):
            return version
    return env.compat.deepspeed_releases[-1]


def _local_spec(cell: Cell, compat: Compat) -> MatrixSpec:
    """The one-cell matrix of a local build: defaults as the shipped matrix has them."""
    return MatrixSpec(
        filename="this machine",
        deepspeed=(cell.deepspeed,),
        torch=((cell.torch, (cell.variant,)),),
        python=(cell.python,),
        platforms=(cell.platform,),
        include=(),
        exclude=(),
        ops=None,
        cpu_baseline="x86-64-v2",
        cuda_check="skip-when-needed",
        toolkits={},
        arch_lists={},
        torch_index=compat.torch_index,
        runners={},
        sources={},
    )


def _local_fix(reason: Reason, cell: Cell, nvcc: VersionTuple | None, env: _Env) -> str:
    """The planner's fix speaks of the matrix and runner images; on a user's machine say what to install."""
    if reason.rule == "host-compiler":
        cuda = nvcc or cell.variant.cuda
        info = env.compat.cuda.get(cuda) if cuda else None
        if cell.platform.os == "windows":
            if info is None:
                return "install Visual Studio 2022 Build Tools with 'Desktop development with C++'"
            low, high = info.msvc
            return (
                f"install an MSVC toolset nvcc {format_version(info.minor)} accepts (_MSC_VER {low}-{high - 1}, "
                f"toolsets 14.{low - 1900}-14.{high - 1 - 1900}): Visual Studio Installer > Individual components > "
                "'MSVC v143 - VS 2022 C++ x64/x86 build tools (v14.3x)' or the v142 (14.29) component"
            )
        limit = info.gcc_max if info else None
        if limit is None:
            return "install gcc and g++ (apt install build-essential)"
        return (
            f"install gcc {limit} or older (e.g. apt install gcc-{limit} g++-{limit}) and export CC=gcc-{limit} "
            f"CXX=g++-{limit} (torch passes $CC to nvcc as -ccbin)"
        )
    if reason.rule == "arch-list":
        return "set TORCH_CUDA_ARCH_LIST to archs both this nvcc and torch accept"
    return reason.fix or "see `dswheels plan --explain`"


def _local_build(env: _Env, cell: Cell) -> LocalBuild:
    compat, facts = env.compat, env.facts
    os = cell.platform.os
    blockers: list[str] = []
    workarounds: list[str] = []
    variables: list[tuple[str, str]] = []
    nvcc: VersionTuple | None = None
    missing_libs: tuple[DevLibrary, ...] = ()
    if cell.variant.cuda is not None:
        best = _best_toolkit(env)
        usable = [v for v in env.views if v.is_toolkit and v.nvcc]
        if best is None and usable:
            # a toolkit of another CUDA major: the planner says why it cannot build (nvcc-major)
            home = env.cuda_home_view
            nvcc = (home if home in usable else usable[0]).nvcc
        elif best is None:
            blockers.append(
                f"no CUDA toolkit found: torch CUDA {cell.variant.cuda_text} needs one; {_install_toolkit_fix(env)}",
            )
        else:
            nvcc = best.nvcc
            home = env.cuda_home_view
            if home is None or home.root != best.root:
                where = env.cuda_home or "None"
                workarounds.append(f"set CUDA_HOME={best.root} (torch would use {where})")
            variables.append(("CUDA_HOME", best.root))
            if best.missing_headers:
                pip = _pip_include_for(env, best.missing_headers)
                names = ", ".join(lib.header for lib in best.missing_headers)
                if pip:
                    workarounds.append(f"set CUDA_INC_PATH={pip}: {best.root} lacks {names}")
                    variables.append(("CUDA_INC_PATH", pip))
                else:
                    blockers.append(f"{best.root} lacks {names}: {_dev_packages_fix(env, best)}")
            elif best.targets_only_headers:
                include = f"{best.root}/targets/x86_64-linux/include"
                workarounds.append(f"set CUDA_INC_PATH={include}")
                variables.append(("CUDA_INC_PATH", include))
            missing_libs = best.missing_libs
    msvc: tuple[str, ...] = ()
    if os == "windows":
        # vcvarsall's default toolset of the newest installation first (the planner prefers it)
        ordered = [toolset_minor(install.default) for install in env.vs if install.default]
        ordered.extend(toolset for install in env.vs for toolset in install.majors())
        msvc = tuple(dict.fromkeys(ordered))
    host = LocalHost(os=os, gcc=_gcc_major(facts) if os == "linux" else "", msvc=msvc, nvcc=nvcc)
    resolved = resolve_cell(cell, compat, _local_spec(cell, compat), host=host)
    if isinstance(resolved, DroppedCell):
        blockers.extend(
            f"[{reason.rule}] {reason.message} -- {_local_fix(reason, cell, nvcc, env)}" for reason in resolved.reasons
        )
        return LocalBuild(status=Status.FAIL, blockers=tuple(blockers), workarounds=tuple(workarounds))
    toolchain = resolved.toolchain
    compiler = toolchain.host_compiler
    for lib in missing_libs:
        hit = ops_linking(lib, os, resolved.ops.build_names)
        if hit:
            workarounds.append(
                f"the toolkit lacks {lib_paths(os, lib.link)[0]}: {', '.join(hit)} would fail to link; install the "
                f"{lib.name} dev files or leave those ops out (DS_BUILD_<OP>=0)",
            )
    if os == "windows":
        default = msvc[0] if msvc else ""
        if compiler.version != default:
            workarounds.append(
                f"use MSVC {compiler.version}: call vcvarsall.bat x64 -vcvars_ver={compiler.version} ({compiler.why})",
            )
        variables.append(("DISTUTILS_USE_SDK", "1"))
    escape = [f for f in toolchain.nvcc_flags if f == "-D_ALLOW_COMPILER_AND_STL_VERSION_MISMATCH"]
    if escape:
        workarounds.append(
            f"{compiler.why}: the build passes -allow-unsupported-compiler and {escape[0]}; installing an MSVC "
            "toolset this nvcc supports is safer (Visual Studio Installer > Individual components > "
            "'MSVC v143 - VS 2022 C++ x64/x86 build tools (v14.39-17.9)' or v142)",
        )
    if toolchain.skip_cuda_check:
        workarounds.append(toolchain.cuda_check)
        variables.append(("DS_SKIP_CUDA_CHECK", "1"))
    if cell.variant.is_cuda:
        if not env.gpus:
            variables.append(("DS_ACCELERATOR", "cuda"))
        variables.append(("TORCH_CUDA_ARCH_LIST", toolchain.arch_list_text))
    if toolchain.nvcc_flags:
        variables.append(("NVCC_APPEND_FLAGS", " ".join(toolchain.nvcc_flags)))
    variables.append(("DS_BUILD_OPS", "0"))
    variables.extend((f"DS_BUILD_{var}", "1") for _name, var in resolved.ops.build)
    status = Status.FAIL if blockers else Status.WARN if workarounds else Status.OK
    return LocalBuild(
        status=status,
        blockers=tuple(blockers),
        workarounds=tuple(workarounds),
        environment=tuple(variables),
        toolchain=toolchain,
        ops=resolved.ops.build_names,
        left_out=resolved.ops.left_out,
    )


def _verdict(env: _Env, *, deepspeed: VersionTuple | None, index: IndexView | None) -> Verdict:
    wanted = _wanted(env)
    files = index.files if index is not None else ()
    if isinstance(wanted, str):
        local = LocalBuild(status=Status.FAIL, blockers=(wanted,))
        return Verdict(cell=None, no_cell=wanted, rules=(), index=index, wheel=None, nearest=(), local=local)
    version = _choose_deepspeed(env, wanted, deepspeed, files)
    cell = Cell(
        deepspeed=version, torch=wanted.torch, variant=wanted.variant, python=wanted.python, platform=wanted.platform
    )
    rules = check_cell(cell, env.compat)
    exact = Wanted(
        torch=wanted.torch, variant=wanted.variant, python=wanted.python, platform=wanted.platform, deepspeed=version
    )
    wheel = pick_wheel(exact, files) if index is not None else None
    near = nearest(exact, files) if index is not None and not index.error and wheel is None else ()
    local = _local_build(env, cell)
    return Verdict(cell=cell, no_cell="", rules=rules, index=index, wheel=wheel, nearest=near, local=local)


# --- CUDA_HOME guidance -------------------------------------------------------------------------


def _guidance(env: _Env, verdict: Verdict) -> tuple[str, ...]:
    facts = env.facts
    if env.variant is None or not env.variant.is_cuda:
        return ()
    best = _best_toolkit(env)
    cuda = env.variant.cuda_text
    kind = env_kind(facts)
    py = facts.python
    lines: list[str] = []
    if facts.os == "windows":
        example = best.root if best else f"C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v{cuda}"
        lines.append(
            "The CUDA installer sets CUDA_PATH (and CUDA_PATH_Vxx_y per version); torch uses CUDA_HOME first, then "
            "CUDA_PATH. With several toolkits, set CUDA_HOME to the one matching torch's CUDA.",
        )
        if kind == "conda":
            lines.append(f'conda: conda env config vars set CUDA_HOME="{example}" and re-activate the environment;')
            lines.append(
                "       or install the toolkit into the env (conda install -c nvidia cuda-toolkit=X.Y) and set "
                "CUDA_HOME=%CONDA_PREFIX%\\Library",
            )
        elif kind == "venv":
            scripts = ntpath.join(py.prefix, "Scripts") if py else "<venv>\\Scripts"
            lines.append(f'venv: add  set "CUDA_HOME={example}"  to {scripts}\\activate.bat and ')
            lines.append(f'      $env:CUDA_HOME = "{example}"  to {scripts}\\Activate.ps1')
        else:
            lines.append(f'system: setx CUDA_HOME "{example}"  (applies to new terminals)')
    else:
        example = best.root if best else f"/usr/local/cuda-{cuda}"
        if kind == "conda":
            lines.append(
                f"conda: conda env config vars set CUDA_HOME={example}; conda deactivate; conda activate <env>"
            )
            lines.append(
                "       or use the env's own toolkit: conda install -c nvidia cuda-toolkit=X.Y, then "
                "CUDA_HOME=$CONDA_PREFIX (headers may live in $CONDA_PREFIX/targets/x86_64-linux/include: "
                "set CUDA_INC_PATH to it)",
            )
        elif kind == "venv":
            activate = posixpath.join(py.prefix, "bin", "activate") if py else "<venv>/bin/activate"
            lines.append(f"venv: echo 'export CUDA_HOME={example}' >> {activate}  (set on every activation)")
        else:
            lines.append(f"system: add  export CUDA_HOME={example}  to ~/.bashrc (or ~/.profile)")
        lines.append(
            "Avoid relying on nvcc on PATH: torch takes the parent of its bin/ as CUDA_HOME, which is wrong for "
            "wrapper scripts such as /usr/local/bin/nvcc.",
        )
    if verdict.cell is not None and verdict.cell.variant.cuda:
        lines.append(
            f"The toolkit must be CUDA {verdict.cell.variant.cuda[0]}.x (torch refuses another major); "
            f"CUDA {verdict.cell.variant.cuda_text} exactly avoids DeepSpeed's minor-version check.",
        )
    return tuple(lines)


# --- entry point --------------------------------------------------------------------------------


def diagnose(
    facts: Facts,
    compat: Compat,
    *,
    deepspeed: VersionTuple | None = None,
    index: IndexView | None = None,
) -> Report:
    """Every check with its fix, and the verdict for this environment."""
    env = _derive(facts, compat)
    checks: list[Check] = [_check_platform(env), _check_python(env), _check_torch(env), _check_gpu(env)]
    checks.append(_check_cuda_home(env))
    checks.extend(_check_toolkits(env))
    checks.extend(_check_compiler(env))
    checks.extend(_check_long_paths(env))
    checks.append(_check_ninja(env))
    checks.append(_check_deepspeed(env))
    verdict = _verdict(env, deepspeed=deepspeed, index=index)
    checks.extend(_check_index(verdict))
    return Report(checks=tuple(checks), verdict=verdict, guidance=_guidance(env, verdict), env_kind=env_kind(facts))
