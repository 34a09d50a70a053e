"""Checks of what building ops needs besides CUDA: the C++ compiler (GCC or MSVC), long paths, ninja."""

from __future__ import annotations

from dswheels.doctor.checkup import Check, Status
from dswheels.doctor.environment_view import Env, gcc_major
from dswheels.doctor.machine_facts import toolset_minor
from dswheels.kernel.platform_traits import known_os

__all__ = ["check_compiler", "check_long_paths", "check_ninja"]


def check_compiler(env: Env) -> list[Check]:
    """The compiler of the OS's family (GCC, MSVC) on a machine of an OS dswheels builds for; nothing elsewhere."""
    facts = env.facts
    compiler = row.compiler if (row := known_os(facts.os)) else None
    if compiler == "gcc":
        major = gcc_major(facts)
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
    if compiler != "msvc" or facts.visual_studio is None:
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


def check_long_paths(env: Env) -> list[Check]:
    """Where the OS limits a path's length (Windows' MAX_PATH) unless it is told not to."""
    row = known_os(env.facts.os)
    if row is None or row.max_path is None:
        return []
    enabled = env.facts.long_paths
    if enabled:
        return [Check("long_paths", Status.OK, "long paths enabled (LongPathsEnabled=1)")]
    return [
        Check(
            "long_paths",
            Status.WARN,
            "long paths are not enabled" if enabled is False else "long paths: could not read the registry",
            detail=f"builds unpack DeepSpeed's sources into deep trees; paths over {row.max_path} characters fail "
            "without it",
            fix="as administrator: reg add HKLM\\SYSTEM\\CurrentControlSet\\Control\\FileSystem /v LongPathsEnabled "
            "/t REG_DWORD /d 1 /f ; and git config --global core.longpaths true",
        ),
    ]


def check_ninja(env: Env) -> Check:
    if env.facts.ninja:
        return Check("ninja", Status.OK, f"ninja {env.facts.ninja}")
    return Check(
        "ninja",
        Status.WARN,
        "ninja not found",
        detail="DeepSpeed JIT-compiles ops missing from a wheel with ninja, and parallel builds use it",
        fix="pip install ninja (in this environment)",
    )
