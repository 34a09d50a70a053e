"""``dswheels plan --skip-published URL``: a re-run of a tag plans nothing, read over real HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dswheels.cli import main
from tests.support.servers import StaticServer
from tests.support.wheels import write_deepspeed_wheel
from tests.unit.test_publish import MATRIX

pytestmark = pytest.mark.integration


def test_a_rerun_plans_nothing_once_everything_is_published(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    matrix = tmp_path / "matrix.yml"
    matrix.write_text(MATRIX)
    site = tmp_path / "site"
    site.mkdir()
    with StaticServer(site) as server:
        plan = ["plan", "--matrix", str(matrix), "--format", "json"]
        # nothing published yet: the index answers 404 and every cell is planned
        assert main([*plan, "--skip-published", server.url]) == 0
        assert len(json.loads(capsys.readouterr().out)["cells"]) == 2

        dist = tmp_path / "dist"
        write_deepspeed_wheel(dist, variant="cu130", torch="2.14", python="cp311")
        assert main(["publish", str(dist), "--dir", str(tmp_path / "published")]) == 0
        index = ["index", "--from", str(tmp_path / "published"), "--out", str(site), "--site-url", server.url]
        assert main(index) == 0
        capsys.readouterr()
        for location in (server.url, server.url + "simple/", server.url + "whl/cu130-torch2.14/simple/"):
            assert main([*plan, "--skip-published", location]) == 0
            cells = [c["id"] for c in json.loads(capsys.readouterr().out)["cells"]]
            assert cells == ["ds0.19.8-torch2.14-cpu-cp311-linux_x86_64"], location

        write_deepspeed_wheel(dist, variant="cpu", torch="2.14", python="cp311")
        assert main(["publish", str(dist), "--dir", str(tmp_path / "published")]) == 0
        assert main(index) == 0
        capsys.readouterr()
        assert main([*plan, "--skip-published", server.url]) == 3
        assert "already published" in capsys.readouterr().err
        requested = server.paths()
        assert "/simple/deepspeed/" in requested
        assert not [p for p in requested if p.endswith(".whl")], "listing what is published downloads no wheel"
