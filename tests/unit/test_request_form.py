"""The wheel-request issue: the form's answers read back typed, the event payload, the verdict and its comment.

Every hostile input is met here as the pure readers meet it; tests/integration/test_request_chain.py
runs requests.yml's own steps with recorded events and shows a hostile body reaches no shell.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from dswheels.kernel.errors import ConfigError
from dswheels.kernel.model import Platform, Python, Reason, Variant
from dswheels.plan.effects.published import PublishedAt
from dswheels.request.answer import ANSWER_MARKER, Buildable, Impossible, Published, Unreadable, render_answer
from dswheels.request.event import parse_issue_event
from dswheels.request.form import BUILD_LABEL, FIELDS, FORM_LABEL, OS_CHOICES, RequestFormError, parse_form
from dswheels.request.step import dispatch_inputs, judge_cell
from tests.conftest import ROOT
from tests.gha.model import as_map, load_workflow
from tests.support.issue_events import FORM_BODY, form_body, issue_event

TEMPLATE = ROOT / ".github" / "ISSUE_TEMPLATE" / "wheel-request.yml"
MATRIX = ROOT / "matrix" / "matrix.yml"
REPO = "octo/dswheels"


def _problems(body: str | None) -> tuple[str, ...]:
    with pytest.raises(RequestFormError) as caught:
        parse_form(body)
    return caught.value.problems


# --- the form ------------------------------------------------------------------------------------


def test_the_templates_labels_are_the_headings_the_answer_reads() -> None:
    template = yaml.safe_load(TEMPLATE.read_text(encoding="utf-8"))
    fields = {item["id"]: item["attributes"] for item in template["body"] if item["type"] != "markdown"}
    assert {key: value["label"] for key, value in fields.items()} == FIELDS
    assert fields["os"]["options"] == list(OS_CHOICES)
    assert template["labels"] == [FORM_LABEL]


def test_a_filled_in_form_reads_as_its_cell() -> None:
    request = parse_form(FORM_BODY.replace("\n", "\r\n"))  # GitHub stores some bodies with CRLF
    assert request.deepspeed == (0, 19, 8)
    assert request.torch == (2, 14)
    assert request.variant == Variant.parse("cu130")
    assert request.python == Python(version=(3, 12))
    assert request.platform is Platform.LINUX_X86_64
    assert request.describe() == "DeepSpeed 0.19.8, torch 2.14 (cu130), Python 3.12, linux_x86_64"


@pytest.mark.parametrize(
    ("torch", "python", "expected"),
    [
        ("2.9.1+cpu", "3.13t", ((2, 9), "cpu", (3, 13), True)),
        ("2.10.0+cu128", "3.11.9", ((2, 10), "cu128", (3, 11), False)),
        ("2.15.0rc1+cu132", "3.12", ((2, 15), "cu132", (3, 12), False)),
        ("2.9+cu126", "3.10", ((2, 9), "cu126", (3, 10), False)),
        ("`2.9.1+cu128`", "'3.12'", ((2, 9), "cu128", (3, 12), False)),  # pasted as code, or quoted
    ],
)
def test_torch_as_it_prints_itself_and_pythons_as_they_print(
    torch: str, python: str, expected: tuple[object, ...]
) -> None:
    request = parse_form(form_body(deepspeed="v0.19.8", torch=torch, python=python, os="Windows (x86_64)"))
    assert (request.torch, request.variant.name, request.python.version, request.python.free_threaded) == expected
    assert request.platform is Platform.WIN_AMD64


def test_every_field_that_does_not_read_is_named_at_once_and_nothing_of_it_is_echoed() -> None:
    body = form_body(deepspeed="latest", torch="2.9.1", python="three", os="macOS")
    problems = _problems(body)
    assert [p.split(":")[0] for p in problems] == list(FIELDS.values())
    for given in ("latest", "three", "macOS"):
        assert not any(given in p for p in problems), problems
    assert "2.9.1+cu128 or 2.9.1+cpu" in problems[1]  # what to paste instead


@pytest.mark.parametrize(
    "hostile",
    [
        "\u0661.\u0661\u0669.\u0668",  # Arabic-Indic digits: int() reads them, a release name never has them
        "\uff10.\uff11\uff19.\uff18",  # fullwidth
        "0.19.8\u200b",  # a zero-width space
        "0.19.8; rm -rf ~",
        "$(touch /tmp/pwned)",
        "`id`",
        "${{ github.token }}",
        "0.19.8\n0.19.9",  # two lines
        "0." + "9" * 80 + ".1",
    ],
)
def test_a_hostile_answer_is_a_problem_never_a_value(hostile: str) -> None:
    problems = _problems(form_body(deepspeed=hostile, torch="2.9.1+cu128", python="3.12", os="Linux (x86_64)"))
    assert len(problems) == 1
    assert problems[0].startswith(FIELDS["deepspeed"])
    assert hostile not in problems[0]


def test_bodies_that_are_not_forms() -> None:
    assert _problems(None) == ("the issue has no body: open it with the wheel-request form",)
    assert "longer than a filled-in form" in _problems(FORM_BODY + "x" * 70_000)[0]
    twice = FORM_BODY + "\n\n### DeepSpeed version\n\n0.19.7\n"
    assert _problems(twice) == (f"{FIELDS['deepspeed']}: given twice",)
    empty = form_body(deepspeed="_No response_", torch="2.9.1+cu128", python="3.12", os="Linux (x86_64)")
    assert _problems(empty) == (f"{FIELDS['deepspeed']}: no answer",)
    missing = FORM_BODY.replace("### Python version", "### Python")
    assert _problems(missing) == (f"{FIELDS['python']}: missing (open the issue with the wheel-request form)",)
    assert _problems("just some text\n```\n### nope\n```") == tuple(
        f"{heading}: missing (open the issue with the wheel-request form)" for heading in FIELDS.values()
    )


# --- the event payload ---------------------------------------------------------------------------


def _parsed(event: dict[str, object], name: str = "issues") -> object:
    return parse_issue_event(json.dumps(event).encode(), event_name=name)


def test_recorded_issue_events_read_as_typed_values() -> None:
    opened = _parsed(issue_event("opened", repository=REPO, number=12))
    assert opened.action == "opened"  # type: ignore[attr-defined]
    assert (opened.number, opened.open, opened.labels) == (12, True, frozenset({FORM_LABEL}))  # type: ignore[attr-defined]
    assert opened.body == FORM_BODY  # type: ignore[attr-defined]
    assert opened.repository == REPO  # type: ignore[attr-defined]
    labeled = _parsed(issue_event("labeled", repository=REPO, labels=(FORM_LABEL, BUILD_LABEL), label=BUILD_LABEL))
    assert labeled.label == BUILD_LABEL  # type: ignore[attr-defined]
    assert _parsed(issue_event("edited", repository=REPO, body=None)).body is None  # type: ignore[attr-defined]


def test_other_events_and_shapes_are_refused() -> None:
    with pytest.raises(ConfigError, match="not 'issue_comment'"):
        _parsed(issue_event("comment", repository=REPO), "issue_comment")
    pull = issue_event("opened", repository=REPO)
    pull["issue"]["pull_request"] = {"url": "https://api.github.com/repos/octo/dswheels/pulls/7"}
    with pytest.raises(ConfigError, match="pull request"):
        _parsed(pull)
    bad = issue_event("opened", repository=REPO)
    bad["issue"]["number"] = "7; id"
    with pytest.raises(ConfigError, match=r"event\.issue\.number: expected an integer"):
        _parsed(bad)
    with pytest.raises(ConfigError, match="not JSON"):
        parse_issue_event(b"\xff{", event_name="issues")


# --- the verdict and the comment -----------------------------------------------------------------


def _judge(body: str, published: Path) -> object:
    return judge_cell(
        parse_form(body).cell,
        matrix=MATRIX,
        published=PublishedAt(publish_dir=str(published), index_url="https://o.github.io/d/"),
    )


def test_a_buildable_cell_is_answered_with_its_cost(tmp_path: Path) -> None:
    verdict = _judge(FORM_BODY, tmp_path)
    assert isinstance(verdict, Buildable)
    assert verdict.cell_id == "ds0.19.8-torch2.14-cu130-cp312-linux_x86_64"
    assert verdict.runner_minutes > verdict.compile_minutes > 0
    assert verdict.figures["assumed"] > 0
    text = render_answer(verdict, asked="x")
    assert text.startswith(ANSWER_MARKER)
    assert f"adding the label `{BUILD_LABEL}`" in text


def test_a_published_cell_is_answered_with_its_install_line(tmp_path: Path) -> None:
    (tmp_path / "deepspeed-0.19.8+cu130torch2.14-cp312-cp312-linux_x86_64.whl").write_bytes(b"")
    verdict = _judge(FORM_BODY, tmp_path)
    assert isinstance(verdict, Published)
    assert verdict.pip.startswith('pip install "deepspeed==0.19.8+cu130torch2.14" --extra-index-url ')
    assert "https://o.github.io/d/whl/cu130-torch2.14/simple/" in verdict.pip
    assert verdict.pip in render_answer(verdict, asked="x")


def test_a_cell_published_under_its_manylinux_tag_is_published(tmp_path: Path) -> None:
    """A Linux wheel is published under the floor auditwheel judged, not the cell's linux_x86_64."""
    (tmp_path / "deepspeed-0.19.8+cu130torch2.14-cp312-cp312-manylinux_2_28_x86_64.whl").write_bytes(b"")
    verdict = _judge(FORM_BODY, tmp_path)
    assert isinstance(verdict, Published)
    assert verdict.cell_id == "ds0.19.8-torch2.14-cu130-cp312-linux_x86_64"
    assert "https://o.github.io/d/whl/cu130-torch2.14/simple/" in verdict.pip


def test_an_impossible_cell_is_answered_with_each_rule_and_its_source(tmp_path: Path) -> None:
    body = form_body(deepspeed="0.19.8", torch="2.14.1+cu118", python="3.12", os="Linux (x86_64)")
    verdict = _judge(body, tmp_path)
    assert isinstance(verdict, Impossible)
    (reason,) = verdict.reasons
    assert reason.rule == "torch-variant"
    text = render_answer(verdict, asked="x")
    assert f"{reason.message} (rule `torch-variant`; source: {reason.source})" in text
    assert f"what would work: {reason.fix}" in text


def test_an_unreadable_request_is_answered_with_its_problems_only() -> None:
    hostile = "@everyone <img src=x onerror=alert(1)> [click](https://evil.example)"
    problems = _problems(form_body(deepspeed=hostile, torch="x", python="y", os="z"))
    text = render_answer(Unreadable(problems=problems), asked="")
    assert hostile not in text
    assert "@everyone" not in text
    assert "evil.example" not in text
    assert "Edit the issue" in text
    impossible = Impossible(cell_id="c", reasons=(Reason(rule="r", message="m"),))
    assert "- m (rule `r`)" in render_answer(impossible, asked="x")


def test_the_dispatch_asks_wheels_yml_for_one_published_cell_with_the_issue() -> None:
    wheels = load_workflow(ROOT / ".github" / "workflows" / "wheels.yml")
    declared = as_map(as_map(as_map(wheels["on"], "on")["workflow_dispatch"], "wd")["inputs"], "inputs")
    inputs = dispatch_inputs(parse_form(FORM_BODY.replace("3.12", "3.13t")).cell, issue=12)
    assert set(inputs) == set(declared)
    assert inputs == {
        "deepspeed": "0.19.8",
        "torch": "2.14",
        "cuda": "cu130",
        "python": "3.13t",
        "platform": "linux_x86_64",
        "canary": "false",
        "publish": "true",
        "request": "12",
    }
    for key in ("torch", "cuda", "python", "platform"):  # each is one of the dispatch form's choices
        assert inputs[key] in as_map(declared[key], key)["options"]  # type: ignore[operator]
