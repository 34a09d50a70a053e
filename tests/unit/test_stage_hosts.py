"""Each stage's entry works under the cache it is handed (issue 24; issue 29: the ``CacheLayout`` the
command made), never ``DSWHEELS_CACHE`` read behind the command's back; the follow steps read the token
and the API where their client is made, as the stores do. The deep effect (a venv, NVIDIA's downloads,
GitHub) is replaced by a recorder that stops the step: these are tests of the wiring, the effects have
their own."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import pytest

from dswheels.cuda import step as cuda_step
from dswheels.cuda.effects.install_toolkit import CudaInstallOptions
from dswheels.facts import follow_step
from dswheels.facts import step as facts_step
from dswheels.host.cache import CacheLayout
from dswheels.host.downloads import Downloader
from dswheels.host.github import GitHub
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.model import Platform
from dswheels.smoke import step as smoke_step
from dswheels.verify import step as verify_step
from tests.conftest import ROOT
from tests.support.wheels import cpu_deepspeed_wheel


class Stop(Exception):  # noqa: N818 - not an error: where the recorder ends the step
    """Raised by a recorder once it has what the test looks at."""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CacheLayout:
    """A cache in one directory while ``DSWHEELS_CACHE`` names another."""
    monkeypatch.setenv("DSWHEELS_CACHE", str(tmp_path / "from-the-environment"))
    return CacheLayout(tmp_path / "host-cache")


@dataclass
class Seen:
    """What the recorder was called with."""

    args: tuple[object, ...] = ()
    kwargs: dict[str, object] = field(default_factory=dict)


def _record(seen: Seen) -> object:
    def recorder(*args: object, **kwargs: object) -> NoReturn:
        seen.args, seen.kwargs = args, kwargs
        raise Stop

    return recorder


def _not_under_the_environment_cache(tmp_path: Path) -> None:
    assert not (tmp_path / "from-the-environment").exists()


def test_verify_works_and_logs_under_the_cache_it_is_handed(
    cache: CacheLayout, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = Seen()
    monkeypatch.setattr(verify_step, "runtime_checks", _record(seen))
    options = verify_step.VerifyOptions(matrix=ROOT / "matrix" / "matrix.yml")
    with pytest.raises(Stop):
        verify_step.verify_wheel(cpu_deepspeed_wheel(tmp_path / "wheels"), options, cache)
    assert seen.kwargs["work_root"] == cache.verify == tmp_path / "host-cache" / "verify"
    log = seen.kwargs["log"]
    assert isinstance(log, Path)
    assert log.parent == cache.verify
    assert log.is_file()
    _not_under_the_environment_cache(tmp_path)


def test_smoke_makes_its_venv_and_log_under_the_cache_it_is_handed(
    cache: CacheLayout, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = Seen()
    monkeypatch.setattr(smoke_step, "fresh_venv", _record(seen))
    with pytest.raises(Stop):
        smoke_step.smoke_wheel(cpu_deepspeed_wheel(tmp_path / "wheels"), smoke_step.SmokeOptions(), cache)
    assert seen.kwargs["root"] == cache.smoke == tmp_path / "host-cache" / "smoke"
    log = seen.kwargs["log"]
    assert isinstance(log, Path)
    assert log.parent == cache.smoke
    assert log.is_file()
    _not_under_the_environment_cache(tmp_path)


def test_cuda_install_caches_under_the_cache_it_is_handed(
    cache: CacheLayout, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = Seen()
    monkeypatch.setattr(cuda_step, "install_cuda", _record(seen))
    with pytest.raises(Stop):
        cuda_step.install_toolkit(cuda_step.CudaStepOptions(toolkit="13.0.2", platform=Platform.LINUX_X86_64), cache)
    options = seen.args[1]
    assert isinstance(options, CudaInstallOptions)
    assert options.cache == cache
    _not_under_the_environment_cache(tmp_path)


def test_facts_check_downloads_into_the_cache_it_is_handed(
    cache: CacheLayout, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = Seen()
    monkeypatch.setattr(facts_step, "read_upstream", _record(seen))
    with pytest.raises(Stop):
        facts_step.check_compat(facts_step.FactsCheckOptions(), cache)
    downloader = seen.args[-1]
    assert isinstance(downloader, Downloader)
    assert downloader.cache_dir == cache.sources == tmp_path / "host-cache" / "sources"
    _not_under_the_environment_cache(tmp_path)


def test_the_follow_steps_read_the_token_and_api_where_their_client_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.delenv("GH_TOKEN", raising=False)
    monkeypatch.setenv("GITHUB_API_URL", "https://environment.invalid/api")
    seen = Seen()
    monkeypatch.setattr(follow_step, "runs", _record(seen))  # GitHub's first call: nothing leaves this machine
    options = follow_step.DispatchOptions(versions=("0.19.8",), repo="octo/dswheels")
    with pytest.raises(ConfigError, match="no GitHub token") as raised:
        follow_step.dispatch_builds(options)
    assert raised.value.exit_code == 2
    issue = follow_step.IssueOptions(report=tmp_path / "absent.json", markdown=tmp_path / "absent.md", repo="o/r")
    with pytest.raises(ConfigError, match="no GitHub token"):  # the token first: the report is not read
        follow_step.keep_drift_issue(issue)
    monkeypatch.setenv("GITHUB_TOKEN", "not a token")  # a space: it cannot go into a header
    with pytest.raises(ConfigError, match="GITHUB_TOKEN"):
        follow_step.dispatch_builds(options)
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_from_the_environment")
    with pytest.raises(Stop):
        follow_step.dispatch_builds(options)
    gh = seen.args[0]
    assert isinstance(gh, GitHub)
    assert gh.api_url == "https://environment.invalid/api"
    assert gh._token == "ghp_from_the_environment"  # noqa: S105 - a made-up token
