"""The request workflow's own steps, run here in job order with recorded issue events (`nox -s dryrun`).

.github/workflows/requests.yml's jobs run as tests/gha/steps.py runs a workflow's steps: each
``if:`` evaluated on the event, each ``run:`` line as written with bash, the event's payload in the
file ``$GITHUB_EVENT_PATH`` names. The events are GitHub's recorded ``issues`` deliveries
(tests/data/github-events/) with the issue's body planted; GitHub's API is a loopback fake
(tests/support/github_follow_fake.py); the published wheels are a directory
(DSWHEELS_PUBLISH_DIR), as in the wheels workflow's chain test, which builds and indexes for real.

A published combination is answered with its install line, an impossible one with each rule and
its source, a buildable one with its cost; an edit edits the one answer; the maintainer's label
dispatches wheels.yml for the cell with the issue, and wheels.yml's ``answer`` job, run as written
after the wheel is published, comments its install line. A hostile title and body reach no shell:
the same event through a copy of requests.yml with one careless step does.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from dswheels.request.form import BUILD_LABEL, FORM_LABEL
from tests.conftest import ROOT, require
from tests.gha.expressions import Status, Value, condition
from tests.gha.model import as_map, load_workflow, validate_inputs
from tests.gha.steps import Artifacts, Job, JobRun, run_job
from tests.support.github_follow_fake import FollowGitHub
from tests.support.issue_events import FORM_BODY, form_body, issue_event

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

WORKFLOWS = ROOT / ".github" / "workflows"
REQUESTS = load_workflow(WORKFLOWS / "requests.yml")
WHEELS = load_workflow(WORKFLOWS / "wheels.yml")
REPO = "octo/dswheels"
TOKEN = "request-token"  # noqa: S105 - what the fake GitHub accepts, not a secret
SITE = "https://octo.github.io/dswheels/"
PUBLISHED_WHEEL = "deepspeed-0.19.8+cu130torch2.14-cp312-cp312-linux_x86_64.whl"


def _contexts(event: dict[str, Any], gh: FollowGitHub, published: Path) -> dict[str, Value]:
    return {
        "github": {
            "event_name": "issues",
            "event": event,
            "repository": REPO,
            "api_url": gh.api_url,
            "token": TOKEN,
            "server_url": "https://github.com",
        },
        "vars": {
            "DSWHEELS_MATRIX": str(ROOT / "matrix" / "matrix.yml"),
            "DSWHEELS_PUBLISH_DIR": str(published),
            "DSWHEELS_INDEX_URL": SITE,
        },
        "runner": {"os": "Linux"},
    }


def _deliver(
    workflow: dict[str, Value], event: dict[str, Any], gh: FollowGitHub, tmp: Path, published: Path
) -> dict[str, JobRun]:
    """Every job of ``workflow`` whose ``if:`` the event passes, run here; by job."""
    contexts = _contexts(event, gh, published)
    ran: dict[str, JobRun] = {}
    for name, spec in as_map(workflow["jobs"], "jobs").items():
        if condition(as_map(spec, name).get("if"), contexts, Status()):  # type: ignore[arg-type]
            job = Job(
                workflow=workflow, job=name, workspace=tmp / f"{name}-{len(list(tmp.glob('*')))}", contexts=contexts
            )
            ran[name] = run_job(job, Artifacts(tmp / "artifacts"))
    return ran


@pytest.fixture
def published(tmp_path: Path) -> Path:
    folder = tmp_path / "published"
    folder.mkdir()
    (folder / PUBLISHED_WHEEL).write_bytes(b"")  # `dswheels request` reads the names the store lists
    return folder


def _gh(number: int = 7) -> FollowGitHub:
    gh = FollowGitHub(REPO, WORKFLOWS)
    gh.add_issue(number, labels=(FORM_LABEL,))
    return gh


def test_each_kind_of_request_is_answered_in_one_comment(tmp_path: Path, published: Path) -> None:
    require(sys.platform == "linux", "the chain stands in for the workflow's ubuntu runners")
    with _gh() as gh:
        ran = _deliver(REQUESTS, issue_event("opened", repository=REPO), gh, tmp_path, published)
        assert list(ran) == ["answer"]
        assert ran["answer"].ran == ["Answer"]
        (answer,) = gh.comments_on(7)
        assert "cell `ds0.19.8-torch2.14-cu130-cp312-linux_x86_64`" in answer
        assert 'pip install "deepspeed==0.19.8+cu130torch2.14" --extra-index-url ' in answer
        assert f"{SITE}whl/cu130-torch2.14/simple/" in answer

        # the author edits it to a combination torch never shipped: the same comment now says why, and where from
        impossible = form_body(deepspeed="0.19.8", torch="2.14.1+cu118", python="3.12", os="Linux (x86_64)")
        _deliver(REQUESTS, issue_event("edited", repository=REPO, body=impossible), gh, tmp_path, published)
        (answer,) = gh.comments_on(7)
        assert "It cannot be built" in answer
        assert "torch 2.14 has no cu118 build for linux_x86_64 (rule `torch-variant`; source: pypi-torch" in answer
        assert "what would work: torch 2.14 on linux_x86_64 has cu126, cu130, cu132, cpu" in answer

        # ... and to one the rules allow that is not published: its cost by the model
        buildable = form_body(deepspeed="0.19.8", torch="2.13.0+cu130", python="3.11", os="Windows (x86_64)")
        _deliver(REQUESTS, issue_event("edited", repository=REPO, body=buildable), gh, tmp_path, published)
        (answer,) = gh.comments_on(7)
        assert "`ds0.19.8-torch2.13-cu130-cp311-win_amd64`" in answer
        assert "it can be built" in answer
        assert "runner minutes (setup " in answer
        assert "assumed" in answer  # which of the model's figures the estimate rests on
        assert f"adding the label `{BUILD_LABEL}`" in answer


def test_the_label_builds_the_cell_and_the_wheels_run_answers_with_its_install_line(
    tmp_path: Path, published: Path
) -> None:
    require(sys.platform == "linux", "the chain stands in for the workflow's ubuntu runners")
    body = form_body(deepspeed="0.19.8", torch="2.13.0+cu130", python="3.11", os="Linux (x86_64)")
    with _gh(9) as gh:
        other = issue_event("labeled", repository=REPO, number=9, body=body, label="bug")
        assert _deliver(REQUESTS, other, gh, tmp_path, published) == {}  # another label: no job at all
        event = issue_event("labeled", repository=REPO, number=9, body=body, labels=(FORM_LABEL, BUILD_LABEL))
        event["label"]["name"] = BUILD_LABEL
        ran = _deliver(REQUESTS, event, gh, tmp_path, published)
        assert list(ran) == ["build"]
        (dispatch,) = gh.state.dispatches
        assert (dispatch.workflow, dispatch.ref) == ("wheels.yml", "main")
        assert dispatch.inputs == {
            "deepspeed": "0.19.8",
            "torch": "2.13",
            "cuda": "cu130",
            "python": "3.11",
            "platform": "linux_x86_64",
            "canary": "false",
            "publish": "true",
            "request": "9",
        }
        (started,) = gh.comments_on(9)
        assert started.startswith("The build of `ds0.19.8-torch2.13-cu130-cp311-linux_x86_64` was started")

        # the run it started publishes the wheel (tests/integration/test_workflow_chain.py builds one for real);
        # its answer job, after pages, comments the install line
        (published / "deepspeed-0.19.8+cu130torch2.13-cp311-cp311-linux_x86_64.whl").write_bytes(b"")
        answered = _wheels_answer_job(dispatch.inputs, gh, tmp_path, published, pages="success")
        assert answered.ran == ["Answer the request"]
        indexed = gh.comments_on(9)[-1]
        assert indexed.startswith("`ds0.19.8-torch2.13-cu130-cp311-linux_x86_64` is built and indexed")
        assert 'pip install "deepspeed==0.19.8+cu130torch2.13"' in indexed

        # a run whose wheel did not reach the index says so, with the run to look at
        failed = {**dispatch.inputs, "python": "3.12"}
        _wheels_answer_job(failed, gh, tmp_path, published, pages="skipped")
        assert (
            "did not put its wheel into the index: see the run, https://github.com/octo/dswheels/actions/runs/77"
            in (gh.comments_on(9)[-1])
        )


def _wheels_answer_job(inputs: dict[str, str], gh: FollowGitHub, tmp: Path, published: Path, *, pages: str) -> JobRun:
    declared = as_map(as_map(as_map(WHEELS["on"], "on")["workflow_dispatch"], "wd")["inputs"], "inputs")
    contexts: dict[str, Value] = {
        **_contexts({}, gh, published),
        "inputs": validate_inputs(declared, inputs),
        "needs": {
            "plan": {"result": "success", "outputs": {"index_url": SITE, "publish_dir": str(published)}},
            "pages": {"result": pages, "outputs": {}},
        },
    }
    github = {**as_map(contexts["github"], "github"), "event_name": "workflow_dispatch", "run_id": "77"}
    contexts["github"] = github
    assert condition(str(as_map(as_map(WHEELS["jobs"], "jobs")["answer"], "answer")["if"]), contexts, Status())
    job = Job(workflow=WHEELS, job="answer", workspace=tmp / f"answer-{pages}", contexts=contexts)
    return run_job(job, Artifacts(tmp / "wheels-artifacts"))


HOSTILE_TITLE = 'Wheel request"; touch {canary}-title; echo "${{{{ github.token }}}} `touch {canary}-tick`'


def _hostile_body(canary: Path) -> str:
    lines = [
        f"$(touch {canary}-dollar)",
        f"`touch {canary}-backtick`",
        "${{ github.token }}",
        f"'; touch {canary}-quote; '",
        "\u0660.\u0661\u0669.\u0668",  # Arabic-Indic digits
    ]
    body = form_body(deepspeed=lines[0], torch=lines[1], python=lines[2], os=lines[3])
    return body + "\n\n" + "\n".join(lines) + "\n\n" + "x" * 70_000  # longer than any form


def test_a_hostile_title_and_body_reach_no_shell(tmp_path: Path, published: Path) -> None:
    require(sys.platform == "linux", "the chain stands in for the workflow's ubuntu runners")
    canary = tmp_path / "pwned"
    body = _hostile_body(canary)
    title = HOSTILE_TITLE.format(canary=canary)
    with _gh() as gh:
        for action in ("opened", "edited"):
            _deliver(REQUESTS, issue_event(action, repository=REPO, body=body, title=title), gh, tmp_path, published)
        labeled = issue_event("labeled", repository=REPO, body=body, title=title, labels=(FORM_LABEL, BUILD_LABEL))
        labeled["label"]["name"] = BUILD_LABEL
        assert list(_deliver(REQUESTS, labeled, gh, tmp_path, published)) == ["build"]
        assert not list(tmp_path.glob("pwned*")), "the issue's text ran in a shell"
        assert not gh.state.dispatches  # unreadable: nothing built
        (answer,) = gh.comments_on(7)  # one answer, edited
        assert "does not read as a wheel request" in answer
        assert "longer than a filled-in form" in answer
        for fragment in ("touch", "github.token", "$(", "`touch"):
            assert fragment not in answer

        # the detector works: one careless step (the body in an expression in its script) and the body runs
        careless = yaml.safe_load((WORKFLOWS / "requests.yml").read_text(encoding="utf-8").replace("on:\n", '"on":\n'))
        careless["jobs"]["answer"]["steps"].append({"name": "Careless", "run": 'echo "${{ github.event.issue.body }}"'})
        short = issue_event("opened", repository=REPO, body=f"$(touch {canary}-careless)")
        _deliver(careless, short, gh, tmp_path / "careless", published)
        assert (tmp_path / "pwned-careless").exists()


def test_a_planted_answer_marker_in_a_persons_comment_is_left_alone(tmp_path: Path, published: Path) -> None:
    require(sys.platform == "linux", "the chain stands in for the workflow's ubuntu runners")
    from dswheels.request.answer import ANSWER_MARKER

    with _gh() as gh:
        gh.comment_as(7, f"{ANSWER_MARKER}\nmine", login="octocat")
        _deliver(REQUESTS, issue_event("opened", repository=REPO, body=FORM_BODY), gh, tmp_path, published)
        mine, answer = gh.comments_on(7)
        assert mine == f"{ANSWER_MARKER}\nmine"
        assert "is published" in answer or "install it with" in answer
