"""The toolchain of a cell the rules allow: runner image, host compiler, nvcc, arch list, ops, flags.

:class:`Resolver` picks them for one cell (cached per DeepSpeed x torch x variant x platform)
from the matrix's runners, or from this machine (:class:`LocalHost`), and gives a
:class:`~dswheels.kernel.model.Reason` when nothing can build the cell. The host compiler is
picked by :mod:`dswheels.plan.host_compiler`, the CUDA parts by :mod:`dswheels.plan.cuda_parts`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dswheels.kernel.binaries.linux_runtime import RuntimeFloor
from dswheels.kernel.compat import Compat
from dswheels.kernel.compat.entries import CudaToolkit, OpInfo, RunnerImage, TorchRelease
from dswheels.kernel.compiler_flags.record import FlagRecord, load_flag_record
from dswheels.kernel.compiler_flags.screen import screen_ops
from dswheels.kernel.model import Accelerator, Cell, HostCompiler, OpPlan, Platform, Reason, Toolchain, Variant
from dswheels.kernel.platform_traits import traits
from dswheels.kernel.versions import VersionTuple, format_version
from dswheels.plan.cuda_parts import arch_value, cuda_check, nvcc_facts, redist_reason, resolve_arch_list
from dswheels.plan.host_compiler import image_above, pick_compiler, pick_gcc, pick_msvc
from dswheels.plan.matrix.spec import MatrixSpec

__all__ = ["LocalHost", "Resolver"]

_NO_CUDA_CHECK = "cpu variant: no CUDA, no check"


@dataclass(frozen=True, slots=True)
class LocalHost:
    """The machine itself as the builder (``dswheels build`` for the current environment)."""

    os: str
    gcc: str = ""  # major version on Linux
    msvc: tuple[str, ...] = ()  # toolsets found on Windows
    nvcc: VersionTuple | None = None


@dataclass(frozen=True, slots=True)
class _Host:
    """Where a cell builds and with which compiler (and the nvcc flags that compiler needs)."""

    runner_image: str
    runs_on: tuple[str, ...]
    compiler: HostCompiler
    escape_flags: tuple[str, ...]
    notes: tuple[str, ...] = ()
    container: str = ""
    gcc_toolset: bool = False


@dataclass(frozen=True, slots=True)
class _Nvcc:
    """The nvcc a cell builds with and compat.yml's facts of it (a cpu cell has none)."""

    toolkit: CudaToolkit | None = None
    version: VersionTuple | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _CudaBuild:
    """What nvcc is told: the arch list, and whether DeepSpeed's CUDA version check is skipped."""

    arch_list: tuple[str, ...] = ()
    skip_check: bool = False
    check_text: str = _NO_CUDA_CHECK
    notes: tuple[str, ...] = ()


@dataclass
class Resolver:
    """The toolchain of each cell (:meth:`toolchain`), resolved once per DeepSpeed x torch x variant x platform."""

    compat: Compat
    spec: MatrixSpec
    host: LocalHost | None = None
    nvcc: VersionTuple | None = None  # plan as if the builder had this nvcc
    flag_record: FlagRecord | None = None  # the ops' recorded flags (default: the shipped op_flags.json)
    redist_required: bool = False  # a toolkit no runner can install (no pinned redistrib JSON) drops the cell
    _cache: dict[tuple[VersionTuple, VersionTuple, Variant, Platform], tuple[Toolchain, OpPlan] | Reason] = field(
        default_factory=dict,
    )
    _ops: dict[tuple[VersionTuple, str], tuple[OpInfo, ...]] = field(default_factory=dict)
    _screened: dict[tuple[object, ...], tuple[OpPlan, tuple[str, ...], Reason | None]] = field(default_factory=dict)
    _redists: dict[tuple[str, str], Reason | str | None] = field(default_factory=dict)

    def _redist(self, cell: Cell, toolkit: CudaToolkit) -> Reason | str | None:
        """:func:`redist_reason`, once per toolkit release x platform."""
        key = (toolkit.install, cell.platform.value)
        if key not in self._redists:
            self._redists[key] = redist_reason(cell, toolkit, self.compat, required=self.redist_required)
        return self._redists[key]

    def screen(
        self, cell: Cell, ops: OpPlan, arch_list: str, nvcc_flags: tuple[str, ...]
    ) -> tuple[OpPlan, tuple[str, ...], Reason | None]:
        """:func:`screen_ops` once per release x platform x accelerator x arch list x flags x ops."""
        key = (cell.deepspeed, cell.platform, cell.variant.is_cuda, arch_list, nvcc_flags, ops)
        if key not in self._screened:
            record = self.flag_record or load_flag_record()
            self._screened[key] = screen_ops(
                cell,
                ops,
                arch_list=arch_list,
                nvcc_flags=nvcc_flags,
                record=record,
                explicit=self.spec.ops is not None,
                baseline_swap=self._baseline_swap(cell, record),
            )
        return self._screened[key]

    def _baseline_swap(self, cell: Cell, record: FlagRecord) -> dict[str, str]:
        """The record's CPU baseline flags -> the cell's, where the cell's baseline is another one."""
        recorded = self.compat.cpu_baselines.get(record.context.get("cpu_baseline", ""))
        name = self.spec.cpu_baseline_for(traits(cell.platform).machine, self.compat)
        if recorded is None or recorded.name == name:
            return {}
        mine = self.compat.cpu_baselines[name]
        return {recorded.gcc: mine.gcc, recorded.simd: mine.simd}

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

    def _resolve(self, cell: Cell) -> tuple[Toolchain, OpPlan] | Reason:
        compat, spec = self.compat, self.spec
        nvcc = self._nvcc(cell)
        if isinstance(nvcc, Reason):
            return nvcc
        # What a Linux wheel may need of glibc and libstdc++ at most (the matrix's, else compat.yml's). A build
        # on this machine promises nothing: its wheel's tag says what it needs (auditwheel's verdict).
        linux = traits(cell.platform).runtime_floor and self.host is None
        runtime = (spec.linux_runtime or compat.linux_runtime_floor) if linux else None
        host = self._host(cell, nvcc, runtime)
        if isinstance(host, Reason):
            return host
        cuda = self._cuda(cell, nvcc)
        if isinstance(cuda, Reason):
            return cuda
        notes = [*nvcc.notes, *host.notes, *cuda.notes]
        nvcc_flags = list(host.escape_flags)
        for workaround in compat.workarounds:
            if workaround.when.matches(cell):
                if workaround.nvcc_flags and cell.variant.is_cuda:
                    nvcc_flags.extend(workaround.nvcc_flags)
                    notes.append(f"{' '.join(workaround.nvcc_flags)}: {workaround.why}")
                if workaround.note:
                    notes.append(workaround.note)
        ops = _resolve_ops(cell, cuda.arch_list, self.ops_for(cell.deepspeed, cell.variant.accelerator), spec.ops)
        # the ops whose recorded flags a compiler of the platform would reject cannot be built
        ops, flag_notes, rejected = self.screen(cell, ops, ";".join(cuda.arch_list), tuple(nvcc_flags))
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
            runner_image=host.runner_image,
            runs_on=host.runs_on,
            host_compiler=host.compiler,
            nvcc=nvcc.version,
            cuda_toolkit=nvcc.toolkit.install if nvcc.toolkit else "",
            arch_list=cuda.arch_list,
            skip_cuda_check=cuda.skip_check,
            cuda_check=cuda.check_text,
            nvcc_flags=tuple(dict.fromkeys(nvcc_flags)),
            cpu_baseline=spec.cpu_baseline_for(traits(cell.platform).machine, compat),
            cuda_components=tuple(c.redist for c in compat.components_for(nvcc.toolkit.minor)) if nvcc.toolkit else (),
            notes=tuple(dict.fromkeys(notes)),
            linux_runtime=runtime,
            container=host.container,
            gcc_toolset=host.gcc_toolset,
        )
        return toolchain, ops

    def _nvcc(self, cell: Cell) -> _Nvcc | Reason:
        """The nvcc a CUDA cell builds with (this run's, this machine's, the matrix's, else torch's CUDA)."""
        if cell.variant.cuda is None:
            return _Nvcc()
        if self.nvcc is not None:
            version = self.nvcc
        elif self.host is not None and self.host.nvcc is not None:
            version = self.host.nvcc
        else:
            version = self.spec.toolkits.get(cell.variant.name, cell.variant.cuda)
        nvcc = nvcc_facts(cell, version, self.compat)
        if isinstance(nvcc, Reason):
            return nvcc
        notes = (f"CUDA {format_version(nvcc.minor)} facts partly inferred ({nvcc.source})",) if nvcc.inferred else ()
        return _Nvcc(toolkit=nvcc, version=version, notes=notes)

    def _cuda(self, cell: Cell, nvcc: _Nvcc) -> _CudaBuild | Reason:
        """The arch list and DeepSpeed's CUDA check for the chosen nvcc, and whether a runner can install
        it (nothing for a cpu cell)."""
        if nvcc.toolkit is None or nvcc.version is None:
            return _CudaBuild()
        arch = resolve_arch_list(cell, nvcc.toolkit, self.compat, self.spec.arch_lists.get(cell.variant.name))
        if isinstance(arch, str):
            return Reason(
                rule="arch-list",
                message=arch,
                fix="set arch_lists for this variant in the matrix",
                source="ptxas-help, cpp-extension",
            )
        arch_list, arch_notes = arch
        # a build runner installs the toolkit from NVIDIA's archives; this machine has its own
        redist = self._redist(cell, nvcc.toolkit) if self.host is None else None
        if isinstance(redist, Reason):
            return redist
        if redist:
            arch_notes.append(redist)
        skip_check, check_text = cuda_check(cell, nvcc.version, self.compat)
        if skip_check and self.spec.cuda_check == "strict":
            return Reason(
                rule="cuda-check-strict",
                message=check_text.removeprefix("DS_SKIP_CUDA_CHECK=1: ") + " and the matrix says cuda_check: strict",
                fix=f"install nvcc {cell.variant.cuda_text} (`toolkits:` in the matrix) "
                "or set cuda_check: skip-when-needed",
                source="ds-setup assert_no_cuda_mismatch",
            )
        return _CudaBuild(arch_list=arch_list, skip_check=skip_check, check_text=check_text, notes=tuple(arch_notes))

    def _host(self, cell: Cell, nvcc: _Nvcc, runtime: RuntimeFloor | None) -> _Host | Reason:
        """The first runner whose image can build the cell (or this machine), and its compiler."""
        release = self.compat.torch[cell.torch]
        if self.host is not None:
            return self._local_host(self.host, cell, nvcc.toolkit, release)
        runners = self.spec.runners.get(cell.platform)
        if runners is None or not runners.build:
            return Reason(
                rule="runners",
                message=f"the matrix has no build runner for {cell.platform.value}",
                fix=f"add runners.{cell.platform.value}.build to {self.spec.filename}",
                source=self.spec.filename,
            )
        failures: list[str] = []
        for runner in runners.build:
            image = self.compat.runner_images[runner.image]
            picked = pick_compiler(cell, nvcc.toolkit, image, release, self.compat)
            if isinstance(picked, str):
                failures.append(picked)
                continue
            notes: list[str] = []
            if runtime is not None and (above := image_above(image, runtime)):
                notes.append(
                    f"{image.name} has {above}, above the promised linux_runtime: its wheels may need more "
                    "(dswheels verify checks; list an older image first in runners)"
                )
            if image.inferred:
                notes.append(f"{image.name} toolsets partly inferred ({image.source})")
            compiler, escape_flags = picked
            return _Host(
                image.name,
                runner.labels,
                compiler,
                escape_flags,
                tuple(notes),
                container=image.container,
                gcc_toolset=image.gcc_toolset and compiler.kind == "gcc",
            )
        return _no_host_compiler(cell, failures)

    def _local_host(
        self, host: LocalHost, cell: Cell, nvcc: CudaToolkit | None, release: TorchRelease
    ) -> _Host | Reason:
        """This machine's compiler (``dswheels build`` for the current environment)."""
        picked: tuple[HostCompiler, tuple[str, ...]] | str
        if traits(host.os).compiler == "msvc":
            image = RunnerImage(name="this machine", os=host.os, msvc=host.msvc, gcc=(), inferred=False, source="")
            picked = pick_msvc(cell, nvcc, image, release, self.compat) if host.msvc else "no MSVC toolset found"
        else:
            gcc = pick_gcc(cell, nvcc, (host.gcc,) if host.gcc else (), "this machine", self.compat)
            picked = gcc if isinstance(gcc, str) else (gcc, ())
        if isinstance(picked, str):
            return _no_host_compiler(cell, [picked])
        return _Host("local", (), *picked)


def _no_host_compiler(cell: Cell, failures: list[str]) -> Reason:
    images = traits(cell.platform).runner_image
    return Reason(
        rule="host-compiler",
        message="; ".join(failures),
        fix=f"add an image with a suitable compiler (e.g. {images}) to runners.{cell.platform.value}.build",
        source="host-config, runner-images",
    )


def _resolve_ops(
    cell: Cell, arch_list: tuple[str, ...], available: tuple[OpInfo, ...], wanted: tuple[str, ...] | None
) -> OpPlan:
    """``ops: all`` builds what compat.yml ships on the OS; an explicit list builds what it names."""
    os = cell.platform.os
    top_arch = max((arch_value(t) for t in arch_list), default=None)
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
