"""Checks of what DeepSpeed runs on: the platform, the Python, torch and its CUDA, the GPUs."""

from __future__ import annotations

from collections.abc import Sequence

from dswheels.doctor.checkup import Check, IndexView, Status
from dswheels.doctor.environment_view import Env, env_kind
from dswheels.doctor.per_os import words_for
from dswheels.kernel.compat import Compat
from dswheels.kernel.index_files import IndexFile
from dswheels.kernel.numbers import is_ascii_digits
from dswheels.kernel.platform_traits import traits
from dswheels.kernel.versions import VersionTuple, format_version, parse_version

__all__ = ["check_gpu", "check_platform", "check_python", "check_torch"]


def _pip_torch_command(torch_version: str, variant: str, compat: Compat, os: str) -> str:
    index = compat.torch_index.format(variant=variant)
    minor = parse_version(torch_version)[:2]
    if words_for(os).pypi_torch_cuda and compat.pypi_variant(minor, os) == variant:
        return f"pip install torch=={torch_version}"
    return f"pip install torch=={torch_version} --index-url {index}"


def check_platform(env: Env) -> Check:
    facts = env.facts
    if env.platform is not None:
        return Check("platform", Status.OK, f"{facts.os} {facts.machine} ({env.platform.value} wheels)")
    py = facts.python
    words = words_for(facts.os)
    if py is not None and words.narrow_python is not None and py.platform == words.narrow_python:
        platform = traits(facts.os).platform
        return Check(
            "platform",
            Status.FAIL,
            f"32-bit Python on {facts.os.capitalize()} ({py.executable})",
            detail=f"torch and DeepSpeed ship {platform.value} wheels only",
            fix=words.narrow_python_fix,
        )
    where = f"{facts.os} {facts.machine}" + (f" (Python platform {py.platform})" if py else "")
    return Check(
        "platform",
        Status.FAIL,
        f"unsupported platform: {where}",
        detail="dswheels publishes win_amd64, linux_x86_64 and linux_aarch64 wheels: an x86-64 Windows or Linux "
        "machine, or an arm64 Linux one (Grace, Graviton, ...)",
        fix="use Windows x64, Linux x86_64 (WSL2 counts as Linux) or Linux aarch64",
    )


def check_python(env: Env) -> Check:
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
        os = traits(env.platform).compat_key
        supported = sorted({p for t in env.compat.torch.values() for p in t.python.get(os, ())})
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


def _variant_for_toolkit(env: Env, minor: VersionTuple, os: str) -> str | None:
    """A CUDA variant of torch ``minor`` matching a toolkit on this machine, if any."""
    variants = list(env.compat.torch[minor].variants.get(os, ()))
    toolkit_versions = {v.nvcc for v in env.views if v.nvcc}
    for variant in reversed(variants):
        if variant.cuda in toolkit_versions:
            return variant.name
    for variant in reversed(variants):
        if variant.cuda and any(t[0] == variant.cuda[0] for t in toolkit_versions):
            return variant.name
    return None


def _published_for_here(env: Env, index: IndexView, deepspeed: VersionTuple | None) -> IndexFile | None:
    """The index's wheel for this Python and platform a torch install should aim at, or None.

    With a GPU a CUDA wheel before a CPU one (without, the reverse), a variant matching a toolkit
    here first, then the newest torch, then the newest DeepSpeed; only torch minors compat.yml
    knows for this Python (their newest release is what gets installed).
    """
    if env.platform is None or env.python is None:
        return None
    os = traits(env.platform).compat_key
    fits = [
        f
        for f in index.files
        if f.cell is not None
        and not f.is_yanked
        and f.cell.python == env.python
        and f.cell.platform == env.platform
        and (deepspeed is None or f.cell.deepspeed == deepspeed)
        and f.cell.torch in env.compat.torch
        and env.python in env.compat.torch[f.cell.torch].python.get(os, ())
    ]

    def rank(f: IndexFile) -> tuple[bool, bool, VersionTuple, VersionTuple]:
        assert f.cell is not None  # noqa: S101 - filtered above
        toolkit = _variant_for_toolkit(env, f.cell.torch, os) == f.cell.variant.name
        return (f.cell.variant.is_cuda == bool(env.gpus), toolkit, f.cell.torch, f.cell.deepspeed)

    return max(fits, key=rank, default=None)


def _torch_to_install(env: Env, os: str, index: IndexView | None, deepspeed: VersionTuple | None) -> tuple[str, str]:
    """(the command that installs torch, why that one) for an environment without torch.

    With an index: the torch of a wheel it publishes for this Python and platform, from that
    variant's torch index, so that ``dswheels install --index`` finds its wheel afterwards.
    """
    wheel = _published_for_here(env, index, deepspeed) if index is not None and not index.error else None
    if wheel is not None and wheel.cell is not None:
        minor, variant = wheel.cell.torch, wheel.cell.variant.name
        command = _pip_torch_command(env.compat.torch[minor].latest, variant, env.compat, os)
        return command, (
            f"the index publishes {wheel.filename} for this Python and platform: with its torch "
            f"(torch {format_version(minor)} {variant}) installed, `dswheels install --index {index.url}` installs it"
            if index is not None
            else ""
        )
    newest = _newest_torch_for(env)
    if not newest:
        return "install torch first", ""
    command = _pip_torch_command(env.compat.torch[newest].latest, _default_variant(env, newest, os), env.compat, os)
    if index is None or index.error:
        return command, ""
    where = f"Python {env.python} on {env.platform.value}" if env.python and env.platform else "this environment"
    return command, f"the index publishes no wheel for {where}: this torch is for a local build (dswheels build)"


def check_torch(env: Env, index: IndexView | None = None, deepspeed: VersionTuple | None = None) -> Check:
    facts = env.facts
    torch = facts.torch
    os = traits(env.platform).compat_key if env.platform else facts.os
    if torch is None:
        fix, why = _torch_to_install(env, os, index, deepspeed)
        not_installed = facts.torch_error in ("", "not installed")
        return Check(
            "torch",
            Status.FAIL,
            "torch is not installed" if not_installed else "torch does not import",
            detail=why if not_installed else "; ".join(filter(None, (facts.torch_error, why))),
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
        why = (
            "this is a CPU build"
            if words_for(os).pypi_torch_cuda
            else f"PyPI's {os.capitalize()} torch wheels are all CPU builds"
        )
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


def _newest_torch_for(env: Env) -> VersionTuple | None:
    if env.python is None or env.platform is None:
        return None
    key = traits(env.platform).compat_key
    fits = [m for m in env.compat.torch_minors if env.python in env.compat.torch[m].python.get(key, ())]
    released = [m for m in fits if not env.compat.torch[m].inferred] or fits
    return released[-1] if released else None


def _default_variant(env: Env, minor: VersionTuple, os: str) -> str:
    """The CUDA variant to suggest: one matching a toolkit here, else PyPI's Linux default."""
    match = _variant_for_toolkit(env, minor, os)
    if match:
        return match
    variants = [v.name for v in env.compat.torch[minor].variants.get(os, ())]
    pypi = env.compat.pypi_variant(minor, os)
    if pypi is not None and pypi in variants:
        return pypi
    return variants[-1] if variants else "cpu"


def check_gpu(env: Env) -> Check:
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
        if not is_ascii_digits(digits) or len(digits) < 2:
            continue
        have = (int(digits[:-1]), int(digits[-1]))
        if kind == "compute" and have <= want:
            return True
        if kind == "sm" and (have == want or (digits == code and have[0] == want[0] and have[1] <= want[1])):
            return True
    return False
