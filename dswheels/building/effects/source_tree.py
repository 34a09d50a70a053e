"""The DeepSpeed source tree a cell compiles: fetched and verified, unpacked, then patched.

:func:`patch_tree` makes every source change a build makes, each returned as a note for the log
and the manifest (``source_changes``): the op builders' CPU code made portable (the plan's CPU
baseline instead of ``-march=native``), the ops with SIMD paths built once per ISA level
(:func:`add_isa_variants`), the files win32's setup.py needs and the sdist leaves out,
one build directory per extension (parallel extension builds), the op-flag patches
(:func:`dswheels.building.effects.op_flags_asked.apply_flag_patches`), torch pinned in requirements.txt, and
``-g0`` for ``-g`` unless debug symbols are kept. The text edits themselves are pure
(:mod:`dswheels.building.patches`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from dswheels.building.build_env import baseline_flag
from dswheels.building.effects.cell_log import log_note
from dswheels.building.effects.op_flags_asked import apply_flag_patches
from dswheels.building.patches import (
    BUILDER_FILES,
    DEBUG_FLAG_FILES,
    PatchError,
    patch_debug_flags,
    patch_env_report_variants,
    patch_isa_levels,
    patch_parallel_extensions,
    patch_portable_cpu,
    patch_setup_variants,
    patch_torch_requirement,
)
from dswheels.host.cache import CacheLayout
from dswheels.host.downloads import Downloader, FetchedSource, extract_archive, fetch_source
from dswheels.host.log import get_reporter
from dswheels.kernel.compat import Compat
from dswheels.kernel.errors import BuildError
from dswheels.kernel.isa_variants import DISPATCH_MODULE, variant_levels
from dswheels.kernel.model import PlannedCell
from dswheels.kernel.platform_traits import traits
from dswheels.kernel.versions import format_version
from dswheels.kernel.wheel_contents import torch_pin
from dswheels.platforms import platform_module
from dswheels.probes import isa_dispatch, isa_variants

__all__ = ["PreparedSource", "add_isa_variants", "patch_tree", "prepare_source"]

HELPER = "dswheels_isa_variants.py"  # setup.py imports it from the tree's root


@dataclass(frozen=True, kw_only=True, slots=True)
class PreparedSource:
    src: Path  # the patched tree, ready to compile
    fetched: FetchedSource  # the archive it came from, verified
    notes: tuple[str, ...]  # what was changed (the manifest's source_changes)


def prepare_source(
    planned: PlannedCell,
    *,
    src: Path,
    compat: Compat,
    cache: CacheLayout,
    pypi_json: str,
    debug_symbols: bool,
    parallel: bool,
    log: Path,
) -> PreparedSource:
    """Fetch the cell's source (cached in the cache's sources), unpack it into ``src`` and patch it."""
    with Downloader(cache.sources) as downloader:
        fetched = fetch_source(planned, downloader=downloader, pypi_json=pypi_json)
    extract_archive(fetched.path, src)
    notes = patch_tree(src, planned, compat, debug_symbols=debug_symbols, parallel=parallel)
    for note in notes:
        log_note(log, note)
    return PreparedSource(src=src, fetched=fetched, notes=tuple(notes))


def patch_tree(
    src: Path, planned: PlannedCell, compat: Compat, *, debug_symbols: bool, parallel: bool = False
) -> list[str]:
    """Apply the source patches; returns notes for the log (``parallel``: per-extension build dirs)."""
    notes = _make_cpu_portable(src, planned, compat)
    notes += add_isa_variants(src, planned, compat)
    notes += platform_module(planned.cell.platform).add_source_files(src, compat)
    if parallel:
        notes.append(_build_extensions_apart(src, planned))
    notes += apply_flag_patches(src, planned)
    notes += _pin_torch(src, planned)
    if not debug_symbols:
        notes.append(_drop_debug_flags(src))
    return notes


def _files(src: Path, rels: Sequence[str]) -> Iterator[tuple[str, Path]]:
    """Each of ``rels`` that exists under ``src``, once per real file (some are links to others)."""
    seen: set[Path] = set()
    for rel in rels:
        path = src / rel
        if not path.exists():
            continue
        real = path.resolve()
        if real not in seen:
            seen.add(real)
            yield rel, real


def _make_cpu_portable(src: Path, planned: PlannedCell, compat: Compat) -> list[str]:
    """The op builders' ``cpu_arch()``/``simd_width()`` return the plan's CPU baseline, not the build machine's."""
    baseline = compat.cpu_baselines[planned.toolchain.cpu_baseline]
    arch_flag = baseline_flag(baseline, planned.cell.platform.os)
    notes: list[str] = []
    for rel, real in _files(src, BUILDER_FILES):
        try:
            text = patch_portable_cpu(
                real.read_text(encoding="utf-8"), arch_flag=arch_flag, simd_flag=baseline.simd, filename=rel
            )
        except PatchError as exc:
            raise BuildError(
                f"cannot make DeepSpeed {format_version(planned.cell.deepspeed)}'s CPU code portable: {exc}",
                hint="this DeepSpeed's op_builder differs from 0.14-0.19; the cpu_arch/simd_width patch needs updating",
            ) from None
        real.write_text(text, encoding="utf-8")
        notes.append(f"patched {rel}: cpu_arch() -> {arch_flag!r}, simd_width() -> {baseline.simd!r}")
    if not notes:
        raise BuildError(f"{src} has no op_builder/builder.py: not a DeepSpeed source tree")
    return notes


def add_isa_variants(src: Path, planned: PlannedCell, compat: Compat) -> list[str]:
    """setup.py builds every op whose builder passes cpu_arch()/simd_width() on once per ISA level from the cell's
    baseline up, and the op's module loads the variant the CPU runs; ds_report says which. Nothing when the
    baseline is the top level."""
    levels = variant_levels(
        compat.cpu_baselines, planned.toolchain.cpu_baseline, compiler=traits(planned.cell.platform).compiler
    )
    if not levels:
        return []
    version = format_version(planned.cell.deepspeed)
    rows = [level.helper_row() for level in levels]
    try:
        helper = patch_isa_levels(Path(isa_variants.__file__).read_text(encoding="utf-8"), rows)
        dispatch = patch_isa_levels(
            Path(isa_dispatch.__file__).read_text(encoding="utf-8"), [(lv.suffix, lv.level) for lv in levels]
        )
        setup_py, report = src / "setup.py", src / "deepspeed" / "env_report.py"
        setup_text = patch_setup_variants(setup_py.read_text(encoding="utf-8"))
        report_text = patch_env_report_variants(report.read_text(encoding="utf-8"))
    except (PatchError, OSError) as exc:
        raise BuildError(
            f"cannot build DeepSpeed {version}'s CPU ops once per ISA level: {exc}",
            hint="this DeepSpeed's setup.py or env_report.py differs from 0.14-0.19.8; the ISA variant patches "
            "(dswheels/building/patches.py) need updating, or set the matrix's cpu_baseline to the top level",
        ) from None
    (src / HELPER).write_text(helper, encoding="utf-8")
    (src / DISPATCH_MODULE).write_text(dispatch, encoding="utf-8")
    setup_py.write_text(setup_text, encoding="utf-8")
    report.write_text(report_text, encoding="utf-8")
    described = ", ".join(f"{lv.suffix} ({lv.level}: {lv.arch_flag or 'no /arch'} {lv.simd_flag})" for lv in levels)
    return [
        f"setup.py: each op whose builder passes cpu_arch()/simd_width() on is built once per ISA level: {described}",
        f"added {DISPATCH_MODULE} (loads the variant torch's CPU capability allows) and {HELPER} (setup.py's)",
        "patched deepspeed/env_report.py: ds_report says which ISA variant loads here",
    ]


def _build_extensions_apart(src: Path, planned: PlannedCell) -> str:
    """setup.py gives each extension its own build directory, so extensions can build in parallel."""
    setup_py = src / "setup.py"
    try:
        setup_py.write_text(patch_parallel_extensions(setup_py.read_text(encoding="utf-8")), encoding="utf-8")
    except (PatchError, OSError) as exc:
        raise BuildError(
            f"cannot prepare DeepSpeed {format_version(planned.cell.deepspeed)}'s setup.py for parallel "
            f"extension builds: {exc}",
            hint="build with --parallel-ops 1",
        ) from None
    return "setup.py: one build directory per extension (parallel extension builds)"


def _pin_torch(src: Path, planned: PlannedCell) -> list[str]:
    """requirements.txt asks for the torch the wheel is built against (the wheel's METADATA is pinned later)."""
    requirements = src / "requirements" / "requirements.txt"
    if not requirements.is_file():
        return []
    pin = torch_pin(planned.cell.torch)
    text, count = patch_torch_requirement(requirements.read_text(encoding="utf-8"), pin)
    requirements.write_text(text, encoding="utf-8")
    return [f"requirements/requirements.txt: torch -> {pin} ({count} line(s))"]


def _drop_debug_flags(src: Path) -> str:
    """``-g`` -> ``-g0`` in the op builders: a wheel without debug info (``--debug-symbols`` keeps it)."""
    changed = 0
    for _rel, real in _files(src, DEBUG_FLAG_FILES):
        text, count = patch_debug_flags(real.read_text(encoding="utf-8"))
        if count:
            real.write_text(text, encoding="utf-8")
            changed += count
    if not changed:
        get_reporter().warning("found no '-g' flag in the op builders to drop: the build keeps debug info")
    return f"compiling without debug info: {changed} '-g' flag(s) -> '-g0'"
