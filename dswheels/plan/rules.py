"""The rules that forbid a cell outright: no torch wheel for it, DeepSpeed too old, ...

Each broken rule is a :class:`~dswheels.kernel.model.Reason` with what would work instead.
:class:`Judge` caches its partial verdicts: a matrix asks the same questions many times.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dswheels.kernel.compat import Compat, describe_versions
from dswheels.kernel.compat.entries import Rule, TorchRelease
from dswheels.kernel.model import Cell, Reason
from dswheels.kernel.platform_traits import traits
from dswheels.kernel.versions import VersionTuple, format_version

__all__ = ["Judge", "check_cell"]


def _fmt_minors(versions: Sequence[VersionTuple], all_minors: Sequence[VersionTuple]) -> str:
    """``2.0-2.4, 2.9``: runs of consecutive known torch minors collapsed."""
    chosen = set(versions)
    runs: list[list[VersionTuple]] = []
    for minor in all_minors:
        if minor in chosen:
            if runs and runs[-1][-1] == _previous(minor, all_minors):
                runs[-1].append(minor)
            else:
                runs.append([minor])
    return ", ".join(
        format_version(r[0]) if len(r) == 1 else f"{format_version(r[0])}-{format_version(r[-1])}" for r in runs
    )


def _previous(minor: VersionTuple, all_minors: Sequence[VersionTuple]) -> VersionTuple | None:
    index = all_minors.index(minor)
    return all_minors[index - 1] if index else None


class Judge:
    """:func:`check_cell` with every partial verdict cached: a matrix repeats the same questions."""

    def __init__(self, compat: Compat) -> None:
        self.compat = compat
        self.releases = frozenset(compat.deepspeed_releases)
        self.newest_release = max(compat.deepspeed_releases)
        self._python: dict[tuple[VersionTuple, VersionTuple, bool, str], Reason | None] = {}
        self._variant: dict[tuple[VersionTuple, str, str], Reason | None] = {}
        self._rules: dict[tuple[VersionTuple, VersionTuple, VersionTuple | None, str], tuple[Reason, ...]] = {}
        # most rules ignore the Python version: judge those once per (ds, torch, variant, os)
        self.python_rules = tuple(r for r in compat.rules if r.when.python or r.require.python)
        self.other_rules = tuple(r for r in compat.rules if r not in self.python_rules)

    def check(self, cell: Cell) -> tuple[Reason, ...]:
        reasons: list[Reason] = []
        os = cell.platform.os
        key = traits(cell.platform).compat_key  # how compat.yml keys what torch publishes for the platform
        # a release newer than compat.yml knows is planned with its open-ended ranges (the follow
        # workflow starts such a build after `dswheels facts check` read its sdist); one between
        # known releases is a typo
        if cell.deepspeed not in self.releases and cell.deepspeed < self.newest_release:
            reasons.append(self._unknown_deepspeed(cell))
        if cell.torch not in self.compat.torch:
            reasons.append(
                Reason(
                    rule="torch-release",
                    message=f"torch {format_version(cell.torch)} is not a known release",
                    fix=f"known: {describe_versions(self.compat.torch_minors)}",
                    source="compat.yml torch",
                ),
            )
            return tuple(reasons)
        if key not in self.compat.torch[cell.torch].python:
            reasons.append(self._no_platform(cell, key))
            return tuple(reasons)
        py_key = (cell.torch, cell.python.version, cell.python.free_threaded, key)
        if py_key not in self._python:
            self._python[py_key] = self._check_python(cell)
        if (reason := self._python[py_key]) is not None:
            reasons.append(reason)
        variant_key = (cell.torch, cell.variant.name, key)
        if variant_key not in self._variant:
            self._variant[variant_key] = self._check_variant(cell)
        if (reason := self._variant[variant_key]) is not None:
            reasons.append(reason)
        rules_key = (cell.deepspeed, cell.torch, cell.variant.cuda, os)
        rules = self._rules.get(rules_key)
        if rules is None:
            rules = self._rules[rules_key] = self._check_rules(cell, self.other_rules)
        reasons.extend(rules)
        if self.python_rules:
            reasons.extend(self._check_rules(cell, self.python_rules))
        return tuple(reasons)

    def _unknown_deepspeed(self, cell: Cell) -> Reason:
        releases = self.compat.deepspeed_releases
        return Reason(
            rule="deepspeed-release",
            message=f"DeepSpeed {format_version(cell.deepspeed)} is not a known release",
            fix=f"known releases: {format_version(releases[0])} to {format_version(releases[-1])}",
            source="compat.yml deepspeed.releases",
        )

    def _no_platform(self, cell: Cell, key: str) -> Reason:
        """torch publishes no wheels of the cell's platform that compat.yml records for this minor."""
        fix = f"use a torch minor with {cell.platform.value} wheels"
        if others := self._minors_with(lambda r: key in r.python):
            fix += f": {others}"
        why, source = self.compat.platform_scope.get(key, ("", "compat.yml torch"))
        return Reason(
            rule="torch-platform",
            message=f"compat.yml records no {cell.platform.value} wheels of torch {format_version(cell.torch)}"
            + (f": {why}" if why else ""),
            fix=fix,
            source=source,
        )

    def _check_python(self, cell: Cell) -> Reason | None:
        key = traits(cell.platform).compat_key
        release = self.compat.torch[cell.torch]
        if cell.python in release.python[key]:
            return None
        fix = f"torch {format_version(cell.torch)} on {cell.platform.value} has Python " + ", ".join(
            str(p) for p in release.python[key]
        )
        if others := self._minors_with(lambda r: cell.python in r.python.get(key, ())):
            fix += f"; Python {cell.python} wheels exist for torch {others}"
        return Reason(
            rule="torch-python",
            message=f"torch {format_version(cell.torch)} has no Python {cell.python} wheel for {cell.platform.value}",
            fix=fix,
            # a platform recorded in its own section names its own source (pypi-torch-aarch64)
            source=f"{release.sources_on.get(key, 'pypi-torch')} (wheel tags per platform)",
        )

    def _check_variant(self, cell: Cell) -> Reason | None:
        key = traits(cell.platform).compat_key
        release = self.compat.torch[cell.torch]
        variants = release.variants_for(key)
        if cell.variant in variants:
            return None
        fix = f"torch {format_version(cell.torch)} on {cell.platform.value} has " + ", ".join(v.name for v in variants)
        if others := self._minors_with(lambda r: key in r.variants and cell.variant in r.variants_for(key)):
            fix += f"; {cell.variant.name} exists for torch {others}"
        inferred = " (inferred)" if release.inferred_for(key) else ""
        return Reason(
            rule="torch-variant",
            message=f"torch {format_version(cell.torch)} has no {cell.variant.name} build for "
            f"{cell.platform.value}{inferred}",
            fix=fix,
            source=release.source_on(key),
        )

    def _minors_with(self, has: Callable[[TorchRelease], bool]) -> str:
        """The torch minors whose release ``has`` what a cell asked for, runs collapsed ("" when none)."""
        minors = self.compat.torch_minors
        return _fmt_minors([m for m in minors if has(self.compat.torch[m])], minors)

    @staticmethod
    def _check_rules(cell: Cell, rules: tuple[Rule, ...]) -> tuple[Reason, ...]:
        reasons = []
        for rule in rules:
            if rule.when.matches(cell) and not rule.require.matches(cell):
                mark = " (inferred)" if rule.inferred else ""
                reasons.append(Reason(rule=rule.id, message=rule.why + mark, fix=rule.fix, source=rule.source))
        return tuple(reasons)


def check_cell(cell: Cell, compat: Compat) -> tuple[Reason, ...]:
    """Every rule the cell breaks (empty: the rules allow it)."""
    return Judge(compat).check(cell)
