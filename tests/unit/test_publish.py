"""Publishing to a directory, the upload request we build, and plan --skip-published."""

from __future__ import annotations

import json
from email.parser import BytesParser
from email.policy import HTTP
from pathlib import Path

import pytest
import requests

from dswheels.cli import main
from dswheels.host.files import sha256_file
from dswheels.kernel.errors import ConfigError, PublishError
from dswheels.publish.step import collect_wheels
from dswheels.stores.directory import publish_dir
from dswheels.stores.upload_server import _multipart, upload_credentials
from tests.support.wheels import write_deepspeed_wheel, write_manifest

MATRIX = """\
schema: 1
deepspeed: ["0.19.8"]
torch:
  - {version: "2.14", variants: [cu130, cpu]}
python: ["3.11"]
platforms: [linux_x86_64]
runners:
  linux_x86_64: {build: [ubuntu-24.04], smoke: [self-hosted, linux, gpu]}
"""


def _manifest(wheel: Path, sha256: str) -> None:
    write_manifest(wheel, sha256)


def test_publishing_to_a_directory_is_idempotent_and_never_overwrites(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    first = write_deepspeed_wheel(dist, variant="cu128", torch="2.9")
    second = write_deepspeed_wheel(dist, variant="cpu", torch="2.9")
    _manifest(first, sha256_file(first))
    dest = tmp_path / "published"
    result = publish_dir(collect_wheels([dist]), dest)
    assert sorted(result.uploaded) == sorted(
        [
            first.name,
            first.name + ".metadata",
            first.name.removesuffix(".whl") + ".manifest.json",
            second.name,
            second.name + ".metadata",
        ]
    )
    assert (dest / first.name).read_bytes() == first.read_bytes()
    manifest = first.name.removesuffix(".whl") + ".manifest.json"
    assert (dest / manifest).read_bytes() == (dist / manifest).read_bytes()  # the bytes checked are those published
    again = publish_dir(collect_wheels([dist]), dest)
    assert again.uploaded == []
    assert len(again.present) == 5

    other = tmp_path / "other"
    write_deepspeed_wheel(other, variant="cu128", torch="2.9", payload=10)
    write_deepspeed_wheel(other, variant="cpu", torch="2.9", payload=10)
    write_deepspeed_wheel(other, variant="cu130", torch="2.9")  # new: still not written, the run is refused whole
    with pytest.raises(PublishError, match="2 file\\(s\\) are already published") as info:
        publish_dir(collect_wheels([other]), dest)
    assert first.name in (info.value.details or "")
    assert second.name in (info.value.details or "")
    assert (dest / first.name).read_bytes() == first.read_bytes()
    assert not list(dest.glob("*cu130*"))
    assert "build tag" in (info.value.hint or "")


def test_a_manifest_that_describes_other_bytes_stops_the_publish(tmp_path: Path) -> None:
    wheel = write_deepspeed_wheel(tmp_path / "dist")
    _manifest(wheel, "0" * 64)
    with pytest.raises(PublishError, match="describes other bytes"):
        publish_dir(collect_wheels([tmp_path / "dist"]), tmp_path / "published")
    assert not (tmp_path / "published").exists() or not any((tmp_path / "published").iterdir())


def test_collecting_wheels_says_what_is_wrong(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="no wheels in"):
        collect_wheels([tmp_path / "empty"])
    with pytest.raises(ConfigError, match="no such wheel or directory"):
        collect_wheels([tmp_path / "missing"])
    a = write_deepspeed_wheel(tmp_path / "a")
    write_deepspeed_wheel(tmp_path / "b")
    with pytest.raises(ConfigError, match="given twice"):
        collect_wheels([tmp_path / "a", tmp_path / "b"])
    assert [w.path for w in collect_wheels([a, tmp_path / "a"])] == [a]  # the same file twice is one


def test_the_upload_request_is_a_sized_multipart_form_with_the_wheel(tmp_path: Path) -> None:
    wheels = collect_wheels([write_deepspeed_wheel(tmp_path, payload=300_000)])
    body, content_type, size = _multipart(wheels[0])
    prepared = requests.Request(
        "POST", "http://127.0.0.1/", data=body, headers={"Content-Type": content_type}
    ).prepare()
    assert prepared.headers["Content-Length"] == str(size)  # not chunked: pypiserver cannot parse chunked bodies
    assert "Transfer-Encoding" not in prepared.headers
    raw = body.read()
    assert len(raw) == size
    message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
    parts = {part.get_param("name", header="content-disposition"): part for part in message.iter_parts()}
    assert parts[":action"].get_content() == "file_upload"
    assert parts["name"].get_content() == "deepspeed"
    assert parts["version"].get_content() == "0.19.8+cu128torch2.9"
    assert parts["sha256_digest"].get_content() == wheels[0].sha256
    assert parts["requires_dist"].get_content() == "torch==2.9.*"
    assert parts["content"].get_payload(decode=True) == wheels[0].path.read_bytes()


def test_upload_credentials_come_from_our_variables_or_twines() -> None:
    assert upload_credentials({"TWINE_USERNAME": "t", "TWINE_PASSWORD": "p"}) == ("t", "p")
    env = {"DSWHEELS_UPLOAD_USERNAME": "d", "DSWHEELS_UPLOAD_PASSWORD": "q", "TWINE_PASSWORD": "p"}
    assert upload_credentials(env) == ("d", "q")
    assert upload_credentials({}) == (None, None)


# --- plan --skip-published ------------------------------------------------------------------------


def test_plan_skips_cells_whose_wheel_is_published(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    matrix = tmp_path / "matrix.yml"
    matrix.write_text(MATRIX)
    published = tmp_path / "published"
    # a re-spin with a build tag counts as its cell
    write_deepspeed_wheel(published, variant="cu130", torch="2.14", python="cp311", build="1")
    assert main(["plan", "--matrix", str(matrix), "--format", "json", "--skip-published", str(published)]) == 0
    out = capsys.readouterr()
    cells = [cell["id"] for cell in json.loads(out.out)["cells"]]
    assert cells == ["ds0.19.8-torch2.14-cpu-cp311-linux_x86_64"]
    assert "skipped 1 of 2 cells" in out.err

    write_deepspeed_wheel(published, variant="cpu", torch="2.14", python="cp311")
    assert main(["plan", "--matrix", str(matrix), "--skip-published", str(published)]) == 3
    assert "all 2 selected cells are already published" in capsys.readouterr().err
    argv = ["plan", "--matrix", str(matrix), "--format", "github", "--allow-empty", "--skip-published", str(published)]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out) == {"include": []}


def test_the_index_trusts_the_ledger_only_for_untouched_wheels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from dswheels.stores import directory as store_directory
    from dswheels.stores.ledger import load_ledger
    from dswheels.stores.wheel_ref import LocalWheel, local_wheel

    write_deepspeed_wheel(tmp_path / "dist", variant="cu128", torch="2.9")
    write_deepspeed_wheel(tmp_path / "dist", variant="cpu", torch="2.9")
    published = tmp_path / "published"
    publish_dir(collect_wheels([tmp_path / "dist"]), published)
    ledger = load_ledger(published)
    assert sorted(ledger) == sorted(p.name for p in (tmp_path / "dist").iterdir())
    read: list[str] = []
    original = local_wheel

    def spy(path: Path, *, follow_symlinks: bool = True) -> LocalWheel:
        read.append(path.name)
        return original(path, follow_symlinks=follow_symlinks)

    monkeypatch.setattr(store_directory, "local_wheel", spy)
    first = store_directory.scan_directory(published)
    assert read == []  # every fact came from the ledger
    touched = published / first[0].wheel.filename
    os.utime(touched, ns=(touched.stat().st_atime_ns, touched.stat().st_mtime_ns + 1))
    second = store_directory.scan_directory(published)
    assert read == [touched.name]  # a file changed behind publish's back is read again
    assert [(w.sha256, w.metadata_sha256, w.requires_python) for w in first] == [
        (w.sha256, w.metadata_sha256, w.requires_python) for w in second
    ]
