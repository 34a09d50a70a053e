"""What to tell the user to run or set for a CUDA toolkit, worded for their OS and kind of environment."""

from __future__ import annotations

from collections.abc import Sequence

from dswheels.doctor.environment_view import Env, env_kind
from dswheels.doctor.machine_facts import DevLibrary, ToolkitView
from dswheels.doctor.per_os import words_for
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
    packages = env.compat.subpackages_for(variant.cuda)
    components = f" (installer components: {', '.join(packages)})" if packages else ""
    return words_for(os).install_toolkit.format(release=release, cuda=variant.cuda_text, components=components)


def set_cuda_home_fix(env: Env, root: str) -> str:
    commands = words_for(env.facts.os).set_cuda_home
    return commands.get(env_kind(env.facts), commands[""]).format(root=root)


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
    packages = ", ".join(env.compat.subpackages_for(nvcc))
    return words_for(env.facts.os).dev_packages.format(
        version=format_version(nvcc), dashed=f"{nvcc[0]}-{nvcc[1]}", packages=packages
    )
