"""compat.yml's sources on loopback, served from the recordings in tests/data/upstream/.

:func:`assemble` lays out a site the way the real hosts are laid out (PyPI's JSON API and
file paths, download.pytorch.org's ``/whl/<variant>/torch/``, raw.githubusercontent.com's
``/<owner>/<repo>/<commit>/<path>``); :class:`UpstreamServer` serves it. torch wheels are
served from their recorded byte ranges (``ranges/<wheel>.gz``): a range dswheels did not read
when the recording was made answers 416, so a reader that changes what it reads fails here
instead of passing on invented bytes. DeepSpeed sdists are the real files from PyPI (fetched
once into the test cache and checked against the sha256 in the recorded JSON).
"""

from __future__ import annotations

import gzip
import json
import shutil
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

from dswheels.facts.cuda_action import ActionPin
from dswheels.facts.seen import Upstream
from tests.conftest import DATA
from tests.support.servers import LoopbackServer

__all__ = ["RECORDED", "SDISTS", "UpstreamServer", "assemble", "recorded_upstream", "urls"]

RECORDED = DATA / "upstream"
PYPI_JSON = "https://pypi.org/pypi/{project}/json"
SDISTS = ("0.19.4", "0.19.5", "0.19.6", "0.19.7", "0.19.8")  # what a check of the shipped facts reads


@dataclass(frozen=True)
class _Ranges:
    size: int
    segments: tuple[tuple[int, bytes], ...]

    def read(self, start: int, end: int) -> bytes | None:
        for offset, data in self.segments:
            if offset <= start and end < offset + len(data):
                return data[start - offset : end - offset + 1]
        return None


def _load_ranges(path: Path) -> _Ranges:
    header, _, body = gzip.decompress(path.read_bytes()).partition(b"\n")
    meta = json.loads(header)
    segments, position = [], 0
    for start, length in meta["segments"]:
        segments.append((int(start), body[position : position + length]))
        position += length
    return _Ranges(size=int(meta["size"]), segments=tuple(segments))


def assemble(root: Path, sdist_cache: Path, *, sdists: Iterable[str] = SDISTS) -> Path:
    """Lay the recordings out under ``root`` as the hosts serve them; returns ``root``."""
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(RECORDED / "pypi", root / "pypi")
    for project in ("deepspeed", "torch", "cuda-toolkit"):
        (root / "pypi" / project / "json").rename(root / "pypi" / project / "index.json")
    shutil.copytree(RECORDED / "torch-index", root / "whl")
    shutil.copytree(RECORDED / "cuda-toolkit", root / "Jimver" / "cuda-toolkit")
    # GitHub's API path of the runner-images announcements (its query string is not part of the file's path)
    (root / "repos" / "actions" / "runner-images").mkdir(parents=True)
    shutil.copy2(RECORDED / "runner-images" / "issues.json", root / "repos" / "actions" / "runner-images" / "issues")
    (root / "_ranges").mkdir()
    for recording in (RECORDED / "ranges").glob("*.gz"):
        shutil.copy2(recording, root / "_ranges" / recording.name)
    from dswheels.host.downloads import Downloader

    data = json.loads((RECORDED / "pypi" / "deepspeed" / "json").read_text(encoding="utf-8"))
    with Downloader(sdist_cache) as downloader:
        for version in sdists:
            sdist = next(f for f in data["releases"][version] if f["packagetype"] == "sdist")
            real = urljoin(PYPI_JSON.format(project="deepspeed"), sdist["url"])
            cached, _sha = downloader.fetch(real, sha256=sdist["digests"]["sha256"], size=sdist["size"])
            # where the recorded (relative) URL points once the JSON is served from the loopback host
            served = root / urlsplit(urljoin("http://host/pypi/deepspeed/json", sdist["url"])).path.lstrip("/")
            served.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(cached, served)
    return root


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        path = unquote(urlsplit(self.path).path)
        self.server.record(path)
        if path.startswith("/pypi/") and path.endswith("/json"):
            path = path.removesuffix("json") + "index.json"
        elif path.endswith("/"):
            path += "index.html"
        target = self.server.root / path.lstrip("/")
        ranges = self.server.root / "_ranges" / f"{Path(path).name}.gz"
        if ranges.is_file():
            self._ranges(_load_ranges(ranges))
        elif target.is_file() and target.resolve().is_relative_to(self.server.root.resolve()):
            self._send(200, target.read_bytes())
        else:
            self._send(404, b"not found")

    def _ranges(self, recorded: _Ranges) -> None:
        spec = self.headers.get("Range", "").removeprefix("bytes=")
        first, _, last = spec.partition("-")
        if not spec:
            self._send(416, b"only range requests are recorded for this wheel")
            return
        start, end = (recorded.size - int(last), recorded.size - 1) if not first else (int(first), int(last))
        data = recorded.read(start, end)
        if data is None:
            self._send(416, f"bytes {start}-{end} were not recorded".encode())
            return
        self._send(206, data, {"Content-Range": f"bytes {start}-{end}/{recorded.size}"})

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.root = root
        self.paths: list[str] = []
        self._lock = threading.Lock()

    def record(self, path: str) -> None:
        with self._lock:
            self.paths.append(path)


class UpstreamServer(LoopbackServer):
    """``with UpstreamServer(assemble(dir, cache)) as up: up.args`` -> the facts check's source flags."""

    _server: _Server

    def __init__(self, root: Path) -> None:
        super().__init__(_Server(root))

    @property
    def paths(self) -> list[str]:
        return list(self._server.paths)

    @property
    def args(self) -> list[str]:
        return urls(self.base_url)


def urls(base: str) -> list[str]:
    """The `dswheels facts check` options that point every source at ``base``."""
    return [
        "--pypi",
        f"{base}/pypi/{{project}}/json",
        "--torch-index",
        f"{base}/whl/{{variant}}/torch/",
        "--action-links",
        f"{base}/{{action}}/{{commit}}/src/links/{{os}}-links.ts",
        "--runner-images",
        f"{base}/repos/actions/runner-images/issues?labels=Announcement&state=all&per_page=100",
    ]


def recorded_action_pin() -> ActionPin:
    """The action wheels.yml pinned (v0.2.35) until it installed CUDA from NVIDIA's archives: the recorded tables'."""
    from dswheels.facts.cuda_action import find_action_pin

    (commit,) = [p.name for p in (RECORDED / "cuda-toolkit").iterdir()]
    step = f"      - uses: Jimver/cuda-toolkit@{commit} # v0.2.35\n        with:\n          method: network\n"
    pin = find_action_pin(step)
    assert pin is not None
    return pin


def recorded_upstream(*, with_index: bool = True, with_action: bool = True, with_toolkits: bool = True) -> Upstream:
    """The recordings parsed by the same code a real check uses (no sdists, no METADATA ranges)."""
    from dswheels.facts.cuda_action import cuda_action_seen
    from dswheels.facts.pypi_json import cuda_toolkit_releases, deepspeed_releases, torch_minors
    from dswheels.facts.torch_index import torch_index_seen
    from dswheels.kernel.pypi_project import PypiProject, read_pypi_project

    def load(project: str) -> PypiProject:
        data = json.loads((RECORDED / "pypi" / project / "json").read_text(encoding="utf-8"))
        return read_pypi_project(data, json_url=PYPI_JSON.format(project=project))

    index = None
    if with_index:
        base = "https://download.pytorch.org/whl/{variant}/torch/"
        pages: dict[str, tuple[str, str] | None] = {}
        for variant in ("cu126", "cu128", "cu129", "cu130", "cu131", "cu132", "cu133", "cu134"):
            page = RECORDED / "torch-index" / variant / "torch" / "index.html"
            url = base.format(variant=variant)
            pages[variant] = (page.read_text(encoding="utf-8"), url) if page.is_file() else None
        index = torch_index_seen(base, pages)
    action = None
    if with_action:
        pin = recorded_action_pin()
        links = RECORDED / "cuda-toolkit" / pin.commit / "src" / "links"
        action = cuda_action_seen(
            pin,
            linux=(links / "linux-links.ts").read_text(encoding="utf-8"),
            windows=(links / "windows-links.ts").read_text(encoding="utf-8"),
        )
    toolkits = None
    if with_toolkits:
        toolkits = cuda_toolkit_releases(load("cuda-toolkit"))
    return Upstream(
        deepspeed_releases=deepspeed_releases(load("deepspeed")),
        torch=torch_minors(load("torch")),
        torch_index=index,
        cuda_action=action,
        cuda_toolkit=toolkits,
    )
