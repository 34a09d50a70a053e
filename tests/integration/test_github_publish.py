"""Publishing to GitHub Releases, against a loopback server that answers in GitHub's recorded shapes.

GitHub itself cannot be reached from CI; tests/support/github_fake.py documents which of
GitHub's documented behaviours it reproduces (drafts, uploads, pagination, conflicts,
``starter`` assets, immutable releases, 5xx and rate limits).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from dswheels.cli import main
from dswheels.host.github import GitHub, GitHubAPIError, Retry
from dswheels.host.log import reset_reporter, set_reporter
from dswheels.kernel.errors import GitHubError, PublishError
from dswheels.kernel.index_links import GITHUB_ASSET_MAX_BYTES
from dswheels.publish.step import collect_wheels
from dswheels.stores.github_release import check_github_limits, github_index_files, publish_github
from dswheels.stores.outgoing import Outgoing
from dswheels.stores.wheel_ref import LocalWheel
from tests.support.github_fake import FakeGitHub
from tests.support.recording import RecordingReporter
from tests.support.wheels import write_deepspeed_wheel

pytestmark = pytest.mark.integration

TAG = "v2026.11.23"


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        yield server


@pytest.fixture
def reporter() -> Iterator[RecordingReporter]:
    recording = RecordingReporter()
    token = set_reporter(recording)
    yield recording
    reset_reporter(token)


def _client(fake: FakeGitHub, token: str | None = None) -> GitHub:
    # no real waiting in tests; the waits asked for are recorded in retry.waits
    return GitHub(fake.repo, token=token or fake.token, api_url=fake.api_url, retry=Retry(sleep=lambda _s: None))


def _wheels(directory: Path, count: int = 3, *, seed: int = 0) -> list[LocalWheel]:
    variants = [("cu128", "2.9"), ("cu130", "2.10"), ("cpu", "2.9"), ("cu126", "2.9"), ("cu128", "2.10")]
    for variant, torch in variants[:count]:
        write_deepspeed_wheel(directory, variant=variant, torch=torch, payload=2048, seed=seed)
    return collect_wheels([directory])


def _uploads(fake: FakeGitHub) -> list[str]:
    return [path for _m, path, status in fake.requests("POST", "/uploads/") if status == 201]


def test_a_new_tag_is_drafted_filled_checked_and_published(fake: FakeGitHub, tmp_path: Path) -> None:
    wheels = _wheels(tmp_path / "dist")
    result = publish_github(wheels, _client(fake), TAG)
    release = fake.release(TAG)
    assert not release.draft
    names = {a.name: a for a in release.assets}
    for wheel in wheels:
        assert names[wheel.wheel.filename].data == wheel.path.read_bytes()
        assert names[wheel.wheel.filename + ".metadata"].data == wheel.metadata
    assert sorted(result.uploaded) == sorted(names)
    # created as a draft, and published only after the last upload
    creates = fake.requests("POST", "/releases$")
    patches = fake.requests("PATCH", "/releases/")
    assert len(creates) == 1
    assert len(patches) == 1
    assert fake.log.index(patches[0]) > max(fake.log.index(e) for e in fake.requests("POST", "/uploads/"))


def test_a_rerun_of_the_tag_uploads_nothing(fake: FakeGitHub, tmp_path: Path) -> None:
    wheels = _wheels(tmp_path / "dist")
    publish_github(wheels, _client(fake), TAG)
    before = len(_uploads(fake))
    again = publish_github(collect_wheels([tmp_path / "dist"]), _client(fake), TAG)
    assert again.uploaded == []
    assert len(again.present) == 2 * len(wheels)
    assert len(_uploads(fake)) == before
    assert len(fake.requests("POST", "/releases$")) == 1


def test_same_name_other_bytes_is_an_error_and_changes_nothing(fake: FakeGitHub, tmp_path: Path) -> None:
    publish_github(_wheels(tmp_path / "a"), _client(fake), TAG)
    before = {a.name: a.data for a in fake.release(TAG).assets}
    respun = _wheels(tmp_path / "b", count=4, seed=1)  # same names, other bytes, plus one new wheel
    with pytest.raises(PublishError, match=r"already published .* with other bytes") as info:
        publish_github(respun, _client(fake), TAG)
    assert info.value.details is not None
    assert info.value.details.count("deepspeed-0.19.8+") == 3  # every conflicting wheel is named
    assert {a.name: a.data for a in fake.release(TAG).assets} == before


def test_listings_are_followed_across_pages(fake: FakeGitHub, tmp_path: Path) -> None:
    fake.page_size = 2
    fake.add_release(TAG, draft=True)  # left by an earlier run ...
    for number in range(5):  # ... and listed after five newer releases: on page 3 of 3
        fake.add_release(f"later-{number}")
    wheels = _wheels(tmp_path / "dist", count=5)
    publish_github(wheels, _client(fake), TAG)
    assert not fake.requests("POST", r"/releases$"), "the draft on page 3 was not found"
    assert fake.requests("GET", r"/releases\?per_page=2&page=3")
    assert len(fake.release(TAG).assets) == 10
    assert fake.requests("GET", r"/releases/\d+/assets\?per_page=2&page=5")
    again = publish_github(wheels, _client(fake), TAG)  # the rerun must see all 10 assets to upload nothing
    assert again.uploaded == []


def test_server_errors_and_rate_limits_are_retried_with_backoff(
    fake: FakeGitHub, tmp_path: Path, reporter: RecordingReporter
) -> None:
    fake.fail("GET", r"/releases$", 502, times=2)
    fake.fail("POST", r"/releases$", 502)
    fake.fail("GET", r"/assets$", 503)
    fake.fail("PATCH", r"/releases/\d+$", 500)
    fake.fail(
        "GET",
        r"/assets$",
        403,
        headers={"Retry-After": "7"},
        body={"message": "You have exceeded a secondary rate limit."},
    )
    client = _client(fake)
    publish_github(_wheels(tmp_path / "dist", count=1), client, TAG)
    assert not fake.release(TAG).draft  # fake.release also proves there is exactly one
    assert 7.0 in client.retry.waits
    backoffs = [w for w in client.retry.waits if w != 7.0]
    assert len(backoffs) == 5
    assert backoffs[1] >= 2.0  # exponential: 1s, 2s, ... (plus jitter)
    assert any("retrying in" in w for w in reporter.of("warning"))


def test_a_plain_403_is_not_retried(fake: FakeGitHub, tmp_path: Path) -> None:
    fake.fail("POST", r"/releases$", 403, body={"message": "Resource not accessible by integration"})
    with pytest.raises(GitHubAPIError, match=r"403 .*Resource not accessible by integration") as info:
        publish_github(_wheels(tmp_path / "dist", count=1), _client(fake), TAG)
    assert "contents: write" in (info.value.hint or "")


def test_a_failed_upload_leaving_a_starter_asset_is_cleaned_up_and_retried(fake: FakeGitHub, tmp_path: Path) -> None:
    fake.fail("POST", "/uploads/", 502, leave_starter=True, body={"message": "Bad Gateway"})
    wheels = _wheels(tmp_path / "dist", count=1)
    publish_github(wheels, _client(fake), TAG)
    release = fake.release(TAG)
    assert [a.state for a in release.assets] == ["uploaded", "uploaded"]
    assert fake.requests("DELETE", "/releases/assets/")


def test_an_upload_whose_answer_is_lost_is_found_not_duplicated(fake: FakeGitHub, tmp_path: Path) -> None:
    fake.fail("POST", "/uploads/", 500, after_upload=True)
    wheels = _wheels(tmp_path / "dist", count=1)
    publish_github(wheels, _client(fake), TAG)
    assert sorted(a.name for a in fake.release(TAG).assets) == sorted(
        [wheels[0].wheel.filename, wheels[0].wheel.filename + ".metadata"]
    )


def test_an_interrupted_run_leaves_a_draft_that_the_next_run_finishes(fake: FakeGitHub, tmp_path: Path) -> None:
    wheels = _wheels(tmp_path / "dist")
    fake.fail("POST", "/uploads/", 502, times=1000, leave_starter=True)
    fake.faults[-1].times = 0  # armed below, after two files went through
    client = _client(fake)
    original = client.upload_asset
    calls = {"n": 0}

    def flaky(*args: object, **kwargs: object) -> object:
        calls["n"] += 1
        if calls["n"] == 3:
            fake.faults[-1].times = 1000  # GitHub goes down for good in the middle of the run
        return original(*args, **kwargs)  # type: ignore[arg-type]

    client.upload_asset = flaky  # type: ignore[method-assign,assignment]
    with pytest.raises(GitHubAPIError, match="502"):
        publish_github(wheels, client, TAG)
    release = fake.release(TAG)
    assert release.draft, "a half-filled release must not be published"
    fake.faults[-1].times = 0  # GitHub is back
    result = publish_github(wheels, _client(fake), TAG)
    assert len(result.present) == 2
    assert not fake.release(TAG).draft
    assert all(a.state == "uploaded" for a in fake.release(TAG).assets)
    assert len(fake.release(TAG).assets) == 6


def test_a_published_immutable_release_cannot_gain_files(fake: FakeGitHub, tmp_path: Path) -> None:
    publish_github(_wheels(tmp_path / "a", count=1), _client(fake), TAG)
    with pytest.raises(PublishError, match="published and immutable") as info:
        publish_github(_wheels(tmp_path / "a", count=2), _client(fake), TAG)
    assert "new tag" in (info.value.hint or "")


def test_the_asset_limits_are_checked_before_anything_is_uploaded(fake: FakeGitHub, tmp_path: Path) -> None:
    release = fake.add_release(TAG, draft=True)
    for number in range(999):
        fake.add_asset(release, f"old-{number}.txt", b"x")
    with pytest.raises(PublishError, match="would hold 1001 assets; GitHub allows 1000") as info:
        publish_github(_wheels(tmp_path / "dist", count=1), _client(fake), TAG)
    assert "more than one tag" in (info.value.hint or "")
    assert not fake.requests("POST", "/uploads/")
    big = Outgoing(name="deepspeed-huge.whl", size=GITHUB_ASSET_MAX_BYTES + 1, sha256="0" * 64)
    ok = Outgoing(name="deepspeed-ok.whl", size=GITHUB_ASSET_MAX_BYTES, sha256="0" * 64)
    check_github_limits([ok], existing=0, new=1, tag=TAG)
    with pytest.raises(PublishError, match="under 2 GiB") as info:
        check_github_limits([ok, big], existing=0, new=2, tag=TAG)
    assert info.value.details == "deepspeed-huge.whl: 2.00 GiB"


def test_old_assets_without_a_digest_are_compared_by_downloading(fake: FakeGitHub, tmp_path: Path) -> None:
    wheels = _wheels(tmp_path / "dist", count=1)
    release = fake.add_release(TAG, draft=True)
    fake.add_asset(release, wheels[0].wheel.filename, wheels[0].path.read_bytes(), with_digest=False)
    result = publish_github(wheels, _client(fake), TAG)
    assert result.present == [wheels[0].wheel.filename]
    assert fake.requests("GET", "/releases/download/")


def test_the_index_is_read_from_published_releases_only(fake: FakeGitHub, tmp_path: Path) -> None:
    first = _wheels(tmp_path / "one", count=2)
    publish_github(first, _client(fake), "v1")
    second = _wheels(tmp_path / "two", count=1, seed=0)  # the same file again in a later release
    second += collect_wheels([write_deepspeed_wheel(tmp_path / "three", version="0.19.7")])
    publish_github(second, _client(fake), "v2")
    draft = fake.add_release("v3", draft=True)
    fake.add_asset(draft, "deepspeed-0.19.9+cu128torch2.9-cp311-cp311-linux_x86_64.whl", b"unfinished")
    files, warnings = github_index_files(_client(fake))
    names = sorted(f.filename for f in files)
    assert names == sorted({w.wheel.filename for w in first + second})
    for item in files:
        local = next(w for w in first + second if w.wheel.filename == item.filename)
        assert item.sha256 == local.sha256
        assert item.metadata_sha256 == hashlib.sha256(local.metadata).hexdigest()
        assert item.requires_python == ">=3.9"
        assert item.url.startswith(f"{fake.api_url}/{fake.repo}/releases/download/v")
    duplicated = next(f for f in files if f.filename == first[0].wheel.filename)
    assert "/download/v1/" in duplicated.url  # the oldest release's copy is the one linked
    assert warnings == []


def test_the_token_comes_from_the_environment_and_is_never_printed(
    fake: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _wheels(tmp_path / "dist", count=1)
    monkeypatch.setenv("GITHUB_API_URL", fake.api_url)
    monkeypatch.setenv("GITHUB_TOKEN", fake.token)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    fake.fail("GET", r"/releases$", 502)  # a retry warning is printed too
    argv = ["--debug", "publish", str(tmp_path / "dist"), "--github", fake.repo, "--tag", TAG]
    assert main(argv) == 0
    assert main(argv) == 0  # the re-run: nothing new
    assert all(value == f"Bearer {fake.token}" for value in fake.seen_authorization)
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_wrong_secret_value")
    assert main(argv) == 7
    out = capsys.readouterr()
    text = out.out + out.err
    assert "2 files new" in text
    assert "already there" in text
    assert "401 Unauthorized" in text
    assert "Bad credentials" in text
    assert "GITHUB_TOKEN" in text  # the hint says which variable
    for secret in (fake.token, "ghp_wrong_secret_value"):
        assert secret not in text
    assert fake.token not in repr(GitHub(fake.repo, token=fake.token))
    monkeypatch.delenv("GITHUB_TOKEN")
    monkeypatch.delenv("GH_TOKEN", raising=False)
    assert main(argv) == 7
    assert "needs a token" in capsys.readouterr().err


def test_an_oversized_metadata_asset_is_refused_not_read_whole(fake: FakeGitHub, tmp_path: Path) -> None:
    """A .metadata asset is read with the bound every HTTP page has: past 1 MiB it is an error."""
    wheel = _wheels(tmp_path / "dist", count=1)[0]
    release = fake.add_release(TAG)
    fake.add_asset(release, wheel.wheel.filename, wheel.path.read_bytes())
    fake.add_asset(release, wheel.wheel.filename + ".metadata", b"Metadata-Version: 2.1\n" + b"x" * (1 << 21))
    with pytest.raises(GitHubError, match=r"\.metadata is larger than 1 MiB; refusing to read further"):
        github_index_files(_client(fake))
