"""The local dry run of .github/workflows/follow.yml: check the facts -> drift issue -> start builds.

Runs the real workflow file (tests/gha/runner.py) on a copy of this working tree whose
compat.yml does not know DeepSpeed 0.19.8 yet (a planted fact), with every source served
from loopback (tests/support/upstream.py: the recordings and real sdists) through the
repository variable DSWHEELS_FACTS_SOURCES, and GitHub's API answered by a loopback fake
(tests/support/github_follow_fake.py):

1. a scheduled run: the check reports the new release (its sdist read: the facts place it)
   and the rest of today's drift; ONE issue is opened with the proposed diff; wheels.yml is
   dispatched for 0.19.8 (new) and 0.19.7 (the matrix's newest known release, nothing published);
2. a dispatched run the same day: the issue is kept (no second one), and no build is started
   again while the first ones are queued;
3. with DSWHEELS_FOLLOW=off every job is skipped.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.gha.model import Trigger
from tests.gha.runner import RunOptions, RunReport, run_workflow
from tests.support.github_follow_fake import Dispatch, FollowGitHub
from tests.support.upstream import UpstreamServer, assemble, urls

__all__ = ["FollowDryRun", "follow_dry_run"]

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = Path(".github") / "workflows" / "follow.yml"
REPOSITORY = "dswheels/dswheels"
TOKEN = "dry-run-token"  # noqa: S105 - what the fake GitHub accepts, not a secret


@dataclass(frozen=True, kw_only=True)
class FollowDryRun:
    runs: tuple[RunReport, ...]
    issues: tuple[dict[str, object], ...]
    dispatches: tuple[Dispatch, ...]
    seconds: float
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def _planted_copy(repo: Path, dest: Path) -> Path:
    """This working tree (uncommitted changes included) as a git repository, compat.yml without 0.19.8."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = repo / name
        if source.is_file() and not name.startswith(".nox/"):
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    compat = dest / "dswheels" / "compat.yml"
    text = compat.read_text(encoding="utf-8")
    planted = text.replace('"0.19.7", "0.19.8",\n', '"0.19.7",\n', 1)
    if planted == text:
        msg = "the planted fact (0.19.8 unknown) could not be made: deepspeed.releases changed shape"
        raise RuntimeError(msg)
    compat.write_text(planted, encoding="utf-8")
    git = ["git", "-c", "user.name=dry run", "-c", "user.email=dry-run@localhost"]
    subprocess.run([*git, "init", "-q"], cwd=dest, check=True)
    subprocess.run([*git, "add", "-A"], cwd=dest, check=True)
    subprocess.run([*git, "commit", "-qm", "dry run"], cwd=dest, check=True)
    return dest


def _check(runs: list[RunReport], gh: FollowGitHub) -> list[str]:
    problems: list[str] = []
    first, second, off = runs
    expected = {"check": "success", "issue": "success", "build": "success"}
    for name, run in (("scheduled run", first), ("dispatched run", second)):
        if run.results != expected:
            problems.append(f"{name}: jobs ended {run.results}, expected {expected}")
    if off.results != {"check": "skipped", "issue": "skipped", "build": "skipped"}:
        problems.append(f"DSWHEELS_FOLLOW=off: jobs ended {off.results}, expected all skipped")
    issues = gh.issues
    if len(issues) != 1:
        problems.append(f"expected ONE drift issue, GitHub has {len(issues)}")
    elif '+    "0.19.8"' not in str(issues[0]["body"]) and '"0.19.8"' not in str(issues[0]["body"]):
        problems.append("the drift issue does not carry the proposed diff adding DeepSpeed 0.19.8")
    started = [(d.workflow, d.inputs.get("deepspeed"), d.inputs.get("torch")) for d in gh.state.dispatches]
    wanted = [("wheels.yml", "0.19.8", "matrix"), ("wheels.yml", "0.19.7", "matrix")]
    if started != wanted:
        problems.append(f"dispatches: expected {wanted} (and none again the same day), got {started}")
    return problems


def follow_dry_run(out: Path, *, cache: Path, say: Callable[[str], None] = print, repo: Path = ROOT) -> FollowDryRun:
    """Run the three follow runs into ``out`` (emptied first); ``cache`` keeps the real sdists."""
    out = out.resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / ".gitignore").write_text("*\n", encoding="utf-8")
    start = time.monotonic()
    planted = _planted_copy(repo, out / "repo")
    site = assemble(out / "upstream", cache / "sources")
    runs: list[RunReport] = []
    with UpstreamServer(site) as upstream, FollowGitHub(REPOSITORY, planted / ".github" / "workflows") as gh:
        variables = {
            "DSWHEELS_FACTS_SOURCES": " ".join(urls(upstream.base_url)),
            "DSWHEELS_MATRIX": "tests/data/follow-matrix.yml",
            "DSWHEELS_PUBLISH_DIR": str(out / "published"),
        }
        events = [
            ("scheduled", Trigger(event="schedule", ref="refs/heads/main"), variables),
            ("dispatched", Trigger(event="workflow_dispatch", ref="refs/heads/main"), variables),
            ("off", Trigger(event="schedule", ref="refs/heads/main"), {**variables, "DSWHEELS_FOLLOW": "off"}),
        ]
        for name, trigger, values in events:
            say(f"\n### follow.yml: {name} run")
            report = run_workflow(
                RunOptions(
                    workflow=planted / WORKFLOW,
                    repo=planted,
                    out=out / name,
                    trigger=trigger,
                    vars=values,
                    repository=REPOSITORY,
                    api_url=gh.api_url,
                    token=TOKEN,
                    say=say,
                )
            )
            say("\n" + report.table())
            runs.append(report)
        problems = tuple(_check(runs, gh))
        return FollowDryRun(
            runs=tuple(runs),
            issues=tuple(gh.issues),
            dispatches=tuple(gh.state.dispatches),
            seconds=time.monotonic() - start,
            problems=problems,
        )
