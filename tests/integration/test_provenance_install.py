"""Provenance from the workflow's bundle to `dswheels install --require-provenance`, through the real commands.

GitHub's bundle for each wheel is placed beside it (as wheels.yml's attest job does), `dswheels publish
--dir` makes the PEP 740 provenance, `dswheels index` serves it with ``data-provenance``, a loopback
server serves the site, and `dswheels install --require-provenance` (real pip into a venv with this
machine's torch 2.13.0+cpu) installs the verified wheel. Then the site is tampered with as a
compromised index host would (the page's sha256 rewritten to the swapped bytes, files swapped): each
refusal has its own exit code, comes before the wheel is downloaded, and leaves the venv as it was.

Real: sigstore-python's verification and pypi-attestations' identity rule, pip, the commands.
Synthetic: the Sigstore instance that signs (tests/support/sigstore_fake.py: its keys are the tests'
own; the bundle's shape is GitHub's), handed to install as ``--trusted-root``.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dswheels.kernel.attestations import provenance_from_bundle
from dswheels.kernel.naming import wheel_filename, wheel_version
from tests.conftest import require
from tests.integration.test_doctor_install import _cell, _env, _make_venv, _uv, build_wheel
from tests.support.servers import StaticServer
from tests.support.sigstore_fake import FakeSigstore, Identity

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

EXACT = _cell((2, 13), "cpu")  # the wheel this environment needs
OLDER = _cell((2, 13), "cpu", deepspeed=(0, 19, 7))  # another wheel of the release, attested too


@dataclass
class World:
    root: Path
    fake: FakeSigstore
    python: Path

    @property
    def trusted_root(self) -> Path:
        return self.root / "trusted_root.json"

    def sha(self, path: Path) -> str:
        return _sha(path)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    require(sys.platform.startswith("linux"), "the test wheels are linux_x86_64")
    root = tmp_path_factory.mktemp("provenance")
    fake = FakeSigstore()
    (root / "trusted_root.json").write_bytes(fake.trusted_root())
    dist = root / "dist"
    for cell in (EXACT, OLDER):
        wheel = build_wheel(dist, cell)
        # wheels.yml's attest job: one attestation per wheel, GitHub's bundle placed beside it
        (dist / f"{wheel.name}.sigstore.json").write_bytes(fake.attest([(wheel.name, _sha(wheel))]))
    build_wheel(dist / "unattested", _cell((2, 12), "cpu"))  # published without one
    published = root / "published"
    for source in (dist, dist / "unattested"):
        done = _dswheels("publish", str(source), "--dir", str(published))
        assert done.returncode == 0, done.stdout + done.stderr
    python = _make_venv(root / "venv", "2.13.0")
    return World(root=root, fake=fake, python=python)


def _dswheels(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dswheels", *args], capture_output=True, text=True, env=_env(), timeout=600, check=False
    )


def _installed(python: Path) -> str:
    done = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('deepspeed'))"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() if done.returncode == 0 else ""


def _uninstall(python: Path) -> None:
    subprocess.run([*_uv(), "pip", "uninstall", "-q", "--python", str(python), "deepspeed"], check=False, env=_env())


@dataclass
class Served:
    site: Path
    server: StaticServer

    @property
    def url(self) -> str:
        return self.server.url

    def wheel_fetched(self) -> bool:
        return any(p.endswith(".whl") for p in self.server.paths())


@contextlib.contextmanager
def _serve(world: World, name: str, tamper: Callable[[Path], None] | None = None) -> Iterator[Served]:
    """`dswheels index` of the published directory, served; ``tamper`` then changes the served site."""
    site = world.root / name
    with StaticServer(site) as server:
        done = _dswheels("index", "--from", str(world.root / "published"), "--out", str(site), "--site-url", server.url)
        assert done.returncode == 0, done.stdout + done.stderr
        if tamper is not None:
            tamper(site)
        yield Served(site=site, server=server)


def _install(world: World, served: Served, *extra: str) -> subprocess.CompletedProcess[str]:
    _uninstall(world.python)
    served.server.clear()
    return _dswheels("install", "--index", served.url, "--python", str(world.python), *extra)


def _require(world: World, repository: str = "octo/dswheels") -> list[str]:
    return ["--require-provenance", "--provenance-repository", repository, "--trusted-root", str(world.trusted_root)]


def _files(site: Path) -> Path:
    return site / "files"


def _replace(path: Path, data: bytes) -> None:
    """A new file under ``path``: the site's files are hard links to the published ones, which stay intact."""
    path.unlink()
    path.write_bytes(data)


def _swap_wheel(site: Path, name: str, new_bytes: bytes) -> None:
    """A compromised host: other bytes under the wheel's name, and every page's sha256 rewritten to match."""
    old = _sha(_files(site) / name)
    _replace(_files(site) / name, new_bytes)
    new = hashlib.sha256(new_bytes).hexdigest()
    for page in site.rglob("index.html"):
        text = page.read_text(encoding="utf-8")
        page.write_text(text.replace(old, new), encoding="utf-8")


def test_the_index_serves_provenance_only_for_attested_wheels(world: World) -> None:
    with _serve(world, "site-plain") as served:
        page = (served.site / "simple" / "deepspeed" / "index.html").read_text(encoding="utf-8")
        links = re.findall(r"<a [^>]*>", page)
        attested = {wheel_filename(EXACT), wheel_filename(OLDER)}
        for link in links:
            name = re.search(r'href="[^"]*/([^/"#]+)#', link)
            assert name is not None
            filename = name.group(1).replace("%2B", "+")
            expected = f'data-provenance="{served.url}files/{name.group(1)}.provenance"'
            assert (expected in link) == (filename in attested), link
        for filename in attested:
            assert (_files(served.site) / f"{filename}.provenance").is_file()


def test_install_requires_and_verifies_provenance_before_pip(world: World) -> None:
    with _serve(world, "site-good") as served:
        done = _install(world, served, *_require(world))
        assert done.returncode == 0, done.stdout + done.stderr
        assert _installed(world.python) == wheel_version(EXACT)
        assert "provenance verified: https://github.com/octo/dswheels/.github/workflows/wheels.yml@refs/tags/" in (
            done.stdout
        )
        order = [p for p in served.server.paths() if "/files/" in p]
        assert order[0].endswith(".provenance"), order  # verified before the wheel was fetched
        # dry run: verified too, nothing downloaded
        dry = _install(world, served, "--dry-run", *_require(world))
        assert dry.returncode == 0, dry.stderr
        assert not served.wheel_fetched()


def _refused(world: World, served: Served, code: int, *extra: str) -> str:
    done = _install(world, served, *extra)
    assert done.returncode == code, done.stdout + done.stderr
    assert _installed(world.python) == ""
    assert not served.wheel_fetched(), served.server.paths()  # refused before a byte of the wheel was read
    return done.stderr


def test_a_tampered_wheel_is_refused_with_exit_12(world: World) -> None:
    impostor = build_wheel(world.root / "impostor", EXACT, kind="jit")  # same name, other bytes

    def swap(site: Path) -> None:
        _swap_wheel(site, wheel_filename(EXACT), impostor.read_bytes())

    with _serve(world, "site-tampered", swap) as served:
        stderr = _refused(world, served, 12, *_require(world))
        assert f"it attests other bytes: sha256 {world.sha(world.root / 'published' / wheel_filename(EXACT))}" in (
            stderr
        )
        # without --require-provenance the index's sha256 is all there is: the swap would install
        assert _install(world, served, "--dry-run").returncode == 0


def test_a_bundle_for_another_wheel_is_refused_with_exit_13(world: World) -> None:
    def misplace(site: Path) -> None:
        files = _files(site)
        _replace(
            files / f"{wheel_filename(EXACT)}.provenance", (files / f"{wheel_filename(OLDER)}.provenance").read_bytes()
        )

    with _serve(world, "site-other-wheel", misplace) as served:
        stderr = _refused(world, served, 13, *_require(world))
        assert f"it attests another file: {wheel_filename(OLDER)}" in stderr


def test_another_repositorys_identity_is_refused_with_exit_14(world: World) -> None:
    name = wheel_filename(EXACT)
    sha = world.sha(world.root / "published" / name)
    mallory = world.fake.attest([(name, sha)], Identity(repository="mallory/dswheels"))

    def resign(site: Path) -> None:
        _replace(_files(site) / f"{name}.provenance", provenance_from_bundle(mallory, filename=name, sha256=sha))

    with _serve(world, "site-mallory", resign) as served:
        stderr = _refused(world, served, 14, *_require(world))
        assert "it is signed by https://github.com/mallory/dswheels/.github/workflows/wheels.yml" in stderr
        assert "not by octo/dswheels's wheels.yml" in stderr
        # the same attestation is what mallory/dswheels's own wheels would carry: it verifies for that repository
        assert _install(world, served, "--dry-run", *_require(world, "mallory/dswheels")).returncode == 0


def test_no_provenance_or_an_untrusted_root_is_refused_with_exit_11(world: World) -> None:
    def strip(site: Path) -> None:
        for page in site.rglob("index.html"):
            text = page.read_text(encoding="utf-8")
            page.write_text(re.sub(r' data-provenance="[^"]*"', "", text), encoding="utf-8")

    with _serve(world, "site-stripped", strip) as served:
        stderr = _refused(world, served, 11, *_require(world))
        assert "the index serves no provenance for" in stderr
    with _serve(world, "site-pinned") as served:
        # the pinned root is Sigstore's public-good one: the tests' own CA does not chain to it
        stderr = _refused(world, served, 11, "--require-provenance", "--provenance-repository", "octo/dswheels")
        assert "its signature does not verify against the trusted root" in stderr
        # a GitHub Pages URL names the repository; a loopback one names none (exit 2, before anything)
        assert _install(world, served, "--require-provenance").returncode == 2
