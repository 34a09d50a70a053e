"""``dswheels doctor``: check this machine for DeepSpeed, and say what to fix."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dswheels import __version__
from dswheels.commands.common import Subparsers, formatter
from dswheels.core.compat import load_compat
from dswheels.core.doctor import IndexView, Report, Status, diagnose
from dswheels.core.doctor.facts import Facts
from dswheels.core.doctor.facts_json import FactsError, facts_from_data
from dswheels.core.doctor.render import render_json, render_text
from dswheels.core.jsondoc import parse_json
from dswheels.core.versions import VersionTuple, parse_version
from dswheels.effects.files import MAX_INPUT_BYTES, read_bounded
from dswheels.effects.index_read import read_index, read_manifest
from dswheels.effects.probe import collect, current_environment
from dswheels.errors import ConfigError, DswheelsError
from dswheels.log import TerminalReporter, get_reporter, reset_reporter, set_reporter

__all__ = ["add_target_arguments", "index_view", "register", "run"]

DESCRIPTION = """\
Inspect the environment that will use DeepSpeed and report each check as OK, WARN or FAIL,
with a concrete fix: OS and architecture; Python; torch, its CUDA, the GPUs and their compute
capability; the CUDA toolkits (CUDA_HOME, CUDA_PATH and CUDA_PATH_V*, nvcc on PATH, the
standard install locations) with each nvcc's version and the cuBLAS/cuSPARSE/cuSOLVER/cuRAND
dev files; on Windows, Visual Studio / Build Tools and their MSVC toolsets (vswhere) and
whether long paths are enabled; ninja; DeepSpeed and which of its ops are prebuilt; on Linux,
the glibc and the libstdc++ the environment loads against what the published wheels need
(compat.yml linux_runtime_floor, or with --index the picked wheel's build manifest).

Then the verdict: the cell this environment is (e.g. ds0.19.8-torch2.9-cu128-cp312-win_amd64),
whether --index publishes its wheel (and the nearest cells if not), and whether a local build
would work -- decided by the same rules as `dswheels plan` -- with what blocks it or what to
set. Ends with where to set CUDA_HOME for this kind of environment (system, venv or conda).

The environment is the Python that will use DeepSpeed: this interpreter, or --python.
Exit code 0 when nothing FAILs, 9 otherwise (the report is printed either way).

examples:
  dswheels doctor
  dswheels doctor --python .venv/bin/python --index https://example.org/dswheels
  dswheels doctor --json > doctor.json          # attach this to a bug report
  dswheels doctor --facts doctor.json           # judge someone else's machine again"""


def add_target_arguments(p: argparse.ArgumentParser) -> None:
    """--python, --index and --deepspeed: shared with `dswheels install`."""
    p.add_argument(
        "--python",
        metavar="PATH",
        help="interpreter of the environment to inspect (default: the one running dswheels)",
    )
    p.add_argument(
        "--index",
        metavar="URL",
        help="published index: its base URL or directory, as in docs/index-layout.md (default: $DSWHEELS_INDEX)",
    )
    p.add_argument(
        "--deepspeed",
        metavar="X.Y.Z",
        help="DeepSpeed version to judge (default: the newest published for this environment, "
        "else the installed one, else the newest the rules allow)",
    )


def register(sub: Subparsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "doctor",
        help="check this machine (torch, CUDA, GPU, compilers) and say which wheel fits",
        description=DESCRIPTION,
        formatter_class=formatter,
    )
    add_target_arguments(p)
    p.add_argument("--json", action="store_true", help="print the report and the collected facts as JSON")
    p.add_argument(
        "--facts",
        type=Path,
        metavar="FILE",
        help="judge facts saved by `dswheels doctor --json` instead of probing this machine",
    )
    p.set_defaults(func=run)


def parse_deepspeed(text: str | None) -> VersionTuple | None:
    if text is None:
        return None
    try:
        version = parse_version(text)
    except ValueError as exc:
        raise ConfigError(f"--deepspeed: {exc}") from None
    if len(version) != 3:
        raise ConfigError(f"--deepspeed: give X.Y.Z (e.g. '0.19.8'), not {text!r}")
    return version


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


def examine(args: argparse.Namespace) -> tuple[Facts, Report]:
    """Collect (or load) the facts, read the index, and diagnose."""
    compat = load_compat()
    deepspeed = parse_deepspeed(args.deepspeed)
    reporter = get_reporter()
    env = current_environment()
    index = args.index or env.get("DSWHEELS_INDEX")
    if getattr(args, "facts", None):
        facts = _load_facts(args.facts)
    else:
        with reporter.group("probe the environment"):
            facts = collect(args.python, env)
    view = None
    if index:
        with reporter.group(f"read the index {index}"):
            view = index_view(index)
    report = diagnose(facts, compat, deepspeed=deepspeed, index=view)
    wheel = report.verdict.wheel
    if wheel is not None and facts.linux_runtime is not None:
        # judge the picked wheel's own glibc/libstdc++ need (its build manifest), not only the promise
        with reporter.group(f"read the build manifest of {wheel.filename}"):
            published = read_manifest(wheel)
        report = diagnose(facts, compat, deepspeed=deepspeed, index=view, published=published)
    return facts, report


def run(args: argparse.Namespace) -> int:
    if args.json:
        # progress would break the JSON on stdout: send it to stderr
        token = set_reporter(TerminalReporter(stream=sys.stderr))
        try:
            facts, report = examine(args)
        finally:
            reset_reporter(token)
        sys.stdout.write(render_json(report, facts, version=__version__))
    else:
        facts, report = examine(args)
        sys.stdout.write(render_text(report))
    return 9 if report.worst is Status.FAIL else 0
