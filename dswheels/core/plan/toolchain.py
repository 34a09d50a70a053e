"""The toolchain of a cell the rules allow: runner image, host compiler, nvcc, arch list, ops, flags.

:class:`Resolver` picks them for one cell (cached per DeepSpeed x torch x variant x platform)
from the matrix's runners, or from this machine (:class:`LocalHost`), and gives a
:class:`~dswheels.core.model.Reason` when nothing can build the cell.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from dswheels.core.binaries.linux_runtime import RuntimeFloor
from dswheels.core.compat import Compat, CudaToolkit, OpInfo, RunnerImage, TorchRelease, describe_versions
from dswheels.core.flags.record import FlagRecord, load_flag_record
from dswheels.core.flags.screen import screen_ops
from dswheels.core.matrix.spec import MatrixSpec, PlatformRunners
from dswheels.core.model import Accelerator, Cell, HostCompiler, OpPlan, Platform, Reason, Toolchain, Variant
from dswheels.core.versions import VersionTuple, format_version, parse_version

__all__ = ["LocalHost", "Resolver"]

_MSVC_FLAG_FREE_LIMIT = (14, 50)  # nvcc < 13.2 crashes on VS 2026 headers even with escape flags


@dataclass(frozen=True, slots=True)
class LocalHost:
    """The machine itself as the builder (``dswheels build`` for the current environment)."""

    os: str
    gcc: str = ""  # major version on Linux
    msvc: tuple[str, ...] = ()  # toolsets found on Windows
    nvcc: VersionTuple | None = None


def _msc_ver(toolset: str) -> int:
    """MSVC toolset 14.44 is ``_MSC_VER`` 1944 (holds from 14.20 on)."""
    major, minor = parse_version(toolset)[:2]
    return 100 * (major + 5) + minor


def _pick_msvc(
    cell: Cell,
    nvcc: CudaToolkit | None,
    image: RunnerImage,
    release: TorchRelease,
    compat: Compat,
) -> tuple[HostCompiler, tuple[str, ...]] | str:
    """The toolset to activate (and escape flags it needs), or why none of the image's works."""
    default = image.msvc[0]
    if nvcc is None:
        return HostCompiler(kind="msvc", version=default, why=f"{image.name} default"), ()
    usable: list[str] = []
    rejected: list[str] = []
    for toolset in image.msvc:
        msc = _msc_ver(toolset)
        if release.cxx_std >= 20 and parse_version(toolset) < (14, 30):
            rejected.append(f"{toolset} (v142: C++20 torch {format_version(cell.torch)} headers untested)")
            continue
        if not nvcc.msvc[0] <= msc < nvcc.msvc[1]:
            rejected.append(
                f"{toolset} (_MSC_VER {msc} outside nvcc {format_version(nvcc.minor)}'s "
                f"{nvcc.msvc[0]}-{nvcc.msvc[1] - 1})"
            )
            continue
        floor = compat.stl_floor(parse_version(toolset))
        if floor and nvcc.minor < floor[0]:
            rejected.append(f"{toolset} (its STL wants CUDA >= {format_version(floor[0])})")
            continue
        usable.append(toolset)
    if usable:
        chosen = default if default in usable else max(usable, key=parse_version)
        why = (
            f"{image.name} default"
            if chosen == default
            else f"{image.name} side-by-side toolset; rejected " + "; ".join(rejected)
        )
        return HostCompiler(kind="msvc", version=chosen, why=why), ()
    # No clean toolset: DeepSpeed already passes -allow-unsupported-compiler on win32, the STL
    # gate needs its own escape. Not for VS 2026 toolsets, where old nvcc front ends crash.
    fallback = [t for t in image.msvc if parse_version(t) < _MSVC_FLAG_FREE_LIMIT]
    if fallback:
        chosen = max(fallback, key=parse_version)
        return (
            HostCompiler(
                kind="msvc",
                version=chosen,
                why=f"no toolset of {image.name} passes nvcc {format_version(nvcc.minor)}'s checks; escape flags added",
            ),
            ("-D_ALLOW_COMPILER_AND_STL_VERSION_MISMATCH",),
        )
    return f"no MSVC toolset of {image.name} works with nvcc {format_version(nvcc.minor)}: " + "; ".join(rejected)


def _pick_gcc(
    cell: Cell, nvcc: CudaToolkit | None, gccs: Sequence[str], image: str, compat: Compat
) -> HostCompiler | str:
    """The GCC to build with, or why none of ``gccs`` works.

    The newest: what nvcc's host_config.h and torch's own check accept; the oldest: what torch's
    headers accept (compat.yml torch_gcc_min). The image's default wins when it is in between.
    """
    if not gccs:
        return f"{image} lists no GCC"
    limit = 99
    why_limit = ""
    if nvcc is not None:
        limit, why_limit = nvcc.gcc_max, f"nvcc {format_version(nvcc.minor)} accepts GCC <= {nvcc.gcc_max}"
        for torch_range, cuda_range, gcc_max, _source in compat.torch_gcc_limits:
            if cell.torch in torch_range and nvcc.minor in cuda_range and gcc_max < limit:
                limit = gcc_max
                why_limit = (
                    f"torch {format_version(cell.torch)} rejects GCC > {gcc_max} with CUDA {format_version(nvcc.minor)}"
                )
    low, why_low = compat.gcc_min(cell.torch)
    ok = [g for g in gccs if low <= int(g) <= limit]
    if not ok:
        bounds = "; ".join(w for w in (why_limit, f"GCC >= {low}: {why_low}" if low else "") if w)
        return f"no GCC {f'>= {low} and ' if low else ''}<= {limit} on {image} (it has {', '.join(gccs)}): {bounds}"
    default = gccs[0]
    if default in ok:
        return HostCompiler(kind="gcc", version=default, why=f"{image} default")
    chosen = max(ok, key=int)
    why = why_limit if int(default) > limit else f"GCC >= {low}: {why_low}"
    return HostCompiler(kind="gcc", version=chosen, why=f"{why}; {image} default is GCC {default}")


def _image_above(image: RunnerImage, runtime: RuntimeFloor) -> str:
    """What of an image's glibc and system libstdc++ is newer than the promise ("" if nothing).

    An extension binds each symbol to the version the *linked* library gives it (Debian and Ubuntu
    link every gcc-N against the system libstdc++.so.6, the newest GCC's), so the image, not the
    GCC picked, bounds what a wheel built there can need.
    """
    parts = []
    if image.glibc and runtime.glibc and image.glibc > runtime.glibc:
        parts.append(f"glibc {format_version(image.glibc)}")
    if image.glibcxx and runtime.glibcxx and image.glibcxx > runtime.glibcxx:
        parts.append(f"libstdc++ with GLIBCXX {format_version(image.glibcxx)}")
    return " and ".join(parts)


def _arch_token_sm(token: str) -> str:
    """``8.6`` -> ``86``; ``9.0a`` -> ``90a``; ``12.0+PTX`` -> ``120``."""
    return token.removesuffix("+PTX").replace(".", "")


def _arch_value(token: str) -> VersionTuple:
    base = token.removesuffix("+PTX").rstrip("af")
    return parse_version(base)


def _resolve_arch_list(
    cell: Cell,
    nvcc: CudaToolkit,
    compat: Compat,
    override: tuple[str, ...] | None,
) -> tuple[tuple[str, ...], list[str]] | str:
    notes: list[str] = []
    if override is not None:
        wanted = override
        notes.append(f"arch list from the matrix: {';'.join(override)}")
    else:
        row = compat.torch_arch_list(cell.torch, cell.variant.name)
        if row is None:
            return f"no TORCH_CUDA_ARCH_LIST known for torch {format_version(cell.torch)} {cell.variant.name}"
        wanted = row.lists[cell.platform.os]
        if row.inferred:
            notes.append(f"torch's arch list for {cell.variant.name} on {cell.platform.os} is inferred ({row.source})")
    accepted = compat.arch_tokens(cell.torch)
    kept: list[str] = []
    for token in wanted:
        base = token.removesuffix("+PTX")
        if base not in accepted:
            notes.append(f"dropped {token}: torch {format_version(cell.torch)} does not accept it")
        elif _arch_token_sm(token) not in nvcc.sm:
            notes.append(f"dropped {token}: nvcc {format_version(nvcc.minor)} cannot target sm_{_arch_token_sm(token)}")
        else:
            kept.append(token)
    if not kept:
        return (
            f"no arch of {';'.join(wanted)} can be built by nvcc {format_version(nvcc.minor)} "
            f"for torch {format_version(cell.torch)}"
        )
    return tuple(kept), notes


def _cuda_check(cell: Cell, nvcc: VersionTuple, compat: Compat) -> tuple[bool, str]:
    torch_cuda = cell.variant.cuda
    if torch_cuda is None:
        return False, "cpu variant: no CUDA, no check"
    ds = format_version(cell.deepspeed)
    if nvcc == torch_cuda:
        return False, f"nvcc {format_version(nvcc)} = torch CUDA {format_version(torch_cuda)}: DeepSpeed's check passes"
    ok = compat.mismatch_ok(cell.deepspeed, nvcc[0])
    if nvcc in ok and torch_cuda in ok:
        return False, (
            f"nvcc {format_version(nvcc)} != torch CUDA {format_version(torch_cuda)}, both in DeepSpeed {ds}'s "
            "minor-mismatch list: the check passes"
        )
    listed = f"its CUDA {nvcc[0]} list is {describe_versions(sorted(ok))}" if ok else f"it has no CUDA {nvcc[0]} list"
    return True, (
        f"DS_SKIP_CUDA_CHECK=1: nvcc {format_version(nvcc)} != torch CUDA {format_version(torch_cuda)} and DeepSpeed "
        f"{ds} would refuse ({listed}); torch itself only warns on a minor mismatch"
    )


@dataclass
class Resolver:
    """The toolchain of each cell (:meth:`toolchain`), resolved once per DeepSpeed x torch x variant x platform."""

    compat: Compat
    spec: MatrixSpec
    host: LocalHost | None = None
    nvcc: VersionTuple | None = None  # plan as if the builder had this nvcc
    flag_record: FlagRecord | None = None  # the ops' recorded flags (default: the shipped op_flags.json)
    _cache: dict[tuple[VersionTuple, VersionTuple, Variant, Platform], tuple[Toolchain, OpPlan] | Reason] = field(
        default_factory=dict,
    )
    _ops: dict[tuple[VersionTuple, str], tuple[OpInfo, ...]] = field(default_factory=dict)
    _screened: dict[tuple[object, ...], tuple[OpPlan, tuple[str, ...], Reason | None]] = field(default_factory=dict)

    def screen(
        self, cell: Cell, ops: OpPlan, arch_list: str, nvcc_flags: tuple[str, ...]
    ) -> tuple[OpPlan, tuple[str, ...], Reason | None]:
        """:func:`screen_ops` once per release x platform x accelerator x arch list x flags x ops."""
        key = (cell.deepspeed, cell.platform, cell.variant.is_cuda, arch_list, nvcc_flags, ops)
        if key not in self._screened:
            self._screened[key] = screen_ops(
                cell,
                ops,
                arch_list=arch_list,
                nvcc_flags=nvcc_flags,
                record=self.flag_record or load_flag_record(),
                explicit=self.spec.ops is not None,
            )
        return self._screened[key]

    def ops_for(self, deepspeed: VersionTuple, accelerator: Accelerator) -> tuple[OpInfo, ...]:
        key = (deepspeed, accelerator)
        if key not in self._ops:
            self._ops[key] = self.compat.ops_for(deepspeed, accelerator)
        return self._ops[key]

    def toolchain(self, cell: Cell) -> tuple[Toolchain, OpPlan] | Reason:
        key = (cell.deepspeed, cell.torch, cell.variant, cell.platform)
        cached = self._cache.get(key)
        if cached is None:
            cached = self._cache[key] = self._resolve(cell)
        return cached

    def _runners(self, platform: Platform) -> PlatformRunners | None:
        return self.spec.runners.get(platform)

    def _resolve(self, cell: Cell) -> tuple[Toolchain, OpPlan] | Reason:
        compat, spec = self.compat, self.spec
        release = compat.torch[cell.torch]
        notes: list[str] = []
        nvcc: CudaToolkit | None = None
        nvcc_version: VersionTuple | None = None
        if cell.variant.cuda is not None:
            if self.nvcc is not None:
                nvcc_version = self.nvcc
            elif self.host is not None and self.host.nvcc is not None:
                nvcc_version = self.host.nvcc
            else:
                nvcc_version = spec.toolkits.get(cell.variant.name, cell.variant.cuda)
            if nvcc_version[0] != cell.variant.cuda[0]:
                return Reason(
                    rule="nvcc-major",
                    message=f"nvcc {format_version(nvcc_version)} cannot build {cell.variant.name}: "
                    "torch refuses a CUDA major mismatch",
                    fix=f"install a CUDA {cell.variant.cuda[0]}.x toolkit, ideally {cell.variant.cuda_text}",
                    source="cpp-extension _check_cuda_version",
                )
            nvcc = compat.cuda.get(nvcc_version)
            if nvcc is None:
                return Reason(
                    rule="nvcc-facts",
                    message=f"compat.yml has no facts for CUDA {format_version(nvcc_version)}",
                    fix=f"use a toolkit compat.yml knows ({describe_versions(sorted(compat.cuda))}) or add it there",
                    source="compat.yml cuda",
                )
            if nvcc.inferred:
                notes.append(f"CUDA {format_version(nvcc.minor)} facts partly inferred ({nvcc.source})")

        # What a Linux wheel may need of glibc and libstdc++ at most (the matrix's, else compat.yml's).
        runtime = (spec.linux_runtime or compat.linux_runtime_floor) if cell.platform.os == "linux" else None
        # Host compiler: the first runner whose image can build the cell.
        runner_image = ""
        runs_on: tuple[str, ...] = ()
        host_compiler: HostCompiler | None = None
        escape_flags: tuple[str, ...] = ()
        failures: list[str] = []
        if self.host is not None:
            runner_image, runs_on = "local", ()
            if self.host.os == "windows":
                image = RunnerImage(
                    name="this machine", os="windows", msvc=self.host.msvc, gcc=(), inferred=False, source=""
                )
                picked = _pick_msvc(cell, nvcc, image, release, compat) if self.host.msvc else "no MSVC toolset found"
                if isinstance(picked, str):
                    failures.append(picked)
                else:
                    host_compiler, escape_flags = picked
            else:
                gcc = _pick_gcc(cell, nvcc, (self.host.gcc,) if self.host.gcc else (), "this machine", compat)
                if isinstance(gcc, str):
                    failures.append(gcc)
                else:
                    host_compiler = gcc
        else:
            runners = self._runners(cell.platform)
            if runners is None or not runners.build:
                return Reason(
                    rule="runners",
                    message=f"the matrix has no build runner for {cell.platform.value}",
                    fix=f"add runners.{cell.platform.value}.build to {spec.filename}",
                    source=spec.filename,
                )
            for runner in runners.build:
                image = compat.runner_images[runner.image]
                if cell.platform.os == "windows":
                    picked = _pick_msvc(cell, nvcc, image, release, compat)
                    if isinstance(picked, str):
                        failures.append(picked)
                        continue
                    host_compiler, escape_flags = picked
                else:
                    gcc = _pick_gcc(cell, nvcc, image.gcc, image.name, compat)
                    if isinstance(gcc, str):
                        failures.append(gcc)
                        continue
                    host_compiler = gcc
                runner_image, runs_on = image.name, runner.labels
                if runtime is not None and (above := _image_above(image, runtime)):
                    notes.append(
                        f"{image.name} has {above}, above the promised linux_runtime: its wheels may need more "
                        "(dswheels verify checks; list an older image first in runners)"
                    )
                if image.inferred:
                    notes.append(f"{image.name} toolsets partly inferred ({image.source})")
                break
        if host_compiler is None:
            images = "ubuntu-22.04" if cell.platform.os == "linux" else "windows-2022"
            return Reason(
                rule="host-compiler",
                message="; ".join(failures),
                fix=f"add an image with a suitable compiler (e.g. {images}) to runners.{cell.platform.value}.build",
                source="host-config, runner-images",
            )

        arch_list: tuple[str, ...] = ()
        skip_check, check_text = False, "cpu variant: no CUDA, no check"
        if nvcc is not None and nvcc_version is not None:
            arch = _resolve_arch_list(cell, nvcc, compat, spec.arch_lists.get(cell.variant.name))
            if isinstance(arch, str):
                return Reason(
                    rule="arch-list",
                    message=arch,
                    fix="set arch_lists for this variant in the matrix",
                    source="ptxas-help, cpp-extension",
                )
            arch_list, arch_notes = arch
            notes.extend(arch_notes)
            skip_check, check_text = _cuda_check(cell, nvcc_version, compat)
            if skip_check and spec.cuda_check == "strict":
                return Reason(
                    rule="cuda-check-strict",
                    message=check_text.removeprefix("DS_SKIP_CUDA_CHECK=1: ")
                    + " and the matrix says cuda_check: strict",
                    fix=f"install nvcc {cell.variant.cuda_text} (`toolkits:` in the matrix) "
                    "or set cuda_check: skip-when-needed",
                    source="ds-setup assert_no_cuda_mismatch",
                )

        nvcc_flags: list[str] = list(escape_flags)
        for workaround in compat.workarounds:
            if workaround.when.matches(cell):
                if workaround.nvcc_flags and cell.variant.is_cuda:
                    nvcc_flags.extend(workaround.nvcc_flags)
                    notes.append(f"{' '.join(workaround.nvcc_flags)}: {workaround.why}")
                if workaround.note:
                    notes.append(workaround.note)

        ops = _resolve_ops(cell, arch_list, self.ops_for(cell.deepspeed, cell.variant.accelerator), spec.ops)
        # the ops whose recorded flags a compiler of the platform would reject cannot be built
        ops, flag_notes, rejected = self.screen(cell, ops, ";".join(arch_list), tuple(nvcc_flags))
        if rejected is not None:
            return rejected
        notes.extend(flag_notes)
        if not ops.build:
            return Reason(
                rule="ops",
                message=f"no op to build for DeepSpeed {format_version(cell.deepspeed)} on {cell.platform.os} "
                f"({cell.variant.accelerator} accelerator)",
                fix="check the matrix's ops list",
                source="compat.yml ops",
            )
        toolchain = Toolchain(
            runner_image=runner_image,
            runs_on=runs_on,
            host_compiler=host_compiler,
            nvcc=nvcc_version,
            cuda_toolkit=nvcc.install if nvcc else "",
            arch_list=arch_list,
            skip_cuda_check=skip_check,
            cuda_check=check_text,
            nvcc_flags=tuple(dict.fromkeys(nvcc_flags)),
            cpu_baseline=spec.cpu_baseline,
            cuda_subpackages=compat.subpackages_for(nvcc.minor) if nvcc and cell.platform.os == "windows" else (),
            notes=tuple(dict.fromkeys(notes)),
            linux_runtime=runtime,
        )
        return toolchain, ops


def _resolve_ops(
    cell: Cell, arch_list: tuple[str, ...], available: tuple[OpInfo, ...], wanted: tuple[str, ...] | None
) -> OpPlan:
    """``ops: all`` builds what compat.yml ships on the OS; an explicit list builds what it names."""
    os = cell.platform.os
    top_arch = max((_arch_value(t) for t in arch_list), default=None)
    build: list[tuple[str, str]] = []
    left_out: list[tuple[str, str]] = []
    for op in available:
        if wanted is not None and op.name not in wanted:
            left_out.append((op.name, "not in the matrix's ops list"))
        elif os not in (op.platforms if wanted is not None else op.ship):
            left_out.append((op.name, op.left_out.get(os, f"cannot be built on {os}")))
        elif wanted is None and op.ship_versions is not None and cell.deepspeed not in op.ship_versions:
            left_out.append((op.name, op.not_portable))
        elif op.min_arch is not None and cell.variant.is_cuda and (top_arch is None or top_arch < op.min_arch):
            left_out.append((op.name, f"needs sm >= {format_version(op.min_arch)}; the arch list has none"))
        else:
            build.append((op.name, op.var))
    return OpPlan(build=tuple(build), left_out=tuple(left_out))
