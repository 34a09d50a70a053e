"""Publishing to a real pypiserver on loopback through the upload API, and installing back."""

from __future__ import annotations

from pathlib import Path

import pytest

from dswheels.cli import main
from dswheels.kernel.naming import PROJECT
from tests.support.installers import Installer
from tests.support.servers import StaticServer
from tests.support.wheels import interpreter_tag, write_deepspeed_wheel, write_fake_torch

pytestmark = pytest.mark.integration


def test_publish_to_pypiserver_is_idempotent_refuses_other_bytes_and_installs_back(
    pypiserver: tuple[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, packages = pypiserver
    dist = tmp_path / "dist"
    ours = write_deepspeed_wheel(dist, variant="cu128", torch="2.9")
    write_deepspeed_wheel(dist, variant="cpu", torch="2.9")
    assert main(["publish", str(dist), "--repository-url", url]) == 0
    assert sorted(p.name for p in packages.iterdir()) == sorted(p.name for p in dist.iterdir())
    assert (packages / ours.name).read_bytes() == ours.read_bytes()
    assert "2 files new" in capsys.readouterr().out

    assert main(["publish", str(dist), "--repository-url", url]) == 0  # a re-run: nothing to do
    assert "0 files new, 2 already there" in capsys.readouterr().out

    respun = tmp_path / "respun"
    write_deepspeed_wheel(respun, variant="cu128", torch="2.9", payload=100)  # same name, other bytes
    assert main(["publish", str(respun), "--repository-url", url]) == 7
    err = capsys.readouterr().err
    assert "already published" in err
    assert ours.name in err
    assert (packages / ours.name).read_bytes() == ours.read_bytes(), "the published file was overwritten"

    torch_root = tmp_path / "torch-index"
    write_fake_torch(torch_root / "torch", "2.9.1+cu128")
    with StaticServer(torch_root) as torch_index:
        installer = Installer(tmp_path, "pip")
        result = installer.pip(
            "install",
            f"{PROJECT}==0.19.8+cu128torch2.9",
            "--index-url",
            url + "simple/",
            "--extra-index-url",
            torch_index.url,
        )
    assert result.ok, result.output
    tag = interpreter_tag()
    assert (
        installer.python_eval("import deepspeed; print(deepspeed.BUILD)") == f"0.19.8+cu128torch2.9-{tag}-linux_x86_64"
    )
