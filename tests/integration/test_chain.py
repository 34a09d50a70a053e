"""The commands chain through their default locations, as the README's examples run them.

``dswheels build`` with no --out (the CPU reference build of conftest.py runs that way) writes
``wheelhouse/<variant>/``; ``publish`` with no wheels takes it into ``published/``; ``index``
with no flags writes ``site/`` with install lines for ``http://127.0.0.1:8000/`` and prints the
command that serves it there. The site is then served by the printed command and pip installs
the wheel from the printed line, in a fresh venv. The README's build, publish and index
examples are compared with these real runs (tests/support/readme.py).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import venv
from pathlib import Path

import pytest

from dswheels.kernel.locations import LOCAL_SITE_URL, PUBLISHED, SITE, WHEELHOUSE
from tests.conftest import ROOT
from tests.integration.conftest import Built, _free_port, build_env, dswheels
from tests.support.readme import README_CACHE, README_CWD, check_example

pytestmark = pytest.mark.integration


def _auto_cache() -> str:
    """What `--compiler-cache auto` picks on this PATH (the README: ccache, else sccache, else none)."""
    for tool in ("ccache", "sccache"):
        if shutil.which(tool):
            return tool
    return "no compiler cache"


def test_the_build_example_is_the_reference_build(cpu_build: Built, dswheels_cache: Path) -> None:
    places = {str(cpu_build.cwd): README_CWD, str(ROOT): README_CWD, str(dswheels_cache): README_CACHE}
    check_example("build", argv=cpu_build.argv, output=cpu_build.stdout + cpu_build.stderr, places=places)
    # what the example leaves out (`...`) because it differs between machines (the slots: its cores), said here:
    # the cache auto picks
    line = re.search(
        r"^building 2 op\(s\), longest first, 2 at a time, every unit from one pool of \d+ compile slot\(s\), (.+)$",
        cpu_build.stdout,
        re.MULTILINE,
    )
    assert line is not None, cpu_build.stdout
    assert line.group(1) == _auto_cache()


def _wait_for(port: int, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert server.poll() is None, "the printed serve command exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            time.sleep(0.1)
        else:
            return
    pytest.fail(f"nothing listens on port {port} 30 s after the printed serve command started")


def _printed(output: str) -> tuple[str, str]:
    """The serve command and the (one) pip line `dswheels index` printed."""
    serve = re.search(r"^serve it: (.+)$", output, re.MULTILINE)
    pip = re.findall(r"^  (pip install .+)$", output, re.MULTILINE)
    assert serve, output
    assert len(pip) == 1, output
    return serve.group(1), pip[0]


def test_publish_and_index_take_what_build_wrote_and_the_served_site_installs(
    cpu_build: Built, dswheels_cache: Path, tmp_path: Path
) -> None:
    clone = tmp_path / "clone"
    shutil.copytree(cpu_build.out, clone / WHEELHOUSE)  # what build wrote, as it wrote it
    env = build_env(dswheels_cache)
    places = {str(clone): README_CWD}

    published = dswheels("publish", env=env, cwd=clone)
    assert published.returncode == 0, published.stdout + published.stderr
    check_example("publish", argv=["publish"], output=published.stdout + published.stderr, places=places)
    assert (clone / PUBLISHED / cpu_build.wheel.name).read_bytes() == cpu_build.wheel.read_bytes()

    indexed = dswheels("index", env=env, cwd=clone)
    assert indexed.returncode == 0, indexed.stdout + indexed.stderr
    check_example("index", argv=["index"], output=indexed.stdout + indexed.stderr, places=places)
    serve, pip = _printed(indexed.stdout)
    assert serve.split() == ["python3", "-m", "http.server", "--bind", "127.0.0.1", "--directory", str(SITE), "8000"]
    assert f"--extra-index-url {LOCAL_SITE_URL}whl/cpu-torch2.13/simple/" in pip
    assert pip in (clone / SITE / "index.html").read_text(encoding="utf-8").replace("&quot;", '"')

    # The same site for a free port (8000 may be taken on a shared machine), then its printed
    # command serves it and pip installs from its printed line, exactly as printed.
    port = _free_port()
    again = dswheels("index", "--site-url", f"http://127.0.0.1:{port}/", env=env, cwd=clone)
    assert again.returncode == 0, again.stdout + again.stderr
    serve, pip = _printed(again.stdout)
    argv = shlex.split(serve)
    argv[0] = shutil.which(argv[0]) or sys.executable  # python3 is this interpreter where PATH has none
    server_log = tmp_path / "server.log"
    with server_log.open("wb") as log:
        server = subprocess.Popen(argv, cwd=clone, stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait_for(port, server)
            target = tmp_path / "venv"
            venv.EnvBuilder(with_pip=False).create(target)
            python = target / "bin" / "python"
            # the machine's pip configuration supplies torch (as for the build); download.pytorch.org,
            # which the line names, is out of reach here: no retries for it
            pip_env = {**os.environ, "PIP_RETRIES": "0", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
            installed = subprocess.run(
                [sys.executable, "-m", "pip", "--python", str(python), *shlex.split(pip)[1:]],
                env=pip_env,
                capture_output=True,
                text=True,
                timeout=900,
                check=False,
            )
        finally:
            server.terminate()
            server.wait(timeout=10)
    assert installed.returncode == 0, installed.stdout[-4000:] + installed.stderr[-4000:]
    version = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('deepspeed'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert version == "0.19.8+cputorch2.13"
    served = server_log.read_text(encoding="utf-8", errors="replace")
    wheel_url = "/files/" + cpu_build.wheel.name.replace("+", "%2B")
    assert f'"GET {wheel_url} HTTP/1.1" 200' in served, served
