"""Checks of the CUDA toolkits: where CUDA_HOME points (as torch finds it) and what each toolkit holds."""

from __future__ import annotations

import dataclasses

from dswheels.doctor.checkup import Check, Status
from dswheels.doctor.environment_view import Env, best_toolkit
from dswheels.doctor.fixes import dev_packages_fix, install_toolkit_fix, pip_include_for, set_cuda_home_fix
from dswheels.doctor.machine_facts import DEV_LIBRARIES, ToolkitView, lib_paths
from dswheels.doctor.per_os import words_for
from dswheels.kernel.versions import format_version

__all__ = ["check_cuda_home", "check_toolkits"]


def check_cuda_home(env: Env) -> Check:
    facts = env.facts
    cuda_torch = facts.torch is not None and facts.torch.cuda is not None
    home, how = env.cuda_home, env.cuda_home_how
    best = best_toolkit(env)
    set_fix = set_cuda_home_fix(env, best.root) if best else ""
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
        finding = f"{home} {what}: it is not a CUDA toolkit root" + (
            " (a wrapper script or symlink in bin/ makes torch guess its parent)"
            if how.startswith(("nvcc on PATH", "torch.utils"))
            else ""
        )
        if facts.torch is not None and not cuda_torch:  # a wrong root is harmless only where nothing uses it
            return Check(
                "cuda_home",
                Status.OK,
                "CUDA_HOME: not used (torch is a CPU build)",
                detail=f"it would be {home} (via {how}), but {finding}",
            )
        return Check(
            "cuda_home",
            Status.WARN,  # a CUDA torch (or the one still to be installed) would build and JIT against it
            title,
            detail=finding,
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
            fix=set_fix if best and best.nvcc and best.nvcc[0] == torch_cuda[0] else install_toolkit_fix(env),
        )
    suffix = f" = CUDA {format_version(view.nvcc)}" if view.nvcc else ""
    if how == "torch.utils.cpp_extension.CUDA_HOME" or how.startswith(("nvcc on PATH", "the standard")):
        detail = "found by torch's guess; setting CUDA_HOME explicitly keeps it stable"
        return Check("cuda_home", Status.OK, title + suffix, detail=detail, fix=set_fix)
    return Check("cuda_home", Status.OK, title + suffix)


def check_toolkits(env: Env) -> list[Check]:
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


def _toolkit_checks(env: Env) -> list[Check]:
    if not env.views:
        return [_no_toolkit_check(env)]
    return [_toolkit_check(env, view) for view in env.views]


def _no_toolkit_check(env: Env) -> Check:
    cuda_torch = env.variant is not None and env.variant.is_cuda
    looked = words_for(env.facts.os).toolkits_looked_at
    return Check(
        "toolkit",
        Status.WARN if cuda_torch else Status.OK,
        "no CUDA toolkit found",
        detail=f"looked at {looked}. Prebuilt wheels do not need one; local builds and JIT-compiled ops do",
        fix=install_toolkit_fix(env) if cuda_torch else "",
    )


def _toolkit_check(env: Env, view: ToolkitView) -> Check:
    """One toolkit found: is it one (nvcc, a release, include/), and does it hold what ops build with."""
    via = ", ".join(view.toolkit.found_via)
    title = f"{view.label()} [{via}]"
    if not view.has_nvcc:
        return Check("toolkit", Status.WARN, title, detail="no bin/nvcc: not a toolkit (runtime only?)", fix="")
    if view.nvcc is None:
        return Check(
            "toolkit",
            Status.WARN,
            title,
            detail="nvcc --version did not print a release: "
            + (view.toolkit.nvcc_output.strip().splitlines() or ["(no output)"])[-1],
            fix="reinstall the toolkit",
        )
    if DEV_LIBRARIES[0] in view.missing_headers:
        best = best_toolkit(env)
        return Check(
            "toolkit",
            Status.WARN,
            f"{view.root} has bin/nvcc (CUDA {format_version(view.nvcc)}) but no include/: not a toolkit root [{via}]",
            detail="its nvcc is a wrapper script or a link into a toolkit elsewhere; torch takes this "
            "directory for CUDA_HOME when CUDA_HOME and CUDA_PATH are unset",
            fix=set_cuda_home_fix(env, best.root) if best else "set CUDA_HOME to the real toolkit root",
        )
    problems, fixes = _missing_files(env, view)
    if problems:
        return Check(
            "toolkit",
            Status.WARN,
            title,
            detail="; ".join(problems),
            fix="; or ".join(dict.fromkeys(f for f in fixes if f)),
        )
    return Check("toolkit", Status.OK, title, detail="nvcc and the cuBLAS/cuSPARSE/cuSOLVER/cuRAND dev files")


def _missing_files(env: Env, view: ToolkitView) -> tuple[list[str], list[str]]:
    """What a toolkit lacks of the headers and link libraries ops build with, and the fixes."""
    problems: list[str] = []
    fixes: list[str] = []
    if view.missing_headers:
        names = ", ".join(f"{lib.name} ({lib.header})" for lib in view.missing_headers)
        problems.append(f"missing headers: {names}")
        pip = pip_include_for(env, view.missing_headers)
        if pip:
            fixes.append(f"CUDA_INC_PATH={pip} adds the headers torch's pip CUDA packages ship")
        fixes.append(dev_packages_fix(env, view))
    if view.targets_only_headers and not view.missing_headers:
        include = f"{view.root}/targets/x86_64-linux/include"
        problems.append("headers only under targets/x86_64-linux/include (conda layout)")
        fixes.append(f"CUDA_INC_PATH={include}")
    if view.missing_libs:
        names = ", ".join(f"{lib.name} ({lib_paths(env.facts.os, lib.link)[0]})" for lib in view.missing_libs)
        problems.append(f"missing link libraries: {names}: the ops that link them fail to build")
        if not view.missing_headers:
            fixes.append(dev_packages_fix(env, view))
    return problems, fixes
