"""Would a local build work here, and with what to set or install.

Judged by the planner itself (:func:`dswheels.plan.planner.resolve_cell` with this machine as the
builder), so doctor and ``dswheels plan`` never disagree; its fixes are then reworded for a
user's machine instead of a matrix and runner images.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dswheels.doctor.checkup import LocalBuild, Status
from dswheels.doctor.environment_view import Env, best_toolkit, gcc_major
from dswheels.doctor.fixes import dev_packages_fix, install_toolkit_fix, pip_include_for
from dswheels.doctor.machine_facts import DevLibrary, lib_paths, ops_linking, toolset_minor
from dswheels.kernel.compat import Compat
from dswheels.kernel.model import Cell, DroppedCell, PlannedCell, Reason
from dswheels.kernel.platform_traits import traits
from dswheels.kernel.versions import VersionTuple, format_version
from dswheels.plan.matrix.spec import MatrixSpec
from dswheels.plan.planner import LocalHost, resolve_cell

__all__ = ["judge_local_build"]


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
        cpu_baselines=(),
        cuda_check="skip-when-needed",
        toolkits={},
        arch_lists={},
        torch_index=compat.torch_index,
        runners={},
        sources={},
    )


def _local_fix(reason: Reason, cell: Cell, nvcc: VersionTuple | None, env: Env) -> str:
    """The planner's fix speaks of the matrix and runner images; on a user's machine say what to install."""
    if reason.rule == "host-compiler":
        cuda = nvcc or cell.variant.cuda
        info = env.compat.cuda.get(cuda) if cuda else None
        if traits(cell.platform).compiler == "msvc":
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


@dataclass
class _Steps:
    """What a local build needs, gathered in the order a person would act on it."""

    blockers: list[str] = field(default_factory=list)
    workarounds: list[str] = field(default_factory=list)
    variables: list[tuple[str, str]] = field(default_factory=list)


def judge_local_build(env: Env, cell: Cell) -> LocalBuild:
    os = cell.platform.os
    steps = _Steps()
    nvcc, missing_libs = _toolkit_steps(env, cell, steps) if cell.variant.cuda is not None else (None, ())
    compiler = traits(cell.platform).compiler
    msvc = _msvc_toolsets(env) if compiler == "msvc" else ()
    host = LocalHost(os=os, gcc=gcc_major(env.facts) if compiler == "gcc" else "", msvc=msvc, nvcc=nvcc)
    resolved = resolve_cell(cell, env.compat, _local_spec(cell, env.compat), host=host)
    if isinstance(resolved, DroppedCell):
        steps.blockers.extend(
            f"[{reason.rule}] {reason.message} -- {_local_fix(reason, cell, nvcc, env)}" for reason in resolved.reasons
        )
        return LocalBuild(status=Status.FAIL, blockers=tuple(steps.blockers), workarounds=tuple(steps.workarounds))
    _build_steps(env, resolved, msvc=msvc, missing_libs=missing_libs, steps=steps)
    status = Status.FAIL if steps.blockers else Status.WARN if steps.workarounds else Status.OK
    return LocalBuild(
        status=status,
        blockers=tuple(steps.blockers),
        workarounds=tuple(steps.workarounds),
        environment=tuple(steps.variables),
        toolchain=resolved.toolchain,
        ops=resolved.ops.build_names,
        left_out=resolved.ops.left_out,
    )


def _toolkit_steps(env: Env, cell: Cell, steps: _Steps) -> tuple[VersionTuple | None, tuple[DevLibrary, ...]]:
    """The toolkit a CUDA cell builds with here (its nvcc, and the dev libraries it lacks), and how to point at it."""
    best = best_toolkit(env)
    usable = [v for v in env.views if v.is_toolkit and v.nvcc]
    if best is None and usable:
        # a toolkit of another CUDA major: the planner says why it cannot build (nvcc-major)
        home = env.cuda_home_view
        return (home if home in usable else usable[0]).nvcc, ()
    if best is None:
        steps.blockers.append(
            f"no CUDA toolkit found: torch CUDA {cell.variant.cuda_text} needs one; {install_toolkit_fix(env)}",
        )
        return None, ()
    home = env.cuda_home_view
    if home is None or home.root != best.root:
        where = env.cuda_home or "None"
        steps.workarounds.append(f"set CUDA_HOME={best.root} (torch would use {where})")
    steps.variables.append(("CUDA_HOME", best.root))
    if best.missing_headers:
        pip = pip_include_for(env, best.missing_headers)
        names = ", ".join(lib.header for lib in best.missing_headers)
        if pip:
            steps.workarounds.append(f"set CUDA_INC_PATH={pip}: {best.root} lacks {names}")
            steps.variables.append(("CUDA_INC_PATH", pip))
        else:
            steps.blockers.append(f"{best.root} lacks {names}: {dev_packages_fix(env, best)}")
    elif best.targets_only_headers:
        include = f"{best.root}/targets/x86_64-linux/include"
        steps.workarounds.append(f"set CUDA_INC_PATH={include}")
        steps.variables.append(("CUDA_INC_PATH", include))
    return best.nvcc, best.missing_libs


def _msvc_toolsets(env: Env) -> tuple[str, ...]:
    """vcvarsall's default toolset of the newest installation first (the planner prefers it), then the rest."""
    ordered = [toolset_minor(install.default) for install in env.vs if install.default]
    ordered.extend(toolset for install in env.vs for toolset in install.majors())
    return tuple(dict.fromkeys(ordered))


def _build_steps(
    env: Env, resolved: PlannedCell, *, msvc: tuple[str, ...], missing_libs: tuple[DevLibrary, ...], steps: _Steps
) -> None:
    """What the planned toolchain asks of this machine: libraries, the toolset, escape flags, the variables."""
    cell, toolchain = resolved.cell, resolved.toolchain
    os = cell.platform.os
    compiler = toolchain.host_compiler
    for lib in missing_libs:
        hit = ops_linking(lib, os, resolved.ops.build_names)
        if hit:
            steps.workarounds.append(
                f"the toolkit lacks {lib_paths(os, lib.link)[0]}: {', '.join(hit)} would fail to link; install the "
                f"{lib.name} dev files or leave those ops out (DS_BUILD_<OP>=0)",
            )
    if compiler.kind == "msvc":
        default = msvc[0] if msvc else ""
        if compiler.version != default:
            steps.workarounds.append(
                f"use MSVC {compiler.version}: call vcvarsall.bat x64 -vcvars_ver={compiler.version} ({compiler.why})",
            )
        steps.variables.append(("DISTUTILS_USE_SDK", "1"))
    escape = [f for f in toolchain.nvcc_flags if f == "-D_ALLOW_COMPILER_AND_STL_VERSION_MISMATCH"]
    if escape:
        steps.workarounds.append(
            f"{compiler.why}: the build passes -allow-unsupported-compiler and {escape[0]}; installing an MSVC "
            "toolset this nvcc supports is safer (Visual Studio Installer > Individual components > "
            "'MSVC v143 - VS 2022 C++ x64/x86 build tools (v14.39-17.9)' or v142)",
        )
    if toolchain.skip_cuda_check:
        steps.workarounds.append(toolchain.cuda_check)
        steps.variables.append(("DS_SKIP_CUDA_CHECK", "1"))
    if cell.variant.is_cuda:
        if not env.gpus:
            steps.variables.append(("DS_ACCELERATOR", "cuda"))
        steps.variables.append(("TORCH_CUDA_ARCH_LIST", toolchain.arch_list_text))
    if toolchain.nvcc_flags:
        steps.variables.append(("NVCC_APPEND_FLAGS", " ".join(toolchain.nvcc_flags)))
    steps.variables.append(("DS_BUILD_OPS", "0"))
    steps.variables.extend((f"DS_BUILD_{var}", "1") for _name, var in resolved.ops.build)
