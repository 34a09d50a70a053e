"""pip and uv install from the generated index, over real HTTP on loopback, in fresh venvs.

The world these tests build (once per session):

- our site, from ``dswheels publish`` + ``dswheels index``, served by a static server;
- a stand-in for PyPI (``--index-url``) that offers *newer* DeepSpeed sdists (0.20.0, and a
  plain 0.19.8) whose build fails loudly, and a newer torch (2.11.0);
- a stand-in for PyTorch's per-variant indexes with small fake torch builds (2.9.1+cu128,
  2.10.0+cu128, ...): the wheels keep their real ``torch==M.m.*`` pin, and this is what
  satisfies it without downloading gigabytes.

Every installer is isolated from the machine's pip.conf, environment and caches
(tests/support/installers.py), so the server logs show everything it fetched.
"""

from __future__ import annotations

import hashlib
import html
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from pypi_simple import IndexPage, ProjectPage, PyPISimple

from dswheels.cli import main
from dswheels.kernel.index_links import install_command
from dswheels.kernel.naming import PROJECT
from tests.support.installers import Installer, clean_env, uv_binary
from tests.support.servers import StaticServer
from tests.support.wheels import (
    interpreter_tag,
    write_deepspeed_wheel,
    write_fake_sdist,
    write_fake_torch,
    write_wheel,
)

pytestmark = pytest.mark.integration

HERE = interpreter_tag()
OTHER = "cp312" if HERE != "cp312" else "cp313"


@dataclass
class World:
    root: Path
    site: StaticServer
    aux: StaticServer

    @property
    def pypi(self) -> str:
        return self.aux.url + "pypi/"

    def torch_index(self, variant: str) -> str:
        return f"{self.aux.url}torch/{variant}/"

    def home(self) -> str:
        return (self.root / "site" / "index.html").read_text(encoding="utf-8")

    def line(self, tool: str, part: str) -> str:
        """The install line for ``part`` exactly as the human page shows it."""
        match = re.search(rf'<h3 id="{re.escape(part)}">.*?<pre><code>(.*?)</code></pre>', self.home(), re.DOTALL)
        assert match, f"no install lines for {part} on the page"
        lines = html.unescape(match.group(1)).splitlines()
        return next(line for line in lines if line.startswith("uv " if tool == "uv" else "pip "))

    def uv_project(self, part: str) -> str:
        """The uv project lines for ``part`` exactly as the human page shows them."""
        match = re.search(
            rf'<h3 id="{re.escape(part)}">.*?<pre class="uv-project"><code>(.*?)</code></pre>', self.home(), re.DOTALL
        )
        assert match, f"no uv project lines for {part} on the page"
        return html.unescape(match.group(1))

    def clear_logs(self) -> None:
        self.site.clear()
        self.aux.clear()


def _build(root: Path) -> None:
    dist = root / "dist"
    for version in ("0.19.7", "0.19.8"):
        write_deepspeed_wheel(dist, version=version, variant="cu128", torch="2.9")
        write_deepspeed_wheel(dist, version=version, variant="cu128", torch="2.9", python=OTHER, platform="win_amd64")
        write_deepspeed_wheel(dist, version=version, variant="cpu", torch="2.9")
    write_deepspeed_wheel(dist, version="0.19.8", variant="cu128", torch="2.10")
    # a newer wheel this Python cannot use: installers must skip it from data-requires-python alone
    write_deepspeed_wheel(dist, version="0.19.9", variant="cu128", torch="2.10", requires_python=">=3.99")
    # a partition with nothing for this machine
    write_deepspeed_wheel(dist, version="0.19.8", variant="cu126", torch="2.9", python=OTHER, platform="win_amd64")
    aux = root / "aux"
    for variant in ("cu128", "cu126", "cpu"):
        for version in ("2.9.1", "2.10.0"):
            write_fake_torch(aux / "torch" / variant / "torch", f"{version}+{variant}")
    write_fake_sdist(aux / "pypi" / PROJECT, version="0.20.0")
    write_fake_sdist(aux / "pypi" / PROJECT, version="0.19.8")
    write_fake_torch(aux / "pypi" / "torch", "2.11.0")
    (root / "yanked.txt").write_text("deepspeed-0.19.8+cputorch2.9-* crashes in cpu_adam (test)\n")


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("index-world")
    _build(root)
    with StaticServer(root / "site") as site, StaticServer(root / "aux") as aux:
        assert main(["publish", str(root / "dist"), "--dir", str(root / "published")]) == 0
        code = main(
            [
                "index",
                "--from",
                str(root / "published"),
                "--out",
                str(root / "site"),
                "--site-url",
                site.url,
                "--torch-index",
                aux.url + "torch/{variant}/",
                "--yanked",
                str(root / "yanked.txt"),
            ]
        )
        assert code == 0
        yield World(root=root, site=site, aux=aux)


def _downloads(server: StaticServer, suffix: str) -> list[str]:
    return [path for path in server.paths(200) if path.endswith(suffix)]


TOOLS = ["pip", "uv"]


def test_pypi_simple_reads_every_page_the_server_serves(world: World) -> None:
    """Every PEP 503 page of the generated site, fetched over HTTP, parsed by pypi-simple, checked against the bytes."""
    pages = sorted(world.root.joinpath("site").rglob("index.html"))
    project_pages = [p for p in pages if p.parent.name == PROJECT or p.parent.parent.name == "whl"]
    assert len(project_pages) == 1 + 2 * len(list((world.root / "site" / "whl").iterdir()))
    with PyPISimple() as client:
        for page_path in project_pages:
            rel = page_path.parent.relative_to(world.root / "site").as_posix()
            url = f"{world.site.url}{rel}/"
            response = requests.get(url, timeout=10)
            page = ProjectPage.from_response(response, PROJECT)
            assert page.repository_version == "1.0"
            assert page.packages, url
            for package in page.packages:
                assert (
                    package.digests["sha256"]
                    == hashlib.sha256(requests.get(package.url, timeout=10).content).hexdigest()
                )
                assert package.has_metadata
                metadata = client.get_package_metadata_bytes(package)  # checks the data-core-metadata digest
                assert metadata.startswith(b"Metadata-Version:")
                assert package.requires_python is not None
                assert package.is_yanked == package.filename.startswith("deepspeed-0.19.8+cputorch2.9-")
        root = IndexPage.from_response(requests.get(world.site.url + "simple/", timeout=10))
        assert root.projects == [PROJECT]


@pytest.mark.parametrize("tool", TOOLS)
def test_the_install_line_from_the_page_installs_our_wheel_and_torch_build(
    world: World, tool: str, tmp_path: Path
) -> None:
    world.clear_logs()
    installer = Installer(tmp_path, tool)
    line = world.line(tool, "cu128-torch2.9")
    assert '"deepspeed==0.19.8+cu128torch2.9"' in line
    # --index-url stands in for pypi.org, which offers newer DeepSpeed sdists and a newer torch
    result = installer.run(tool, line, "--index-url", world.pypi)
    assert result.ok, result.output
    assert (
        installer.python_eval("import deepspeed; print(deepspeed.BUILD)") == f"0.19.8+cu128torch2.9-{HERE}-linux_x86_64"
    )
    assert installer.installed()["torch"] == "2.9.1+cu128"  # the pin, from PyTorch's cu128 index
    assert _downloads(world.site, ".whl") == [f"/files/deepspeed-0.19.8+cu128torch2.9-{HERE}-{HERE}-linux_x86_64.whl"]
    assert not [p for p in world.aux.paths() if p.endswith(".tar.gz")], "a PyPI sdist was fetched"
    assert not [p for p in world.site.paths() if "files/" in p and "cu128torch2.9" not in p]


def test_pip_without_the_exact_pin_would_compile_pypis_newer_sdist(world: World, tmp_path: Path) -> None:
    """Why the install line pins: pip merges indexes, so the partition alone does not protect."""
    pip = Installer(tmp_path, "pip")
    unpinned = pip.pip(
        "install",
        PROJECT,
        "--index-url",
        world.pypi,
        "--extra-index-url",
        world.site.url + "whl/cu128-torch2.9/simple/",
    )
    assert not unpinned.ok
    assert "this sdist must never be built" in unpinned.output
    # uv takes a package from the first index that has it: the partition wins even unpinned
    uv = Installer(tmp_path, "uv")
    result = uv.uv(
        "pip",
        "install",
        PROJECT,
        "--index-url",
        world.pypi,
        "--extra-index-url",
        world.site.url + "whl/cu128-torch2.9/simple/",
        "--extra-index-url",
        world.torch_index("cu128"),
    )
    assert result.ok, result.output
    assert uv.installed()["deepspeed"] == "0.19.8+cu128torch2.9"


@pytest.mark.parametrize("tool", TOOLS)
def test_the_partition_also_works_as_a_find_links_page(world: World, tool: str, tmp_path: Path) -> None:
    installer = Installer(tmp_path, tool)
    args = [
        "install",
        "deepspeed==0.19.8+cu128torch2.9",
        "--no-index",
        "--find-links",
        world.site.url + "whl/cu128-torch2.9/",
        "--find-links",
        world.torch_index("cu128") + "torch/",
    ]
    result = installer.pip(*args) if tool == "pip" else installer.uv("pip", *args)
    assert result.ok, result.output
    assert installer.installed()["deepspeed"] == "0.19.8+cu128torch2.9"


def test_the_pin_holds_even_against_the_all_wheels_index(world: World, tmp_path: Path) -> None:
    """Without the pin, the highest label wins: on the all-wheels index that is another torch's wheel."""
    everything = world.site.url + "simple/"
    unpinned = Installer(tmp_path, "unpinned")
    result = unpinned.uv(
        "pip", "install", PROJECT, "--index-url", everything, "--extra-index-url", world.torch_index("cu128")
    )
    assert result.ok, result.output
    assert unpinned.installed()["deepspeed"] == "0.19.8+cu128torch2.10"  # +cu128torch2.10 > +cu128torch2.9
    assert unpinned.installed()["torch"] == "2.10.0+cu128"  # ... and it moves torch to its minor
    pinned = Installer(tmp_path, "pinned")
    line = install_command(
        tool="uv",
        version="0.19.8+cu128torch2.9",
        site_url=world.site.url,
        part="cu128-torch2.9",
        torch_index=world.torch_index("cu128"),
    ).replace("whl/cu128-torch2.9/simple/", "simple/")
    result = pinned.run("uv", line, "--index-url", world.pypi)
    assert result.ok, result.output
    assert pinned.installed()["deepspeed"] == "0.19.8+cu128torch2.9"
    assert pinned.installed()["torch"] == "2.9.1+cu128"


@pytest.mark.parametrize("tool", TOOLS)
def test_no_wheel_for_this_machine_fails_instead_of_compiling(world: World, tool: str, tmp_path: Path) -> None:
    world.clear_logs()
    installer = Installer(tmp_path, tool)
    result = installer.run(tool, world.line(tool, "cu126-torch2.9"), "--index-url", world.pypi)
    assert not result.ok
    expected = "No matching distribution found" if tool == "pip" else "unsatisfiable"
    assert expected in result.output, result.output
    assert "must never be built" not in result.output
    assert not [p for p in world.aux.paths() if p.endswith(".tar.gz")]


@pytest.mark.parametrize("tool", TOOLS)
def test_resolving_reads_only_metadata_files(world: World, tool: str, tmp_path: Path) -> None:
    world.clear_logs()
    installer = Installer(tmp_path, tool)
    args = [
        "install",
        "--dry-run",
        PROJECT,
        "--index-url",
        world.site.url + "whl/cu128-torch2.10/simple/",
        "--extra-index-url",
        world.torch_index("cu128"),
    ]
    result = installer.pip(*args) if tool == "pip" else installer.uv("pip", *args)
    assert result.ok, result.output
    assert "0.19.8+cu128torch2.10" in result.output
    fetched = [p for p in world.site.paths() if p.startswith("/files/")]
    assert fetched == [f"/files/deepspeed-0.19.8+cu128torch2.10-{HERE}-{HERE}-linux_x86_64.whl.metadata"]
    # 0.19.9 needs Python >= 3.99: skipped from data-requires-python, without fetching anything of it
    assert not [p for p in world.site.paths() if "0.19.9" in p]


@pytest.mark.parametrize("tool", TOOLS)
def test_a_corrupted_wheel_fails_the_hash_check(world: World, tool: str, tmp_path: Path) -> None:
    copy = tmp_path / "site"
    shutil.copytree(world.root / "site", copy)  # real copies: the published wheels stay intact
    wheel = copy / "files" / f"deepspeed-0.19.8+cu128torch2.9-{HERE}-{HERE}-linux_x86_64.whl"
    # swapped for another valid wheel of the same name: only the hash can tell
    impostor = write_deepspeed_wheel(tmp_path / "impostor", version="0.19.8", variant="cu128", torch="2.9", payload=64)
    wheel.unlink()
    shutil.copyfile(impostor, wheel)
    with StaticServer(copy) as server:
        line = install_command(
            tool=tool,
            version="0.19.8+cu128torch2.9",
            site_url=server.url,
            part="cu128-torch2.9",
            torch_index=world.torch_index("cu128"),
        )
        result = Installer(tmp_path, tool).run(tool, line, "--index-url", world.pypi)
    assert not result.ok
    expected = "THESE PACKAGES DO NOT MATCH THE HASHES" if tool == "pip" else "Hash mismatch"
    assert expected in result.output, result.output


def test_the_torch_pin_is_in_the_metadata_and_the_resolver_honours_it(world: World, tmp_path: Path) -> None:
    installer = Installer(tmp_path, "pip")
    # a user with the wrong torch minor installed: the wheel's pin moves it to 2.9.x, not to the newest
    pre = installer.pip("install", "torch==2.10.0+cu128", "--index-url", world.torch_index("cu128"))
    assert pre.ok, pre.output
    result = installer.run("pip", world.line("pip", "cu128-torch2.9"), "--index-url", world.pypi)
    assert result.ok, result.output
    assert installer.installed()["torch"] == "2.9.1+cu128"
    metadata = installer.python_eval(
        "import importlib.metadata as m; print(m.metadata('deepspeed').get_all('Requires-Dist'))"
    )
    assert metadata == "['torch==2.9.*']"


@pytest.mark.parametrize("tool", TOOLS)
def test_a_yanked_wheel_is_skipped(world: World, tool: str, tmp_path: Path) -> None:
    installer = Installer(tmp_path, tool)
    args = [
        "install",
        PROJECT,
        "--index-url",
        world.site.url + "whl/cpu-torch2.9/simple/",
        "--extra-index-url",
        world.torch_index("cpu"),
    ]
    result = installer.pip(*args) if tool == "pip" else installer.uv("pip", *args)
    assert result.ok, result.output
    assert installer.installed()["deepspeed"] == "0.19.7+cputorch2.9"  # 0.19.8 is yanked


def test_an_index_of_github_releases_installs_from_the_release_assets(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.github_fake import FakeGitHub

    with FakeGitHub() as fake:
        monkeypatch.setenv("GITHUB_API_URL", fake.api_url)
        monkeypatch.setenv("GITHUB_TOKEN", fake.token)
        dist = tmp_path / "dist"
        write_deepspeed_wheel(dist, version="0.19.8", variant="cu128", torch="2.9")
        write_wheel(dist, name="other", version="1.0", tag="py3-none-any", files={})  # not ours: refused
        assert main(["publish", str(dist), "--github", fake.repo, "--tag", "v1"]) == 2  # bad input, before any call
        (dist / "other-1.0-py3-none-any.whl").unlink()
        assert main(["publish", str(dist), "--github", fake.repo, "--tag", "v1"]) == 0
        monkeypatch.delenv("GITHUB_TOKEN")  # a public repository's releases need no token to index
        site = tmp_path / "site"
        with StaticServer(site) as server:
            args = ["index", "--github", fake.repo, "--out", str(site), "--site-url", server.url]
            assert main([*args, "--torch-index", world.aux.url + "torch/{variant}/"]) == 0
            assert not (site / "files").exists()  # the site links the release assets
            mark = len(fake.log)
            installer = Installer(tmp_path, "pip")
            line = install_command(
                tool="pip",
                version="0.19.8+cu128torch2.9",
                site_url=server.url,
                part="cu128-torch2.9",
                torch_index=world.torch_index("cu128"),
            )
            result = installer.run("pip", line, "--index-url", world.pypi)
        assert result.ok, result.output
        downloads = [p for method, p, _status in fake.log[mark:] if method == "GET" and "/releases/download/v1/" in p]
        name = f"deepspeed-0.19.8%2Bcu128torch2.9-{HERE}-{HERE}-linux_x86_64.whl"
        assert downloads == [
            f"/{fake.repo}/releases/download/v1/{name}.metadata",
            f"/{fake.repo}/releases/download/v1/{name}",
        ]


def test_uv_sync_of_a_project_made_from_the_pages_lines_installs_the_partitions_wheel(
    world: World, tmp_path: Path
) -> None:
    """The page's pyproject.toml lines, merged into a new project's own [project] table as a user does; uv
    lock and uv sync against the served site (PyPI's stand-in, with newer DeepSpeed sdists, as the default index)."""
    import subprocess
    import sys

    world.clear_logs()
    lines = world.uv_project("cu128-torch2.9")
    assert lines.startswith("[project]\n")
    own = f'name = "app"\nversion = "0.1.0"\nrequires-python = "=={sys.version_info[0]}.{sys.version_info[1]}.*"\n'
    project = tmp_path / "app"
    project.mkdir()
    (project / "pyproject.toml").write_text(lines.replace("[project]\n", "[project]\n" + own, 1), encoding="utf-8")
    env = clean_env(tmp_path / "home") | {"UV_DEFAULT_INDEX": world.pypi, "UV_PYTHON": sys.executable}

    def uv(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [uv_binary(), *args], cwd=project, env=env, capture_output=True, text=True, check=False, timeout=300
        )

    locked = uv("lock")
    assert locked.returncode == 0, locked.stdout + locked.stderr
    lock = (project / "uv.lock").read_text(encoding="utf-8")
    assert 'version = "0.19.8+cu128torch2.9"' in lock
    assert 'version = "2.9.1+cu128"' in lock  # the wheel's torch==2.9.* pin, from the variant's own index
    synced = uv("sync")
    assert synced.returncode == 0, synced.stdout + synced.stderr
    python = project / ".venv" / "bin" / "python"
    done = subprocess.run(
        [str(python), "-c", "import deepspeed, torch; print(deepspeed.BUILD, torch.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == [f"0.19.8+cu128torch2.9-{HERE}-linux_x86_64", "2.9.1+cu128"]
    assert _downloads(world.site, ".whl") == [f"/files/deepspeed-0.19.8+cu128torch2.9-{HERE}-{HERE}-linux_x86_64.whl"]
    assert not [p for p in world.aux.paths() if p.endswith(".tar.gz")], "a PyPI sdist was fetched"
