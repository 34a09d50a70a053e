"""What to tell the user to run or set for a CUDA toolkit, worded for their OS and kind of environment."""

from __future__ import annotations

from collections.abc import Sequence

from dswheels.doctor.environment_view import Env, env_kind
from dswheels.doctor.machine_facts import DevLibrary, ToolkitView
from dswheels.kernel.versions import format_version

__all__ = ["dev_packages_fix", "install_toolkit_fix", "pip_include_for", "set_cuda_home_fix"]


def install_toolkit_fix(env: Env) -> str:
    variant = env.variant
    if variant is None or variant.cuda is None:
        return ""
    info = env.compat.cuda.get(variant.cuda)
    release = info.install if info else variant.cuda_text
    os = env.platform.os if env.platform else env.facts.os
    if info is not None and info.redist_sha256:  # NVIDIA's archives of it are pinned: dswheels can install it
        return (
            f"`dswheels cuda install --toolkit {release}` (the components a build needs, from NVIDIA's "
            "redistributable archives, sha256-checked) and set CUDA_HOME to the root it prints; or install the "
            f"CUDA {release} toolkit from https://developer.nvidia.com/cuda-toolkit-archive"
        )
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


def set_cuda_home_fix(env: Env, root: str) -> str:
    kind = env_kind(env.facts)
    if env.facts.os == "windows":
        if kind == "conda":
            return f'conda env config vars set CUDA_HOME="{root}" (then conda deactivate && conda activate)'
        return f'setx CUDA_HOME "{root}" (new terminals), or $env:CUDA_HOME = "{root}" for this PowerShell'
    if kind == "conda":
        return f"conda env config vars set CUDA_HOME={root} (then conda deactivate && conda activate)"
    return f"export CUDA_HOME={root}"


def pip_include_for(env: Env, libs: Sequence[DevLibrary]) -> str:
    wanted = {lib.header for lib in libs}
    for directory, headers in env.facts.pip_cuda_headers.items():
        if wanted <= set(headers):
            return directory
    return ""


def dev_packages_fix(env: Env, view: ToolkitView) -> str:
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
