"""The loaded checks: the wheel installed in an interpreter with the cell's torch (a fresh venv, or the
one ``--python`` names), ``ds_report`` run, and every op loaded with an empty ``TORCH_EXTENSIONS_DIR``
while JIT compilation is made to fail.

The effectful side (:func:`dswheels.verify.effects.prove.runtime_checks`) runs them and gathers
:class:`LoadedFacts`; each check here is a function of :data:`LOADED`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from dswheels.kernel.isa_variants import VariantTable, chosen_suffix
from dswheels.kernel.opload_result import LoadReport, judge_loads
from dswheels.kernel.versions import format_version
from dswheels.verify.ds_report import DsReport
from dswheels.verify.registry import Registry, Stage, Verdict
from dswheels.verify.static_checks import Expected

__all__ = [
    "ADAM_TOLERANCE",
    "LOADED",
    "AdamStep",
    "LoadedFacts",
    "ds_report_variant_verdicts",
    "variant_load_verdicts",
]

ADAM_TOLERANCE = 1e-5  # the largest difference from torch's AdamW DeepSpeedCPUAdam may have after its steps


@dataclass(frozen=True, kw_only=True, slots=True)
class AdamStep:
    """DeepSpeedCPUAdam run against torch's AdamW from the same start with the same gradients."""

    steps: int  # 0: no answer
    max_abs_diff: float | None
    tail: Sequence[str] = ()  # the run's last lines (why there is no answer)

    @classmethod
    def from_answer(cls, answer: object, *, tail: Sequence[str]) -> AdamStep:
        """The probe's answer (``no_jit.py adam``), or its absence.

        >>> AdamStep.from_answer({"max_abs_diff": 5e-6, "steps": 20}, tail=()).max_abs_diff
        5e-06
        >>> AdamStep.from_answer(None, tail=("Traceback ...",)).steps
        0
        """
        if not isinstance(answer, dict):
            return cls(steps=0, max_abs_diff=None, tail=tuple(tail))
        diff, steps = answer.get("max_abs_diff"), answer.get("steps")
        if isinstance(diff, bool) or not isinstance(diff, (int, float)) or not isinstance(steps, int):
            return cls(steps=0, max_abs_diff=None, tail=(f"a malformed answer: {answer!r}"[:300],))
        return cls(steps=steps, max_abs_diff=float(diff), tail=())


@dataclass(frozen=True, kw_only=True, slots=True)
class LoadedFacts:
    """What the wheel did once installed."""

    expected: Expected
    torch: str  # the interpreter's torch version ("": none)
    ds_report: DsReport | None  # None: its output did not parse (``ds_report_problem`` says why)
    ds_report_problem: str = ""
    loads: LoadReport | None  # None: the loader printed no answer (``loader_tail`` says why)
    loader_tail: Sequence[str] = ()
    jit_files: Sequence[str] = ()  # what appeared in TORCH_EXTENSIONS_DIR
    variants: VariantTable = field(default_factory=VariantTable)  # the wheel's ops built once per ISA level
    adam: AdamStep | None = None  # None: the wheel has no cpu_adam


LOADED: Registry[LoadedFacts] = Registry(Stage.LOADED)


@LOADED.check("runtime torch", judges="the interpreter's torch is the minor the wheel was built for")
def _runtime_torch(facts: LoadedFacts) -> Iterator[Verdict]:
    minor = ".".join(facts.torch.split("+")[0].split(".")[:2])
    want = format_version(facts.expected.cell.torch)
    yield Verdict(
        minor == want,
        f"the environment has torch {facts.torch or 'none'}, the wheel is built for torch {want}"
        + ("" if minor == want else ": DeepSpeed refuses every prebuilt op (PyTorch version mismatch)"),
    )


@LOADED.check(
    "ds_report",
    judges="ds_report runs, marks exactly the expected ops installed, and says they were compiled with the "
    "cell's torch (and CUDA)",
)
def _ds_report(facts: LoadedFacts) -> Iterator[Verdict]:
    report, cell = facts.ds_report, facts.expected.cell
    if report is None:
        yield Verdict(ok=False, detail=facts.ds_report_problem)
        return
    shown, want_ops = set(report.installed), set(facts.expected.ops)
    compiled = report.compiled_with
    want_compiled = f"torch {format_version(cell.torch)}" + (
        f", cuda {cell.variant.cuda_text}" if cell.variant.is_cuda else ""
    )
    detail = f"installed [YES]: {', '.join(sorted(shown)) or 'none'}; compiled w. {compiled!r}"
    if shown != want_ops:
        detail += f"; expected {', '.join(sorted(want_ops))}"
    yield Verdict(shown == want_ops and compiled.startswith(want_compiled), detail)


@LOADED.check(
    "load",
    judges="every expected op loads the extension from the wheel, nothing JIT-compiled, per op "
    "('load ops' when the loader itself failed)",
)
def _load(facts: LoadedFacts) -> Iterator[Verdict]:
    loads = facts.loads
    if loads is None or (loads.error and not loads.ops):
        why = loads.error if loads is not None else " / ".join(facts.loader_tail[-8:])
        yield Verdict(ok=False, detail=f"the loader failed: {why}", subject="ops")
        return
    for verdict in judge_loads(loads):
        yield Verdict(verdict.ok, verdict.detail, subject=verdict.name)


@LOADED.check(
    "isa variant",
    judges="each op built once per ISA level loaded the variant torch's CPU capability there picks, never one "
    "above it, per op",
)
def _isa_variant(facts: LoadedFacts) -> Iterator[Verdict]:
    loads = facts.loads
    if loads is not None and not (loads.error and not loads.ops):
        yield from variant_load_verdicts(facts.variants, loads)


def variant_load_verdicts(variants: VariantTable, loads: LoadReport) -> list[Verdict]:
    """Each op built once per ISA level loaded the variant torch's CPU capability there picks (never one above)."""
    verdicts = []
    for op in loads.ops:
        if op.name not in variants.ops or not op.prebuilt:
            continue
        want = chosen_suffix(variants, loads.cpu_capability)
        ok = bool(op.variant) and op.variant == want
        detail = (
            f"loaded its {op.variant or 'no'} variant; torch's CPU capability there is {loads.cpu_capability or '?'}, "
            f"which picks {want or 'none'} of {', '.join(variants.suffixes)}"
        )
        verdicts.append(Verdict(ok, detail, subject=op.name))
    return verdicts


@LOADED.check(
    "ds_report isa variant",
    judges="ds_report's 'cpu op isa variants' line names the variant torch's CPU capability picks there (with "
    "such ops)",
)
def _ds_report_isa_variant(facts: LoadedFacts) -> Iterator[Verdict]:
    loads = facts.loads
    if facts.ds_report is not None and loads is not None and not (loads.error and not loads.ops):
        line = facts.ds_report.info.get("cpu op isa variants")
        yield from ds_report_variant_verdicts(facts.variants, line, loads.cpu_capability)


def ds_report_variant_verdicts(variants: VariantTable, line: str | None, capability: str) -> list[Verdict]:
    """``ds_report``'s "cpu op isa variants" line names the variant torch's CPU capability picks there."""
    if not variants.ops:
        return []
    want = chosen_suffix(variants, capability) or "NONE"
    ok = line is not None and line.startswith(f"{want} ") and f"capability {capability}" in line
    shown = "no such line" if line is None else repr(line)
    return [Verdict(ok, f"cpu op isa variants: {shown}; expected {want} for {capability}")]


@LOADED.check("no JIT", judges="TORCH_EXTENSIONS_DIR is still empty after ds_report and the loads")
def _no_jit(facts: LoadedFacts) -> Iterator[Verdict]:
    leftovers = facts.jit_files
    yield Verdict(
        not leftovers,
        "TORCH_EXTENSIONS_DIR stayed empty" if not leftovers else f"JIT builds in it: {', '.join(leftovers)}",
    )


@LOADED.check(
    "cpu_adam step",
    judges=f"with cpu_adam installed: 20 DeepSpeedCPUAdam steps match torch.optim.AdamW within {ADAM_TOLERANCE:.0e} "
    "(the compiled SIMD path computes what torch computes), nothing JIT-compiled",
)
def _adam(facts: LoadedFacts) -> Iterator[Verdict]:
    adam = facts.adam
    if adam is None:
        return
    if adam.max_abs_diff is None:
        yield Verdict(ok=False, detail="no answer: " + " / ".join(adam.tail[-4:]))
        return
    ok = adam.max_abs_diff <= ADAM_TOLERANCE and not facts.jit_files
    detail = (
        f"{adam.steps} DeepSpeedCPUAdam steps against torch.optim.AdamW: largest difference {adam.max_abs_diff:.1e} "
        f"(tolerance {ADAM_TOLERANCE:.0e})"
    )
    yield Verdict(ok, detail + (f"; JIT-compiled {', '.join(facts.jit_files)}" if facts.jit_files else ""))
