"""Every check ``dswheels verify`` makes, in the order it makes them: the one registry.

A new check is one function in the module of what it reads (the wheel's files:
:mod:`~dswheels.verify.static_checks`; its extension binaries: :mod:`~dswheels.verify.binary_checks`;
the wheel loaded: :mod:`~dswheels.verify.loaded_checks`), decorated with that module's registry:
it runs from here, and ``docs/verify.md`` lists it (``tests/unit/test_verify_checks.py`` keeps the
page equal to :func:`render_registry`).
"""

from __future__ import annotations

from dswheels.verify import binary_checks, loaded_checks, static_checks
from dswheels.verify.loaded_checks import LoadedFacts
from dswheels.verify.registry import Check, Registry, VerifyCheck
from dswheels.verify.static_checks import WheelFacts

__all__ = ["CHECKS", "LOADED", "STATIC", "judge_loaded", "judge_static", "render_registry"]

STATIC: Registry[WheelFacts] = static_checks.STATIC + binary_checks.STATIC
LOADED: Registry[LoadedFacts] = loaded_checks.LOADED
CHECKS: tuple[VerifyCheck[WheelFacts] | VerifyCheck[LoadedFacts], ...] = (*STATIC, *LOADED)


def judge_static(facts: WheelFacts) -> list[Check]:
    """Every static check of the wheel, in order."""
    return STATIC.run(facts)


def judge_loaded(facts: LoadedFacts) -> list[Check]:
    """Every loaded check, in order."""
    return LOADED.run(facts)


def render_registry() -> str:
    """The table of ``docs/verify.md``: every check, in the order it runs."""
    lines = ["| check | reads | judges | exit |", "|---|---|---|---|"]
    for check in CHECKS:
        judges = check.judges.replace("|", "\\|")
        gate = " A failure stops the checks after it." if check.gate else ""
        lines.append(f"| `{check.name}` | {check.stage} | {judges}.{gate} | {check.exit_code} |")
    return "\n".join(lines) + "\n"
