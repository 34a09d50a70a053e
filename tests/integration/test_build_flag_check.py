"""The build judges its own tree's flags before compiling: ``dswheels build`` stops with exit 5, compiling nothing.

The source is DeepSpeed 0.19.8's real sdist with one change, the kind a new release brings: the
CPU builder hands the host compiler an nvcc option (``--use_fast_math``), which g++ rejects.
It is served to ``dswheels build`` as a pinned archive override, so the whole real build path
runs (fetch, sha256, unpack, patches, interpreter, op probe) up to the flag check.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
import time
from pathlib import Path

import pytest

from dswheels.building.effects.flag_recorder import fetch_sdists
from dswheels.host.downloads import Downloader
from dswheels.kernel.compat import load_compat
from tests.conftest import DATA
from tests.integration.conftest import build_env, dswheels, record_time, require_compilers

pytestmark = pytest.mark.integration

CELL = "ds0.19.8-torch2.13-cpu-cp311-linux_x86_64"
MEMBER = "deepspeed-0.19.8/op_builder/cpu/builder.py"


def _sabotaged_sdist(sdist: Path, out: Path) -> Path:
    """The sdist with ``'-Wno-reorder'`` in CPUOpBuilder.cxx_args() replaced by nvcc's ``'--use_fast_math'``."""
    with tarfile.open(sdist) as src, tarfile.open(out, "w:gz") as dst:
        for member in src:
            data = src.extractfile(member) if member.isfile() else None
            if member.name == MEMBER and data is not None:
                text = data.read().decode()
                assert text.count("'-Wno-reorder'") == 1
                payload = text.replace("'-Wno-reorder'", "'--use_fast_math'").encode()
                member.size = len(payload)
                dst.addfile(member, io.BytesIO(payload))
            else:
                dst.addfile(member, data)
    return out


def test_a_flag_gcc_rejects_stops_the_build_before_the_compile(dswheels_cache: Path, tmp_path: Path) -> None:
    require_compilers()
    with Downloader(dswheels_cache / "sources") as downloader:
        [sdist] = fetch_sdists(["0.19.8"], downloader=downloader, pypi_json=load_compat().sdist_json).values()
    archive = _sabotaged_sdist(sdist, tmp_path / "deepspeed-0.19.8-broken.tar.gz")
    sha = hashlib.sha256(archive.read_bytes()).hexdigest()
    matrix = (DATA / "matrix-cpu.yml").read_text(encoding="utf-8")
    matrix = matrix.replace(
        'deepspeed: ["0.19.8"]',
        f'deepspeed:\n  - version: "0.19.8"\n    source: {{url: "{archive.as_uri()}", sha256: "{sha}"}}',
    )
    (tmp_path / "matrix.yml").write_text(matrix, encoding="utf-8")
    out = tmp_path / "out"
    start = time.monotonic()
    result = dswheels(
        "build",
        "--matrix",
        str(tmp_path / "matrix.yml"),
        "--cell",
        CELL,
        "--torch-index",
        "pip",
        "--out",
        str(out),
        env=build_env(dswheels_cache),
        timeout=900,
    )
    record_time("build stopped by the flag check", time.monotonic() - start)
    text = result.stdout + result.stderr
    assert result.returncode == 5, text[-4000:]
    assert "DeepSpeed 0.19.8's flags for cpu_adam" in text
    assert "g++ rejects '--use_fast_math'" in text
    assert "nothing was compiled" in text
    [log] = (out / "logs").glob(f"{CELL}-*.log")
    assert "python -m build" not in log.read_text(encoding="utf-8")  # the compile never started
    assert not list(out.glob("*/*.whl"))
