"""Run a workflow locally: ``python -m tests.gha dryrun`` (what ``nox -s dryrun`` does) or ``run``.

examples:
  python -m tests.gha dryrun                          # the wheels.yml chain for one Linux cell
  python -m tests.gha follow                          # follow.yml: facts check, drift issue, builds
  python -m tests.gha run --event workflow_dispatch --input deepspeed=0.19.8 --input torch=2.13 \\
      --input cuda=cpu --input python=3.11 --input platform=linux_x86_64 \\
      --var DSWHEELS_TORCH_INDEX=pip --var DSWHEELS_MATRIX=tests/data/dryrun-matrix.yml
  python -m tests.gha run --event push --ref refs/tags/v0.19.8 --var DSWHEELS_PUBLISH_DIR=/tmp/pub
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from tests.gha.dryrun import ROOT, dry_run
from tests.gha.expressions import ExpressionError
from tests.gha.follow_dryrun import follow_dry_run
from tests.gha.model import Trigger, WorkflowError
from tests.gha.runner import RunOptions, run_workflow


def _pairs(values: list[str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        name, sep, text = value.partition("=")
        if not sep:
            raise SystemExit(f"--{what} {value!r}: expected NAME=VALUE")
        out[name] = text
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.gha",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    dry = sub.add_parser("dryrun", help="plan -> build -> verify -> publish(dir) -> index for one Linux cell")
    dry.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "dswheels-dryrun", help="run directory")
    follow = sub.add_parser("follow", help="follow.yml: sources and GitHub on loopback, three runs")
    follow.add_argument(
        "--out", type=Path, default=Path(tempfile.gettempdir()) / "dswheels-follow", help="run directory"
    )
    follow.add_argument(
        "--cache", type=Path, default=Path(tempfile.gettempdir()) / "dswheels-follow-cache", help="keeps the sdists"
    )
    run = sub.add_parser("run", help="run a workflow for one event")
    run.add_argument("--workflow", type=Path, default=ROOT / ".github" / "workflows" / "wheels.yml")
    run.add_argument("--event", choices=("push", "workflow_dispatch", "schedule"), required=True)
    run.add_argument("--ref", default="refs/heads/main", help="refs/tags/v0.19.8 for a tag push")
    run.add_argument("--input", action="append", default=[], metavar="NAME=VALUE", help="workflow_dispatch input")
    run.add_argument("--var", action="append", default=[], metavar="NAME=VALUE", help="repository variable")
    run.add_argument("--repository", default="dswheels/dswheels", metavar="OWNER/NAME")
    run.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "dswheels-gha", help="run directory")
    args = parser.parse_args(argv)
    try:
        if args.command == "dryrun":
            result = dry_run(args.out)
            print(f"\ndry run: {'ok' if result.ok else 'FAILED'} in {result.seconds:.0f}s ({args.out})")
            for problem in result.problems:
                print(f"  - {problem}")
            return 0 if result.ok else 1
        if args.command == "follow":
            followed = follow_dry_run(args.out, cache=args.cache)
            print(f"\nfollow dry run: {'ok' if followed.ok else 'FAILED'} in {followed.seconds:.0f}s ({args.out})")
            for problem in followed.problems:
                print(f"  - {problem}")
            return 0 if followed.ok else 1
        report = run_workflow(
            RunOptions(
                workflow=args.workflow,
                repo=ROOT,
                out=args.out,
                trigger=Trigger(event=args.event, ref=args.ref, inputs=_pairs(args.input, "input")),
                vars=_pairs(args.var, "var"),
                repository=args.repository,
            )
        )
    except (WorkflowError, ExpressionError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("\n" + report.table())
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
