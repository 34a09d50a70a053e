"""``dswheels inspect``: what is inside any DeepSpeed wheel, ours or not, Linux or Windows.

Everything here works on what :mod:`dswheels.verify.effects.inspect_wheel` read out of the wheel: its
METADATA, DeepSpeed's ``git_version_info_installed.py``, the op builders' sources (which
module each op imports) and each extension's binary (:mod:`dswheels.kernel.binaries.extension`). The
result is one :class:`Inspection` per wheel, rendered as aligned text or as JSON (keys in
docs/inspect.md), with plain warnings where a user would be surprised at run time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from dswheels.kernel.binaries.dlls import DllFacts, DllTarget, DllVerdict, judge_imports
from dswheels.kernel.binaries.extension import ExtensionBinary
from dswheels.kernel.binaries.isa import IsaReport
from dswheels.kernel.binaries.linux_runtime import LibstdcxxRelease, floor_of
from dswheels.kernel.isa_variants import VariantTable, chosen_suffix, describe_levels
from dswheels.kernel.naming import WheelNameError, parse_wheel_name
from dswheels.kernel.wheel_contents import InstalledInfo, Metadata, builder_modules, check_ops
from dswheels.verify.placement import Placement, expected_file, module_of_extension, place_extensions
from dswheels.verify.static_checks import cell_from_wheel_filename

A64_BASELINE = "armv8.2-a"  # what inspect judges an AArch64 extension against (compat.yml's default)

__all__ = [
    "LEVELS",
    "SCHEMA",
    "ExtensionReport",
    "Inspection",
    "NotDeepSpeedError",
    "ProvenanceReport",
    "inspect_wheel",
    "isa_level",
    "render_inspection",
]

SCHEMA = "dswheels.inspect/1"


class NotDeepSpeedError(ValueError):
    """A valid wheel that is not DeepSpeed's."""


@dataclass(frozen=True, slots=True)
class ExtensionReport:
    op: str  # the op whose builder imports this file ("" when no builder does)
    binary: ExtensionBinary
    dlls: tuple[DllVerdict, ...]  # PE: a verdict per imported DLL
    runtime: str  # ELF: the glibc/libstdc++ floor in words; "" for PE
    module: str = ""  # what the file imports as (its path)
    misplaced: str = ""  # why loading its op does not import this file ("" when it does)
    variant: str = ""  # an op built once per ISA level: this file's variant (avx2) ...
    level: str = ""  # ... and the level it is compiled for (x86-64-v3)

    def as_json(self) -> dict[str, object]:
        b = self.binary
        return {
            "op": self.op or None,
            "file": b.member,
            "module": self.module,
            "misplaced": self.misplaced or None,
            "format": b.format,
            "size": b.size,
            "gpu": None
            if b.gpu is None
            else {"sass": [f"sm_{a}" for a in b.gpu.sass], "ptx": [f"compute_{a}" for a in b.gpu.ptx]},
            "cpu": None if b.isa is None else {"level": isa_level(b.isa, machine=b.machine), **_isa_json(b.isa)},
            "isa_variant": {"variant": self.variant, "level": self.level} if self.variant else None,
            "linux_runtime": {lib: list(v) for lib, v in b.version_needs.items()} if b.format == "elf" else None,
            "linux_runtime_floor": self.runtime or None,
            "dll_imports": [v.as_json() for v in self.dlls] if b.format == "pe" else None,
            "delay_imports": list(b.delay_imports) if b.format == "pe" else None,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class ProvenanceReport:
    """The PEP 740 provenance found beside a wheel (``<wheel>.provenance`` or GitHub's ``<wheel>.sigstore.json``)."""

    file: str
    signer: str = ""  # who signed it, when it verified: the workflow at its ref (commit)
    predicate_type: str = ""
    logged_at: str = ""  # when the transparency log recorded it (UTC)
    problem: str = ""  # why it does not verify ("" when it does)

    @property
    def verified(self) -> bool:
        return not self.problem

    def words(self) -> str:
        if self.problem:
            return f"NOT verified ({self.file}): {self.problem}"
        logged = f", logged {self.logged_at}" if self.logged_at else ""
        return f"verified ({self.file}): signed by {self.signer}{logged}; {self.predicate_type}"

    def as_json(self) -> dict[str, object]:
        return {
            "file": self.file,
            "verified": self.verified,
            "signer": self.signer or None,
            "predicate_type": self.predicate_type or None,
            "logged_at": self.logged_at or None,
            "problem": self.problem or None,
        }


@dataclass(frozen=True, slots=True)
class Inspection:
    filename: str
    version: str
    local_label: str
    python_tag: str
    platform_tag: str
    torch_requirements: tuple[str, ...]  # Requires-Dist torch... without an extra marker
    accelerator: str
    installed_ops: tuple[str, ...]
    without_extension: tuple[str, ...]  # installed ops whose extension file is not in the wheel (or not found)
    torch_info: Mapping[str, object]
    target: str  # what the DLLs are judged against ("torch 2.6 (CUDA 12)"), "" on Linux
    extensions: tuple[ExtensionReport, ...]
    warnings: tuple[str, ...]
    provenance: ProvenanceReport | None = None  # None: no provenance beside the wheel
    variants: VariantTable = field(default_factory=VariantTable)  # the ops built once per ISA level (its dispatch)
    here: str | None = None  # torch's CPU capability on this machine, as its CPU flags give it (None: unknown)

    @property
    def loads_here(self) -> str | None:
        """The variant this machine's CPU loads (None: unknown, or none fits)."""
        return chosen_suffix(self.variants, self.here) if self.here is not None else None

    def as_json(self) -> dict[str, object]:
        return {
            "wheel": self.filename,
            "version": self.version,
            "local_label": self.local_label or None,
            "python_tag": self.python_tag,
            "platform": self.platform_tag,
            "torch_requirement": list(self.torch_requirements),
            "accelerator": self.accelerator,
            "installed_ops": list(self.installed_ops),
            "torch_info": dict(self.torch_info),
            "dlls_judged_for": self.target or None,
            "extensions": [e.as_json() for e in self.extensions],
            "isa_variants": None
            if not self.variants.ops
            else {
                "levels": [{"variant": suffix, "level": level} for suffix, level in self.variants.levels],
                "ops": dict(self.variants.ops),
                "cpu_capability_here": self.here,
                "loads_here": self.loads_here,
            },
            "warnings": list(self.warnings),
            "provenance": self.provenance.as_json() if self.provenance is not None else None,
        }


def _isa_json(isa: IsaReport) -> dict[str, object]:
    return {
        "instructions": isa.instructions,
        "above_x86_64_v2": isa.violations,  # of an AArch64 extension: above armv8.2-a (the key is the contract's)
        "runtime_dispatch": isa.runtime_dispatch,
        "examples": list(isa.examples),
    }


LEVELS = ("x86-64-v2", "x86-64-v3", "x86-64-v4", "above x86-64-v4")  # what isa_level answers, lowest first


def isa_level(isa: IsaReport, *, machine: str = "x86_64") -> str:
    """The highest x86-64 level an extension's instructions need, from a scan against x86-64-v2; of an AArch64
    one, ``armv8.2-a`` or what it has above it.

    >>> isa_level(IsaReport(instructions=10, violations=0, examples=(), kinds=()))
    'x86-64-v2'
    >>> isa_level(IsaReport(instructions=10, violations=2, examples=(), kinds=("SVE/SVE2",)), machine="aarch64")
    'above armv8.2-a: SVE/SVE2'
    """
    if machine == "aarch64":
        return A64_BASELINE if isa.violations == 0 else f"above {A64_BASELINE}: {', '.join(isa.kinds)}"
    if isa.violations == 0:
        return "x86-64-v2"
    if any("above x86-64-v4" in kind for kind in isa.kinds):
        return "above x86-64-v4"
    if any(kind.startswith("AVX-512") for kind in isa.kinds):
        return "x86-64-v4"
    return "x86-64-v3"


def _above(isa: IsaReport, level: str) -> bool:
    """Whether the scanned code needs more than ``level`` (one of :data:`LEVELS`; an unknown level: anything)."""
    need = LEVELS.index(isa_level(isa))
    return need > (LEVELS.index(level) if level in LEVELS else 0)


def inspect_wheel(
    *,
    filename: str,
    metadata: Metadata,
    installed: InstalledInfo,
    names: Sequence[str],
    builder_sources: Mapping[str, str],
    binaries: Mapping[str, ExtensionBinary],
    dll_facts: DllFacts,
    libstdcxx: Sequence[LibstdcxxRelease],
    toolkit_sm: Mapping[str, frozenset[int]],
    variants: VariantTable | None = None,
    here: str | None = None,
) -> Inspection:
    """Describe a DeepSpeed wheel. ``toolkit_sm``: CUDA ``X.Y`` -> the SASS archs its nvcc can emit (compat.yml);
    ``variants``: its ops built once per ISA level; ``here``: torch's CPU capability on this machine (None: unknown)."""
    variants = variants or VariantTable()
    try:
        name = parse_wheel_name(filename)
    except WheelNameError as exc:
        raise NotDeepSpeedError(str(exc)) from None
    version, tag = name.version, name.tag
    try:
        cell = cell_from_wheel_filename(filename, installed)
    except ValueError:
        cell = None
    cuda = str(installed.torch_info.get("cuda_version") or "0.0")
    target = DllTarget(
        python=cell.python if cell else None,
        torch=cell.torch if cell else None,
        cuda_major=int(cell.variant.cuda_text.split(".")[0]) if cell and cell.variant.is_cuda else None,
    )
    modules = builder_modules(builder_sources)
    modules.update({op: variants.modules(op) for op in variants.ops if modules})  # an op per ISA level: its variants
    placed = {p.member: p for p in place_extensions(names, built=installed.built_ops, modules=modules) if modules}
    found = check_ops(installed.built_ops, installed=installed, modules=modules, names=names)
    reports = []
    for member, binary in sorted(binaries.items()):
        dlls = (
            judge_imports(binary.dll_imports + binary.delay_imports, target, dll_facts) if binary.format == "pe" else ()
        )
        runtime = floor_of([binary.version_needs]).describe(libstdcxx) if binary.format == "elf" else ""
        place = placed.get(member) or Placement(member=member, module=module_of_extension(member), op="")
        _op, suffix, level = variants.level_of(place.module) or ("", "", "")
        reports.append(
            ExtensionReport(
                op=place.op,
                binary=binary,
                dlls=dlls,
                runtime=runtime,
                module=place.module,
                misplaced=place.problem,
                variant=suffix,
                level=level,
            )
        )
    torch_reqs = tuple(
        str(r) for r in metadata.requirements if r.name == "torch" and "extra" not in str(r.marker or "")
    )
    inspection = Inspection(
        filename=filename,
        version=str(version),
        local_label=version.local or "",
        python_tag=tag.interpreter if tag.abi == "none" else tag.abi,
        platform_tag=tag.platform,
        torch_requirements=torch_reqs,
        accelerator=installed.accelerator_name,
        installed_ops=installed.built_ops,
        without_extension=tuple(op for op in installed.built_ops if op in {*found.no_file, *found.unknown}),
        torch_info=installed.torch_info,
        target=target.torch_words if any(r.binary.format == "pe" for r in reports) else "",
        extensions=tuple(reports),
        warnings=(),
        variants=variants,
        here=here,
    )
    warnings = _placement_warnings(inspection, modules) + _warnings(inspection, cuda=cuda, toolkit_sm=toolkit_sm)
    return replace(inspection, warnings=tuple(warnings))


def _placement_warnings(i: Inspection, modules: Mapping[str, Sequence[str]]) -> list[str]:
    """Every extension outside its op's import path, and every built op with no file where it is imported from."""
    warnings = [r.misplaced for r in i.extensions if r.misplaced]
    paired = {r.op for r in i.extensions if r.misplaced and r.op}
    unnamed = []
    for op in i.without_extension:
        if op in paired or not i.extensions:
            continue
        if not modules.get(op):
            unnamed.append(op)  # no builder names its module: every extension is some other op's
            continue
        wanted = " or ".join(modules[op])
        warnings.append(
            f"installed_ops lists {op}, but no extension sits where its builder loads it from ({wanted}: "
            f"{' or '.join(expected_file(m) for m in modules[op])}): loading {op} raises ModuleNotFoundError"
        )
    if unnamed:
        warnings.append(f"installed_ops lists {', '.join(unnamed)}, but the wheel has no extension for them")
    return warnings


def _warnings(i: Inspection, *, cuda: str, toolkit_sm: Mapping[str, frozenset[int]]) -> list[str]:
    warnings: list[str] = []
    pins = [r for r in i.torch_requirements if "==" in r]
    if not pins:
        warnings.append(
            f"torch is not pinned (Requires-Dist: {', '.join(i.torch_requirements) or 'none'}): pip may install "
            f"another torch than {i.torch_info.get('version', 'the one it was built with')}, and DeepSpeed then "
            "refuses every prebuilt op and JIT-compiles them"
        )
    gpu = [r for r in i.extensions if r.binary.gpu is not None]
    no_ptx = [r for r in gpu if r.binary.gpu is not None and not r.binary.gpu.ptx]
    if no_ptx:
        newest = max(max(r.binary.gpu.sass, default=0) for r in no_ptx if r.binary.gpu is not None)
        which = "any CUDA extension" if len(no_ptx) == len(gpu) else ", ".join(_label(r) for r in no_ptx)
        warnings.append(f"no PTX in {which}: GPUs newer than sm_{newest} cannot run these ops")
    can = toolkit_sm.get(cuda)
    if can is not None:
        beyond = sorted({a for r in gpu if r.binary.gpu is not None for a in r.binary.gpu.sass} - can)
        if beyond:
            warnings.append(
                f"SASS {', '.join(f'sm_{a}' for a in beyond)} but torch_info says CUDA {cuda}, whose nvcc cannot "
                "emit it: the ops were compiled by a newer toolkit than the torch they were built against"
            )
    for r in i.extensions:
        warnings.extend(f"{_label(r)} imports {v.name}: {v.detail}" for v in r.dlls if not v.ok)
        isa = r.binary.isa
        if isa is None:
            continue
        if r.variant and not isa.runtime_dispatch and _above(isa, r.level):
            warnings.append(f"{_label(r)}: its {r.variant} variant needs {isa_level(isa)}, above its level {r.level}")
        elif not r.variant and not isa.ok:
            warnings.append(
                f"{_label(r)}: {isa.describe(A64_BASELINE if r.binary.machine == 'aarch64' else 'x86-64-v2')}"
            )
    if i.variants.ops and i.here is not None and i.loads_here is None:
        warnings.append(
            f"this CPU (torch's capability {i.here}) is below every ISA variant of {', '.join(sorted(i.variants.ops))}"
            f" ({describe_levels(i.variants)}): loading them raises ImportError here"
        )
    return warnings


def _label(r: ExtensionReport) -> str:
    name = r.op or r.binary.name
    return f"{name} ({r.variant})" if r.variant else name


def _import_words(r: ExtensionReport, variants: VariantTable) -> str:
    if r.misplaced:
        return f"{r.module}: NOT where its op is imported from (see the warnings)"
    if not r.op:
        return f"{r.module} (not judged: the wheel has no op builder sources)"
    if r.variant:
        return (
            f"{r.module}: {r.op}'s {r.variant} variant, compiled for {r.level}; {variants.ops.get(r.op, '?')} (its "
            "absolute_name()) loads it where torch's CPU capability allows"
        )
    return f"{r.module}: {r.op}'s builder imports it from here (its absolute_name())"


def _gpu_words(r: ExtensionReport) -> str:
    gpu = r.binary.gpu
    return "none (CPU code only)" if gpu is None else gpu.describe()


def _cpu_words(isa: IsaReport | None, r: ExtensionReport) -> str:
    if isa is None:
        return "not read (objdump is not on PATH)"
    machine = r.binary.machine
    if machine == "aarch64":
        return f"{isa_level(isa, machine=machine)} ({isa.instructions} instructions, {isa.violations} above it)"
    if r.variant:
        need, counted = isa_level(isa), f"{isa.violations} of {isa.instructions} instructions above x86-64-v2"
        if not _above(isa, r.level):
            return f"{need} ({counted}): within its level {r.level}"
        if isa.runtime_dispatch:
            return f"{r.level}; {counted} need {need}, in code selected at run time (cpuid)"
        return f"{need} ({counted}): ABOVE its level {r.level}"
    if isa.violations == 0:
        return f"x86-64-v2 ({isa.instructions} instructions)"
    above = f"{isa.violations} of {isa.instructions} instructions need {isa_level(isa)}"
    if isa.runtime_dispatch:
        return f"x86-64-v2; {above}, in code selected at run time (cpuid)"
    return f"{isa_level(isa)}: {above}, with no CPU feature detection"


def _dll_lines(dlls: Sequence[DllVerdict]) -> list[str]:
    lines = [f"UNEXPECTED {v.name}: {v.detail}" for v in dlls if not v.ok]
    groups: dict[str, list[str]] = {}
    for v in dlls:
        if v.ok:
            groups.setdefault(v.provider, []).append(v.name)
    return lines + [f"{provider}: {', '.join(names)}" for provider, names in groups.items()]


def render_inspection(i: Inspection) -> str:
    """The aligned text ``dswheels inspect`` prints."""
    info = i.torch_info
    rows = [
        ("version", i.version + ("" if i.local_label else " (no local label: not a dswheels build)")),
        ("python", i.python_tag),
        ("platform", i.platform_tag),
        ("torch pin", ", ".join(i.torch_requirements) or "none"),
        ("accelerator", i.accelerator or "unknown"),
        ("torch_info", f"torch {info.get('version', '?')}, CUDA {info.get('cuda_version', '?')}"),
        ("installed ops", f"{len(i.installed_ops)}: {', '.join(i.installed_ops) or 'none'}"),
    ]
    if i.variants.ops:
        here = "unknown (this CPU's flags were not read)"
        if i.here is not None:
            here = f"{i.loads_here or 'NONE'} (torch's CPU capability here: {i.here})"
        rows.append(("isa variants", f"{', '.join(sorted(i.variants.ops))}: {describe_levels(i.variants)}"))
        rows.append(("loads here", here))
    if i.target:
        rows.append(("DLLs judged for", f"Python {i.python_tag}, {i.target}"))
    rows.append(("provenance", i.provenance.words() if i.provenance is not None else "none beside the wheel"))
    lines = [i.filename, *(f"  {k:<16} {v}" for k, v in rows), ""]
    width = max((len(_label(r)) for r in i.extensions), default=0)
    for r in i.extensions:
        lines.append(f"  {_label(r):<{width}}  {r.binary.member} ({r.binary.format}, {r.binary.size / 1e6:.1f} MB)")
        pad = " " * (width + 4)
        lines.append(f"{pad}module   {_import_words(r, i.variants)}")
        lines.append(f"{pad}gpu      {_gpu_words(r)}")
        lines.append(f"{pad}cpu      {_cpu_words(r.binary.isa, r)}")
        if r.binary.format == "elf":
            lines.append(f"{pad}needs    {r.runtime}")
        elif r.binary.format == "pe":
            for n, text in enumerate(_dll_lines(r.dlls)):
                lines.append(f"{pad}{'dlls' if n == 0 else '':<8} {text}")
    if i.warnings:
        lines += ["", "  warnings:"]
        lines += [f"  - {w}" for w in i.warnings]
    return "\n".join(lines) + "\n"
