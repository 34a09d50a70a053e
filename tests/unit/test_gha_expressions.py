"""The workflow tests' expression evaluator (tests/gha/expressions.py) against GitHub's documented semantics."""

from __future__ import annotations

import pytest

from tests.gha.expressions import ExpressionError, Status, Value, condition, evaluate, interpolate, to_string

CTX: dict[str, Value] = {
    "github": {"event_name": "push", "ref": "refs/tags/v0.19.8", "ref_type": "tag"},
    "inputs": {"publish": True, "deepspeed": "0.19.8"},
    "vars": {"EMPTY": "", "RUNNERS": "linux_x86_64 win_amd64"},
    "matrix": {"runs_on": ["ubuntu-24.04"], "platform": "win_amd64", "n": 3},
    "needs": {"plan": {"result": "success", "outputs": {"matrix": '{"include":[{"name":"a"}]}'}}},
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("null", None),
        ("true", True),
        ("FALSE", False),
        ("42", 42),
        ("-1.5", -1.5),
        ("0xff", 255),
        ("'it''s'", "it's"),
        ("github.event_name", "push"),
        ("github['event_name']", "push"),
        ("github.nope", None),
        ("github.nope.deeper", None),
        ("matrix.runs_on[0]", "ubuntu-24.04"),
        ("matrix.runs_on[5]", None),
        ("GitHub.Event_Name", "push"),  # contexts and properties ignore case
        # == compares strings case-insensitively; different types compare as numbers
        ("github.event_name == 'PUSH'", True),
        ("'3' == matrix.n", True),
        ("null == 0", True),
        ("true == 1", True),
        ("'' == 0", True),
        ("'abc' == 0", False),
        ("matrix.runs_on == matrix.runs_on", True),  # the same object
        ("matrix.runs_on != 'x'", True),
        ("1 < 2 && 'b' > 'A'", True),
        # && and || return an operand
        ("vars.EMPTY || 'default'", "default"),
        ("vars.RUNNERS || 'default'", "linux_x86_64 win_amd64"),
        ("github.event_name == 'push' && github.ref || 'other'", "refs/tags/v0.19.8"),
        ("inputs.publish && 'yes'", "yes"),
        ("!inputs.publish", False),
        ("!vars.EMPTY", True),
        ("!(1 == 2)", True),
        # functions
        ("contains(vars.RUNNERS, matrix.platform)", True),
        ("contains(vars.RUNNERS, 'WIN_AMD64')", True),
        ("contains(matrix.runs_on, 'ubuntu-24.04')", True),
        ("contains(matrix.runs_on, 'ubuntu')", False),  # arrays: element equality, not substrings
        ("startsWith(github.ref, 'refs/TAGS/')", True),
        ("endsWith(github.ref, '.8')", True),
        ("format('{0}-{1}-{{2}}', 'a', 1)", "a-1-{2}"),
        ("join(matrix.runs_on, '+')", "ubuntu-24.04"),
        ("fromJSON('[1, \"x\"]')[1]", "x"),
        ("fromJSON(needs.plan.outputs.matrix).include[0].name", "a"),
        ("fromJSON('{\"include\":[]}').include[0] != null", False),
        ("toJSON(matrix.runs_on)", '[\n  "ubuntu-24.04"\n]'),
    ],
)
def test_evaluate(text: str, expected: Value) -> None:
    assert evaluate(text, CTX) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("unknown.context", "unknown context 'unknown'"),
        ("hashFiles('x')", "not supported"),
        ("matrix.*.name", "object filter"),
        ("contains('a')", "takes 2..2 arguments"),
        ("fromJSON('')", "needs a JSON string"),
        ("fromJSON('{bad')", "fromJSON()"),
        ("format('{1}', 'a')", "bad placeholder"),
        ("1 ==", "unexpected 'end'"),
        ("(1", "expected ')'"),
        ("a $ b", "unexpected character"),
    ],
)
def test_errors_name_the_problem_and_the_expression(text: str, message: str) -> None:
    with pytest.raises(ExpressionError, match=None) as info:
        evaluate(text, CTX)
    assert message in str(info.value)
    assert text in str(info.value)


def test_interpolate_keeps_the_type_of_a_whole_value_and_stringifies_inside_text() -> None:
    assert interpolate("${{ matrix.runs_on }}", CTX) == ["ubuntu-24.04"]
    assert interpolate("  ${{ matrix.n }} ", CTX) == 3
    assert interpolate("n=${{ matrix.n }}, p=${{ inputs.publish }}, x=${{ github.nope }}", CTX) == "n=3, p=true, x="
    assert interpolate("no template", CTX) == "no template"
    assert interpolate("${{ 'a' }}${{ 'b' }}", CTX) == "ab"


@pytest.mark.parametrize(
    ("value", "expected"), [(None, ""), (True, "true"), (2.0, "2"), (2.5, "2.5"), ([1], "Array"), ({}, "Object")]
)
def test_to_string(value: Value, expected: str) -> None:
    assert to_string(value) == expected


def test_conditions_imply_success_unless_they_use_a_status_function() -> None:
    failed = Status(success=False, failure=True)
    assert condition(None, CTX, Status()) is True
    assert condition(None, CTX, failed) is False
    assert condition("github.event_name == 'push'", CTX, Status()) is True
    assert condition("github.event_name == 'push'", CTX, failed) is False  # success() && (...)
    assert condition("${{ github.event_name == 'push' }}", CTX, failed) is False
    assert condition("always()", CTX, failed) is True
    assert condition("failure()", CTX, failed) is True
    assert condition("failure()", CTX, Status()) is False
    assert condition("!cancelled() && true", CTX, failed) is True
    assert condition("${{ !contains(vars.RUNNERS, matrix.platform) }}", CTX, Status()) is False
    assert condition(text=True, contexts=CTX, status=Status()) is True
    assert condition(text=False, contexts=CTX, status=Status()) is False
