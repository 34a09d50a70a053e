"""PyPI JSON and where torch comes from (pure parts)."""

from __future__ import annotations

import json

import pytest

from dswheels.kernel.pypi_project import PypiFile, read_pypi_project
from dswheels.kernel.sources import TorchSource, TorchSourceKind, parse_pip_config, uv_index_args
from tests.conftest import DATA

SHA = "9e491abd0827ea5c389dd702e15e11e13d83d904bac4a20d6c2a4cb37207a9af"
BLAKE = "bcd83162fc810870df1183e686ec70b57028b464a5940b148a90767c727f113c"
# https://pypi.org/pypi/deepspeed/json as the dev machine's mirror serves it (relative file URLs), recorded
PYPI = json.loads((DATA / "upstream" / "pypi" / "deepspeed" / "json").read_text(encoding="utf-8"))


def sdist_from_pypi_json(data: object, *, version: str, json_url: str) -> PypiFile:
    return read_pypi_project(data, json_url=json_url).sdist(version)


def test_sdist_from_pypi_json_resolves_relative_urls() -> None:
    info = sdist_from_pypi_json(PYPI, version="0.19.8", json_url="https://pypi.org/pypi/deepspeed/json")
    assert info.url == f"https://pypi.org/packages/packages/bc/d8/{BLAKE[4:]}/deepspeed-0.19.8.tar.gz"
    assert (info.sha256, info.size, info.filename) == (SHA, 2020482, "deepspeed-0.19.8.tar.gz")
    absolute = json.loads(json.dumps(PYPI).replace("../../packages", "https://files.example/packages"))
    assert sdist_from_pypi_json(absolute, version="0.19.8", json_url="https://x/pypi/deepspeed/json").url.startswith(
        "https://files.example/"
    )


def test_sdist_from_pypi_json_errors() -> None:
    with pytest.raises(LookupError, match=r"no release 0\.99\.0"):
        sdist_from_pypi_json(PYPI, version="0.99.0", json_url="https://pypi.org/pypi/deepspeed/json")
    yanked = json.loads(json.dumps(PYPI))
    for entry in yanked["releases"]["0.19.7"]:
        entry["yanked"] = True
    with pytest.raises(LookupError, match="no \\(unyanked\\) sdist"):
        sdist_from_pypi_json(yanked, version="0.19.7", json_url="https://pypi.org/pypi/deepspeed/json")
    yanked["releases"]["0.19.7"] = []
    with pytest.raises(LookupError, match="no \\(unyanked\\) sdist"):
        sdist_from_pypi_json(yanked, version="0.19.7", json_url="https://pypi.org/pypi/deepspeed/json")
    bad = json.loads(json.dumps(PYPI))
    bad["releases"]["0.19.8"][0]["digests"] = {"md5": "x"}
    with pytest.raises(ValueError, match="sha256"):
        sdist_from_pypi_json(bad, version="0.19.8", json_url="https://pypi.org/pypi/deepspeed/json")
    with pytest.raises(ValueError, match="expected an object"):
        sdist_from_pypi_json([], version="0.19.8", json_url="u")


def test_pip_config_of_this_kind_of_machine() -> None:
    # `pip config list` on a machine with a pip.conf and PIP_FIND_LINKS
    text = (
        ":env:.cert='/etc/ssl/certs/ca-certificates.crt'\n"
        ":env:.find-links='/opt/wheels'\n"
        "global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'\n"
        "global.find-links='/opt/wheels'\n"
        "global.index-url='https://mirror.example/simple'\n"
        "user.index-url='https://ignored.example/simple'\n"
    )
    config = parse_pip_config(text)
    assert config == {
        "find-links": ["/opt/wheels"],
        "extra-index-url": ["file:///opt/pypi/simple", "file:///opt/pypi-more/simple"],
        "index-url": ["https://mirror.example/simple"],
    }
    assert uv_index_args(TorchSource(TorchSourceKind.PIP), plan_index="", pip_config=config) == [
        "--default-index",
        "https://mirror.example/simple",
        "--index",
        "file:///opt/pypi/simple",
        "--index",
        "file:///opt/pypi-more/simple",
        "--find-links",
        "/opt/wheels",
    ]


def test_torch_sources() -> None:
    plan_index = "https://download.pytorch.org/whl/cu130"
    assert uv_index_args(TorchSource(TorchSourceKind.PLAN), plan_index=plan_index, pip_config={}) == [
        "--index",
        plan_index,
    ]
    mirror = TorchSource(TorchSourceKind.INDEX, "http://127.0.0.1:8000/simple")
    assert uv_index_args(mirror, plan_index=plan_index, pip_config={}) == ["--index", "http://127.0.0.1:8000/simple"]
    assert uv_index_args(TorchSource(TorchSourceKind.LINKS, "/w"), plan_index=plan_index, pip_config={}) == [
        "--find-links",
        "/w",
    ]
    assert "pip" in TorchSource(TorchSourceKind.PIP).describe()
