"""What a wheel must be, checked without installing it (``dswheels verify``, static part).

Every check is a :class:`Check` with a sentence a person can act on; the effectful side
(:mod:`dswheels.verify.effects.prove`) gathers the wheel's contents and adds the checks that need
tools (disassembly) or a running interpreter (ds_report, loading every op).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from dswheels.kernel.binaries.dlls import DllFacts, DllTarget, describe_providers, judge_imports
from dswheels.kernel.binaries.extension import ExtensionBinary
from dswheels.kernel.binaries.fatbin import GpuCode, judge_gpu_code
from dswheels.kernel.binaries.linux_runtime import LibstdcxxRelease, RuntimeFloor, floor_of, judge_runtime
from dswheels.kernel.manifest import Manifest
from dswheels.kernel.model import Accelerator, Cell, Platform, Python, Variant
from dswheels.kernel.naming import (
    WheelNameError,
    local_label,
    parse_wheel,
    parse_wheel_name,
    wheel_filename,
    wheel_version,
)
from dswheels.kernel.platform_traits import traits
from dswheels.kernel.versions import TorchMinor, format_version, parse_version
from dswheels.kernel.wheel_contents import PORTABLE_MARK, InstalledInfo, Metadata, builder_modules, check_ops, torch_pin
from dswheels.verify.placement import place_extensions

__all__ = [
    "Check",
    "Expected",
    "ExpectedFrom",
    "binary_checks",
    "cell_from_wheel_filename",
    "expected_from_manifest",
    "gpu_checks",
    "linux_runtime_checks",
    "render_checks_markdown",
    "static_checks",
]


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str

    def as_json(self) -> dict[str, object]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


class ExpectedFrom(str, Enum):
    """Where what a wheel must contain comes from."""

    MANIFEST = "manifest"  # the build manifest beside the wheel
    PLAN = "plan"  # the matrix's plan for the wheel's cell (no manifest)
    WHEEL = "wheel"  # the wheel's own installed_ops (smoke: nothing to compare with)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class Expected:
    """What the wheel must contain: from its build manifest, or from the plan when there is none."""

    cell: Cell
    ops: tuple[str, ...]
    modules: Mapping[str, str] = field(default_factory=dict)  # op -> absolute_name() ("" unknown)
    cpu_baseline: str = ""
    arch_list: tuple[str, ...] = ()
    source: ExpectedFrom = ExpectedFrom.MANIFEST
    wheel_sha256: str = ""  # the manifest's record of the wheel ("" from a plan)
    linux_runtime: RuntimeFloor | None = None  # the most a Linux wheel may need (None: no limit)
    linux_runtime_from: str = ""  # where that limit comes from, for messages
    recorded_runtime: RuntimeFloor | None = None  # the floor the manifest records
    # extension -> the SASS archs its op's builder asked nvcc for (from the manifest; empty: unknown)
    sass: Mapping[str, frozenset[int]] = field(default_factory=dict)

    @property
    def accelerator(self) -> Accelerator:
        return self.cell.variant.accelerator


def cell_from_wheel_filename(filename: str, installed: InstalledInfo | None = None) -> Cell:
    """The cell a wheel's name says it is (its local label ``<variant>torch<M.m>``, read by :func:`parse_wheel`).

    A DeepSpeed wheel without the label (DeepSpeed's own, from PyPI) is taken for the cell its
    ``torch_info`` names when ``installed`` is given: torch M.m and CUDA X.Y as DeepSpeed's
    setup.py stamped them. ``WheelNameError`` (a ValueError) says why there is none.

    >>> from dswheels.kernel.naming import cell_id
    >>> cell_id(cell_from_wheel_filename("deepspeed-0.19.8+cu130torch2.14-cp311-cp311-linux_x86_64.whl"))
    'ds0.19.8-torch2.14-cu130-cp311-linux_x86_64'
    >>> info = InstalledInfo("0.16.5", {}, "cuda", {"version": "2.6", "cuda_version": "12.4"})
    >>> cell_id(cell_from_wheel_filename("deepspeed-0.16.5-cp311-cp311-win_amd64.whl", info))
    'ds0.16.5-torch2.6-cu124-cp311-win_amd64'
    """
    name = parse_wheel_name(filename)
    if name.label:
        return parse_wheel(filename).cell
    if installed is None or not installed.torch_info.get("version"):
        msg = f"{filename} has no dswheels label (+<variant>torch<M.m>) in its version"
        raise WheelNameError(msg)
    cuda = str(installed.torch_info.get("cuda_version") or "0.0")
    variant = "cpu" if installed.accelerator_name != "cuda" or cuda == "0.0" else cuda
    try:
        return Cell(
            deepspeed=parse_version(name.version.base_version),
            torch=TorchMinor(parse_version(str(installed.torch_info["version"]))[:2]),
            variant=Variant.parse(variant),
            python=Python.parse(name.tag.abi),
            platform=Platform(name.tag.platform),
        )
    except ValueError as exc:
        msg = f"{filename}: {exc}"
        raise WheelNameError(msg) from None


def expected_from_manifest(manifest: Manifest, cell: Cell, *, default_runtime: RuntimeFloor | None = None) -> Expected:
    """What the manifest says the wheel is; the runtime limit is its plan's, else ``default_runtime``."""
    arch = tuple(t for t in manifest.arch_list.split(";") if t)
    promise = manifest.plan.toolchain.linux_runtime
    linux = traits(cell.platform).runtime_floor
    return Expected(
        cell=cell,
        ops=manifest.ops,
        modules={op.name: op.module for op in manifest.ops_built},
        cpu_baseline=manifest.cpu_baseline,
        arch_list=arch,
        source=ExpectedFrom.MANIFEST,
        wheel_sha256=manifest.wheel.sha256,
        linux_runtime=(promise or default_runtime) if linux else None,
        linux_runtime_from=(
            "the manifest's plan" if promise is not None else "compat.yml linux_runtime_floor (an older manifest)"
        ),
        recorded_runtime=manifest.runtime,
        sass={op.extension: frozenset(op.sass) for op in manifest.ops_built if op.sass},
    )


def binary_checks(
    binaries: Mapping[str, ExtensionBinary],
    expected: Expected,
    libstdcxx: Sequence[LibstdcxxRelease],
    dlls: DllFacts,
) -> list[Check]:
    """What the extensions need when they load: glibc/libstdc++ versions (ELF), DLLs (PE)."""
    elf = {m: b.version_needs for m, b in binaries.items() if b.format == "elf"}
    checks = linux_runtime_checks(elf, expected, libstdcxx)
    cell = expected.cell
    target = DllTarget(
        python=cell.python,
        torch=cell.torch,
        cuda_major=int(cell.variant.cuda_text.split(".")[0]) if cell.variant.is_cuda else None,
    )
    for binary in (b for _, b in sorted(binaries.items()) if b.format == "pe"):
        verdicts = judge_imports(binary.dll_imports + binary.delay_imports, target, dlls)
        bad = [v for v in verdicts if not v.ok]
        if bad:
            detail = "; ".join(f"{v.name}: {v.detail}" for v in bad)
        else:
            detail = "all provided: " + describe_providers(verdicts)
        checks.append(Check(f"dll imports {binary.name.split('.')[0]}", not bad, detail))
    return checks


def linux_runtime_checks(
    needs: Mapping[str, Mapping[str, Sequence[str]]], expected: Expected, libstdcxx: Sequence[LibstdcxxRelease]
) -> list[Check]:
    """The wheel's glibc/libstdc++ floor against the promised maximum, and against the manifest's record.

    ``needs``: extension member -> library -> the symbol versions it needs (``{}``: no ELF, no check).
    """
    if not needs:
        return []
    floor = floor_of(needs.values())
    promised = expected.linux_runtime or RuntimeFloor()
    judgement = judge_runtime(floor, promised)
    detail = f"needs {floor.describe(libstdcxx)}"
    if expected.linux_runtime is not None:
        detail += f"; promised at most {promised.describe(libstdcxx)} ({expected.linux_runtime_from or 'the plan'})"
    if judgement.problems:
        culprits = [
            f"{name.rsplit('/', 1)[-1]} needs {', '.join(bad)}"
            for name, per_lib in sorted(needs.items())
            if (bad := judge_runtime(floor_of([per_lib]), promised).problems)
        ]
        detail += (
            f". Above the promise: {'; '.join(culprits)}. Where only the promised versions exist the op fails "
            "to load (version `...' not found): build on an older image (runners in the matrix), or raise "
            "linux_runtime if the narrower reach is intended"
        )
    checks = [Check("linux runtime", judgement.ok, detail)]
    recorded = expected.recorded_runtime
    if recorded is not None and recorded != floor:
        checks.append(
            Check(
                "manifest runtime",
                ok=False,
                detail=f"the manifest records {recorded.describe(libstdcxx)}, "
                f"the wheel needs {floor.describe(libstdcxx)}",
            )
        )
    return checks


def _import_modules(expected: Expected, builder_sources: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    """op -> the module(s) it is imported from: what the wheel's own builders say (``load()`` runs them), else
    what the manifest recorded of the build."""
    modules: dict[str, tuple[str, ...]] = {op: (module,) for op, module in expected.modules.items() if module}
    modules.update(builder_modules(builder_sources))
    return modules


def static_checks(
    *,
    filename: str,
    names: Sequence[str],
    metadata: Metadata,
    installed: InstalledInfo,
    expected: Expected,
    builder_source: str | None,
    sha256: str = "",
    builder_sources: Mapping[str, str] | None = None,
) -> list[Check]:
    """Every check that needs only the wheel's bytes (the ``builder_source`` is its op_builder/builder.py;
    ``builder_sources`` every op builder's, which say where each op is imported from)."""
    cell = expected.cell
    checks: list[Check] = []
    if expected.wheel_sha256:
        same = sha256 == expected.wheel_sha256
        checks.append(
            Check(
                "manifest sha256",
                ok=same,
                detail=f"sha256 {sha256[:16]}... "
                + ("as the manifest records" if same else f"but the manifest records {expected.wheel_sha256[:16]}..."),
            ),
        )
    label = local_label(cell)

    want_name = wheel_filename(cell)
    checks.append(
        Check("filename", filename == want_name, f"{filename}" + ("" if filename == want_name else f" != {want_name}")),
    )
    version = metadata.version
    checks.append(
        Check(
            "version label",
            version == wheel_version(cell) and installed.version == wheel_version(cell),
            f"METADATA {version}, git_version_info {installed.version}, expected {wheel_version(cell)}",
        ),
    )
    torch_reqs = [str(r) for r in metadata.requirements if r.name == "torch"]
    checks.append(
        Check(
            "torch pin",
            torch_reqs == [torch_pin(cell.torch)],
            f"Requires-Dist torch: {', '.join(torch_reqs) or 'none'}; expected {torch_pin(cell.torch)}",
        ),
    )
    accel_ok = installed.accelerator_name == expected.accelerator
    detail = f"accelerator_name {installed.accelerator_name!r}"
    if not accel_ok:
        detail += (
            f", but the wheel is labelled {label}: DeepSpeed loads prebuilt ops only when the run-time accelerator "
            f"is the build's, so on {'a GPU' if expected.accelerator is Accelerator.CUDA else 'this machine'} every op "
            f"would be JIT-compiled (build with DS_ACCELERATOR={expected.accelerator})"
        )
    checks.append(Check("accelerator", accel_ok, detail))
    info = installed.torch_info
    want_cuda = cell.variant.cuda_text if cell.variant.is_cuda else "0.0"
    torch_ok = str(info.get("version")) == format_version(cell.torch)
    cuda_ok = str(info.get("cuda_version")) == want_cuda
    checks.append(
        Check(
            "torch_info",
            torch_ok and cuda_ok,
            f"built with torch {info.get('version')}, CUDA {info.get('cuda_version')}; the label says torch "
            f"{format_version(cell.torch)}, CUDA {want_cuda}",
        ),
    )
    modules = _import_modules(expected, builder_sources or {})
    ops = check_ops(expected.ops, installed=installed, modules=modules, names=names)
    parts = [f"installed_ops: {', '.join(sorted(ops.installed)) or 'none'}"]
    if ops.missing:
        parts.append(f"short of the {expected.source}'s list by {', '.join(sorted(ops.missing))}")
    if ops.extra:
        parts.append(f"not in the {expected.source}'s list: {', '.join(ops.extra)}")
    checks.append(Check("installed ops", not ops.missing and not ops.extra, "; ".join(parts)))
    misplaced = [p for p in place_extensions(names, built=ops.installed, modules=modules) if not p.ok]
    paired = {p.op for p in misplaced}
    problems = [p.problem for p in misplaced]
    problems += [line for op, line in zip(ops.no_file, ops.describe_no_file(modules), strict=True) if op not in paired]
    if len(ops.extensions) != len(ops.installed):
        problems.append(f"{len(ops.extensions)} extension files for {len(ops.installed)} installed ops")
    checks.append(
        Check(
            "extensions",
            not problems,
            "; ".join(problems)
            or f"one extension per op ({len(ops.extensions)}): " + ", ".join(sorted(ops.extensions)),
        ),
    )
    if builder_source is not None:
        checks.append(
            Check(
                "portable op_builder",
                PORTABLE_MARK in builder_source,
                "deepspeed/ops/op_builder/builder.py "
                + (
                    "returns the CPU baseline (JIT builds on users' machines are portable too)"
                    if PORTABLE_MARK in builder_source
                    else "still probes the build host's CPU (-march=native)"
                ),
            ),
        )
    return checks


def gpu_checks(expected: Expected, gpu: Mapping[str, GpuCode]) -> list[Check]:
    """SASS only for planned archs (and some), PTX only where +PTX, and every arch the manifest says its
    builder asked for: per CUDA extension."""
    if not expected.cell.variant.is_cuda or not expected.arch_list:
        return []
    checks = []
    for name, code in sorted(gpu.items()):
        judged = judge_gpu_code(code, expected.arch_list, expected.sass.get(name, frozenset()))
        bad = [*judged.unplanned_sass, *judged.unplanned_ptx]
        detail = code.describe() + (f"; unplanned {bad}" if bad else "")
        if judged.missing_sass:
            detail += f"; {judged.missing_text}"
        checks.append(Check(f"gpu code {name.rsplit('/', 1)[-1]}", judged.ok, detail))
    return checks


def render_checks_markdown(title: str, checks: Sequence[Check]) -> str:
    lines = [f"#### {title}", "", "| check | result | detail |", "|---|---|---|"]
    for c in checks:
        detail = c.detail.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {c.name} | {'ok' if c.ok else '**FAILED**'} | {detail} |")
    return "\n".join(lines) + "\n"
