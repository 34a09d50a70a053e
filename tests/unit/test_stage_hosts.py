"""Each stage's entry works through the ``Host`` it is handed (issue 24): its cache directory is the
host's, never ``DSWHEELS_CACHE`` read behind the command's back, and the follow steps' token is the
host's, never ``GITHUB_TOKEN``. The deep effect (a venv, NVIDIA's downloads, GitHub) is replaced by a
recorder that stops the step: these are tests of the wiring, the effects have their own."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import NoReturn

import pytest

from dswheels.cuda import step as cuda_step
from dswheels.cuda.effects.install_toolkit import CudaInstallOptions
from dswheels.facts import follow_step
from dswheels.facts import step as facts_step
from dswheels.host.downloads import Downloader
from dswheels.host.github import GitHub
from dswheels.host.ports import Host
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.model import OS
from dswheels.smoke import step as smoke_step
from dswheels.verify import step as verify_step
from tests.conftest import ROOT
from tests.support.wheels import cpu_deepspeed_wheel

HOST_TOKEN = "ghp_from_the_host"  # noqa: S105 - a test's, which the step must take over the environment's


class Stop(Exception):  # noqa: N818 - not an error: where the recorder ends the step
    """Raised by a recorder once it has what the test looks at."""


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Host:
    """A host whose cache is one directory while ``DSWHEELS_CACHE`` names another."""
    monkeypatch.setenv("DSWHEELS_CACHE", str(tmp_path / "from-the-environment"))
    return Host(cache_dir=tmp_path / "host-cache")


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


def test_verify_works_and_logs_under_the_hosts_cache(
    host: Host, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = Seen()
    monkeypatch.setattr(verify_step, "runtime_checks", _record(seen))
    options = verify_step.VerifyOptions(matrix=ROOT / "matrix" / "matrix.yml")
    with pytest.raises(Stop):
        verify_step.verify_wheel(cpu_deepspeed_wheel(tmp_path / "wheels"), options, host)
    assert seen.kwargs["work_root"] == host.cache_dir / "verify"
    log = seen.kwargs["log"]
    assert isinstance(log, Path)
    assert log.parent == host.cache_dir / "verify"
    assert log.is_file()
    _not_under_the_environment_cache(tmp_path)


def test_smoke_makes_its_venv_and_log_under_the_hosts_cache(
    host: Host, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = Seen()
    monkeypatch.setattr(smoke_step, "fresh_venv", _record(seen))
    with pytest.raises(Stop):
        smoke_step.smoke_wheel(cpu_deepspeed_wheel(tmp_path / "wheels"), smoke_step.SmokeOptions(), host)
    assert seen.kwargs["root"] == host.cache_dir / "smoke"
    log = seen.kwargs["log"]
    assert isinstance(log, Path)
    assert log.parent == host.cache_dir / "smoke"
    assert log.is_file()
    _not_under_the_environment_cache(tmp_path)


def test_cuda_install_caches_under_the_hosts_cache(host: Host, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = Seen()
    monkeypatch.setattr(cuda_step, "install_cuda", _record(seen))
    with pytest.raises(Stop):
        cuda_step.install_toolkit(cuda_step.CudaStepOptions(toolkit="13.0.2", os=OS.LINUX), host)
    options = seen.args[1]
    assert isinstance(options, CudaInstallOptions)
    assert options.cache == host.cache_dir
    _not_under_the_environment_cache(tmp_path)


def test_facts_check_downloads_into_the_hosts_cache(
    host: Host, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = Seen()
    monkeypatch.setattr(facts_step, "read_upstream", _record(seen))
    with pytest.raises(Stop):
        facts_step.check_compat(facts_step.FactsCheckOptions(), host)
    downloader = seen.args[-1]
    assert isinstance(downloader, Downloader)
    assert downloader.cache_dir == host.cache_dir / "sources"
    _not_under_the_environment_cache(tmp_path)


def test_the_follow_steps_use_the_hosts_token_and_api_not_the_environments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_from_the_environment")
    monkeypatch.setenv("GITHUB_API_URL", "https://environment.invalid/api")
    seen = Seen()
    monkeypatch.setattr(follow_step, "runs", _record(seen))  # GitHub's first call: nothing leaves this machine
    options = follow_step.DispatchOptions(versions=("0.19.8",), repo="octo/dswheels")
    with pytest.raises(ConfigError, match="no GitHub token") as raised:
        follow_step.dispatch_builds(options, Host(cache_dir=tmp_path))  # a host made without github=True
    assert raised.value.exit_code == 2
    environ = MappingProxyType({"GITHUB_API_URL": "https://host.invalid/api"})
    with pytest.raises(Stop):
        follow_step.dispatch_builds(options, Host(cache_dir=tmp_path, github_token=HOST_TOKEN, environ=environ))
    gh = seen.args[0]
    assert isinstance(gh, GitHub)
    assert gh.api_url == "https://host.invalid/api"
    assert gh._token == HOST_TOKEN
