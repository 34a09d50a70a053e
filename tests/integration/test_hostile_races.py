"""Real processes racing and being killed: the published set and the site stay exactly one writer's bytes.

* Several ``dswheels publish`` runs of one name with other bytes, at once, into a directory and
  into a real pypiserver: one wins, every other run fails (exit 7), nothing is replaced.
* Several ``dswheels index`` runs at once on one site, with a reader checking the site the whole
  time: every run succeeds and the reader never sees a page that links a missing or wrong file.
* ``publish`` and ``index`` killed with SIGKILL at random points, then run again: the set is
  whole, the site is whole at every moment, and nothing the killed run left survives the next.

The kill points are drawn from a seeded generator (``DSWHEELS_RACE_SEED`` picks another), the
number of rounds from ``DSWHEELS_RACE_ROUNDS`` (the nox ``fuzz`` session raises it).
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.conftest import ROOT
from tests.support.wheels import write_deepspeed_wheel

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL and flock are POSIX (docs/hostile-input.md)"),
]

ROUNDS = int(os.environ.get("DSWHEELS_RACE_ROUNDS", "4"))
SEED = int(os.environ.get("DSWHEELS_RACE_SEED", "13"))


def _start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "dswheels", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(process: subprocess.Popen[str]) -> tuple[int, str]:
    _out, err = process.communicate(timeout=300)
    assert "Traceback" not in err, err
    return process.returncode, err


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _metadata_of(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as archive:
        return next(archive.read(n) for n in archive.namelist() if n.endswith(".dist-info/METADATA"))


def _debris(*folders: Path) -> list[str]:
    return [p.name for folder in folders if folder.is_dir() for p in folder.iterdir() if ".dswheels-tmp-" in p.name]


def _check_published(published: Path, sources: dict[str, set[str]]) -> None:
    """Every wheel is one writer's bytes, its .metadata is that wheel's own, nothing is half-written."""
    for wheel in published.glob("*.whl"):
        assert _sha(wheel) in sources[wheel.name], f"{wheel.name}: bytes no writer published"
        sidecar = wheel.with_name(wheel.name + ".metadata")
        if sidecar.exists():
            assert sidecar.read_bytes() == _metadata_of(wheel)
    for sidecar in published.glob("*.metadata"):
        assert sidecar.with_name(sidecar.name.removesuffix(".metadata")).exists(), "a sidecar without its wheel"
    assert _debris(published) == []


# --- racing publishes -------------------------------------------------------------------------------------------


def test_racing_publishes_of_one_name_into_a_directory(tmp_path: Path) -> None:
    for round_ in range(ROUNDS):
        base = tmp_path / f"r{round_}"
        dists = [base / f"dist{i}" for i in range(4)]
        wheels = [
            write_deepspeed_wheel(d, variant="cpu", torch="2.13", payload=2_000_000, seed=i)
            for i, d in enumerate(dists)
        ]
        published = base / "published"
        runs = [_start("publish", "--dir", str(published), str(d)) for d in dists]
        results = [_finish(r) for r in runs]
        winners = [i for i, (code, _err) in enumerate(results) if code == 0]
        assert len(winners) == 1, results
        assert all(code == 7 and "already published" in err for code, err in results if code != 0), results
        (winner,) = winners
        assert _sha(published / wheels[0].name) == _sha(wheels[winner])
        _check_published(published, {wheels[0].name: {_sha(w) for w in wheels}})


def test_racing_publishes_of_the_same_bytes_all_succeed(tmp_path: Path) -> None:
    wheel = write_deepspeed_wheel(tmp_path / "dist", variant="cpu", torch="2.13", payload=1_000_000)
    published = tmp_path / "published"
    results = [_finish(r) for r in [_start("publish", "--dir", str(published), str(wheel)) for _ in range(4)]]
    assert [code for code, _err in results] == [0, 0, 0, 0], results
    _check_published(published, {wheel.name: {_sha(wheel)}})


def test_racing_publishes_to_an_upload_server(pypiserver: tuple[str, Path], tmp_path: Path) -> None:
    url, packages = pypiserver
    wheels = [
        write_deepspeed_wheel(tmp_path / f"dist{i}", variant="cpu", torch="2.13", payload=1_000_000, seed=i)
        for i in range(3)
    ]
    runs = [_start("publish", "--repository-url", url, str(w)) for w in wheels]
    results = [_finish(r) for r in runs]
    winners = [i for i, (code, _err) in enumerate(results) if code == 0]
    assert len(winners) == 1, results
    assert all(code == 7 for code, _err in results if code != 0), results
    assert _sha(packages / wheels[0].name) == _sha(wheels[winners[0]])


# --- racing index runs, with a reader ---------------------------------------------------------------------------

_HREF = re.compile(r'href="([^"#]+)#sha256=([0-9a-f]{64})"')


def _check_site(site: Path) -> int:
    """Every file the project page links exists with the linked sha256; returns how many it links."""
    page = site / "simple" / "deepspeed" / "index.html"
    links = _HREF.findall(page.read_text(encoding="utf-8"))
    for href, sha in links:
        target = (page.parent / unquote(href)).resolve()
        assert _sha(target) == sha, f"{href}: linked but missing or other bytes"
    return len(links)


def test_racing_index_runs_while_a_reader_reads(tmp_path: Path) -> None:
    published = tmp_path / "published"
    for n in range(6):
        write_deepspeed_wheel(published, variant="cpu", torch="2.13", version=f"0.19.{n}", payload=200_000)
    site = tmp_path / "site"
    assert _finish(_start("index", "--from", str(published), "--out", str(site)))[0] == 0
    stop = threading.Event()
    seen: list[int] = []
    problems: list[BaseException] = []

    def reader() -> None:
        try:
            while not stop.is_set():
                seen.append(_check_site(site))
        except BaseException as exc:  # noqa: BLE001 - reported below
            problems.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for _ in range(ROUNDS):
            results = [
                _finish(r) for r in [_start("index", "--from", str(published), "--out", str(site)) for _ in range(3)]
            ]
            assert [code for code, _err in results] == [0, 0, 0], results
    finally:
        stop.set()
        thread.join()
    assert problems == [], f"a reader saw a half-written site: {problems[0]!r}"
    assert seen, "the reader never read"
    assert set(seen) == {6}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["published", "site"]


# --- killed at random points, then the next run -----------------------------------------------------------------


def _kill_after(process: subprocess.Popen[str], delay: float) -> None:
    time.sleep(delay)
    if process.poll() is None:
        process.send_signal(signal.SIGKILL)
    process.communicate(timeout=60)


def test_publish_killed_at_random_points_then_run_again(tmp_path: Path) -> None:
    rng = random.Random(SEED)  # noqa: S311 - kill points, not secrets
    dist = tmp_path / "dist"
    wheels = [
        write_deepspeed_wheel(dist, variant="cpu", torch="2.13", version=f"0.19.{n}", payload=3_000_000)
        for n in range(5)
    ]
    sources = {w.name: {_sha(w)} for w in wheels}
    start = time.monotonic()
    assert _finish(_start("publish", "--dir", str(tmp_path / "timing"), str(dist)))[0] == 0
    whole = time.monotonic() - start
    for round_ in range(ROUNDS * 2):
        published = tmp_path / f"published{round_ % 2}"  # half the rounds resume an earlier killed set
        _kill_after(_start("publish", "--dir", str(published), str(dist)), rng.uniform(0.05, whole))
        if published.exists():
            for wheel in published.glob("*.whl"):
                assert _sha(wheel) in sources[wheel.name], "a killed run left a half-written wheel under its name"
        code, err = _finish(_start("publish", "--dir", str(published), str(dist)))
        assert code == 0, err
        _check_published(published, sources)
        assert sorted(p.name for p in published.glob("*.whl")) == sorted(sources)


def test_index_killed_at_random_points_then_run_again(tmp_path: Path) -> None:
    rng = random.Random(SEED + 1)  # noqa: S311 - kill points, not secrets
    published = tmp_path / "published"
    for n in range(8):
        write_deepspeed_wheel(published, variant="cpu", torch="2.13", version=f"0.19.{n}", payload=500_000)
    site = tmp_path / "site"
    start = time.monotonic()
    assert _finish(_start("index", "--from", str(published), "--out", str(site)))[0] == 0
    whole = time.monotonic() - start
    for _ in range(ROUNDS * 2):
        write_deepspeed_wheel(published, variant="cpu", torch="2.13", version=f"0.20.{rng.randrange(100)}")
        _kill_after(_start("index", "--from", str(published), "--out", str(site)), rng.uniform(0.05, whole))
        assert _check_site(site) >= 8, "a killed run left the site half-written"
        code, err = _finish(_start("index", "--from", str(published), "--out", str(site)))
        assert code == 0, err
        assert _check_site(site) == len(list(published.glob("*.whl")))
        assert sorted(p.name for p in tmp_path.iterdir()) == ["published", "site"]


def test_sigterm_unwinds_and_leaves_nothing(tmp_path: Path) -> None:
    """A cancelled CI job gets SIGTERM: the run stops with 143 and removes its temporary files."""
    dist = tmp_path / "dist"
    for n in range(4):
        write_deepspeed_wheel(dist, variant="cpu", torch="2.13", version=f"0.19.{n}", payload=15_000_000)
    for round_ in range(ROUNDS):
        published = tmp_path / f"published{round_}"
        process = _start("publish", "--dir", str(published), str(dist))
        deadline = time.monotonic() + 60
        while not _debris(published) and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)  # until it is writing a file
        assert process.poll() is None, "publish finished before it could be interrupted"
        process.send_signal(signal.SIGTERM)
        code, err = _finish(process)
        assert code == 143, err
        assert "terminated" in err
        assert _debris(published) == []
        _check_published(published, {w.name: {_sha(w)} for w in dist.glob("*.whl")})
