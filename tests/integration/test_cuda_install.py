"""``dswheels cuda install``: a CUDA root from NVIDIA's archives, served on loopback (tests/data/cuda-redist).

The archives are rebuilt small in NVIDIA's layout from real files of NVIDIA's PyPI wheels
(tests/data/cuda-redist/README.md); the JSON is pinned by the tests with ``--redist-sha256``
(compat.yml pins NVIDIA's). A real HTTP server plays NVIDIA's redist folder, and misbehaves
where a test says: other bytes, a size that lies, a connection that breaks or stalls.
"""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import io
import json
import os
import shutil
import subprocess
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote

import pytest

from dswheels.cli import main
from dswheels.cuda.effects.install_toolkit import MARKER, CudaInstallOptions, install_cuda
from dswheels.host.cache import CacheLayout
from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import ConfigError, SourceError
from dswheels.kernel.model import Platform
from dswheels.kernel.platform_traits import WineCudaSource
from dswheels.platforms.wine.cuda_root import assemble_windows_cuda, cuda_source
from tests.conftest import DATA, require
from tests.support.planned import planned_cell

pytestmark = pytest.mark.integration

Handler = Callable[[http.server.BaseHTTPRequestHandler], None]
REDIST = DATA / "cuda-redist"
JSON_SHA = hashlib.sha256((REDIST / "redistrib_13.0.3.json").read_bytes()).hexdigest()
NVCC = "cuda_nvcc/linux-x86_64/cuda_nvcc-linux-x86_64-13.0.88-archive.tar.xz"
CUBLAS = "libcublas/linux-x86_64/libcublas-linux-x86_64-13.1.1.3-archive.tar.xz"


class Redist:
    """NVIDIA's redist folder on loopback: the files of ``root``, with Range support, and a log."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.log: list[tuple[str, str]] = []  # (path, Range header)
        self.breaks: dict[str, int] = {}  # path -> answers to cut short before serving it whole
        self.stalls: dict[str, int] = {}  # path -> answers that send half and then stall
        self.trickles: dict[str, int] = {}  # path -> answers that send a byte every 20 ms (5 s at most)

    def handle(self, req: http.server.BaseHTTPRequestHandler) -> None:
        path = unquote(req.path).lstrip("/")
        self.log.append((path, req.headers.get("Range", "")))
        file = self.root / path
        if not file.is_file():
            req.send_response(404)
            req.send_header("Content-Length", "0")
            req.end_headers()
            return
        data = file.read_bytes()
        start = 0
        if (wanted := req.headers.get("Range", "")).startswith("bytes="):
            start = int(wanted.removeprefix("bytes=").split("-")[0])
        req.send_response(206 if start else 200)
        if start:
            req.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        req.send_header("Content-Length", str(len(data) - start))
        req.end_headers()
        body = data[start:]
        if self.breaks.get(path):
            self.breaks[path] -= 1
            req.wfile.write(body[: len(body) // 2])  # and the connection ends: the client resumes
            return
        if self.trickles.get(path):
            self.trickles[path] -= 1
            started = time.monotonic()
            for byte in body:
                if time.monotonic() - started > 5:  # then the connection ends
                    return
                try:
                    req.wfile.write(bytes([byte]))
                    req.wfile.flush()
                except OSError:  # the client gave up on this answer
                    return
                time.sleep(0.02)
            return
        if self.stalls.get(path):
            self.stalls[path] -= 1
            req.wfile.write(body[: len(body) // 2])
            req.wfile.flush()
            time.sleep(3)  # longer than the client's read timeout
            return
        req.wfile.write(body)

    def downloads(self) -> list[str]:
        return [p for p, _r in self.log]


@pytest.fixture
def redist(tmp_path: Path, http_server: Callable[[Handler], str]) -> tuple[Redist, str]:
    root = tmp_path / "redist"
    shutil.copytree(REDIST, root)
    served = Redist(root)
    return served, http_server(served.handle)


def _options(tmp_path: Path, url: str, **extra: object) -> CudaInstallOptions:
    values: dict[str, object] = {
        "toolkit": "13.0.3",
        "platform": "linux_x86_64",
        "cache": CacheLayout(tmp_path / "cache"),
        "redist_url": url,
        "redist_sha256": JSON_SHA,
        "retries": 1,
        "timeout": (5.0, 1.0),
    }
    values.update(extra)
    values["platform"] = Platform(str(values["platform"]))  # as cuda install's --platform parses it
    return CudaInstallOptions(**values)  # type: ignore[arg-type]


def _entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def test_a_linux_root_has_every_component_and_the_layout_nvcc_and_deepspeed_use(
    redist: tuple[Redist, str], tmp_path: Path
) -> None:
    served, url = redist
    compat = load_compat()
    installed = install_cuda(compat, _options(tmp_path, url))
    root = installed.root
    assert root.parent == tmp_path / "cache" / "cuda"
    assert root.name.startswith("13.0.3-linux-x86_64-")
    assert not installed.reused
    for component in compat.components_for((13, 0)):  # each component's own file, from its own archive
        assert (root / component.provided_path("linux")).is_file(), component
    assert (root / "include" / "cccl" / "cub" / "cub.cuh").is_file()  # CCCL's own folder from 13.0
    assert (root / "nvvm" / "include" / "nvvm.h").is_file()
    assert (root / "lib64").readlink() == Path("lib")
    assert (root / "targets" / "x86_64-linux" / "include" / "cuda_runtime.h").is_file()  # as nvcc.profile looks
    assert (root / "targets" / "x86_64-linux" / "lib" / "cmake").is_dir()
    assert sorted(p.name for p in (root / "licenses").iterdir()) == sorted(a.component for a in installed.archives)
    assert not (root / "LICENSE").exists()  # each archive's LICENSE is kept apart, none overwrites another
    assert os.access(root / "bin" / "nvcc", os.X_OK)
    version = subprocess.run([root / "bin" / "nvcc", "--version"], capture_output=True, text=True, check=True)
    assert "release 13.0, V13.0.88" in version.stdout
    marker = json.loads((root / MARKER).read_text(encoding="utf-8"))
    assert marker["redist_sha256"] == JSON_SHA
    assert [c["redist"] for c in marker["components"]] == [c.redist for c in compat.components_for((13, 0))]
    # exactly the list's archives were fetched, once each, and nothing the list does not name
    archives = [p for p in served.downloads() if p.endswith((".tar.xz", ".zip"))]
    assert sorted(archives) == sorted(a.relative_path for a in installed.archives)
    assert "redistrib_13.0.3.json" in served.downloads()
    # the archives are gone (the root is the cache): a second install finds the root and downloads nothing
    assert _entries(tmp_path / "cache" / "cuda" / "downloads" / "sha256") == [JSON_SHA]  # only the small JSON
    served.log.clear()
    again = install_cuda(compat, _options(tmp_path, url))
    assert again.reused
    assert again.root == root
    assert [p for p in served.downloads() if p.endswith((".tar.xz", ".zip"))] == []


def test_a_windows_root_is_assembled_from_the_zips(redist: tuple[Redist, str], tmp_path: Path) -> None:
    _served, url = redist
    installed = install_cuda(load_compat(), _options(tmp_path, url, platform="win_amd64", dest=tmp_path / "cuda-win"))
    root = installed.root
    assert root == tmp_path / "cuda-win"
    assert installed.platform == "windows-x86_64"
    assert (root / "bin" / "nvcc.exe").is_file()
    assert (root / "nvvm" / "bin" / "cicc.exe").is_file()
    assert (root / "bin" / "nvcc.profile").read_text(encoding="utf-8").count("$(TOP)/include") >= 1
    assert not (root / "lib64").exists()  # no links: the Windows archives' layout is the one nvcc and torch use
    assert not (root / "targets").exists()


def test_an_archive_with_other_bytes_is_refused_and_nothing_is_installed(
    redist: tuple[Redist, str], tmp_path: Path
) -> None:
    served, url = redist
    dest = tmp_path / "cuda"
    earlier = install_cuda(
        load_compat(), _options(tmp_path, url, dest=dest, platform="win_amd64")
    )  # a root already there
    archive = served.root / CUBLAS
    data = bytearray(archive.read_bytes())
    data[-100] ^= 0xFF  # same size, other bytes
    archive.write_bytes(bytes(data))
    with pytest.raises(SourceError, match=r"sha256 mismatch for .*libcublas-linux-x86_64-13\.1\.1\.3-archive\.tar\.xz"):
        install_cuda(load_compat(), _options(tmp_path, url, dest=dest))
    # the root there is untouched, nothing half-installed beside it, the bad download not kept
    assert json.loads((dest / MARKER).read_text(encoding="utf-8"))["platform"] == "windows-x86_64"
    assert (dest / "bin" / "nvcc.exe").is_file()
    assert not (dest / "lib64").exists()
    assert _entries(tmp_path) == ["cache", "cuda", "redist"]
    assert earlier.root == dest
    kept = tmp_path / "cache" / "cuda" / "downloads" / "sha256"
    assert hashlib.sha256(bytes(data)).hexdigest() not in _entries(kept)


def test_a_size_that_lies_is_refused(redist: tuple[Redist, str], tmp_path: Path) -> None:
    served, url = redist
    document = json.loads((served.root / "redistrib_13.0.3.json").read_text(encoding="utf-8"))
    entry = document["cuda_nvcc"]["linux-x86_64"]
    entry["size"] = str(int(entry["size"]) - 10)  # the JSON says 10 bytes less than the server sends
    text = json.dumps(document, indent=4)
    (served.root / "redistrib_13.0.3.json").write_text(text, encoding="utf-8")
    pin = hashlib.sha256(text.encode()).hexdigest()
    with pytest.raises(
        SourceError, match=r"cuda_nvcc-linux-x86_64-13\.0\.88-archive\.tar\.xz is \d+ bytes; its index said"
    ):
        install_cuda(load_compat(), _options(tmp_path, url, redist_sha256=pin, dest=tmp_path / "cuda"))
    assert not (tmp_path / "cuda").exists()


def test_a_json_that_is_not_the_pinned_one_is_refused_before_any_archive(
    redist: tuple[Redist, str], tmp_path: Path
) -> None:
    served, url = redist
    with pytest.raises(SourceError, match=r"sha256 mismatch for .*redistrib_13\.0\.3\.json"):
        install_cuda(load_compat(), _options(tmp_path, url, redist_sha256="0" * 64))
    assert served.downloads() == ["redistrib_13.0.3.json"]


def test_a_component_missing_from_the_json_is_named_and_nothing_is_downloaded(
    redist: tuple[Redist, str], tmp_path: Path
) -> None:
    served, url = redist
    document = json.loads((served.root / "redistrib_13.0.3.json").read_text(encoding="utf-8"))
    del document["cuda_profiler_api"]
    text = json.dumps(document, indent=4)
    (served.root / "redistrib_13.0.3.json").write_text(text, encoding="utf-8")
    pin = hashlib.sha256(text.encode()).hexdigest()
    with pytest.raises(SourceError, match=r"has no linux-x86_64 archive of profiler_api \(cuda_profiler_api\)"):
        install_cuda(load_compat(), _options(tmp_path, url, redist_sha256=pin))
    assert served.downloads() == ["redistrib_13.0.3.json"]


def test_a_broken_download_is_resumed_and_a_stalled_one_retried_then_a_clear_error(
    redist: tuple[Redist, str], tmp_path: Path
) -> None:
    served, url = redist
    served.breaks[NVCC] = 1  # the first answer ends half way: the next attempt gets it
    installed = install_cuda(load_compat(), _options(tmp_path, url, dest=tmp_path / "a"))
    assert (installed.root / "bin" / "nvcc").is_file()
    assert len([p for p in served.downloads() if p == NVCC]) == 2
    # a server that stalls mid-file every time: each attempt ends at the read timeout, then the error
    served.log.clear()
    served.stalls[CUBLAS] = 99
    started = time.monotonic()
    with pytest.raises(
        SourceError, match=r"libcublas-linux-x86_64-13\.1\.1\.3-archive\.tar\.xz failed after 2 attempts"
    ) as caught:
        install_cuda(
            load_compat(), _options(tmp_path, url, dest=tmp_path / "b", cache=CacheLayout(tmp_path / "cache2"))
        )
    assert time.monotonic() - started < 60  # bounded: two attempts of one read timeout each, no hang
    assert "resumes" in (caught.value.hint or "")
    assert len([p for p, _r in served.log if p == CUBLAS]) >= 2
    assert not (tmp_path / "b").exists()


def test_a_trickling_download_is_cut_at_the_attempt_limit_and_resumed(
    redist: tuple[Redist, str], tmp_path: Path
) -> None:
    served, url = redist
    served.trickles[NVCC] = 1  # a byte every 20 ms never trips the read timeout: the attempt limit must end it
    options = _options(tmp_path, url, dest=tmp_path / "cuda", timeout=(5.0, 30.0), attempt_seconds=1.0)
    started = time.monotonic()
    installed = install_cuda(load_compat(), options)
    assert time.monotonic() - started < 4  # not the 5 s the server trickles for
    assert (installed.root / "bin" / "nvcc").is_file()
    first, second = [r for p, r in served.log if p == NVCC]
    assert first == ""
    assert second.startswith("bytes=")  # the next attempt resumes after what trickled in
    assert second != "bytes=0-"


def test_a_folder_dswheels_did_not_make_is_never_replaced(redist: tuple[Redist, str], tmp_path: Path) -> None:
    _served, url = redist
    dest = tmp_path / "mine"
    dest.mkdir()
    (dest / "keep.txt").write_text("not a CUDA root", encoding="utf-8")
    with pytest.raises(ConfigError, match="is not empty and is no CUDA root dswheels made"):
        install_cuda(load_compat(), _options(tmp_path, url, dest=dest))
    assert _entries(dest) == ["keep.txt"]


def test_a_release_compat_yml_does_not_install_needs_a_pin(tmp_path: Path) -> None:
    compat = load_compat()
    with pytest.raises(ConfigError, match=r"compat\.yml installs CUDA 13\.0\.3 for 13\.0, not 13\.0\.2"):
        install_cuda(compat, _options(tmp_path, "http://127.0.0.1:9/", toolkit="13.0.2", redist_sha256=""))
    assert not compat.cuda[(13, 1)].redist_sha256  # 13.1.2's JSON is not recorded: no pin
    with pytest.raises(ConfigError, match=r"CUDA 13\.1\.2: compat\.yml pins no redistrib_13\.1\.2\.json"):
        install_cuda(compat, _options(tmp_path, "http://127.0.0.1:9/", toolkit="13.1.2", redist_sha256=""))
    with pytest.raises(ConfigError, match="not a CUDA toolkit release"):
        install_cuda(compat, _options(tmp_path, "http://127.0.0.1:9/", toolkit="13.0"))


def test_the_command_line_sets_cuda_home_for_the_jobs_later_steps(
    redist: tuple[Redist, str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _served, url = redist
    files = {name: tmp_path / name for name in ("env", "path")}
    for file in files.values():
        file.touch()
    monkeypatch.setenv("DSWHEELS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("GITHUB_ENV", str(files["env"]))
    monkeypatch.setenv("GITHUB_PATH", str(files["path"]))
    monkeypatch.setenv("DSWHEELS_CUDA_REDIST_URL", url)  # a runner's mirror (wheels.yml: a repository variable)
    code = main(["cuda", "install", "--toolkit", "13.0.3", "--redist-sha256", JSON_SHA, "--github-env"])
    out, err = capsys.readouterr()
    assert code == 0, err
    root = Path(out.strip().splitlines()[-1].removeprefix("CUDA_HOME="))
    assert (root / MARKER).is_file()
    assert files["env"].read_text(encoding="utf-8") == f"CUDA_HOME={root}\nCUDA_PATH={root}\n"
    assert files["path"].read_text(encoding="utf-8") == f"{root / 'bin'}\n"
    assert "libcublas 13.1.1.3" in err
    monkeypatch.delenv("GITHUB_ENV")
    assert main(["cuda", "install", "--toolkit", "13.0.3", "--redist-sha256", JSON_SHA, "--github-env"]) == 2
    assert "$GITHUB_ENV and $GITHUB_PATH are not set" in capsys.readouterr().err


def test_torch_takes_the_root_as_its_cuda_home(redist: tuple[Redist, str], tmp_path: Path, torch_python: Path) -> None:
    _served, url = redist
    root = install_cuda(load_compat(), _options(tmp_path, url)).root
    require(torch_python.is_file(), "a venv with torch")
    # a CPU torch sets cpp_extension.CUDA_HOME to None at import; a CUDA torch sets it from _find_cuda_home()
    script = """
import os, sys
from torch.utils import cpp_extension as c
home = c._find_cuda_home()
assert home == os.environ["CUDA_HOME"], home
c.CUDA_HOME = home  # what a CUDA build of torch does at import
for path in c.include_paths("cuda") + c.library_paths("cuda"):
    assert os.path.isdir(path), path
assert c.library_paths("cuda")[-1] == os.path.join(home, "lib64"), c.library_paths("cuda")
c._check_cuda_version("c++", c.TorchVersion("13.0"))  # runs CUDA_HOME/bin/nvcc --version
print("ok", c.include_paths("cuda")[-1])
"""
    env = {**os.environ, "CUDA_HOME": str(root)}
    env.pop("CUDA_PATH", None)
    done = subprocess.run([torch_python, "-c", script], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == f"ok {root / 'include'}"


def _repin(served: Redist, component: str, platform: str, data: bytes) -> str:
    """Serve ``data`` as the component's archive, with a JSON that lists it; the JSON's new pin."""
    path = served.root / "redistrib_13.0.3.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    entry = document[component][platform]
    (served.root / entry["relative_path"]).write_bytes(data)
    entry["sha256"], entry["size"] = hashlib.sha256(data).hexdigest(), str(len(data))
    text = json.dumps(document, indent=4)
    path.write_text(text, encoding="utf-8")
    return hashlib.sha256(text.encode()).hexdigest()


def _with_member(archive: Path, name: str, data: bytes) -> bytes:
    """The tar.xz ``archive`` with one more file (below its top folder)."""
    out = io.BytesIO()
    with tarfile.open(archive) as old, tarfile.open(fileobj=out, mode="w:xz") as new:
        top = old.getnames()[0].split("/")[0]
        for member in old.getmembers():
            new.addfile(member, old.extractfile(member) if member.isfile() else None)
        info = tarfile.TarInfo(f"{top}/{name}")
        info.size = len(data)
        new.addfile(info, io.BytesIO(data))
    return out.getvalue()


def test_two_components_that_carry_one_file_differently_are_refused(redist: tuple[Redist, str], tmp_path: Path) -> None:
    served, url = redist
    crt = REDIST / "cuda_crt/linux-x86_64/cuda_crt-linux-x86_64-13.0.88-archive.tar.xz"  # the one as recorded
    pin = _repin(served, "cuda_crt", "linux-x86_64", _with_member(crt, "include/cuda_runtime.h", b"/* other */\n"))
    with pytest.raises(SourceError, match=r"cuda_crt carries include/cuda_runtime\.h, which a component unpacked"):
        install_cuda(load_compat(), _options(tmp_path, url, redist_sha256=pin, dest=tmp_path / "cuda"))
    assert not (tmp_path / "cuda").exists()
    # the same bytes twice are one file, not a conflict
    runtime = served.root / "cuda_cudart/linux-x86_64/cuda_cudart-linux-x86_64-13.0.96-archive.tar.xz"
    with tarfile.open(runtime) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("include/cuda_runtime.h"))
        same = tar.extractfile(member).read()  # type: ignore[union-attr]
    pin = _repin(served, "cuda_crt", "linux-x86_64", _with_member(crt, "include/cuda_runtime.h", same))
    install_cuda(load_compat(), _options(tmp_path, url, redist_sha256=pin, dest=tmp_path / "cuda"))


def test_a_root_without_a_components_file_is_refused(redist: tuple[Redist, str], tmp_path: Path) -> None:
    _served, url = redist
    compat = load_compat()
    moved = tuple(
        dataclasses.replace(c, provides="include/cublas_v3.h") if c.name == "cublas" else c
        for c in compat.cuda_components
    )
    with pytest.raises(SourceError, match=r"lacks include/cublas_v3\.h \(cublas: libcublas\)"):
        install_cuda(dataclasses.replace(compat, cuda_components=moved), _options(tmp_path, url, dest=tmp_path / "c"))
    assert not (tmp_path / "c").exists()
    assert _entries(tmp_path) == ["cache", "redist"]


def test_the_wine_host_takes_the_same_components_from_nvidias_archives(
    redist: tuple[Redist, str], tmp_path: Path
) -> None:
    """One list, two transports: the Wine host assembles a Windows cell's CUDA root from NVIDIA's windows-x86_64
    archives as the runners do (``--wine-cuda nvidia``; ``auto`` for CUDA 12.x, whose PyPI nvcc wheels carry no
    nvcc.exe), and from PyPI's wheels from CUDA 13 (tests/integration/test_windows_wine.py)."""
    served, url = redist
    compat = load_compat()
    pinned = dataclasses.replace(
        compat, cuda={**compat.cuda, (13, 0): dataclasses.replace(compat.cuda[(13, 0)], redist_sha256=JSON_SHA)}
    )
    cu130 = planned_cell("ds0.19.8-torch2.14-cu130-cp311-win_amd64")
    assert cuda_source(cu130, WineCudaSource.AUTO) is WineCudaSource.PYPI
    cu126 = planned_cell("ds0.19.8-torch2.14-cu126-cp311-win_amd64")
    assert cuda_source(cu126, WineCudaSource.AUTO) is WineCudaSource.NVIDIA
    cuda = assemble_windows_cuda(
        cu130,
        compat=pinned,
        cache=CacheLayout(tmp_path / "cache"),
        uv="uv",  # not run: the archives carry everything
        dumpbin=tmp_path / "no-dumpbin",
        lib_tool=tmp_path / "no-lib",
        log=tmp_path / "assemble.log",
        source=WineCudaSource.NVIDIA,
        redist_url=url,
    )
    assert cuda.source is WineCudaSource.NVIDIA
    assert set(cuda.components) == {c.name for c in compat.components_for((13, 0))}
    assert all(name.startswith(tuple(c.redist for c in compat.components_for((13, 0)))) for name in cuda.wheels)
    assert all("windows-x86_64" in path for path in served.downloads() if path.endswith(".zip"))
    assert (cuda.root / "bin" / "nvcc.exe").is_file()
    assert (cuda.root / "include" / "cuda_profiler_api.h").is_file()


# --- issue 30.2: archives that each pass the unpacker, merged into one root ----------------------------------------

NVCC_ARCHIVE = REDIST / NVCC
CUDART = "cuda_cudart/linux-x86_64/cuda_cudart-linux-x86_64-13.0.96-archive.tar.xz"


def _with_links(archive: Path, links: dict[str, str]) -> bytes:
    """The tar.xz ``archive`` with symbolic links added (name below its top folder -> target text), and
    without its top-level LICENSE where a link is or names ``licenses`` (an archive need not carry one)."""
    out = io.BytesIO()
    with tarfile.open(archive) as old, tarfile.open(fileobj=out, mode="w:xz") as new:
        top = old.getnames()[0].split("/")[0]
        for member in old.getmembers():
            if "licenses" in (*links, *links.values()) and member.name == f"{top}/LICENSE":
                continue
            new.addfile(member, old.extractfile(member) if member.isfile() else None)
        for name, target in links.items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.type, info.linkname = tarfile.SYMTYPE, target
            new.addfile(info)
    return out.getvalue()


def _two_archives(served: Redist, first: dict[str, str], second: dict[str, str]) -> str:
    """cuda_nvcc (merged first) and cuda_cudart (second) with these links; the JSON's new pin."""
    _repin(served, "cuda_nvcc", "linux-x86_64", _with_links(NVCC_ARCHIVE, first))
    return _repin(served, "cuda_cudart", "linux-x86_64", _with_links(REDIST / CUDART, second))


def _tree(root: Path) -> dict[str, bytes | str]:
    return {
        p.relative_to(root).as_posix(): (str(p.readlink()) if p.is_symlink() else p.read_bytes() if p.is_file() else "")
        for p in sorted(root.rglob("*"))
    }


MERGED_ESCAPES = {
    # a link to '.' in one; in the other a link through it (alone: a/a/../../outside is the archive's outside/),
    # and the root's licenses/ folder a link to it: the later archives' LICENSE files would land in tmp/outside/
    "licenses-through-dot": ({"a": "."}, {"b": "a/a/../../outside", "licenses": "b"}),
    # the same, the link first: archives without a LICENSE (the first two) let it stand until cuda_cccl's is moved
    "licenses-first": ({"a": ".", "licenses": "b"}, {"b": "a/a/../../outside", "x": "licenses"}),
    # dswheels' own layout links (targets/x86_64-linux/include) made through a link of an archive
    "targets-through-dot": ({"a": "."}, {"targets": "a/a/../../outside"}),
    # a component folder that is itself a link, into which the later component's lib/ is merged
    "folder-is-a-link": ({"a": "."}, {"lib": "a/a/../../outside"}),
    "dangling": ({}, {"targets": "nowhere"}),
    "loop-across-archives": ({"p": "q"}, {"q": "p"}),
    "layout-link-taken": ({"x": "."}, {"lib64": "x/.."}),
}


@pytest.mark.parametrize("links", MERGED_ESCAPES.values(), ids=MERGED_ESCAPES)
def test_archives_that_merge_into_links_out_of_the_root_are_refused(
    redist: tuple[Redist, str],
    tmp_path: Path,
    links: tuple[dict[str, str], dict[str, str]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each archive passes the unpacker alone; merged, their links lead out of the root, loop or name nothing:
    exit 4 with one paragraph, the folder outside untouched, no root made."""
    served, url = redist
    pin = _two_archives(served, *links)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "sentinel").write_text("mine", encoding="utf-8")
    before = _tree(outside)
    monkeypatch.setenv("DSWHEELS_CACHE", str(tmp_path / "cache"))
    args = ["cuda", "install", "--toolkit", "13.0.3", "--redist-url", url, "--redist-sha256", pin]
    code = main([*args, "--dest", str(tmp_path / "cuda")])
    err = capsys.readouterr().err
    assert _tree(outside) == before, "written outside the root"
    assert code == 4, err
    assert "Traceback" not in err
    assert "would merge into a root whose links" in err, err
    assert not (tmp_path / "cuda").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "outside", "redist"]


def test_links_within_one_archive_and_across_archives_that_stay_inside_are_kept(
    redist: tuple[Redist, str], tmp_path: Path
) -> None:
    """The control: links NVIDIA's archives have (lib/libx.so -> libx.so.13), one archive linking to another's
    file, and a root whose lib64 an archive already made as dswheels would."""
    served, url = redist
    pin = _two_archives(
        served, {"lib/libnvptx.so": "libnvptx.so.13", "lib/libnvptx.so.13": "../bin/nvcc"}, {"lib64": "lib"}
    )
    installed = install_cuda(load_compat(), _options(tmp_path, url, redist_sha256=pin, dest=tmp_path / "cuda"))
    assert (installed.root / "lib" / "libnvptx.so").resolve() == (installed.root / "bin" / "nvcc").resolve()
    assert (installed.root / "lib64").readlink() == Path("lib")
