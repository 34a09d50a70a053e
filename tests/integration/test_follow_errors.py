"""What the follow commands exit with when GitHub is not there for them (issue 24).

``dswheels facts dispatch`` publishes nothing: a missing token is bad input (2) and an API that
refuses is GitHub's failure (10), never "publish failed" (7). Publishing's own GitHub failures stay
7 (tests/integration/test_github_publish.py). GitHub's API is a loopback fake.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dswheels.cli import main
from dswheels.kernel.errors import ConfigError, GitHubError, PublishError
from tests.conftest import ROOT
from tests.support.github_follow_fake import FollowGitHub

pytestmark = pytest.mark.integration

REPOSITORY = "octo/dswheels"


def _dispatch(*extra: str) -> list[str]:
    return ["facts", "dispatch", "--versions-json", '["0.19.8"]', "--repo", REPOSITORY, *extra]


@pytest.fixture
def github(monkeypatch: pytest.MonkeyPatch) -> Iterator[FollowGitHub]:
    with FollowGitHub(REPOSITORY, ROOT / ".github" / "workflows") as fake:
        monkeypatch.setenv("GITHUB_API_URL", fake.api_url)
        monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
        yield fake


def test_a_missing_token_is_bad_input(
    github: FollowGitHub, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.delenv("GH_TOKEN", raising=False)
    assert main(_dispatch()) == ConfigError.exit_code == 2
    err = capsys.readouterr().err
    assert "bad input: no GitHub token" in err
    assert "hint: set GITHUB_TOKEN" in err
    assert github.issues == []


def test_an_api_error_is_githubs_failure_not_publishings(
    github: FollowGitHub, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_test_token_value")
    # a workflow the repository does not have: GitHub answers 404
    code = main(_dispatch("--workflow", "nothing-here.yml"))
    assert code == GitHubError.exit_code == 10
    assert code != PublishError.exit_code
    err = capsys.readouterr().err
    assert "GitHub failed: GitHub answered 404" in err
    assert "nothing-here.yml" in err
    assert "ghp_test_token_value" not in err
