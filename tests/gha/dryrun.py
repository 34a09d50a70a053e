"""The local dry run of .github/workflows/wheels.yml: plan -> build -> verify -> publish(dir) -> index.

Two runs of the real workflow file, its steps executed as written (tests/gha/runner.py):

1. ``workflow_dispatch`` of one Linux cell, ds0.19.8-torch2.13-cpu-cp311-linux_x86_64, with
   publish ticked. Repository variables point the workflow at a one-op matrix
   (tests/data/dryrun-matrix.yml, so the build is cheap), at pip's configured torch
   (``--torch-index pip``) and at the directory publish backend. Every job runs except the
   GPU smoke test (no ``DSWHEELS_GPU_RUNNERS``, so it is skipped with its notice).
2. A push of the tag ``v0.19.8`` with the same variables: the plan now finds that wheel
   published, plans nothing, and the build and publish jobs are skipped.

Then it checks what a user would get: the published wheel and its manifest, and an index
that lists the wheel with its sha256.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.gha.model import Trigger
from tests.gha.runner import RunOptions, RunReport, run_workflow

__all__ = ["CELL", "DryRun", "dry_run"]

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "wheels.yml"
MATRIX = "tests/data/dryrun-matrix.yml"
CELL = "ds0.19.8-torch2.13-cpu-cp311-linux_x86_64"
VERSION = "0.19.8+cputorch2.13"
WHEEL = f"deepspeed-{VERSION}-cp311-cp311-linux_x86_64.whl"
PARTITION = "cpu-torch2.13"
INPUTS = {
    "deepspeed": "0.19.8",
    "torch": "2.13",
    "cuda": "cpu",
    "python": "3.11",
    "platform": "linux_x86_64",
    "canary": "false",
    "publish": "true",
}


@dataclass(frozen=True, kw_only=True)
class DryRun:
    dispatch: RunReport
    tag: RunReport
    published: Path
    site: Path
    seconds: float
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def _variables(out: Path) -> dict[str, str]:
    return {
        "DSWHEELS_MATRIX": MATRIX,
        "DSWHEELS_TORCH_INDEX": "pip",
        "DSWHEELS_PUBLISH_DIR": str(out / "published"),
        "DSWHEELS_INDEX_URL": (out / "dispatch" / "pages").as_uri() + "/",
    }


def _check(out: Path, dispatch: RunReport, tag: RunReport) -> list[str]:
    problems: list[str] = []
    expected = {"plan": "success", "build": "success", "smoke": "skipped", "release": "success", "pages": "success"}
    if dispatch.results != expected:
        problems.append(f"dispatch run: jobs ended {dispatch.results}, expected {expected}")
    built = [leg for leg in dispatch.legs if leg.job == "build" and leg.result == "success"]
    if [leg.name for leg in built] != [f"build {CELL}"]:
        problems.append(f"dispatch run: expected one build leg for {CELL} run here, got {[leg.name for leg in built]}")
    expected_tag = {"plan": "success", "build": "skipped", "smoke": "skipped", "release": "skipped", "pages": "skipped"}
    if tag.results != expected_tag:
        problems.append(f"tag run: jobs ended {tag.results}, expected {expected_tag} (everything already published)")
    published = out / "published"
    wheels = sorted(p.name for p in published.rglob("*.whl")) if published.exists() else []
    if wheels != [WHEEL]:
        problems.append(f"published: expected [{WHEEL}], found {wheels}")
    site = out / "dispatch" / "pages"
    pages = list(site.rglob("index.html")) if site.exists() else []
    if wheels and pages:
        digest = hashlib.sha256(next(published.rglob(WHEEL)).read_bytes()).hexdigest()
        text = "\n".join(p.read_text(encoding="utf-8") for p in pages)
        href = re.escape(WHEEL.replace("+", "%2B"))
        if not re.search(rf"{href}#sha256={digest}", text):
            problems.append(f"the deployed index does not list {WHEEL} with its sha256")
        problems += _pip_resolves(site / "whl" / PARTITION / "simple", out / "pip-download")
    elif not pages:
        problems.append(f"no index was deployed to {site}")
    return problems


def _pip_resolves(index: Path, dest: Path) -> list[str]:
    """pip, told only about the deployed partition, finds and downloads exactly the wheel."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--isolated",
            "--no-deps",
            "--only-binary",
            ":all:",
            "--index-url",
            index.as_uri() + "/",
            "--dest",
            str(dest),
            "--python-version",
            "3.11",
            "--platform",
            "linux_x86_64",
            f"deepspeed=={VERSION}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    got = sorted(p.name for p in dest.glob("*.whl")) if dest.exists() else []
    if proc.returncode != 0 or got != [WHEEL]:
        return [f"pip could not install from the deployed index {index}: {proc.stdout[-800:]}{proc.stderr[-800:]}"]
    return []


def dry_run(out: Path, *, say: Callable[[str], None] = print, repo: Path = ROOT) -> DryRun:
    """Run the chain into ``out`` (emptied first) and check it; never raises for a failing job."""
    out = out.resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / ".gitignore").write_text("*\n", encoding="utf-8")  # never part of a checkout
    variables = _variables(out)
    start = time.monotonic()
    say(f"dry run of {WORKFLOW.relative_to(ROOT)} into {out}")
    dispatch = run_workflow(
        RunOptions(
            workflow=WORKFLOW,
            repo=repo,
            out=out / "dispatch",
            trigger=Trigger(event="workflow_dispatch", ref="refs/heads/main", inputs=INPUTS),
            vars=variables,
            say=say,
        )
    )
    say("\n" + dispatch.table())
    tag = run_workflow(
        RunOptions(
            workflow=WORKFLOW,
            repo=repo,
            out=out / "tag",
            trigger=Trigger(event="push", ref="refs/tags/v0.19.8"),
            vars=variables,
            say=say,
        )
    )
    say("\n" + tag.table())
    problems = tuple(_check(out, dispatch, tag))
    return DryRun(
        dispatch=dispatch,
        tag=tag,
        published=out / "published",
        site=out / "dispatch" / "pages",
        seconds=time.monotonic() - start,
        problems=problems,
    )
