"""The static checks of a wheel's extension binaries: the CPU instructions and the runtime each needs
(ELF symbol versions, PE DLL imports) and the GPU code in its fatbins.

The binaries are read by the effectful side (:func:`dswheels.host.extensions.read_extensions`,
objdump for the instructions) into :class:`~dswheels.verify.static_checks.WheelFacts`; each check
here is a function of :data:`STATIC`, run after the checks of the wheel's files.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from dswheels.kernel.binaries.dlls import DllTarget, describe_providers, judge_imports
from dswheels.kernel.binaries.fatbin import judge_gpu_code
from dswheels.kernel.binaries.linux_runtime import RuntimeFloor, floor_of, judge_runtime
from dswheels.kernel.manylinux import FloorVerdict, manylinux_glibc, tag_problem
from dswheels.kernel.naming import parse_wheel_name
from dswheels.kernel.platform_traits import traits
from dswheels.verify.registry import Registry, Stage, Verdict
from dswheels.verify.static_checks import WheelFacts

__all__ = ["STATIC", "manylinux_tag_verdict"]

STATIC: Registry[WheelFacts] = Registry(Stage.STATIC)


@STATIC.check("no -march=native", judges="no extension records that it was compiled for the build host's CPU")
def _no_native(facts: WheelFacts) -> Iterator[Verdict]:
    native = [n for n, b in facts.binaries.items() if b.records_native]
    yield Verdict(
        not native,
        "no extension records -march=native" if not native else f"-march=native recorded in {', '.join(native)}",
    )


@STATIC.check(
    "cpu architecture",
    judges="every ELF extension is machine code of the wheel's platform's CPU (x86_64, aarch64)",
)
def _cpu_architecture(facts: WheelFacts) -> Iterator[Verdict]:
    want = traits(facts.expected.cell.platform).machine
    elf = {n: b for n, b in facts.binaries.items() if b.format == "elf"}
    wrong = [f"{n.rsplit('/', 1)[-1]} ({b.machine or 'unknown'})" for n, b in elf.items() if b.machine != want]
    if elf:
        yield Verdict(
            not wrong,
            f"{len(elf)} extension(s) of {want}" if not wrong else f"not {want} code: {', '.join(wrong)}",
        )


@STATIC.check(
    "cpu baseline",
    judges="no extension (but an op's ISA variants: cpu level) holds an instruction above the plan's CPU baseline "
    "(x86-64: disassembled with objdump, where it is on PATH; AArch64: each instruction word read from the file), "
    "per extension",
)
def _cpu_baseline(facts: WheelFacts) -> Iterator[Verdict]:
    known = [b for b in facts.binaries.values() if b.format != "unknown"]
    baseline = facts.expected.cpu_baseline
    if known and not facts.baseline_known:
        yield Verdict(ok=False, detail=f"unknown baseline {baseline!r}")
    for member, binary in sorted(facts.binaries.items()):
        if binary.format != "unknown" and binary.isa is not None and member not in facts.levels:
            yield Verdict(binary.isa.ok, binary.isa.describe(baseline), subject=binary.name.split(".")[0])


@STATIC.check(
    "cpu level",
    judges="no ISA variant of an op holds an instruction above the level it is compiled for (x86-64-v3 for avx2, "
    "x86-64-v4 for avx512), per variant",
)
def _cpu_level(facts: WheelFacts) -> Iterator[Verdict]:
    for member, binary in sorted(facts.binaries.items()):
        level = facts.levels.get(member)
        if level and binary.format != "unknown" and binary.isa is not None:
            yield Verdict(binary.isa.ok, binary.isa.describe(level), subject=binary.name.split(".")[0])


def _elf_needs(facts: WheelFacts) -> dict[str, Mapping[str, Sequence[str]]]:
    """ELF extension member -> library -> the symbol versions it needs."""
    return {m: b.version_needs for m, b in facts.binaries.items() if b.format == "elf"}


@STATIC.check(
    "linux runtime",
    judges="the highest GLIBC, GLIBCXX and CXXABI versions the ELF extensions need are within the plan's "
    "linux_runtime (compat.yml's linux_runtime_floor unless the matrix sets it)",
)
def _linux_runtime(facts: WheelFacts) -> Iterator[Verdict]:
    needs, expected, libstdcxx = _elf_needs(facts), facts.expected, facts.libstdcxx
    if not needs:
        return
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
    yield Verdict(judgement.ok, detail)


@STATIC.check(
    "manifest runtime",
    judges="the runtime floor the manifest records is the one the ELF extensions need (said only when it is not)",
)
def _manifest_runtime(facts: WheelFacts) -> Iterator[Verdict]:
    needs, recorded, libstdcxx = _elf_needs(facts), facts.expected.recorded_runtime, facts.libstdcxx
    if not needs or recorded is None:
        return
    floor = floor_of(needs.values())
    if recorded != floor:
        yield Verdict(
            ok=False,
            detail=f"the manifest records {recorded.describe(libstdcxx)}, the wheel needs {floor.describe(libstdcxx)}",
        )


def manylinux_tag_verdict(filename: str, verdict: FloorVerdict | None) -> Verdict:
    """A wheel's platform tag against auditwheel's verdict on its binaries (None: not judged here).

    A tag that claims an older glibc than the binaries need lets pip and uv install the wheel where an op
    fails to load: that fails. ``linux_x86_64`` claims no floor (pip installs it on any Linux): that passes,
    and says so.
    """
    tag = parse_wheel_name(filename).tag.platform
    if verdict is None:
        return Verdict(ok=True, detail=f"tagged {tag}; not judged: auditwheel runs on Linux only")
    problem = tag_problem(tag, verdict)
    if problem is not None:
        return Verdict(ok=False, detail=f"{problem}: pip would install it where an op fails to load")
    if manylinux_glibc(tag) is None:
        claims = f"tagged {tag}: no floor claimed (pip installs it on any Linux)"
        return Verdict(ok=True, detail=f"{claims}; its binaries allow {verdict.describe()}")
    return Verdict(ok=True, detail=f"tagged {tag}, which its binaries allow: {verdict.describe()}")


@STATIC.check(
    "manylinux tag",
    judges="a Linux wheel's platform tag claims no older glibc than auditwheel says its ELF extensions need "
    "(torch's libraries left out; judged where auditwheel runs, on Linux)",
)
def _manylinux_tag(facts: WheelFacts) -> Iterator[Verdict]:
    if _elf_needs(facts):
        yield manylinux_tag_verdict(facts.filename, facts.floor)


@STATIC.check(
    "dll imports",
    judges="every DLL a .pyd imports comes from Windows, the Visual C++ runtime, the wheel's Python or its torch "
    "wheel, per extension",
)
def _dll_imports(facts: WheelFacts) -> Iterator[Verdict]:
    cell = facts.expected.cell
    target = DllTarget(
        python=cell.python,
        torch=cell.torch,
        cuda_major=int(cell.variant.cuda_text.split(".")[0]) if cell.variant.is_cuda else None,
    )
    for binary in (b for _, b in sorted(facts.binaries.items()) if b.format == "pe"):
        verdicts = judge_imports(binary.dll_imports + binary.delay_imports, target, facts.dlls)
        bad = [v for v in verdicts if not v.ok]
        detail = (
            "; ".join(f"{v.name}: {v.detail}" for v in bad) if bad else "all provided: " + describe_providers(verdicts)
        )
        yield Verdict(not bad, detail, subject=binary.name.split(".")[0])


@STATIC.check(
    "gpu code",
    judges="a CUDA extension's fatbin holds SASS only for planned archs, PTX only where +PTX, and every arch its "
    "builder asked for, per extension",
)
def _gpu_code(facts: WheelFacts) -> Iterator[Verdict]:
    expected = facts.expected
    if not expected.cell.variant.is_cuda or not expected.arch_list:
        return
    for name, binary in sorted(facts.binaries.items()):
        if binary.gpu is None:
            continue
        judged = judge_gpu_code(binary.gpu, expected.arch_list, expected.sass.get(name, frozenset()))
        bad = [*judged.unplanned_sass, *judged.unplanned_ptx]
        detail = binary.gpu.describe() + (f"; unplanned {bad}" if bad else "")
        if judged.missing_sass:
            detail += f"; {judged.missing_text}"
        yield Verdict(judged.ok, detail, subject=name.rsplit("/", 1)[-1])
