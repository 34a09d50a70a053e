"""torch minors: compat.yml's ``torch`` entries against PyPI and PyTorch's per-variant indexes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dswheels.facts.context import Context, PathT
from dswheels.facts.findings import Kind
from dswheels.facts.seen import OSES, TorchIndexSeen, TorchMinorSeen
from dswheels.facts.yaml_edit import Edit, render_flow, render_scalar
from dswheels.kernel.compat.entries import TorchRelease
from dswheels.kernel.model import Python, Variant
from dswheels.kernel.versions import VersionTuple, format_version

__all__ = ["compare_torch", "python_order", "variant_for_pin"]

PYPI = "PyPI torch JSON"


def python_order(pythons: Sequence[Python]) -> list[str]:
    """compat.yml's order: regular builds by version, then the free-threaded ones."""
    return [str(p) for p in sorted(set(pythons), key=lambda p: (p.free_threaded, p.version))]


def _variant_order(names: Sequence[str]) -> list[str]:
    return sorted(set(names), key=lambda n: Variant.parse(n).cuda or (0,))


def variant_for_pin(pin: str) -> str:
    major, minor = pin.split(".")[:2]
    return f"cu{major}{minor}"


def _index_pythons(index: TorchIndexSeen, minor: VersionTuple, os: str) -> tuple[Python, ...] | None:
    """Pythons every CUDA variant of ``minor`` has on ``os`` (None: no CUDA variant there)."""
    sets = [set(index.wheels[v].get((minor, os), ())) for v in index.variants(minor, os)]
    if not sets:
        return None
    return tuple(set.intersection(*sets))


def _wanted_python(seen: TorchMinorSeen, index: TorchIndexSeen | None) -> tuple[dict[str, list[str]], str]:
    per_os: dict[str, list[str]] = {}
    where = PYPI
    for os in OSES:
        pythons = _index_pythons(index, seen.minor, os) if index else None
        if pythons is not None:
            where = "download.pytorch.org (every CUDA variant of the minor)"
        per_os[os] = python_order(pythons if pythons is not None else seen.python.get(os, ()))
    return per_os, where


def _compare_release(ctx: Context, release: TorchRelease, seen: TorchMinorSeen, index: TorchIndexSeen | None) -> None:
    key = format_version(release.minor)
    path: PathT = ("torch", key)
    if release.latest != seen.latest:
        ctx.add(
            Kind.DISAGREES,
            f"torch.{key}.latest",
            f"the newest {key} release is {seen.latest}, compat.yml says {release.latest}",
            PYPI,
            edits=[Edit("set", (*path, "latest"), render_scalar(seen.latest))],
        )
    if seen.released and release.released != seen.released:
        ctx.add(
            Kind.DISAGREES,
            f"torch.{key}.released",
            f"{key}.0 was uploaded on {seen.released}, compat.yml says {release.released}",
            PYPI,
            edits=[Edit("set", (*path, "released"), render_scalar(seen.released))],
        )
    python, python_from = _wanted_python(seen, index)
    have_python = {os: python_order(release.python[os]) for os in OSES}
    if any(set(python[os]) != set(have_python[os]) for os in OSES):
        diffs = [
            f"{os}: {', '.join(python[os])} (compat.yml: {', '.join(have_python[os])})"
            for os in OSES
            if set(python[os]) != set(have_python[os])
        ]
        ctx.add(
            Kind.DISAGREES,
            f"torch.{key}.python",
            f"{seen.latest} has wheels for Python " + "; ".join(diffs),
            python_from,
            edits=ctx.set_per_os((*path, "python"), python, quote=True),
        )
    if index is not None:
        _compare_variants(ctx, release, index)
    if seen.cuda_pin:
        pinned = variant_for_pin(seen.cuda_pin)
        have = ctx.compat.torch_pypi_linux_variant.get(release.minor)
        if have != pinned:
            table = ("torch_pypi_linux_variant",)
            edit = (
                Edit("set", (*table, key), pinned)
                if have is not None
                else Edit("add", table, pinned, key=render_scalar(key))
            )
            ctx.add(
                Kind.DISAGREES if have else Kind.NEW,
                f"torch_pypi_linux_variant.{key}",
                f"PyPI's {seen.latest} Linux wheel requires CUDA {seen.cuda_pin} ({pinned}); compat.yml says {have}",
                seen.pin_from,
                edits=[edit],
            )


def _unsettled_key(ctx: Context, path: PathT) -> str:
    """The one key of an inferred entry its ``unsettled:`` reason is about, when the reason names it first
    (``"cxx_std: ..."``, as a new minor's entry is written); "" when it is about the entry as a whole."""
    why, entry = ctx.value((*path, "unsettled")), ctx.value(path)
    head, colon, _rest = why.partition(":") if isinstance(why, str) else ("", "", "")
    return head if colon and isinstance(entry, dict) and head in entry else ""


def _compare_variants(ctx: Context, release: TorchRelease, index: TorchIndexSeen) -> None:
    key = format_version(release.minor)
    path: PathT = ("torch", key)
    found = {os: _variant_order(index.variants(release.minor, os)) for os in OSES}
    have = {os: _variant_order([v.name for v in release.variants[os]]) for os in OSES}
    # an entry inferred for another key (a new minor's cxx_std) is not settled by its variants
    inferred = ctx.inferred(path) and _unsettled_key(ctx, path) in ("", "variants")
    source = f"download.pytorch.org per-variant indexes ({index.base})"
    if all(set(found[os]) == set(have[os]) for os in OSES):
        if inferred:
            ctx.add(
                Kind.CONFIRMED,
                f"torch.{key}.variants",
                "the indexes list exactly the variants compat.yml infers: "
                + "; ".join(f"{os}: {', '.join(found[os]) or 'none'}" for os in OSES),
                source,
                edits=ctx.settle(
                    path, f"variants confirmed by download.pytorch.org (dswheels facts check {ctx.today})"
                ),
            )
        return
    found_kinds = []
    for os in OSES:
        extra = sorted(set(have[os]) - set(found[os]))
        missing = sorted(set(found[os]) - set(have[os]))
        if extra:
            found_kinds.append(
                (
                    Kind.REFUTED if inferred else Kind.DISAGREES,
                    f"torch.{key}.variants.{os}",
                    (
                        f"torch {key} has no {', '.join(extra)} wheels for {os} on download.pytorch.org "
                        "(compat.yml lists them: the plan would build against wheels that do not exist)"
                    ),
                    "",
                )
            )
        if missing:
            found_kinds.append(
                (
                    Kind.REFUTED if inferred else Kind.NEW,
                    f"torch.{key}.variants.{os}",
                    f"download.pytorch.org has torch {key} {', '.join(missing)} wheels for {os}; compat.yml lacks them",
                    _missing_facts(ctx, release.minor, missing),
                )
            )
    edits = ctx.set_per_os((*path, "variants"), found, quote=False)
    if inferred:
        edits += ctx.settle(path, f"variants read from download.pytorch.org (dswheels facts check {ctx.today})")
    else:
        edits += ctx.note_source(path, f"variants per download.pytorch.org ({ctx.today})")
    for number, (kind, entry, message, person) in enumerate(found_kinds):
        ctx.add(kind, entry, message, source, edits=edits if number == 0 else (), person=person)


def _missing_facts(ctx: Context, minor: VersionTuple, variants: Sequence[str]) -> str:
    """What compat.yml still needs before the planner can use these variants ('' when nothing)."""
    gaps = []
    for name in variants:
        variant = Variant.parse(name)
        if variant.cuda not in ctx.compat.cuda:
            gaps.append(f"a cuda.{variant.cuda_text} toolkit entry")
        if ctx.compat.torch_arch_list(minor, name) is None:
            gaps.append(f"a torch_arch_lists row for torch {format_version(minor)} {name}")
    return "add " + ", ".join(gaps) if gaps else ""


def _new_minor(ctx: Context, seen: TorchMinorSeen, index: TorchIndexSeen | None) -> None:
    key = format_version(seen.minor)
    previous = ctx.compat.torch[max(ctx.compat.torch)]
    python, python_from = _wanted_python(seen, index)
    message = f"torch {seen.latest} (released {seen.released}) is on PyPI; compat.yml knows up to {previous.latest}"
    if index is None:
        ctx.add(
            Kind.NEW,
            f"torch.{key}",
            message,
            PYPI,
            person="its CUDA variants come from download.pytorch.org, which was not read: run the check where it "
            "can be reached (the follow workflow does) or add the entry by hand",
        )
        return
    variants = {os: _variant_order(index.variants(seen.minor, os)) for os in OSES}
    per_os = ", ".join(f"{os}: {render_flow(v, quote=False)}" for os, v in variants.items())
    py_os = ", ".join(f"{os}: {render_flow(v)}" for os, v in python.items())
    prev_key = format_version(previous.minor)
    why = (
        f"cxx_std: torch {prev_key}'s; no source dswheels facts check reads gives torch's C++ standard "
        "(torch/utils/cpp_extension.py in its wheel); the rest was read from PyPI and download.pytorch.org"
    )
    block = "\n".join(
        [
            "",
            f"latest: {render_scalar(seen.latest)}",
            f"released: {render_scalar(seen.released)}",
            f"python: {{{py_os}}}",
            f"variants: {{{per_os}}}",
            f"cxx_std: {previous.cxx_std}",
            "confidence: inferred",
            f"unsettled: {render_scalar(why)}",
            f"source: {render_scalar(f'pypi-torch, download.pytorch.org (dswheels facts check {ctx.today})')}",
        ]
    )
    edits = [Edit("add", ("torch",), block, key=render_scalar(key))]
    if seen.cuda_pin:
        edits.append(Edit("add", ("torch_pypi_linux_variant",), variant_for_pin(seen.cuda_pin), key=render_scalar(key)))
    all_variants = sorted({v for vs in variants.values() for v in vs})
    cxx_std = f"its cxx_std ({previous.cxx_std}) is torch {prev_key}'s, marked inferred: check torch {key}'s "
    cxx_std += "torch/utils/cpp_extension.py"
    choices = f"add {key} to the `torch` choices of .github/workflows/wheels.yml's manual dispatch "
    choices += "(tests/unit/test_workflows.py holds them to compat.yml)"
    decide = [_missing_facts(ctx, seen.minor, all_variants), cxx_std, choices]
    ctx.add(
        Kind.NEW,
        f"torch.{key}",
        f"{message}; Python {python_from}; variants {per_os}",
        f"{PYPI}, download.pytorch.org",
        edits=edits,
        person="; ".join(d for d in decide if d),
    )


def compare_torch(ctx: Context, seen: Mapping[VersionTuple, TorchMinorSeen], index: TorchIndexSeen | None) -> None:
    """``seen``: the minors in scope (compat.yml's newest few and anything newer on PyPI)."""
    known = ctx.compat.torch
    for minor in sorted(seen):
        if minor in known:
            _compare_release(ctx, known[minor], seen[minor], index)
        elif minor > max(known):
            _new_minor(ctx, seen[minor], index)
