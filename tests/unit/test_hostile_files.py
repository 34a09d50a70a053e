"""What other processes read: published directories and sites are never replaced, never half-written,
never left with a killed run's debris, and readable by a server that runs as another user.

In-process and deterministic: a second writer is made to win the race at exactly the worst
moment (between the check and the write), and "killed" runs are reproduced by the files a
SIGKILL leaves. The same properties under real processes, racing and killed at random
points, are in tests/integration/test_hostile_races.py.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dswheels.cli import main
from dswheels.host.files import copy_bounded
from dswheels.index.effects.site_files import local_index_files, write_site
from dswheels.index.pages import render_site
from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import ConfigError, PublishError
from dswheels.kernel.model import Platform, Python, Variant
from dswheels.kernel.naming import cell_id
from dswheels.kernel.versions import TorchMinor
from dswheels.plan.matrix.parse import parse_matrix
from dswheels.plan.planner import Combo, plan
from dswheels.publish.step import collect_wheels
from dswheels.stores.directory import publish_dir, scan_directory
from tests.support.fuzz import examples
from tests.support.wheels import write_deepspeed_wheel

COMPAT = load_compat()
SITE = "https://example.org/ds/"
TORCH_INDEX = "https://download.pytorch.org/whl/{variant}"


@pytest.fixture
def usual_umask() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _listing(folder: Path) -> list[str]:
    """The names in ``folder``, less Windows' lock file (POSIX locks the folder itself)."""
    return sorted(p.name for p in folder.iterdir() if p.name != ".dswheels-lock")


def _modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in [root, *root.rglob("*")]}


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX modes")
def test_published_and_served_files_are_world_readable(tmp_path: Path, usual_umask: None) -> None:
    write_deepspeed_wheel(tmp_path / "dist", variant="cpu", torch="2.13")
    published = tmp_path / "published"
    publish_dir(collect_wheels([tmp_path / "dist"]), published)
    for name, mode in _modes(published).items():
        assert mode & 0o444 == 0o444, f"published/{name} is {oct(mode)}"
    wheels = scan_directory(published)
    site = tmp_path / "site"
    write_site(site, render_site(local_index_files(wheels), site_url=SITE, torch_index=TORCH_INDEX), wheels=wheels)
    for name, mode in _modes(site).items():
        want = 0o755 if (site / name).is_dir() else 0o644
        assert mode & want == want, f"site/{name} is {oct(mode)}"


def test_a_writer_that_wins_between_check_and_write_is_never_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two publishes of one name with other bytes: the second must fail, not replace the first."""
    ours = write_deepspeed_wheel(tmp_path / "ours", variant="cpu", torch="2.13", payload=100, seed=1)
    theirs = write_deepspeed_wheel(tmp_path / "theirs", variant="cpu", torch="2.13", payload=100, seed=2)
    published = tmp_path / "published"
    published.mkdir()
    real_copy = copy_bounded

    def copy_after_the_other_writer(src: BinaryIO, out: BinaryIO, *, limit: int, what: str) -> int:
        target = published / ours.name
        if not target.exists():  # the other run finishes its copy right now
            target.write_bytes(theirs.read_bytes())
        return real_copy(src, out, limit=limit, what=what)

    monkeypatch.setattr("dswheels.stores.directory.copy_bounded", copy_after_the_other_writer)
    with pytest.raises(PublishError, match="already published"):
        publish_dir(collect_wheels([ours]), published)
    assert (published / ours.name).read_bytes() == theirs.read_bytes()
    assert not (published / (ours.name + ".metadata")).exists()  # no sidecar of ours beside their wheel
    assert not [p for p in published.iterdir() if p.name.startswith(".dswheels-tmp-")]


def test_a_killed_publish_leaves_nothing_the_next_run_keeps(tmp_path: Path) -> None:
    """What SIGKILL leaves mid-copy (a temporary file, maybe half written) is swept by the next run."""
    wheel = write_deepspeed_wheel(tmp_path / "dist", variant="cpu", torch="2.13")
    published = tmp_path / "published"
    published.mkdir()
    (published / f".dswheels-tmp-{wheel.name}.k1ll3d").write_bytes(wheel.read_bytes()[:100])
    publish_dir(collect_wheels([wheel]), published)
    names = _listing(published)
    assert names == [".dswheels-ledger.json", wheel.name, wheel.name + ".metadata"]


def test_a_killed_index_leaves_nothing_the_next_run_keeps(tmp_path: Path) -> None:
    write_deepspeed_wheel(tmp_path / "published", variant="cpu", torch="2.13")
    site = tmp_path / "site"
    assert main(["index", "--from", str(tmp_path / "published"), "--out", str(site)]) == 0
    (tmp_path / ".dswheels-tmp-site.x7").mkdir()  # a staging folder, as SIGKILL leaves it
    (tmp_path / ".dswheels-tmp-site.x7" / "index.html").write_text("half")
    (tmp_path / ".dswheels-tmp-site.old").mkdir()
    assert main(["index", "--from", str(tmp_path / "published"), "--out", str(site)]) == 0
    assert _listing(tmp_path) == ["published", "site"]


def test_index_serves_metadata_read_from_the_wheel_not_a_foreign_sidecar(tmp_path: Path) -> None:
    """A wheel copied in by hand beside a .metadata of another wheel (issue 13: torch 2.1 vs 2.9)."""
    published = tmp_path / "published"
    wheel = write_deepspeed_wheel(published, variant="cu128", torch="2.9")
    import zipfile

    with zipfile.ZipFile(wheel) as archive:
        own = next(archive.read(n) for n in archive.namelist() if n.endswith("METADATA"))
    (published / (wheel.name + ".metadata")).write_bytes(own.replace(b"torch==2.9.*", b"torch==2.1.*"))
    site = tmp_path / "site"
    assert main(["index", "--from", str(published), "--out", str(site)]) == 0
    served = (site / "files" / (wheel.name + ".metadata")).read_bytes()
    assert b"torch==2.9.*" in served
    assert b"torch==2.1.*" not in served
    page = (site / "simple" / "deepspeed" / "index.html").read_text(encoding="utf-8")
    assert f"sha256={hashlib.sha256(served).hexdigest()}" in page


def test_index_leaves_out_a_manifest_that_describes_other_bytes(tmp_path: Path) -> None:
    from tests.support.wheels import write_manifest

    published = tmp_path / "published"
    wheel = write_deepspeed_wheel(published, variant="cpu", torch="2.13")
    manifest = write_manifest(wheel, "0" * 64)
    site = tmp_path / "site"
    assert main(["index", "--from", str(published), "--out", str(site)]) == 0
    assert not (site / "files" / manifest.name).exists()


def test_racing_index_runs_in_threads_both_finish_whole(tmp_path: Path) -> None:
    import threading

    for n in range(3):
        write_deepspeed_wheel(tmp_path / "published", variant="cpu", torch="2.13", version=f"0.19.{n}")
    wheels = scan_directory(tmp_path / "published")
    pages = render_site(local_index_files(wheels), site_url=SITE, torch_index=TORCH_INDEX)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            for _ in range(5):
                write_site(tmp_path / "site", pages, wheels=wheels)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert _listing(tmp_path) == ["published", "site"]
    assert len(list((tmp_path / "site" / "files").iterdir())) == 6


# --- one expansion ----------------------------------------------------------------------------------------------

MATRIX = """
schema: 1
deepspeed: ["0.19.8", "0.19.7"]
torch:
  - {version: "2.13", variants: [cpu]}
  - {version: "2.14", variants: [cpu, cu130]}
python: ["3.11", "3.12"]
platforms: [linux_x86_64, win_amd64]
runners:
  linux_x86_64: {build: [ubuntu-22.04], smoke: [self-hosted]}
  win_amd64: {build: [windows-2022], smoke: [self-hosted]}
"""


def test_include_escapes_exclude_the_same_for_the_matrix_and_one_axis() -> None:
    """A tag push plans one axis (`--deepspeed X`); it must plan the matrix's cells of X, no more, no fewer."""
    text = MATRIX + (
        "exclude: [{deepspeed: '0.19.8'}]\n"
        "include: [{deepspeed: '0.19.8', torch: '2.13', variant: cpu, python: '3.11', platform: linux_x86_64}]\n"
    )
    spec = parse_matrix(text, "m.yml", COMPAT)
    whole = {cell_id(p.cell) for p in plan(spec, COMPAT).planned}
    one_axis = {cell_id(p.cell) for p in plan(spec, COMPAT, combo=Combo(deepspeed=(0, 19, 8))).planned}
    assert one_axis == {c for c in whole if c.startswith("ds0.19.8-")} == {"ds0.19.8-torch2.13-cpu-cp311-linux_x86_64"}


_AXIS = {
    "deepspeed": ["0.19.8", "0.19.7"],
    "torch": ["2.13", "2.14"],
    "variant": ["cpu", "cu130"],
    "python": ["3.11", "3.12"],
    "platform": ["linux_x86_64", "win_amd64"],
}
_PATTERN = st.fixed_dictionaries({}, optional={k: st.sampled_from([*v, "*"]) for k, v in _AXIS.items()}).filter(bool)
_CELL = st.fixed_dictionaries({k: st.sampled_from(v) for k, v in _AXIS.items()})


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    exclude=st.lists(_PATTERN, max_size=3),
    include=st.lists(_CELL, max_size=3),
    combo=st.fixed_dictionaries({}, optional={k: st.sampled_from(v) for k, v in _AXIS.items()}),
)
def test_one_expansion(exclude: list[dict[str, str]], include: list[dict[str, str]], combo: dict[str, str]) -> None:
    """Planning some axes gives exactly the whole matrix's cells with those values (when the matrix has them)."""
    doc = yaml.safe_load(MATRIX)
    doc["exclude"], doc["include"] = exclude, include
    try:
        spec = parse_matrix(yaml.safe_dump(doc), "m.yml", COMPAT)
    except ConfigError:
        return  # e.g. an exclude that matches nothing
    if len(combo) == 5:
        return  # five axes name one exact cell, whatever the matrix says (documented)
    wanted = Combo(
        deepspeed=tuple(map(int, combo["deepspeed"].split("."))) if "deepspeed" in combo else None,
        torch=TorchMinor(tuple(map(int, combo["torch"].split(".")))) if "torch" in combo else None,
        variant=Variant.parse(combo["variant"]) if "variant" in combo else None,
        python=Python.parse(combo["python"]) if "python" in combo else None,
        platform=Platform(combo["platform"]) if "platform" in combo else None,
    )
    if "variant" in combo and (combo.get("torch") != "2.14"):
        return  # --cuda replaces the variants of every torch (names combinations the matrix lacks; documented)
    whole = [c for c in spec.axis_cells() if wanted.matches(c)]
    from dswheels.plan.planner import _combo_cells

    assert sorted(map(cell_id, _combo_cells(spec, wanted))) == sorted(map(cell_id, whole))
