"""What a wheel must be (:class:`Expected`), and the static checks of its files: name, label, pin,
what DeepSpeed stamped into it, its ops and their extension files.

Each check is a function registered in :data:`STATIC` (:mod:`dswheels.verify.registry`) that reads
:class:`WheelFacts`, gathered by the effectful side (:mod:`dswheels.verify.effects.prove`); the
checks of the extension binaries are :mod:`dswheels.verify.binary_checks`', the loaded ones
:mod:`dswheels.verify.loaded_checks`'. :mod:`dswheels.verify.checks` runs them all.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from dswheels.kernel.binaries.dlls import DllFacts
from dswheels.kernel.binaries.extension import ExtensionBinary
from dswheels.kernel.binaries.linux_runtime import LibstdcxxRelease, RuntimeFloor
from dswheels.kernel.isa_variants import VariantTable, describe_levels, is_shim, shim_path, variant_problems
from dswheels.kernel.manifest import Manifest
from dswheels.kernel.manylinux import FloorVerdict
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
from dswheels.kernel.wheel_contents import (
    PORTABLE_MARK,
    InstalledInfo,
    Metadata,
    OpsInWheel,
    builder_modules,
    check_ops,
    extension_for_module,
    torch_pin,
)
from dswheels.verify.placement import place_extensions
from dswheels.verify.registry import Check, Registry, Stage, Verdict

__all__ = [
    "BUILDER",
    "STATIC",
    "Expected",
    "ExpectedFrom",
    "WheelFacts",
    "cell_from_wheel_filename",
    "expected_from_manifest",
    "isa_variant_verdicts",
    "render_checks_markdown",
]

BUILDER = "deepspeed/ops/op_builder/builder.py"  # where DeepSpeed probes the build host's CPU


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
            platform=Platform.from_tag(name.tag.platform),
        )
    except ValueError as exc:
        msg = f"{filename}: {exc}"
        raise WheelNameError(msg) from None


def expected_from_manifest(manifest: Manifest, cell: Cell, *, default_runtime: RuntimeFloor | None = None) -> Expected:
    """What the manifest says the wheel is; the runtime limit is its plan's, else ``default_runtime`` for a manifest
    from before ``runtime`` (a plan without a limit is a build for its own machine, whose tag says its floor)."""
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
        linux_runtime=(promise or (default_runtime if manifest.runtime is None else None)) if linux else None,
        linux_runtime_from=(
            "the manifest's plan" if promise is not None else "compat.yml linux_runtime_floor (an older manifest)"
        ),
        recorded_runtime=manifest.runtime,
        sass={op.extension: frozenset(op.sass) for op in manifest.ops_built if op.sass},
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class WheelFacts:
    """What the static checks read: the wheel's files and binaries, and what it must be."""

    filename: str
    names: Sequence[str]
    metadata: Metadata
    installed: InstalledInfo | None  # DeepSpeed's build info; None: unreadable (``installed_problem`` says why)
    expected: Expected
    dlls: DllFacts  # which DLLs Windows, the VC++ runtime, Python and torch provide (windows_dlls.yml)
    installed_problem: str = ""
    sha256: str = ""
    builder_sources: Mapping[str, str] = field(default_factory=dict)  # op_builder/**.py: where each op is imported
    binaries: Mapping[str, ExtensionBinary] = field(default_factory=dict)  # extension member -> what it holds
    baseline_known: bool = True  # compat.yml knows the expected CPU baseline
    libstdcxx: Sequence[LibstdcxxRelease] = ()  # compat.yml's libstdc++ releases, for messages
    floor: FloorVerdict | None = None  # auditwheel's verdict on a Linux wheel (None: not judged, or not Linux)
    # the ops built once per ISA level, as the wheel's deepspeed/dswheels_isa.py says (``variants_problem``: why
    # it could not be read), the text of it and of the op modules, and each variant's extension -> its level
    variants: VariantTable = field(default_factory=VariantTable)
    variants_problem: str = ""
    isa_sources: Mapping[str, str] = field(default_factory=dict)
    levels: Mapping[str, str] = field(default_factory=dict)

    @property
    def info(self) -> InstalledInfo:
        """The build info, for the checks after the gate that fails without it."""
        assert self.installed is not None  # noqa: S101 - the gate (git_version_info_installed.py) stopped the run
        return self.installed

    @property
    def modules(self) -> dict[str, tuple[str, ...]]:
        """op -> the module(s) its extension imports as: what the wheel's own builders say (``load()`` runs
        them), else what the manifest recorded of the build; an op built once per ISA level: its variants'."""
        modules: dict[str, tuple[str, ...]] = {op: (module,) for op, module in self.expected.modules.items() if module}
        modules.update(builder_modules(self.builder_sources))
        modules.update({op: self.variants.modules(op) for op in self.variants.ops})
        return modules

    @property
    def ops(self) -> OpsInWheel:
        return check_ops(self.expected.ops, installed=self.info, modules=self.modules, names=self.names)


STATIC: Registry[WheelFacts] = Registry(Stage.STATIC)


@STATIC.check(
    "git_version_info_installed.py",
    judges="DeepSpeed's build info (installed_ops, accelerator_name, torch_info) is in the wheel and readable",
    gate=True,
)
def _installed_info(facts: WheelFacts) -> Iterator[Verdict]:
    if facts.installed is None:
        yield Verdict(ok=False, detail=facts.installed_problem)


@STATIC.check(
    "dswheels_isa.py",
    judges="the table of the ops built once per ISA level (deepspeed/dswheels_isa.py) is readable, where the "
    "wheel has one",
    gate=True,
)
def _variant_table(facts: WheelFacts) -> Iterator[Verdict]:
    if facts.variants_problem:
        yield Verdict(ok=False, detail=facts.variants_problem)


@STATIC.check("manifest sha256", judges="the wheel's sha256 is the one its build manifest records (with a manifest)")
def _manifest_sha256(facts: WheelFacts) -> Iterator[Verdict]:
    recorded = facts.expected.wheel_sha256
    if recorded:
        same = facts.sha256 == recorded
        said = "as the manifest records" if same else f"but the manifest records {recorded[:16]}..."
        yield Verdict(same, f"sha256 {facts.sha256[:16]}... {said}")


def _own_platform_tag(filename: str, cell: Cell) -> str | None:
    """The wheel's platform tag where it is one of the cell's platform (a Linux wheel's floor), else None."""
    try:
        tag = parse_wheel_name(filename).tag.platform
        return tag if Platform.from_tag(tag) is cell.platform else None
    except ValueError:
        return None


@STATIC.check("filename", judges="the file name is the cell's: version, local label, tags")
def _filename(facts: WheelFacts) -> Iterator[Verdict]:
    want = wheel_filename(facts.expected.cell, _own_platform_tag(facts.filename, facts.expected.cell))
    yield Verdict(facts.filename == want, facts.filename + ("" if facts.filename == want else f" != {want}"))


@STATIC.check("version label", judges="METADATA's version and DeepSpeed's stamped version carry the cell's label")
def _version_label(facts: WheelFacts) -> Iterator[Verdict]:
    want = wheel_version(facts.expected.cell)
    version, stamped = facts.metadata.version, facts.info.version
    yield Verdict(
        version == want and stamped == want, f"METADATA {version}, git_version_info {stamped}, expected {want}"
    )


@STATIC.check("torch pin", judges="METADATA requires exactly the torch minor the wheel was built with")
def _torch_pin(facts: WheelFacts) -> Iterator[Verdict]:
    torch = facts.expected.cell.torch
    reqs = [str(r) for r in facts.metadata.requirements if r.name == "torch"]
    yield Verdict(
        reqs == [torch_pin(torch)], f"Requires-Dist torch: {', '.join(reqs) or 'none'}; expected {torch_pin(torch)}"
    )


@STATIC.check(
    "accelerator",
    judges="the accelerator DeepSpeed stamped is the variant's (else every op is JIT-compiled where it matters)",
)
def _accelerator(facts: WheelFacts) -> Iterator[Verdict]:
    expected, name = facts.expected, facts.info.accelerator_name
    ok = name == expected.accelerator
    detail = f"accelerator_name {name!r}"
    if not ok:
        where = "a GPU" if expected.accelerator is Accelerator.CUDA else "this machine"
        detail += (
            f", but the wheel is labelled {local_label(expected.cell)}: DeepSpeed loads prebuilt ops only when the "
            f"run-time accelerator is the build's, so on {where} every op would be JIT-compiled "
            f"(build with DS_ACCELERATOR={expected.accelerator})"
        )
    yield Verdict(ok, detail)


@STATIC.check("torch_info", judges="the torch and CUDA DeepSpeed stamped are the label's")
def _torch_info(facts: WheelFacts) -> Iterator[Verdict]:
    cell, info = facts.expected.cell, facts.info.torch_info
    want_cuda = cell.variant.cuda_text if cell.variant.is_cuda else "0.0"
    ok = str(info.get("version")) == format_version(cell.torch) and str(info.get("cuda_version")) == want_cuda
    yield Verdict(
        ok,
        f"built with torch {info.get('version')}, CUDA {info.get('cuda_version')}; the label says torch "
        f"{format_version(cell.torch)}, CUDA {want_cuda}",
    )


@STATIC.check("installed ops", judges="installed_ops is exactly the manifest's (or the plan's) list of ops")
def _installed_ops(facts: WheelFacts) -> Iterator[Verdict]:
    ops, source = facts.ops, facts.expected.source
    parts = [f"installed_ops: {', '.join(sorted(ops.installed)) or 'none'}"]
    if ops.missing:
        parts.append(f"short of the {source}'s list by {', '.join(sorted(ops.missing))}")
    if ops.extra:
        parts.append(f"not in the {source}'s list: {', '.join(ops.extra)}")
    yield Verdict(not ops.missing and not ops.extra, "; ".join(parts))


@STATIC.check(
    "extensions",
    judges="one extension file per installed op (one per ISA level of an op built at each), where the op's "
    "builder imports it from",
)
def _extensions(facts: WheelFacts) -> Iterator[Verdict]:
    ops, modules = facts.ops, facts.modules
    misplaced = [p for p in place_extensions(facts.names, built=ops.installed, modules=modules) if not p.ok]
    paired = {p.op for p in misplaced}
    problems = [p.problem for p in misplaced]
    problems += [line for op, line in zip(ops.no_file, ops.describe_no_file(modules), strict=True) if op not in paired]
    variants = facts.variants
    files_wanted = sum(len(variants.modules(op)) or 1 for op in ops.installed)  # or one per ISA level of an op
    if len(ops.extensions) != files_wanted:
        problems.append(f"{len(ops.extensions)} extension files for {len(ops.installed)} installed ops")
    per_level = f", {len(variants.ops)} of them once per ISA level" if variants.ops else ""
    found = f"one extension per op{per_level} ({len(ops.extensions)}): " + ", ".join(sorted(ops.extensions))
    yield Verdict(not problems, "; ".join(problems) or found)


@STATIC.check(
    "isa variants",
    judges="each op built once per ISA level has an extension per level and a module that loads the best one "
    "torch's CPU capability allows (with such ops)",
)
def _isa_variants(facts: WheelFacts) -> Iterator[Verdict]:
    yield from isa_variant_verdicts(facts.variants, facts.names, facts.isa_sources)


def isa_variant_verdicts(variants: VariantTable, names: Sequence[str], isa_sources: Mapping[str, str]) -> list[Verdict]:
    """The ops built once per ISA level: the dispatch module, each op's module dispatching, every level's extension
    (``variants``: what the wheel's dispatch module says; ``isa_sources``: its text and the op modules')."""
    if not variants.ops:
        return []
    extension_of = {m: extension_for_module(m, names) for op in variants.ops for m in variants.modules(op)}
    problems = variant_problems(variants, names, extension_of)
    problems += [
        f"{op}: {shim_path(module)} does not load a variant (not the module dswheels writes)"
        for op, module in sorted(variants.ops.items())
        if shim_path(module) in names and not is_shim(isa_sources.get(shim_path(module), ""))
    ]
    detail = "; ".join(problems) or (
        f"{', '.join(sorted(variants.ops))}: one extension per level, {describe_levels(variants)}; each op's "
        "module loads the best one torch's CPU capability allows"
    )
    return [Verdict(not problems, detail)]


@STATIC.check(
    "portable op_builder",
    judges="DeepSpeed's op_builder/builder.py returns the CPU baseline, not -march=native (with the file)",
)
def _portable_builder(facts: WheelFacts) -> Iterator[Verdict]:
    source = facts.builder_sources.get(BUILDER)
    if source is not None:
        portable = PORTABLE_MARK in source
        said = (
            "returns the CPU baseline (JIT builds on users' machines are portable too)"
            if portable
            else "still probes the build host's CPU (-march=native)"
        )
        yield Verdict(portable, f"{BUILDER} {said}")


def render_checks_markdown(title: str, checks: Sequence[Check]) -> str:
    lines = [f"#### {title}", "", "| check | result | detail |", "|---|---|---|"]
    for c in checks:
        detail = c.detail.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {c.name} | {'ok' if c.ok else '**FAILED**'} | {detail} |")
    return "\n".join(lines) + "\n"
