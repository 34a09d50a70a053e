"""docs/plan-json.md documents exactly the keys the plan writes."""

from __future__ import annotations

import json
import re

from tests.conftest import GOLDEN, ROOT

DOC = (ROOT / "docs" / "plan-json.md").read_text(encoding="utf-8")


def _documented(section: str) -> set[str]:
    part = DOC.split(section, 1)[1].split("\n## ", 1)[0]
    keys: set[str] = set()
    for cell in re.findall(r"^\| (`[^|]+?) \|", part, flags=re.MULTILINE):
        keys.update(re.findall(r"`([^`]+)`", cell))
    return keys


def _flatten(obj: dict[str, object], prefix: str = "") -> set[str]:
    keys: set[str] = set()
    for key, value in obj.items():
        keys.add(prefix + key)
        if isinstance(value, dict) and key == "toolchain":
            keys |= _flatten(value, prefix + key + ".")
        if isinstance(value, dict) and key == "ops":
            keys |= {f"ops.{k}" for k in value}
    return keys


def test_every_cell_key_is_documented_and_every_documented_key_exists() -> None:
    plan = json.loads((GOLDEN / "plan.json").read_text(encoding="utf-8"))
    written = _flatten(plan["cells"][0]) - {"toolchain", "ops"}
    documented = _documented("## `--format json`") - set(plan)
    assert written == documented


def test_top_level_keys() -> None:
    plan = json.loads((GOLDEN / "plan.json").read_text(encoding="utf-8"))
    assert plan["schema"] == "dswheels.plan/1"
    assert set(plan) <= _documented("## `--format json`")


def test_github_job_keys_are_documented() -> None:
    jobs = json.loads((GOLDEN / "plan-github.json").read_text(encoding="utf-8"))["include"]
    documented = _documented("## `--format github`")
    assert set(jobs[0]) == documented
