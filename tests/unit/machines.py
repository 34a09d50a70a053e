"""Recorded machines (tests/data/machines/<name>/machine.json) as :class:`Facts`.

A machine file has the shape of the ``facts`` part of ``dswheels doctor --json``; raw tool
output lives beside it in tests/data/recordings/ and is referenced as ``{"file": PATH}``, a
toolkit's file list as ``{"layout": NAME}`` (tests/data/recordings/layouts/NAME.txt).
Provenance of every recording: tests/data/machines/README.md.
"""

from __future__ import annotations

import json
from pathlib import Path

from dswheels.doctor import Check, Report, Status
from dswheels.doctor.machine_facts import Facts
from dswheels.doctor.machine_facts_json import facts_from_data
from dswheels.kernel.compat import load_compat
from dswheels.kernel.versions import format_version

DATA = Path(__file__).resolve().parent.parent / "data"
MACHINES = DATA / "machines"


def _resolve(value: object) -> object:
    if isinstance(value, dict):
        if set(value) == {"file"}:
            return (DATA / str(value["file"])).read_text(encoding="utf-8")
        if set(value) == {"layout"}:
            text = (DATA / "recordings" / "layouts" / f"{value['layout']}.txt").read_text(encoding="utf-8")
            return [line for line in text.splitlines() if line.strip()]
        return {key: _resolve(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_resolve(item) for item in value]
    return value


def machine_data(name: str) -> dict[str, object]:
    data = json.loads((MACHINES / name / "machine.json").read_text(encoding="utf-8"))
    resolved = _resolve(data)
    assert isinstance(resolved, dict)
    return resolved


def load_machine(name: str) -> Facts:
    return facts_from_data(machine_data(name))


def machine_names() -> list[str]:
    return sorted(p.name for p in MACHINES.iterdir() if (p / "machine.json").is_file())


def nvcc_text(os: str, version: str) -> str:
    return (DATA / "recordings" / "nvcc" / f"{os}-{version}.txt").read_text(encoding="utf-8")


# The shipped facts, and how the doctor tests look up a report's checks.
COMPAT = load_compat()
NEWEST_DS = format_version(COMPAT.deepspeed_releases[-1])


def checks(report: Report, check_id: str) -> list[Check]:
    found = [c for c in report.checks if c.id == check_id]
    assert found, f"no {check_id} check in {[c.id for c in report.checks]}"
    return found


def one(report: Report, check_id: str) -> Check:
    (check,) = checks(report, check_id)
    return check


def statuses(report: Report) -> dict[str, set[Status]]:
    out: dict[str, set[Status]] = {}
    for c in report.checks:
        out.setdefault(c.id, set()).add(c.status)
    return out
