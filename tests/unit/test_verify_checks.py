"""verify's checks are named units in one registry (issue 29, point 4): docs/verify.md lists exactly
the registry, each check names its results, a gate stops the checks after it, and names are unique."""

from __future__ import annotations

import re

import pytest

from dswheels.kernel.errors import VerifyError
from dswheels.kernel.naming import parse_cell_id
from dswheels.verify.checks import CHECKS, LOADED, STATIC, judge_static, render_registry
from dswheels.verify.registry import Check, Registry, Stage, Verdict
from dswheels.verify.static_checks import Expected
from tests.conftest import ROOT
from tests.support.verify_facts import wheel_facts

DOC = ROOT / "docs" / "verify.md"
BLOCK = re.compile(r"<!-- registry: begin[^>]*-->\n(.*?)<!-- registry: end -->", re.DOTALL)
CELL = parse_cell_id("ds0.19.8-torch2.13-cpu-cp311-linux_x86_64")


def test_docs_verify_md_lists_exactly_the_registry() -> None:
    found = BLOCK.search(DOC.read_text(encoding="utf-8"))
    assert found is not None, f"{DOC} has no registry block"
    assert found.group(1) == render_registry(), f"paste this into {DOC}:\n{render_registry()}"


def test_every_check_is_named_once_says_what_it_judges_and_fails_with_verify_s_code() -> None:
    names = [c.name for c in CHECKS]
    assert len(names) == len(set(names))
    assert all(c.judges and not c.judges.endswith(".") for c in CHECKS)  # the table adds the full stop
    assert {c.stage for c in STATIC} == {Stage.STATIC}
    assert {c.stage for c in LOADED} == {Stage.LOADED}
    assert [c.name for c in CHECKS[: len(list(STATIC))]] == [c.name for c in STATIC]  # static ones run first
    assert {c.exit_code for c in CHECKS} == {VerifyError.exit_code} == {6}


def test_the_registry_names_each_result_after_its_check() -> None:
    registry: Registry[int] = Registry(Stage.STATIC)

    @registry.check("one", judges="a thing")
    def _one(facts: int) -> list[Verdict]:
        return [Verdict(ok=facts > 0, detail="whole"), Verdict(ok=True, detail="part", subject="a_op")]

    assert registry.run(1) == [Check("one", ok=True, detail="whole"), Check("one a_op", ok=True, detail="part")]
    with pytest.raises(ValueError, match="'one' is registered twice"):
        registry.check("one", judges="again")(_one)


def test_a_failed_gate_stops_the_checks_after_it() -> None:
    registry: Registry[int] = Registry(Stage.STATIC)
    registry.check("gate", judges="it can be read", gate=True)(lambda n: [Verdict(ok=n > 0, detail="")])
    registry.check("after", judges="what it holds")(lambda _n: [Verdict(ok=True, detail="")])
    assert [c.name for c in registry.run(1)] == ["gate", "after"]
    assert [c.name for c in registry.run(0)] == ["gate"]


def test_a_wheel_without_readable_build_info_is_judged_on_that_alone() -> None:
    facts = wheel_facts(Expected(cell=CELL, ops=("cpu_adam",)), installed=None, installed_problem="no info")
    assert judge_static(facts) == [Check("git_version_info_installed.py", ok=False, detail="no info")]
    ok = judge_static(wheel_facts(Expected(cell=CELL, ops=("cpu_adam",))))
    assert "git_version_info_installed.py" not in {c.name for c in ok}  # it speaks only when it fails
    assert {c.name for c in ok} >= {"filename", "installed ops", "no -march=native"}


def test_every_result_name_is_a_registered_check_or_one_with_a_subject() -> None:
    registered = {c.name for c in CHECKS}
    results = judge_static(wheel_facts(Expected(cell=CELL, ops=("cpu_adam",))))
    for result in results:
        assert result.name in registered or result.name.rsplit(" ", 1)[0] in registered, result.name
