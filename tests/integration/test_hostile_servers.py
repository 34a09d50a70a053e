"""Servers that lie, stall or listen where they should not, and wheels whose bytes are not their name.

Real HTTP servers on 127.0.0.1 play an upload server whose page points at another origin, an
index that trickles a byte a second, an index with yanked wheels or credentials in its URL,
and indexes serving wheels with the right sha256 whose contents say something else than
their name or write outside DeepSpeed's files. ``dswheels install`` runs against a real
virtual environment with real pip, whose (stand-in) torch must be left as it was.

Every case runs the real command line (in a child process, or ``main`` in this one where a
limit is lowered) and checks the exit code, the message and that no traceback is printed.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import os
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote

import pytest

from dswheels.cli import main
from dswheels.doctor.render_report import DOCTOR_SCHEMA
from tests.conftest import ROOT, require
from tests.support.servers import LoopbackServer
from tests.support.wheels import interpreter_tag, write_deepspeed_wheel, write_wheel
from tests.unit.machines import machine_data

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

PY = interpreter_tag()
LABEL = "cputorch2.13"
NAME = f"deepspeed-0.19.8+{LABEL}-{PY}-{PY}-linux_x86_64.whl"


# --- a target environment: real pip, a stand-in torch 2.13.0+cpu --------------------------------------------------


def _clean_env(**extra: str) -> dict[str, str]:
    """No pip configuration of this machine (its /opt/wheels), no index: only what a test offers."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV", "DSWHEELS_"))}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env.update(extra)
    return env


def _fake_torch(directory: Path, version: str) -> Path:
    """A torch that only knows its version (``torch/version.py`` is what `dswheels install` reads)."""
    text = f'__version__ = "{version}"\ncuda = None\nhip = None\n'.encode()
    return write_wheel(
        directory,
        name="torch",
        version=version,
        tag="py3-none-any",
        files={"torch/__init__.py": text, "torch/version.py": text},
    )


@dataclass
class Target:
    """A venv with pip and torch 2.13.0+cpu; ``torches`` offers torch 2.12.0+cpu too (what a lying wheel pins)."""

    python: Path
    torches: Path

    def pip(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = _clean_env(PIP_FIND_LINKS=str(self.torches))
        return subprocess.run(
            [str(self.python), "-m", "pip", *args], capture_output=True, text=True, env=env, check=False, timeout=300
        )

    def installed(self) -> dict[str, str]:
        """name -> version of what the venv has (as pip lists it, without pip's start-up time)."""
        code = (
            "import importlib.metadata as m, json; "
            "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"
        )
        done = subprocess.run([str(self.python), "-c", code], capture_output=True, text=True, check=False, timeout=60)
        assert done.returncode == 0, done.stderr
        found: dict[str, str] = json.loads(done.stdout)
        return found

    def reset(self) -> None:
        """Back to torch 2.13.0+cpu and no deepspeed."""
        installed = self.installed()
        if "deepspeed" in installed:
            assert self.pip("uninstall", "-y", "deepspeed").returncode == 0
        if installed.get("torch") != "2.13.0+cpu":
            assert self.pip("install", "torch==2.13.0+cpu").returncode == 0

    def bin_files(self) -> dict[str, str]:
        """sha256 of every file in the venv's bin/ (what a wheel's scripts could replace)."""
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(self.python.parent.iterdir())}


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Target:
    require(sys.platform.startswith("linux"), "the test wheels are linux_x86_64")
    root = tmp_path_factory.mktemp("target")
    torches = root / "torches"
    for version in ("2.13.0+cpu", "2.12.0+cpu"):
        _fake_torch(torches, version)
    venv = root / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, check=False, timeout=300)
    assert made.returncode == 0, made.stderr
    found = Target(python=venv / "bin" / "python", torches=torches)
    found.reset()
    return found


# --- a served index -----------------------------------------------------------------------------------------------


@dataclass
class Served:
    """What a loopback index serves: path -> bytes, or a handler of its own; and what was asked of it."""

    files: dict[str, bytes] = field(default_factory=dict)
    handlers: dict[str, Callable[[http.server.BaseHTTPRequestHandler], None]] = field(default_factory=dict)
    seen: list[tuple[str, str, str]] = field(default_factory=list)  # (method, Host, Authorization)
    uploads: list[bytes] = field(default_factory=list)
    upload_seconds: float = 0.0  # how long the server takes to answer an upload


def _answer(req: http.server.BaseHTTPRequestHandler, status: int, body: bytes = b"") -> None:
    req.send_response(status)
    req.send_header("Content-Length", str(len(body)))
    req.end_headers()
    req.wfile.write(body)


@pytest.fixture
def served() -> Iterator[tuple[Served, str]]:
    """``(served, base_url)``: a real HTTP server on 127.0.0.1 serving ``served``."""
    state = Served()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _record(self) -> None:
            state.seen.append((self.command, self.headers.get("Host", ""), self.headers.get("Authorization", "")))

        def do_GET(self) -> None:
            self._record()
            path = unquote(self.path.split("?", 1)[0])
            if path in state.handlers:
                state.handlers[path](self)
            elif path in state.files:
                _answer(self, 200, state.files[path])
            else:
                _answer(self, 404)

        def do_POST(self) -> None:
            self._record()
            state.uploads.append(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            time.sleep(state.upload_seconds)
            _answer(self, 200)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002, ARG002 - the stdlib's signature
            return

    with LoopbackServer(http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)) as server:
        yield state, server.base_url


def _project_page(links: Mapping[str, str], attrs: str = "") -> bytes:
    """A PEP 503 page linking ``name -> href``."""
    items = "\n".join(f'<a href="{href}"{attrs}>{name}</a>' for name, href in links.items())
    return f"<!DOCTYPE html><html><body>\n{items}\n</body></html>\n".encode()


def _serve_wheel(state: Served, wheel: Path, *, attrs: str = "") -> None:
    """Put ``wheel`` on the index as ``NAME`` (whatever its own file name), linked with its true sha256."""
    data = wheel.read_bytes()
    state.files[f"/files/{NAME}"] = data
    href = f"../../files/{quote(NAME)}#sha256={hashlib.sha256(data).hexdigest()}"
    state.files["/simple/deepspeed/"] = _project_page({NAME: href}, attrs)


def _dswheels(
    *args: str, env: Mapping[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dswheels", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(env) if env is not None else _clean_env(),
        timeout=timeout,
        check=False,
    )


def _install(target: Target, index: str, *extra: str) -> subprocess.CompletedProcess[str]:
    env = _clean_env(PIP_FIND_LINKS=str(target.torches))
    return _dswheels("install", "--index", index, "--python", str(target.python), *extra, env=env)


def _record(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _raw_wheel(path: Path, members: Mapping[str, bytes]) -> Path:
    """A wheel zip of exactly ``members``, a RECORD added (pip installs what RECORD-valid wheels hold)."""
    dist_info = next(name.split("/")[0] for name in members if name.split("/")[0].endswith(".dist-info"))
    files = dict(members)
    files[f"{dist_info}/RECORD"] = (
        "\n".join([*(_record(n, d) for n, d in files.items()), f"{dist_info}/RECORD,,"]) + "\n"
    ).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


def _deepspeed_members(
    *, version: str = f"0.19.8+{LABEL}", torch: str = "2.13", tag: str = f"{PY}-{PY}-linux_x86_64"
) -> dict[str, bytes]:
    dist_info = f"deepspeed-{version}.dist-info"
    return {
        "deepspeed/__init__.py": f'__version__ = "{version}"\n'.encode(),
        f"{dist_info}/METADATA": (
            f"Metadata-Version: 2.1\nName: deepspeed\nVersion: {version}\nRequires-Dist: torch=={torch}.*\n"
        ).encode(),
        f"{dist_info}/WHEEL": f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tag}\n".encode(),
    }


# --- 2. upload credentials go only to the origin they were given for ----------------------------------------------


def _publish_to(base: str, wheel: Path) -> subprocess.CompletedProcess[str]:
    env = _clean_env(DSWHEELS_UPLOAD_USERNAME="alice", DSWHEELS_UPLOAD_PASSWORD="s3cret")  # noqa: S106 - a test's
    return _dswheels("publish", str(wheel), "--repository-url", base + "/", env=env)


@pytest.mark.parametrize("answer", [200, 500])
def test_publish_sends_upload_credentials_only_to_the_repository_origin(
    served: tuple[Served, str], tmp_path: Path, answer: int
) -> None:
    """The server's page lists the wheel without a hash at another origin (localhost for 127.0.0.1):
    publish downloads it to compare, without the credentials; a 500 there is exit 7, not a traceback."""
    state, base = served
    wheel = write_deepspeed_wheel(tmp_path / "w", variant="cpu", torch="2.13", python=PY)
    elsewhere = base.replace("127.0.0.1", "localhost") + f"/files/{quote(wheel.name)}"
    state.files["/simple/deepspeed/"] = _project_page({wheel.name: elsewhere})
    if answer == 200:
        state.files[f"/files/{wheel.name}"] = wheel.read_bytes()
    else:
        state.handlers[f"/files/{wheel.name}"] = lambda req: _answer(req, 500, b"boom")
    done = _publish_to(base, wheel)
    assert "Traceback" not in done.stderr, done.stderr
    basic = "Basic " + base64.b64encode(b"alice:s3cret").decode()
    to_localhost = [auth for _method, host, auth in state.seen if host.startswith("localhost")]
    assert to_localhost, f"the file at the other origin was never asked for: {state.seen}"
    assert set(to_localhost) == {""}, "the upload credentials went to another origin"
    assert ("GET", base.removeprefix("http://"), basic) in state.seen  # the repository itself gets them
    if answer == 200:
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"already published  {wheel.name}" in done.stdout
    else:
        assert done.returncode == 7, done.stdout + done.stderr
        assert "HTTP 500" in done.stderr
    assert "s3cret" not in done.stdout + done.stderr


# --- 4. a wheel whose contents are not its name is never handed to pip --------------------------------------------


@pytest.mark.parametrize("verify", ["--no-verify", "verify"])
def test_install_refuses_a_wheel_whose_metadata_is_another_build(
    served: tuple[Served, str], target: Target, tmp_path: Path, verify: str
) -> None:
    """Right sha256, the name of the torch 2.13 wheel, the METADATA of a torch 2.12 build pinning torch==2.12.*."""
    state, base = served
    target.reset()
    liar = _raw_wheel(tmp_path / "liar.whl", _deepspeed_members(version="0.19.8+cputorch2.12", torch="2.12"))
    _serve_wheel(state, liar)
    done = _install(target, base, *([verify] if verify.startswith("--") else []))
    assert done.returncode == 4, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "its METADATA says deepspeed 0.19.8+cputorch2.12, its name says deepspeed 0.19.8+cputorch2.13" in done.stderr
    assert "it requires torch==2.12.*; a wheel for torch 2.13 pins torch==2.13.*" in done.stderr
    assert "pip install" not in done.stdout  # pip never ran
    installed = target.installed()
    assert installed["torch"] == "2.13.0+cpu", "the environment's torch was replaced"
    assert "deepspeed" not in installed


@pytest.mark.parametrize(
    ("case", "problem"),
    [
        ("tag", f"its WHEEL file says Tag: py3-none-any; its name says {PY}-{PY}-linux_x86_64"),
        ("unpinned", "it requires no torch; a wheel for torch 2.13 pins torch==2.13.*"),
    ],
)
def test_install_refuses_a_wheel_whose_tags_or_pin_differ(
    served: tuple[Served, str], target: Target, tmp_path: Path, case: str, problem: str
) -> None:
    state, base = served
    target.reset()
    members = _deepspeed_members(tag="py3-none-any") if case == "tag" else _deepspeed_members()
    if case == "unpinned":
        meta = f"deepspeed-0.19.8+{LABEL}.dist-info/METADATA"
        members[meta] = members[meta].replace(b"Requires-Dist: torch==2.13.*\n", b"")
    _serve_wheel(state, _raw_wheel(tmp_path / "w.whl", members))
    done = _install(target, base, "--no-verify")
    assert done.returncode == 4, done.stdout + done.stderr
    assert problem in done.stderr
    assert "deepspeed" not in target.installed()


# --- 17. what a DeepSpeed wheel may write into an environment -----------------------------------------------------

_DATA = f"deepspeed-0.19.8+{LABEL}.data"
_DIST = f"deepspeed-0.19.8+{LABEL}.dist-info"


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ({f"{_DATA}/scripts/pip": b"#!/bin/sh\necho pwned\n"}, "a script DeepSpeed does not install (bin/pip)"),
        ({f"{_DATA}/scripts/python3": b"#!/bin/sh\necho pwned\n"}, "a script DeepSpeed does not install (bin/python3)"),
        ({f"{_DATA}/data/bin/pip": b"#!/bin/sh\n"}, "installed under the environment's data directory"),
        ({f"{_DATA}/headers/x.h": b""}, "installed under the environment's headers directory"),
        (
            {f"{_DIST}/entry_points.txt": b"[console_scripts]\npip = deepspeed:main\n"},
            "declares scripts DeepSpeed does not install: pip",
        ),
        ({"evil.pth": b"import os\n"}, "evil.pth: outside the deepspeed package"),
        ({"pip/__init__.py": b""}, "pip/__init__.py: outside the deepspeed package"),
        (
            {f"{_DATA}/purelib/torch/__init__.py": b""},
            "outside the deepspeed package (site-packages/torch/__init__.py)",
        ),
        (
            {"pip-99.dist-info/METADATA": b"Name: pip\nVersion: 99\n"},
            "pip-99.dist-info",  # read_wheel: a second .dist-info
        ),
    ],
    ids=["bin-pip", "bin-python3", "data", "headers", "console-script", "pth", "package", "purelib", "dist-info"],
)
def test_install_refuses_a_wheel_that_writes_outside_deepspeeds_files(
    served: tuple[Served, str], target: Target, tmp_path: Path, extra: dict[str, bytes], problem: str
) -> None:
    state, base = served
    target.reset()
    before = target.bin_files()
    _serve_wheel(state, _raw_wheel(tmp_path / "w.whl", {**_deepspeed_members(), **extra}))
    done = _install(target, base, "--no-verify")
    assert done.returncode == 4, done.stdout + done.stderr
    assert problem in done.stderr
    assert "Traceback" not in done.stderr
    assert target.bin_files() == before, "the environment's bin/ changed"
    assert "deepspeed" not in target.installed()


def test_install_takes_a_wheel_with_deepspeeds_own_scripts(
    served: tuple[Served, str], target: Target, tmp_path: Path
) -> None:
    """The control: DeepSpeed's scripts and an entry point of another group (the real 0.19.8 wheel has one)."""
    state, base = served
    target.reset()
    scripts = {
        f"{_DATA}/scripts/{name}": b"#!python\nprint('ds')\n" for name in ("deepspeed", "ds", "ds_report", "dsr")
    }
    entry = {f"{_DIST}/entry_points.txt": b"[pytest_randomly.random_seeder]\ndeepspeed = deepspeed:seed\n"}
    _serve_wheel(state, _raw_wheel(tmp_path / "w.whl", {**_deepspeed_members(), **scripts, **entry}))
    done = _install(target, base, "--no-verify")
    assert done.returncode == 0, done.stdout + done.stderr
    assert target.installed()["deepspeed"] == f"0.19.8+{LABEL}"
    assert (target.python.parent / "ds_report").is_file()
    target.reset()


# --- issue 30.1: an entry_points.txt pip reads otherwise than a strict reading ---------------------------------------

_READ_OTHERWISE = {
    "double-brackets": b"[x]\n[[console_scripts]]\npip = deepspeed:main\n",
    "bracket-after": b"[console_scripts]]\npip = deepspeed:main\n",
    "distlib-search": b"[console_scripts]\nds = -x pip=deepspeed:main\n",
    "semicolon-name": b"[console_scripts]\n;pip = deepspeed:main\n",
}


@pytest.mark.parametrize("text", _READ_OTHERWISE.values(), ids=_READ_OTHERWISE)
def test_entry_points_pip_reads_otherwise_are_refused_by_install_publish_and_index(
    served: tuple[Served, str], target: Target, tmp_path: Path, text: bytes
) -> None:
    """The control first: the venv's real pip, installing the wheel itself, writes a script DeepSpeed does not
    (``bin/pip`` for the bracket cases); then install (exit 4), publish and index (exit 7) refuse it."""
    state, base = served
    target.reset()
    wheel = _raw_wheel(tmp_path / "w" / NAME, {**_deepspeed_members(), f"{_DIST}/entry_points.txt": text})
    aside = tmp_path / "aside"
    done = target.pip("install", "--no-deps", "--no-index", "--target", str(aside), str(wheel))
    assert done.returncode == 0, done.stdout + done.stderr
    written = {p.name for p in (aside / "bin").iterdir()}
    assert written - {"deepspeed", "ds", "ds_report"}, f"pip wrote only DeepSpeed's scripts: {written}"
    before = target.bin_files()
    _serve_wheel(state, wheel)
    done = _install(target, base, "--no-verify")
    assert done.returncode == 4, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "entry_points.txt" in done.stderr
    assert target.bin_files() == before, "the environment's bin/ changed"
    assert "deepspeed" not in target.installed()
    for args in (
        ("publish", str(wheel), "--dir", str(tmp_path / "pub")),
        ("index", "--from", str(wheel.parent), "--out", str(tmp_path / "site")),
    ):
        done = _dswheels(*args, "--report", str(tmp_path / "r.json"), env=_clean_env(DSWHEELS_CACHE=str(tmp_path)))
        assert done.returncode == 7, (args, done.stdout + done.stderr)
        assert "entry_points.txt" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    assert not list((tmp_path / "pub").glob("*.whl")) if (tmp_path / "pub").exists() else True


# --- 6. servers that send a byte a second -------------------------------------------------------------------------


def _trickle(body: bytes, *, seconds: float = 40.0) -> Callable[[http.server.BaseHTTPRequestHandler], None]:
    """Send ``body``'s length, then a byte a second for at most ``seconds`` (a test on a stalled reader ends)."""

    def handle(req: http.server.BaseHTTPRequestHandler) -> None:
        req.send_response(200)
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        end = time.monotonic() + seconds
        for byte in body:
            if time.monotonic() > end:
                break
            try:
                req.wfile.write(bytes([byte]))
                req.wfile.flush()
            except OSError:  # the reader hung up
                return
            time.sleep(1.0)
        req.close_connection = True

    return handle


@pytest.fixture
def fast_deadline(monkeypatch: pytest.MonkeyPatch) -> float:
    """A 2-second floor and 16 KiB/s (the defaults are 60 s and 32 KiB/s); what a run may take at most."""
    from dswheels.host import http as http_module

    monkeypatch.setattr(http_module, "FLOOR_SECONDS", 2.0, raising=False)
    monkeypatch.setattr(http_module, "MIN_RATE", 16 * 1024, raising=False)
    return 15.0


@pytest.mark.parametrize("slow", ["page", "manifest", "wheel"])
def test_install_stops_reading_a_server_that_sends_a_byte_a_second(  # noqa: PLR0917 - fixtures
    served: tuple[Served, str],
    target: Target,
    tmp_path: Path,
    slow: str,
    fast_deadline: float,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state, base = served
    target.reset()
    wheel = _raw_wheel(tmp_path / "w.whl", _deepspeed_members())
    _serve_wheel(state, wheel)
    path = {
        "page": "/simple/deepspeed/",
        "manifest": f"/files/{NAME.removesuffix('.whl')}.manifest.json",
        "wheel": f"/files/{NAME}",
    }[slow]
    state.handlers[path] = _trickle(state.files.get(path, b"{" + b" " * 4000 + b"}"))
    for key, value in _clean_env(PIP_FIND_LINKS=str(target.torches)).items():
        monkeypatch.setenv(key, value)
    start = time.monotonic()
    code = main(
        ["install", "--index", base, "--python", str(target.python), "--dry-run" if slow != "wheel" else "--no-verify"]
    )
    seconds = time.monotonic() - start
    out, err = capsys.readouterr()
    assert seconds < fast_deadline, f"still reading after {seconds:.0f} s"
    assert "too slow" in out + err, out + err
    if slow == "manifest":  # an unreadable manifest is a notice: the wheel is still picked
        assert code == 0, out + err
        assert "no glibc/libstdc++ check" in out
    else:
        assert code == 4, out + err
        assert "Traceback" not in err
    assert "deepspeed" not in target.installed()


def test_a_download_that_keeps_the_pace_and_a_slow_upload_answer_are_not_cut(
    served: tuple[Served, str], tmp_path: Path, fast_deadline: float, capsys: pytest.CaptureFixture[str]
) -> None:
    """The deadline grows with what arrives (128 KiB at ~32 KiB/s take twice the 2-s floor), and an
    upload's answer (4 s here) is the server's to give."""
    state, base = served
    wheel = write_deepspeed_wheel(tmp_path / "w", variant="cpu", torch="2.13", python=PY)
    page = _project_page({}) + b"<!--" + b"x" * 128 * 1024 + b"-->"

    def steady(req: http.server.BaseHTTPRequestHandler) -> None:
        req.send_response(200)
        req.send_header("Content-Length", str(len(page)))
        req.end_headers()
        for start in range(0, len(page), 1024):
            req.wfile.write(page[start : start + 1024])
            req.wfile.flush()
            time.sleep(1 / 32)

    state.handlers["/simple/deepspeed/"] = steady
    state.upload_seconds = 4.0
    start = time.monotonic()
    env = {"DSWHEELS_UPLOAD_USERNAME": "alice", "DSWHEELS_UPLOAD_PASSWORD": "s3cret"}
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        code = main(["publish", str(wheel), "--repository-url", base + "/"])
    out, err = capsys.readouterr()
    assert time.monotonic() - start > 7.0, out + err  # both were slower than the floor
    assert "too slow" not in out + err
    assert len(state.uploads) == 1
    # after the upload the page (still the empty one) lacks the wheel: publish says so, exit 7
    assert code == 7, out + err
    assert "lacks or holds other bytes" in err


def test_a_retried_download_whose_headers_trickle_is_bounded(
    served: tuple[Served, str], tmp_path: Path, fast_deadline: float
) -> None:
    """Even its status line comes a byte a second; urllib3 retries the request (a source download
    retries 3 times here): every retry after the deadline ends at once."""
    from dswheels.host.downloads import Downloader
    from dswheels.kernel.errors import SourceError

    state, base = served

    def trickle_all(req: http.server.BaseHTTPRequestHandler) -> None:
        end = time.monotonic() + 40
        for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello":
            if time.monotonic() > end:
                return
            try:
                req.wfile.write(bytes([byte]))
                req.wfile.flush()
            except OSError:
                return
            time.sleep(1.0)

    state.handlers["/src.tar.gz"] = trickle_all
    start = time.monotonic()
    with pytest.raises(SourceError, match="too slow"):
        Downloader(tmp_path / "cache", retries=3).fetch(base + "/src.tar.gz", sha256=None)
    assert time.monotonic() - start < fast_deadline  # the floor plus urllib3's backoff between retries
    assert not list((tmp_path / "cache").glob("sha256/*"))


def test_doctor_stops_reading_an_index_that_sends_a_byte_a_second(
    served: tuple[Served, str], tmp_path: Path, fast_deadline: float, capsys: pytest.CaptureFixture[str]
) -> None:
    state, base = served
    state.handlers["/simple/deepspeed/"] = _trickle(_project_page({NAME: f"../../files/{NAME}"}))
    saved = tmp_path / "doctor.json"
    saved.write_text(json.dumps({"schema": DOCTOR_SCHEMA, "facts": machine_data("windows-healthy-cu124")}))
    start = time.monotonic()
    code = main(["doctor", "--facts", str(saved), "--index", base])
    seconds = time.monotonic() - start
    out, _err = capsys.readouterr()
    assert seconds < fast_deadline, f"still reading after {seconds:.0f} s"
    assert code == 9
    assert "too slow" in out


# --- 11. no shell text in install lines ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "site_url",
    [
        "http://x.example/$(touch${IFS}/tmp/pwn)/",
        "http://x.example/`id`/",
        "http://x.example/a b/",
        "http://x.example/;rm/",
        "ftp://x.example/",
        "http://alice:s3cret@x.example/",
    ],
)
def test_index_refuses_a_site_url_a_shell_would_read(tmp_path: Path, site_url: str) -> None:
    published = tmp_path / "published"
    write_deepspeed_wheel(published, variant="cpu", torch="2.13", python=PY)
    done = _dswheels("index", "--from", str(published), "--out", str(tmp_path / "site"), "--site-url", site_url)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--site-url" in done.stderr
    assert "Traceback" not in done.stderr
    assert "s3cret" not in done.stdout + done.stderr
    assert not (tmp_path / "site").exists()


def test_install_prints_the_index_url_as_one_shell_word(
    served: tuple[Served, str], target: Target, tmp_path: Path
) -> None:
    """A link whose query holds shell text and a newline: the dry run's comment stays one line."""
    state, base = served
    wheel = _raw_wheel(tmp_path / "w.whl", _deepspeed_members())
    data = wheel.read_bytes()
    state.files[f"/files/{NAME}"] = data
    href = f"../../files/{quote(NAME)}?x=$(id)&#10;touch /tmp/pwn #sha256={hashlib.sha256(data).hexdigest()}"
    state.files["/simple/deepspeed/"] = _project_page({NAME: href})
    done = _install(target, base, "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    comment, command = done.stdout.strip().splitlines()[-2:]
    assert comment.startswith("# download '"), comment
    assert comment.endswith("then:"), comment
    assert "touch%20/tmp/pwn" in comment
    assert command.endswith(f"pip install --disable-pip-version-check {NAME}")


# --- 15. no secrets printed ---------------------------------------------------------------------------------------


def test_credentials_in_the_index_url_are_used_and_never_printed(
    served: tuple[Served, str], target: Target, tmp_path: Path
) -> None:
    state, base = served
    _serve_wheel(state, _raw_wheel(tmp_path / "w.whl", _deepspeed_members()))
    secret = base.replace("http://", "http://alice:s3cret@")
    done = _install(target, secret, "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "alice:****@127.0.0.1" in done.stdout
    basic = "Basic " + base64.b64encode(b"alice:s3cret").decode()
    assert ("GET", base.removeprefix("http://"), basic) in state.seen  # the credentials did their job
    saved = tmp_path / "doctor.json"
    saved.write_text(json.dumps({"schema": DOCTOR_SCHEMA, "facts": machine_data("windows-healthy-cu124")}))
    doctor = _dswheels("doctor", "--json", "--facts", str(saved), "--index", secret)
    assert json.loads(doctor.stdout)["verdict"]["index"]["url"] == secret.replace("s3cret", "****")
    unreachable = _dswheels("install", "--index", "http://bob:hunter2@127.0.0.1:9/", "--python", str(target.python))
    assert unreachable.returncode == 4
    for output in (done.stdout, done.stderr, doctor.stdout, doctor.stderr, unreachable.stdout, unreachable.stderr):
        assert "s3cret" not in output
        assert "hunter2" not in output


# --- 16. a yanked wheel is called yanked --------------------------------------------------------------------------


def test_install_says_the_only_fitting_wheel_is_yanked(
    served: tuple[Served, str], target: Target, tmp_path: Path
) -> None:
    state, base = served
    _serve_wheel(state, _raw_wheel(tmp_path / "w.whl", _deepspeed_members()), attrs=' data-yanked="broken cpu_adam"')
    done = _install(target, base, "--dry-run")
    assert done.returncode == 9, done.stdout + done.stderr
    assert f"{NAME}, the wheel for this environment, is yanked: broken cpu_adam" in done.stderr
    assert "no linux_x86_64 wheels at all" not in done.stderr
