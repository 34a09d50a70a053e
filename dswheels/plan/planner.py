"""Turn a matrix (or one named combo) into planned cells, each with its resolved toolchain.

Judging is split in two: :func:`check_cell` applies the rules that forbid a cell outright
(no torch wheel, DeepSpeed too old, ...), :func:`resolve_cell` then picks the toolchain
(runner image, compiler, nvcc, arch list, ops, workaround flags) and may still drop the
cell when no toolchain can build it. Both give reasons a person can act on. They live in
:mod:`dswheels.plan.rules` and :mod:`dswheels.plan.toolchain`; this module selects the
cells (the matrix, a combination, ``--only``) and puts the two together.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from dswheels.kernel.compat import Compat
from dswheels.kernel.compiler_flags.record import FlagRecord
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.model import (
    Cell,
    DroppedCell,
    Plan,
    PlannedCell,
    Platform,
    Python,
    Reason,
    Source,
    SourceKind,
    Variant,
    parse_platform,
    suggest,
)
from dswheels.kernel.naming import cell_id
from dswheels.kernel.sources import torch_index_url
from dswheels.kernel.versions import TorchMinor, VersionTuple, format_version, parse_torch_minor, parse_version
from dswheels.plan.matrix.spec import MatrixSpec
from dswheels.plan.rules import Judge, check_cell
from dswheels.plan.toolchain import LocalHost, Resolver

__all__ = ["Combo", "LocalHost", "check_cell", "combo_from_values", "plan", "resolve_cell", "select_cells"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Combo:
    """Axis values named on the command line (``--deepspeed`` ...); None = the matrix's axis."""

    deepspeed: VersionTuple | None = None
    torch: TorchMinor | None = None
    variant: Variant | None = None
    python: Python | None = None
    platform: Platform | None = None

    def _values(self) -> tuple[object, ...]:
        return (self.deepspeed, self.torch, self.variant, self.python, self.platform)

    @property
    def given(self) -> bool:
        return any(v is not None for v in self._values())

    @property
    def complete(self) -> bool:
        """All five axes named: one exact cell."""
        return all(v is not None for v in self._values())

    def matches(self, cell: Cell) -> bool:
        return all(
            want is None or want == have
            for want, have in zip(
                self._values(),
                (cell.deepspeed, cell.torch, cell.variant, cell.python, cell.platform),
                strict=True,
            )
        )


def resolve_cell(
    cell: Cell, compat: Compat, spec: MatrixSpec, *, host: LocalHost | None = None, redist_required: bool = False
) -> PlannedCell | DroppedCell:
    """Plan one cell, or say why the rules forbid it (see :func:`check_cell`); ``redist_required`` as :func:`plan`."""
    return _plan_cells([cell], compat, spec, Resolver(compat, spec, host, redist_required=redist_required))[0]


def _plan_cells(
    cells: Sequence[Cell], compat: Compat, spec: MatrixSpec, resolver: Resolver
) -> list[PlannedCell | DroppedCell]:
    results: list[PlannedCell | DroppedCell] = []
    judge = Judge(compat)
    sources: dict[tuple[VersionTuple, str], Source] = {}
    for cell in cells:
        reasons = judge.check(cell)
        if reasons:
            results.append(DroppedCell(cell=cell, reasons=reasons))
            continue
        resolved = resolver.toolchain(cell)
        if isinstance(resolved, Reason):
            results.append(DroppedCell(cell=cell, reasons=(resolved,)))
            continue
        toolchain, ops = resolved
        release = compat.torch[cell.torch]
        results.append(
            PlannedCell(
                cell=cell,
                torch_version=release.latest,
                torch_index=torch_index_url(spec.torch_index, cell.variant.name),
                toolchain=toolchain,
                ops=ops,
                source=sources.get((cell.deepspeed, cell.platform.os))
                or sources.setdefault((cell.deepspeed, cell.platform.os), _source(cell, spec)),
                smoke_runs_on=runners.smoke if (runners := spec.runners.get(cell.platform)) else (),
            ),
        )
    return results


def _source(cell: Cell, spec: MatrixSpec) -> Source:
    """PyPI's sdist on every platform, unless the matrix names another (pinned) archive."""
    override = spec.sources.get((cell.deepspeed, cell.platform.os))
    if override and override.url:
        return Source(kind=SourceKind.ARCHIVE, url=override.url, sha256=override.sha256)
    return Source(kind=SourceKind.SDIST, url="", sha256=override.sha256 if override else "")


# --- selection -----------------------------------------------------------------------------------


def _combo_cells(spec: MatrixSpec, combo: Combo) -> list[Cell]:
    """The cells a combination names.

    All five axes given: exactly that cell, whatever the matrix lists or excludes (the rules
    still apply). Some axes given: the matrix with those axes replaced and only the
    ``include`` cells that agree with the flags, expanded by the one expansion
    (:meth:`MatrixSpec.axis_cells`): so ``--deepspeed X`` plans exactly the cells of the
    whole matrix that have DeepSpeed X (when X is one of its versions).
    """
    ds, torch, variant, py, pl = combo.deepspeed, combo.torch, combo.variant, combo.python, combo.platform
    if ds is not None and torch is not None and variant is not None and py is not None and pl is not None:
        return [Cell(deepspeed=ds, torch=torch, variant=variant, python=py, platform=pl)]
    torch_axis: list[tuple[TorchMinor, tuple[Variant, ...]]]
    if combo.torch is not None:
        listed = dict(spec.torch).get(combo.torch) or tuple(sorted({v for _t, vs in spec.torch for v in vs}))
        torch_axis = [(combo.torch, (combo.variant,) if combo.variant else listed)]
    elif combo.variant is not None:
        torch_axis = [(t, (combo.variant,)) for t, _vs in spec.torch]
    else:
        torch_axis = list(spec.torch)
    narrowed = dataclasses.replace(
        spec,
        deepspeed=(combo.deepspeed,) if combo.deepspeed else spec.deepspeed,
        torch=tuple(torch_axis),
        python=(combo.python,) if combo.python else spec.python,
        platforms=(combo.platform,) if combo.platform else spec.platforms,
        include=tuple(c for c in spec.include if combo.matches(c)),
    )
    return narrowed.axis_cells()


def select_cells(cells: Sequence[Cell], patterns: Sequence[str], *, what: str = "the matrix") -> list[Cell]:
    """The cells whose id matches one of ``patterns`` (fnmatch); a pattern that matches none is an error."""
    ids = [cell_id(c) for c in cells]
    chosen: set[int] = set()
    problems: list[str] = []
    for pattern in patterns:
        hits = [i for i, cid in enumerate(ids) if fnmatch.fnmatchcase(cid, pattern)]
        if not hits:
            problems.append(f"--only {pattern!r} matches no cell of {what}{suggest(pattern, ids)}")
        chosen.update(hits)
    if problems:
        raise ConfigError(
            "the selection matches nothing"
            if len(problems) == len(patterns)
            else "part of the selection matches nothing",
            details="\n".join(problems),
            hint="list the matrix's cells with `dswheels plan`; to plan a cell the matrix does not list, "
            "name it with --deepspeed/--torch/--cuda/--python/--platform",
        )
    return [cells[i] for i in sorted(chosen)]


def _explain_nothing(dropped: Sequence[DroppedCell], what: str) -> ConfigError:
    lines = []
    for item in dropped[:20]:
        lines.append(f"{cell_id(item.cell)}:")
        for reason in item.reasons:
            lines.append(f"  - [{reason.rule}] {reason.message}")
            if reason.fix:
                lines.append(f"    what would work: {reason.fix}")
    if len(dropped) > 20:
        lines.append(f"... and {len(dropped) - 20} more (dswheels plan --explain)")
    return ConfigError(f"{what}: the rules forbid every cell it names", details="\n".join(lines))


def plan(
    spec: MatrixSpec,
    compat: Compat,
    *,
    only: Sequence[str] = (),
    combo: Combo | None = None,
    host: LocalHost | None = None,
    nvcc: VersionTuple | None = None,
    flag_record: FlagRecord | None = None,
    redist_required: bool = False,
) -> Plan:
    """Expand the matrix (or the named combo), apply the rules and resolve every cell.

    ``redist_required``: the plan of jobs that install CUDA from NVIDIA's archives (``dswheels ci
    plan``): a cell whose toolkit has no pinned redistrib JSON is dropped, not only noted.
    """
    combo = combo or Combo()
    if combo.given:
        cells = _combo_cells(spec, combo)
        mode = "combo"
        if not cells:
            raise ConfigError(
                f"the exclude patterns of {spec.filename} remove every cell of this combination",
                hint="name all five axes (--deepspeed --torch --cuda --python --platform) to plan one exact "
                "cell regardless of the matrix",
            )
    else:
        cells = spec.axis_cells()
        mode = "matrix"
    if only:
        cells = select_cells(cells, only)
    resolver = Resolver(compat, spec, host, nvcc, flag_record, redist_required=redist_required)
    results = _plan_cells(cells, compat, spec, resolver)
    planned = tuple(r for r in results if isinstance(r, PlannedCell))
    dropped = tuple(r for r in results if isinstance(r, DroppedCell))
    if not planned and (combo.given or only):
        raise _explain_nothing(dropped, "the combination" if combo.given else "the selection")
    if not planned:
        raise ConfigError(
            f"{spec.filename}: every cell of the matrix is forbidden by the rules",
            details="\n".join(f"{cell_id(d.cell)}: {d.reasons[0].message}" for d in dropped[:20]),
            hint="run `dswheels plan --explain` for every reason",
        )
    notes = [] if combo.complete else [f"resolved {spec.filename}: {line}" for line in spec.resolved]
    newest = max(compat.deepspeed_releases)
    notes += [
        f"note: DeepSpeed {format_version(v)} is newer than compat.yml's newest known release "
        f"{format_version(newest)}: planned with compat.yml's open-ended ranges (`dswheels facts check` "
        "reads its sdist and says whether they place it)"
        for v in sorted({c.cell.deepspeed for c in planned if c.cell.deepspeed > newest})
    ]
    return Plan(planned=planned, dropped=dropped, matrix=spec.filename, mode=mode, notes=tuple(notes))


def combo_from_values(values: Mapping[str, str | None]) -> Combo:
    """Parse the command-line axis values; one ConfigError names every bad flag."""
    problems: list[str] = []

    def parse(key: str, fn: Callable[[str], T]) -> T | None:
        text = values.get(key)
        if text is None:
            return None
        try:
            return fn(text)
        except ValueError as exc:
            problems.append(f"--{key}: {exc}")
            return None

    ds = parse("deepspeed", parse_version)
    torch = parse("torch", parse_torch_minor)
    variant = parse("cuda", Variant.parse)
    py = parse("python", Python.parse)
    platform = parse("platform", parse_platform)
    if ds is not None and len(ds) != 3:
        problems.append(f"--deepspeed: give X.Y.Z (e.g. '0.19.8'), not {values['deepspeed']!r}")
    if problems:
        raise ConfigError("bad combination flags", details="\n".join(problems))
    return Combo(deepspeed=ds, torch=torch, variant=variant, python=py, platform=platform)
