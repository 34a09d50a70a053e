"""The doctor step (``dswheels doctor``): the facts of the environment that will use DeepSpeed
(probed, or loaded from a saved report), the index read, and the diagnosis."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dswheels.doctor import IndexView, Report, diagnose
from dswheels.doctor.effects.collect_facts import collect, current_environment
from dswheels.doctor.machine_facts import Facts
from dswheels.doctor.machine_facts_json import FactsError, facts_from_data
from dswheels.host.files import MAX_INPUT_BYTES, read_bounded
from dswheels.host.log import get_reporter
from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import ConfigError, DswheelsError
from dswheels.kernel.jsondoc import parse_json
from dswheels.kernel.versions import VersionTuple
from dswheels.stores.served_index import read_index, read_manifest

__all__ = ["DoctorOptions", "Examination", "examine", "index_view"]


@dataclass(frozen=True, kw_only=True, slots=True)
class DoctorOptions:
    python: str | None = None  # the interpreter of the environment (None: the one running dswheels)
    index: str | None = None  # the published index: base URL or directory
    deepspeed: VersionTuple | None = None  # the DeepSpeed release to judge
    facts_file: Path | None = None  # judge facts saved by `dswheels doctor --json` instead of probing


@dataclass(frozen=True, kw_only=True, slots=True)
class Examination:
    facts: Facts
    report: Report


def index_view(index: str | None) -> IndexView | None:
    """Read the index, keeping a failure as part of the view (doctor reports it as a check)."""
    if not index:
        return None
    try:
        _page, files = read_index(index)
    except DswheelsError as exc:
        return IndexView(url=index, error=exc.message)
    return IndexView(url=index, files=files)


def _load_facts(path: Path) -> Facts:
    try:
        data = parse_json(read_bounded(path, limit=MAX_INPUT_BYTES), what=str(path))
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise ConfigError(str(exc), hint="pass the output of `dswheels doctor --json`") from None
    if isinstance(data, dict) and "facts" in data:
        data = data["facts"]
    try:
        return facts_from_data(data)
    except FactsError as exc:
        raise ConfigError(f"{path}: {exc}", hint="pass the output of `dswheels doctor --json`") from None


def examine(options: DoctorOptions) -> Examination:
    """Collect (or load) the facts, read the index, and diagnose."""
    compat = load_compat()
    reporter = get_reporter()
    if options.facts_file is not None:
        facts = _load_facts(options.facts_file)
    else:
        with reporter.group("probe the environment"):
            facts = collect(options.python, current_environment())
    view = None
    if options.index:
        with reporter.group(f"read the index {options.index}"):
            view = index_view(options.index)
    report = diagnose(facts, compat, deepspeed=options.deepspeed, index=view)
    wheel = report.verdict.wheel
    if wheel is not None and facts.linux_runtime is not None:
        # judge the picked wheel's own glibc/libstdc++ need (its build manifest), not only the promise
        with reporter.group(f"read the build manifest of {wheel.filename}"):
            published = read_manifest(wheel)
        report = diagnose(facts, compat, deepspeed=options.deepspeed, index=view, published=published)
    return Examination(facts=facts, report=report)
