"""DeepSpeed: the release list against PyPI, and what each read sdist says against ops, whitelist and rules."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from dswheels.facts.context import Context
from dswheels.facts.findings import Kind
from dswheels.facts.seen import DeepSpeedRelease, DeepSpeedSourceSeen
from dswheels.facts.yaml_edit import Edit, render_scalar
from dswheels.kernel.compat import Compat
from dswheels.kernel.compat.entries import Rule
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.model import Accelerator
from dswheels.kernel.versions import VersionTuple, format_version, parse_version

__all__ = ["RuleCheck", "boundary_versions", "compare_releases", "compare_sources", "rule_checks"]

PYPI = "PyPI deepspeed JSON"


@dataclass(frozen=True, slots=True)
class RuleCheck:
    """A rule whose claim an sdist can test: ``check: {nvcc_std: {cuda: "13.0", min: 20}}`` in compat.yml."""

    index: int  # its position in compat.yml `rules`
    rule: Rule
    flag: str  # "nvcc_std" | "host_std"
    at: VersionTuple  # the CUDA (nvcc_std) or torch (host_std) version the flag is evaluated for
    minimum: int  # the rule admits exactly the DeepSpeed versions that pass at least -std=c++<minimum>

    def describe(self) -> str:
        what = "nvcc for CUDA" if self.flag == "nvcc_std" else "the host compiler for torch"
        return f"-std=c++{self.minimum} or newer to {what} {format_version(self.at)}"


def rule_checks(compat: Compat, raw: Mapping[str, object]) -> list[RuleCheck]:
    """The rules compat.yml marks checkable against DeepSpeed's sources (their ``check:``)."""
    checks = []
    raw_rules = raw.get("rules")
    for index, rule in enumerate(compat.rules):
        entry = raw_rules[index] if isinstance(raw_rules, list) else None
        check = entry.get("check") if isinstance(entry, dict) else None
        if not isinstance(check, dict):
            continue
        for flag, spec in check.items():
            if flag in ("nvcc_std", "host_std") and isinstance(spec, dict):
                key = "cuda" if flag == "nvcc_std" else "torch"
                checks.append(RuleCheck(index, rule, flag, *_check_spec(spec, key, f"rules[{index}].check.{flag}")))
    return checks


def _check_spec(spec: Mapping[str, object], key: str, where: str) -> tuple[VersionTuple, int]:
    """``{cuda: "13.0", min: 20}``: the version (ASCII digits) and a YAML integer minimum."""
    at, minimum = spec.get(key), spec.get("min", 0)
    try:
        version = parse_version(str(at))
    except ValueError as exc:
        raise ConfigError(f"compat.yml: {where}: {exc}") from None
    if isinstance(minimum, bool) or not isinstance(minimum, int) or not 0 <= minimum < 100:
        raise ConfigError(f"compat.yml: {where}.min: expected a C++ standard such as 17 or 20, got {minimum!r:.40}")
    return version, minimum


def boundary_versions(releases: Sequence[VersionTuple], checks: Iterable[RuleCheck]) -> set[VersionTuple]:
    """The releases on each side of every checked rule's DeepSpeed boundary: the sdists that settle it."""
    wanted: set[VersionTuple] = set()
    ordered = sorted(releases)
    for check in checks:
        admitted = [check.rule.require.deepspeed is None or v in check.rule.require.deepspeed for v in ordered]
        for i in range(1, len(ordered)):
            if admitted[i] != admitted[i - 1]:
                wanted.update((ordered[i - 1], ordered[i]))
    return wanted


def compare_releases(ctx: Context, seen: Sequence[DeepSpeedRelease]) -> list[str]:
    """The release list; returns the new releases that have an sdist (candidates for placing)."""
    known = ctx.compat.deepspeed_releases
    upstream = {r.version: r for r in seen if r.version >= known[0]}
    newest = max(known)
    new = [r for v, r in sorted(upstream.items()) if v not in known]
    appended = [r for r in new if r.version > newest and r.sdist_url]
    for release in new:
        text = format_version(release.version)
        if release in appended:
            ctx.add(
                Kind.NEW,
                "deepspeed.releases",
                f"DeepSpeed {text} is on PyPI (uploaded {release.uploaded}); compat.yml lists up to "
                f"{format_version(newest)}",
                PYPI,
                edits=[Edit("append", ("deepspeed", "releases"), render_scalar(text))],
            )
        else:
            ctx.add(
                Kind.NEW,
                "deepspeed.releases",
                f"DeepSpeed {text} is on PyPI (uploaded {release.uploaded}) and not in compat.yml"
                + ("" if release.sdist_url else " (it has no sdist)"),
                PYPI,
                person="it has no sdist to build from"
                if not release.sdist_url
                else "it is older than the newest listed release: insert it in order by hand",
            )
    for version in known:
        if version not in upstream:
            ctx.add(
                Kind.DISAGREES,
                "deepspeed.releases",
                f"compat.yml lists DeepSpeed {format_version(version)}, which PyPI does not have (or yanked)",
                PYPI,
                person="remove it from deepspeed.releases if the release was withdrawn",
            )
    return [format_version(r.version) for r in appended]


def _compare_ops(ctx: Context, source: DeepSpeedSourceSeen, troubled: set[VersionTuple]) -> None:
    text = format_version(source.version)
    where = f"DeepSpeed {text} sdist (op_builder/)"
    for accelerator, ops in source.ops.items():
        expected = {op.name: op for op in ctx.compat.ops_for(source.version, Accelerator(accelerator))}
        known = {op.name: op for op in ctx.compat.ops if op.accelerator == accelerator}
        for name, var in sorted(ops.items()):
            if name in expected:
                if expected[name].var != var:
                    troubled.add(source.version)
                    ctx.add(
                        Kind.DISAGREES,
                        f"ops.{accelerator}.{name}.var",
                        f"DeepSpeed {text}'s builder reads DS_BUILD_{var}, compat.yml says "
                        f"DS_BUILD_{expected[name].var}",
                        where,
                        edits=[Edit("set", ("ops", accelerator, name, "var"), var)],
                    )
                continue
            troubled.add(source.version)
            if name in known:
                ctx.add(
                    Kind.DISAGREES,
                    f"ops.{accelerator}.{name}.versions",
                    f"DeepSpeed {text} defines {name} for the {accelerator} accelerator; compat.yml's range "
                    f"{known[name].versions} leaves {text} out",
                    where,
                    person="widen `versions` (and check where it ships)",
                )
            else:
                ctx.add(
                    Kind.NEW,
                    f"ops.{accelerator}.{name}",
                    f"DeepSpeed {text} defines a new op {name} (DS_BUILD_{var}) for the {accelerator} accelerator",
                    where,
                    person="add it to compat.yml ops: where it ships, or why it is left out",
                )
        for name in sorted(set(expected) - set(ops)):
            troubled.add(source.version)
            ctx.add(
                Kind.DISAGREES,
                f"ops.{accelerator}.{name}.versions",
                f"compat.yml's range {expected[name].versions} includes DeepSpeed {text}, whose builders do not "
                f"define {name} for the {accelerator} accelerator",
                where,
                person="narrow `versions`",
            )
    for name in sorted(source.not_win32):
        entries = [op for op in ctx.compat.ops if op.name == name and "windows" in op.platforms]
        for op in entries:
            if source.version in op.versions:
                troubled.add(source.version)
                ctx.add(
                    Kind.DISAGREES,
                    f"ops.{op.accelerator}.{name}.platforms",
                    f"DeepSpeed {text}'s {name} builder says is_compatible() is False on win32; compat.yml "
                    "can build it on Windows",
                    where,
                    person="drop windows from `platforms` (and `ship`) and say why in `left_out`",
                )


def _compare_mismatch(ctx: Context, source: DeepSpeedSourceSeen, troubled: set[VersionTuple]) -> None:
    if source.mismatch_ok is None:
        return
    text = format_version(source.version)
    lowest = min(v[0] for v in ctx.compat.cuda)  # CUDA majors dswheels has toolkits for
    for major in sorted({m for m in source.mismatch_ok if m >= lowest}):
        seen = set(source.mismatch_ok[major])
        have = set(ctx.compat.mismatch_ok(source.version, major))
        if seen != have:
            troubled.add(source.version)
            show = ", ".join(format_version(v) for v in sorted(seen))
            ctx.add(
                Kind.DISAGREES,
                "deepspeed.cuda_minor_mismatch_ok",
                f"DeepSpeed {text} whitelists CUDA {major}: {show}; compat.yml's row for it says "
                + (", ".join(format_version(v) for v in sorted(have)) or "nothing"),
                f"DeepSpeed {text} sdist (op_builder/builder.py)",
                person="add or split a row of cuda_minor_mismatch_ok for the versions this applies to",
            )


def _flag(source: DeepSpeedSourceSeen, check: RuleCheck) -> int | None:
    return (source.nvcc_std if check.flag == "nvcc_std" else source.host_std).get(check.at)


def _compare_rules(ctx: Context, sources: Sequence[DeepSpeedSourceSeen], troubled: set[VersionTuple]) -> None:
    for check in rule_checks(ctx.compat, ctx.raw):
        rule, path = check.rule, ("rules", check.index)
        inferred = ctx.inferred(path)
        agree: list[tuple[DeepSpeedSourceSeen, int, bool]] = []
        disagree: list[tuple[DeepSpeedSourceSeen, int, bool]] = []
        sides: set[bool] = set()
        for source in sources:
            std = _flag(source, check)
            if std is None:
                continue
            admitted = rule.require.deepspeed is None or source.version in rule.require.deepspeed
            sides.add(admitted)
            (agree if (std >= check.minimum) == admitted else disagree).append((source, std, admitted))
        entry = f"rules.{rule.id}"
        read = ", ".join(format_version(s.version) for s in sources)
        if disagree:
            troubled.update(s.version for s, _std, _a in disagree)
            details = "; ".join(
                f"DeepSpeed {format_version(s.version)} passes -std=c++{std} yet the rule "
                + ("admits" if admitted else "drops")
                + " it"
                for s, std, admitted in disagree
            )
            ctx.add(
                Kind.REFUTED if inferred else Kind.DISAGREES,
                entry,
                f"the rule says {rule.require.deepspeed} pass {check.describe()}: {details}",
                f"DeepSpeed sdists {read} (op_builder/builder.py)",
                person="fix the rule's `require` range",
            )
        elif sides == {True, False} and inferred:
            ctx.add(
                Kind.CONFIRMED,
                entry,
                f"exactly the DeepSpeed versions the rule admits ({rule.require.deepspeed}) pass {check.describe()}",
                f"DeepSpeed sdists {read} (op_builder/builder.py)",
                edits=ctx.settle(path, f"confirmed by the sdists' CUDAOpBuilder (dswheels facts check {ctx.today})"),
            )


def compare_sources(ctx: Context, sources: Sequence[DeepSpeedSourceSeen]) -> set[VersionTuple]:
    """Every read sdist against compat.yml; returns the versions with a disagreement."""
    troubled: set[VersionTuple] = set()
    for source in sources:
        _compare_ops(ctx, source, troubled)
        _compare_mismatch(ctx, source, troubled)
        if source.notes:
            troubled.add(source.version)
    _compare_rules(ctx, sources, troubled)
    return troubled
