"""In-place YAML edits: the value changes, every other byte (comments, notes, layout) stays."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from dswheels.facts.yaml_edit import Edit, EditError, apply_edits, parse_spans
from tests.conftest import ROOT

DOC = """\
# a comment that must survive
top:
  a: &shared ["1", "2"]   # trailing comment
  b: *shared
  c: *shared
  note: >-
    folded
    text

  flow: {k: v, confidence: inferred, source: "s"}
  list: [
    "x", "y",
  ]
  block:
    first: 1
    confidence: inferred
    last: "z"
"""


def _apply(*edits: Edit) -> tuple[str, dict[str, Any]]:
    text = apply_edits(DOC, edits)
    data = yaml.safe_load(text)
    assert isinstance(data, dict)
    return text, data["top"]


def test_a_scalar_changes_and_nothing_else() -> None:
    text, top = _apply(Edit("set", ("top", "block", "last"), '"new"'))
    assert top["block"]["last"] == "new"
    assert text == DOC.replace('last: "z"', 'last: "new"')


def test_an_alias_being_edited_becomes_a_literal_and_the_anchor_stays() -> None:
    text, top = _apply(Edit("set", ("top", "b"), '["9"]'))
    assert top["a"] == ["1", "2"]
    assert top["b"] == ["9"]
    assert top["c"] == ["1", "2"]
    assert "c: *shared" in text


def test_an_anchored_value_being_edited_leaves_its_aliases_as_they_were() -> None:
    text, top = _apply(Edit("set", ("top", "a"), '["3"]'))
    assert top["a"] == ["3"]
    assert top["b"] == ["1", "2"]
    assert top["c"] == ["1", "2"]
    assert "# trailing comment" in text
    assert "# a comment that must survive" in text


def test_keys_come_out_of_block_and_flow_mappings() -> None:
    text, top = _apply(Edit("remove", ("top", "block", "confidence")), Edit("remove", ("top", "flow", "confidence")))
    assert top["block"] == {"first": 1, "last": "z"}
    assert top["flow"] == {"k": "v", "source": "s"}
    assert "    confidence" not in text


def test_keys_go_into_block_and_flow_mappings_and_blocks_into_block_ones() -> None:
    _text, top = _apply(
        Edit("add", ("top", "block"), '"why"', key="unsettled"),
        Edit("add", ("top", "flow"), '"why"', key="unsettled"),
        Edit("add", ("top",), "\nx: 1\ny: [a]", key="new"),
    )
    assert top["block"]["unsettled"] == "why"
    assert top["flow"]["unsettled"] == "why"
    assert top["new"] == {"x": 1, "y": ["a"]}


def test_the_last_key_of_the_last_entry_goes_while_a_new_entry_comes_after_it() -> None:
    # a torch minor settled (its last key, `unsettled`, removed) the day the next minor is added after it
    text, top = _apply(Edit("remove", ("top", "block", "last")), Edit("add", ("top",), "\nx: 1", key="new"))
    assert top["block"] == {"first": 1, "confidence": "inferred"}
    assert top["new"] == {"x": 1}
    assert text.endswith("    confidence: inferred\n  new:\n    x: 1\n")


def test_a_block_scalar_is_replaced_and_the_blank_line_after_it_stays() -> None:
    text, top = _apply(Edit("set", ("top", "note"), '"one line"'))
    assert top["note"] == "one line"
    assert 'note: "one line"\n\n  flow:' in text


def test_an_item_is_appended_to_a_flow_list() -> None:
    text, top = _apply(Edit("append", ("top", "list"), '"z"'))
    assert top["list"] == ["x", "y", "z"]
    assert '"x", "y", "z",\n  ]' in text


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (Edit("set", ("top", "nope"), "1"), "no key 'nope'"),
        (Edit("set", ("top", "block"), "{}"), "is a block map"),
        (Edit("add", ("top", "block"), "1", key="first"), "already has"),
        (Edit("append", ("top", "block"), "1"), r"not a \[\.\.\] list"),
    ],
)
def test_edits_that_cannot_be_made_say_why(edit: Edit, message: str) -> None:
    with pytest.raises(EditError, match=message):
        apply_edits(DOC, [edit])


def test_two_edits_of_one_value_are_refused() -> None:
    with pytest.raises(EditError, match="same value"):
        apply_edits(DOC, [Edit("set", ("top", "block", "last"), "1"), Edit("set", ("top", "block", "last"), "2")])


def test_the_shipped_facts_file_round_trips_and_edits_stay_local() -> None:
    text = (ROOT / "dswheels" / "compat.yml").read_text(encoding="utf-8")
    assert apply_edits(text, []) == text
    root = parse_spans(text)
    assert root.get("torch") is not None
    edited = apply_edits(text, [Edit("set", ("torch", "2.13", "latest"), '"2.13.9"')])
    changed = [(a, b) for a, b in zip(text.splitlines(), edited.splitlines(), strict=True) if a != b]
    assert changed == [('    latest: "2.13.0"', '    latest: "2.13.9"')]
