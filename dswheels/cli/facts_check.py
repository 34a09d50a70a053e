"""``dswheels facts check``: compat.yml against the sources it was written from (``--write`` fixes it).

``dswheels facts builds``, ``dswheels facts dispatch`` and ``dswheels facts issue`` are the follow
workflow's steps (.github/workflows/follow.yml): wheel builds started for what became buildable,
and one drift issue kept up to date. They live in :mod:`dswheels.cli.facts_follow`.
"""

from __future__ import annotations

import argparse
import json

from dswheels.cli.command import Command
from dswheels.cli.flags import Flag, Flags, Nested, PathUse, fill
from dswheels.cli.shared import REPORT
from dswheels.facts.effects.fetch_sources import SOURCES, WORKFLOW, UpstreamOptions
from dswheels.facts.findings import render_json, render_markdown, render_text
from dswheels.facts.step import FactsCheckOptions, check_compat
from dswheels.host.cache import CacheLayout
from dswheels.host.files import write_text_atomic
from dswheels.host.log import get_reporter
from dswheels.kernel.errors import SourceError
from dswheels.kernel.numbers import is_ascii_digits
from dswheels.kernel.result import Done
from dswheels.kernel.urls import redact_text

__all__ = ["COMMAND"]

HELP = "report where compat.yml drifted from its sources"

DESCRIPTION = """\
Read the sources compat.yml's facts come from and report, entry by entry, where compat.yml
disagrees, which `inferred` entries the sources confirm or refute, and what is new upstream:

  pypi-deepspeed    PyPI's JSON API: DeepSpeed releases and their sdists
  pypi-torch        PyPI's JSON API: torch releases, Requires-Python, wheels per platform, and
                    the CUDA toolkit each minor's newest patch pins (its METADATA)
  pypi-cuda-toolkit PyPI's JSON API: the CUDA toolkit releases NVIDIA published (each install
                    pin against the newest patch of its minor; pre-releases flagged)
  torch-index       PyTorch's per-variant indexes: which variants and Pythons exist per minor
  cuda-action       the CUDA versions the CUDA-install action pinned in the wheels workflow
                    can install, per OS (its version tables at the pinned commit)
  deepspeed-sdists  DeepSpeed's own sdists: the ops its builders define, cuda_minor_mismatch_ok,
                    the C++ standard passed to nvcc and the host compiler, ops not for win32
  runner-images     GitHub's announcements of runner images' retirement (actions/runner-images
                    issues labelled Announcement): each recorded image's end dates

--write turns the findings into an edit of compat.yml (every source note kept), printed as a
diff first. Every source is read on its own: one that cannot be reached is named, its facts
reported unchecked, the others checked and the report (--json, --markdown) written; the run
then exits 4 and compat.yml is not written. --skip NAME checks (and writes) without a source.

examples:
  dswheels facts check                                  # report only
  dswheels facts check --write                          # ... and fix dswheels/compat.yml
  dswheels facts check --skip torch-index --diff        # what would change, without that source
  dswheels facts check --json report.json --markdown report.md   # what the follow workflow reads"""


def _count(text: str) -> int | None:
    if text == "all":
        return None
    if is_ascii_digits(text) and len(text) <= 9 and int(text) > 0:
        return int(text)
    raise argparse.ArgumentTypeError(f"expected a positive number or 'all', got {text!r}")


FLAGS: Flags = (
    Flag(
        "--compat",
        to="compat",
        metavar="PATH",
        path=PathUse.READS,
        help="the facts file (default: the package's)",
    ),
    Flag("--write", action="store_true", help="print the diff, then write it to the facts file"),
    Flag("--diff", action="store_true", help="print the diff --write would make"),
    Flag(
        "--json",
        metavar="PATH",
        path=PathUse.WRITES,
        help="write the report as JSON (dswheels.facts-report/1)",
    ),
    Flag(
        "--markdown",
        metavar="PATH",
        path=PathUse.WRITES,
        help="write the report as Markdown (the drift issue)",
    ),
    Nested(
        "upstream",
        UpstreamOptions,
        Flag(
            "--skip",
            to="skip",
            parse=frozenset,
            action="append",
            choices=SOURCES,
            metavar="SOURCE",
            help="leave a source out",
        ),
        # each source's location may come from a repository variable (mirrors; the chain test's loopback hosts)
        Flag(
            "--pypi",
            to="pypi",
            env="DSWHEELS_FACTS_PYPI",
            default=UpstreamOptions.pypi,
            metavar="URL",
            help="PyPI JSON API, with {project}",
        ),
        Flag(
            "--torch-index",
            to="torch_index",
            env="DSWHEELS_FACTS_TORCH_INDEX",
            default=UpstreamOptions.torch_index,
            metavar="URL",
            help="PyTorch's per-variant index pages, with {variant}",
        ),
        Flag(
            "--action-links",
            to="action_links",
            env="DSWHEELS_FACTS_ACTION_LINKS",
            default=UpstreamOptions.action_links,
            metavar="URL",
            help="the CUDA-install action's links files, with {action}, {commit} and {os}",
        ),
        Flag(
            "--runner-images",
            to="runner_images",
            env="DSWHEELS_FACTS_RUNNER_IMAGES",
            default=UpstreamOptions.runner_images,
            metavar="URL",
            help="GitHub's issues of actions/runner-images labelled Announcement (the runner images' retirements)",
        ),
        Flag(
            "--workflow",
            to="workflow",
            metavar="PATH",
            path=PathUse.READS,
            help=f"the workflow that installs CUDA (default: {WORKFLOW} of the repository, looked up from the "
            "facts file's directory, else from the working directory)",
        ),
        Flag(
            "--torch-minors",
            to="torch_minors",
            type=_count,
            default=3,
            metavar="N|all",
            help="newest torch minors to check",
        ),
        Flag("--sdists", to="sdists", type=_count, default=2, metavar="N|all", help="newest DeepSpeed sdists to read"),
    ),
    REPORT,
)


def _options(args: argparse.Namespace) -> FactsCheckOptions:
    return FactsCheckOptions(**fill(args, FLAGS))


def _run(options: FactsCheckOptions, args: argparse.Namespace) -> Done:
    checked = check_compat(options, CacheLayout.here())
    report, diff, path = checked.report, checked.diff, checked.path
    text = render_text(report)
    shown = get_reporter()
    shown.emit(text)
    shown.summary(f"### Facts check\n\n```\n{text}```")
    # reports are shown (an issue, a summary): no URL's credentials in them
    if args.json:
        write_text_atomic(args.json, redact_text(render_json(report, diff=diff)))
    if args.markdown:
        write_text_atomic(args.markdown, redact_text(render_markdown(report, diff=diff)))
    if (args.diff or args.write) and diff:
        shown.emit("\n" + diff)
    failed = ", ".join(report.unreachable)
    if args.write and report.unreachable:
        shown.emit(f"\nnot written: {failed} could not be read\n")
    elif args.write and diff:
        write_text_atomic(path, report.after)
        shown.emit(f"\nwrote {path}\n")
    elif args.write:
        shown.emit("\nnothing to write: no finding changes compat.yml\n")
    # the report's data: the facts check's own JSON report (--json), whole
    data = {"facts_report": json.loads(render_json(report, diff=diff))}
    if report.unreachable:
        failure = SourceError(
            f"could not read {len(report.unreachable)} of the sources: "
            + "; ".join(f"{name}: {why}" for name, why in report.unreachable.items()),
            hint="the report above (and --json/--markdown) holds what the other sources say; run again when "
            f"they can be reached, or leave them out with {' '.join(f'--skip {n}' for n in report.unreachable)}",
        )
        return Done(data=data, error=failure)
    return Done(data=data)


COMMAND = Command("check", HELP, DESCRIPTION, FLAGS, _options, _run)
