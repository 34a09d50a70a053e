"""Issue 14: "every `inferred` entry left in compat.yml says why no source could settle it".

Two halves, each of which alone would let an unexplained ``inferred`` entry back in: the
shipped file gives a reason for every one, and the reader refuses an entry without one.
(test_facts_compare's ``"source" in why`` also holds for the checker's own "gives no reason
why no source settles it" fallback, so it does not tell the two apart.)
"""

from __future__ import annotations

import copy

import pytest
import yaml

from dswheels.facts.compare import inferred_entries
from dswheels.kernel.compat import parse_compat
from dswheels.kernel.compat.read import CompatDataError
from tests.conftest import ROOT

SHIPPED = yaml.safe_load((ROOT / "dswheels" / "compat.yml").read_text(encoding="utf-8"))
INFERRED = inferred_entries(SHIPPED)


def test_the_shipped_compat_has_inferred_entries_to_check() -> None:
    assert len(INFERRED) >= 5  # the parametrised tests below are not vacuous


@pytest.mark.parametrize(("path", "label", "why"), INFERRED, ids=[label for _p, label, _w in INFERRED])
def test_every_shipped_inferred_entry_says_why_no_source_settles_it(path: object, label: str, why: str) -> None:
    assert why.strip(), f"compat.yml {label}: confidence: inferred with no `unsettled:` reason"


def _entry(raw: object, path: tuple[str | int, ...]) -> dict[str, object]:
    for key in path:
        raw = raw[key]  # type: ignore[index]
    assert isinstance(raw, dict)
    return raw


@pytest.mark.parametrize(("path", "label", "why"), INFERRED, ids=[label for _p, label, _w in INFERRED])
def test_the_reader_refuses_an_inferred_entry_without_a_reason(
    path: tuple[str | int, ...], label: str, why: str
) -> None:
    assert why
    data = copy.deepcopy(SHIPPED)
    del _entry(data, path)["unsettled"]
    with pytest.raises(CompatDataError, match="unsettled"):
        parse_compat(data)
    parse_compat(copy.deepcopy(SHIPPED))  # the shipped file itself is read
