"""``dswheels build`` for real: the two reference wheels, their contents, and the failures it must catch.

Longer than most modules because its cases share two expensive session builds (the CPU and the
CUDA reference wheel); splitting it would build them twice or hide them in a conftest.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import http.server
import io
import json
import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from dswheels.host.downloads import Downloader
from dswheels.kernel.binaries.fatbin import gpu_code
from dswheels.kernel.binaries.isa import scan_disassembly
from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import SourceError
from dswheels.kernel.manifest import parse_manifest
from dswheels.kernel.wheel_contents import parse_installed_info
from tests.conftest import DATA, require
from tests.integration.conftest import (
    CPU_CELL,
    CUDA_CELL,
    CUDA_HOME,
    Built,
    build_env,
    dswheels,
    record_time,
    require_compilers,
    require_cuda,
)
from tests.support.processes import stop_sccache

pytestmark = pytest.mark.integration


def _members(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def _metadata(files: dict[str, bytes]) -> str:
    return next(data for name, data in files.items() if name.endswith(".dist-info/METADATA")).decode()


def _extract(files: dict[str, bytes], name: str, tmp: Path) -> Path:
    path = tmp / Path(name).name
    path.write_bytes(files[name])
    return path


# --- the CPU reference wheel -------------------------------------------------------------------


def test_cpu_wheel_has_exactly_the_planned_op(cpu_build: Built) -> None:
    # tagged with the floor auditwheel judges its binaries need on this machine (manylinux_2_35 on Debian 12)
    assert re.fullmatch(
        r"deepspeed-0\.19\.8\+cputorch2\.13-cp311-cp311-manylinux_2_[0-9]+_x86_64\.whl", cpu_build.wheel.name
    )
    assert cpu_build.wheel.parent == cpu_build.out / "cpu"  # wheelhouse/<variant>/
    files = _members(cpu_build.wheel)
    info = parse_installed_info(files["deepspeed/git_version_info_installed.py"].decode())
    assert info.accelerator_name == "cpu"
    assert set(info.built_ops) == {"cpu_adam", "deepspeed_shm_comm"}
    assert info.torch_info["version"] == "2.13"
    manifest = parse_manifest(cpu_build.manifest.read_text())
    assert manifest.cell_id == CPU_CELL
    assert set(manifest.ops) == {"cpu_adam", "deepspeed_shm_comm"}
    modules = {op.name: op.module for op in manifest.ops_built}
    assert modules["cpu_adam"] == "deepspeed.ops.adam.cpu_adam_op"
    for op in manifest.ops_built:
        assert op.extension in files  # an op built once per ISA level: its baseline variant's
        assert op.size == sum(len(files[e]) for e in {op.extension, *(v.extension for v in op.variants)})
        assert op.seconds is not None
        assert op.seconds > 0
    assert manifest.wheel.sha256 == hashlib.sha256(cpu_build.wheel.read_bytes()).hexdigest()
    assert manifest.wheel.size == cpu_build.wheel.stat().st_size
    assert manifest.accelerator == "cpu"
    assert manifest.torch_version.startswith("2.13.")
    assert manifest.torch_cuda is None
    assert manifest.cpu_baseline == "x86-64-v2"
    assert manifest.env["DS_BUILD_OPS"] == "0"
    assert manifest.env["DS_BUILD_CPU_ADAM"] == "1"
    assert manifest.env["DS_ACCELERATOR"] == "cpu"
    assert manifest.ops_left_out["deepspeed_ccl_comm"]
    assert manifest.source["kind"] == "sdist"
    assert manifest.source["verified_by"] == "PyPI JSON API digest"
    assert set(manifest.durations) >= {"source", "interpreter", "compile", "postprocess", "total"}
    assert manifest.toolchain["ninja"]
    assert manifest.compiler_cache.get("tool") in (None, "ccache", "sccache")


def test_metadata_pins_torch_and_record_is_right(cpu_build: Built) -> None:
    files = _members(cpu_build.wheel)
    metadata = _metadata(files)
    requires = [
        line.split(":", 1)[1].strip()
        for line in metadata.split("\n\n")[0].splitlines()
        if line.startswith("Requires-Dist:")
    ]
    torch = [r for r in requires if Requirement(r).name == "torch"]
    assert torch == ["torch==2.13.*"]  # torchvision/torchembed extras are other projects
    record_name = next(name for name in files if name.endswith(".dist-info/RECORD"))
    rows = list(csv.reader(io.StringIO(files[record_name].decode())))
    assert {row[0] for row in rows} == set(files)
    for name, digest, size in rows:
        if name == record_name:
            assert (digest, size) == ("", "")
            continue
        expected = base64.urlsafe_b64encode(hashlib.sha256(files[name]).digest()).rstrip(b"=").decode()
        assert digest == f"sha256={expected}", name
        assert int(size) == len(files[name])


def test_cpu_extension_is_stripped_and_within_the_baseline(cpu_build: Built, tmp_path: Path) -> None:
    files = _members(cpu_build.wheel)
    manifest = parse_manifest(cpu_build.manifest.read_text())
    so = _extract(files, next(op.extension for op in manifest.ops_built if op.name == "cpu_adam"), tmp_path)
    sections = subprocess.run(["readelf", "-S", "-W", str(so)], capture_output=True, text=True, check=True).stdout
    assert ".debug_info" not in sections
    assert ".symtab" not in sections
    # proven independently of the build: disassemble and scan against the baseline
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(so)], capture_output=True, text=True, check=True)
    report = scan_disassembly(dis.stdout, load_compat().cpu_baselines["x86-64-v2"].forbidden_registers)
    assert report.instructions > 10_000
    assert report.ok, report.examples
    # and it is not a trivially empty proof: the same scan flags AVX code in a -march=native build of
    # the same source on this (AVX2) machine, see test_isa_and_buildlog for recorded examples


def test_progress_and_log(cpu_build: Built) -> None:
    for level in ("default", "avx2", "avx512"):  # cpu_adam once per ISA level (docs/build.md), shm_comm once
        assert re.search(rf"\[\d/4\] compiling cpu_adam \({level}\) \.\.\.", cpu_build.stdout)
        assert re.search(rf"cpu_adam \({level}\) compiled in \d", cpu_build.stdout)
    assert re.search(r"\[\d/4\] compiling deepspeed_shm_comm \.\.\.", cpu_build.stdout)
    assert "CPU baseline x86-64-v2 holds" in cpu_build.stdout
    assert "built 1 of 1 cell(s)" in cpu_build.stdout
    log = cpu_build.log.read_text()
    assert log.startswith("# dswheels ")
    building = r"^\[\d\d:\d\d:\d\d\] building 'deepspeed.ops.adam.cpu_adam_op_avx2' extension$"
    assert re.search(building, log, re.MULTILINE)
    assert "dswheels: patched op_builder/builder.py: cpu_arch() -> '-march=x86-64-v2'" in log


def test_warm_rebuild_hits_the_compiler_cache(cpu_build: Built, dswheels_cache: Path, tmp_path: Path) -> None:
    """A rebuild in a fresh work directory: every object from the cache. Run as under GitHub Actions.

    Through the cache the reference build used (``auto``: ccache where it is installed, else sccache,
    which the test dependencies install), so it is warm whichever that is."""
    tool = str(parse_manifest(cpu_build.manifest.read_text()).compiler_cache.get("tool", ""))
    assert tool in {"ccache", "sccache"}, "the test dependencies install sccache: auto finds a cache"
    summary = tmp_path / "summary.md"
    start = time.monotonic()
    result = dswheels(
        "build",
        "--matrix",
        str(DATA / "matrix-cpu.yml"),
        "--cell",
        CPU_CELL,
        "--torch-index",
        "pip",
        "--out",
        str(tmp_path / "wh"),
        "--compiler-cache",
        tool,
        env=build_env(dswheels_cache, GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(summary)),
    )
    record_time(f"{CPU_CELL} (warm rebuild)", time.monotonic() - start)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    manifest = parse_manifest(next((tmp_path / "wh" / "cpu").glob("*.manifest.json")).read_text())
    cache = manifest.compiler_cache
    assert cache["tool"] == tool
    hits, misses = cache["hits"], cache["misses"]
    assert isinstance(hits, int)
    assert hits >= 8  # cpu_adam's two objects at each of its three ISA levels, shm_comm's two
    assert misses == 0, cache
    assert f"compiler cache: {tool}:" in result.stdout
    # GitHub Actions: a foldable group per step, the compiler output inside it, a job summary table
    assert f"::group::{CPU_CELL}: build" in result.stdout
    assert "::endgroup::" in result.stdout
    assert "building 'deepspeed.ops.adam.cpu_adam_op_avx2' extension" in result.stdout  # streamed under Actions
    table = summary.read_text()
    assert f"| `{CPU_CELL}` | ok | `{cpu_build.wheel.name}`" in table
    assert f"{tool} {hits}/{hits} hits" in table, table


# --- the CUDA reference wheel ------------------------------------------------------------------


def test_cuda_wheel_has_fused_adam_for_the_planned_archs(cuda_build: Built, tmp_path: Path) -> None:
    assert re.fullmatch(
        r"deepspeed-0\.19\.8\+cu130torch2\.14-cp311-cp311-manylinux_2_[0-9]+_x86_64\.whl", cuda_build.wheel.name
    )
    files = _members(cuda_build.wheel)
    info = parse_installed_info(files["deepspeed/git_version_info_installed.py"].decode())
    assert info.accelerator_name == "cuda"
    assert info.built_ops == ("fused_adam",)
    assert info.torch_info["cuda_version"] == "13.0"
    metadata = _metadata(files)
    assert "Requires-Dist: torch==2.14.*" in metadata
    assert "Requires-Dist: nvidia-ml-py" in metadata  # what setup.py adds only for the cuda accelerator
    manifest = parse_manifest(cuda_build.manifest.read_text())
    assert manifest.accelerator == "cuda"
    assert manifest.arch_list == "7.5;8.0+PTX"
    assert manifest.env["TORCH_CUDA_ARCH_LIST"] == "7.5;8.0+PTX"
    assert manifest.env["CUDA_HOME"] == str(CUDA_HOME)
    assert "release 13.0" in manifest.toolchain["nvcc"]
    code = gpu_code(files[manifest.ops_built[0].extension])
    assert code is not None
    assert (code.sass, code.ptx) == ((75, 80), (80,))  # SASS for 7.5 and 8.0, PTX for 8.0+PTX
    # what DeepSpeed's own builder asked nvcc for, recorded for verify; the build checked the SASS against it
    assert manifest.ops_built[0].sass == (75, 80)
    assert "fused_adam: SASS sm_75, sm_80; PTX compute_80" in cuda_build.stdout
    # the toolkit here has no cuBLAS/cuSPARSE headers: the build took them from torch's nvidia wheels
    assert "CPATH" in manifest.env or "lacks" not in cuda_build.stdout


# --- what must fail ----------------------------------------------------------------------------


def _no_wheels(out: Path) -> list[Path]:
    return sorted(out.rglob("*.whl")) + sorted(out.rglob("*.manifest.json"))


def test_wrong_sha256_is_refused(
    cpu_build: Built, dswheels_cache: Path, tmp_path: Path, http_server: Callable[..., str]
) -> None:
    real = json.loads(cpu_build.manifest.read_text())["source"]
    sdist = dswheels_cache / "sources" / "sha256" / real["sha256"]
    data = sdist.read_bytes()
    wrong = hashlib.sha256(data + b"tampered").hexdigest()
    pypi = {
        "releases": {
            "0.19.8": [
                {
                    "packagetype": "sdist",
                    "filename": "deepspeed-0.19.8.tar.gz",
                    "url": "../../files/deepspeed-0.19.8.tar.gz",
                    "digests": {"sha256": wrong},
                    "size": len(data),
                },
            ],
        },
    }

    def handle(req: http.server.BaseHTTPRequestHandler) -> None:
        body = json.dumps(pypi).encode() if req.path == "/pypi/deepspeed/json" else data
        req.send_response(200)
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        req.wfile.write(body)

    base = http_server(handle)
    out = tmp_path / "wh"
    result = dswheels(
        "build",
        "--matrix",
        str(DATA / "matrix-cpu.yml"),
        "--cell",
        CPU_CELL,
        "--torch-index",
        "pip",
        "--out",
        str(out),
        "--pypi",
        f"{base}/pypi/deepspeed/json",
        env=build_env(tmp_path / "fresh-cache"),  # a fresh cache: the good copy must not be reused
    )
    assert result.returncode == 4, result.stderr
    assert "sha256 mismatch" in result.stderr
    assert wrong in result.stderr
    assert real["sha256"] in result.stderr
    assert _no_wheels(out) == []
    # the bad download is not kept for resuming either
    assert not list((tmp_path / "fresh-cache" / "sources" / "sha256").glob("*"))


def _sdist_sha(built: Built) -> str:
    return str(json.loads(built.manifest.read_text())["source"]["sha256"])


def test_pinned_archive_is_checked_and_recorded(
    cpu_build: Built, dswheels_cache: Path, tmp_path: Path, http_server: Callable[..., str]
) -> None:
    """A source the matrix names by URL: its pin is checked, a mismatch fails before anything is built."""
    data = (
        dswheels_cache / "sources" / "sha256" / json.loads(cpu_build.manifest.read_text())["source"]["sha256"]
    ).read_bytes()

    def handle(req: http.server.BaseHTTPRequestHandler) -> None:
        req.send_response(200)
        req.send_header("Content-Length", str(len(data)))
        req.end_headers()
        req.wfile.write(data)

    base = http_server(handle)
    matrix = tmp_path / "matrix.yml"
    pinned = "0" * 64
    matrix.write_text(
        (DATA / "matrix-cpu.yml")
        .read_text()
        .replace(
            'deepspeed: ["0.19.8"]',
            'deepspeed:\n  - version: "0.19.8"\n'
            f'    source: {{url: "{base}/DeepSpeed-0.19.8.tar.gz", sha256: "{pinned}"}}',
        ),
    )
    result = dswheels(
        "build",
        "--matrix",
        str(matrix),
        "--cell",
        CPU_CELL,
        "--out",
        str(tmp_path / "wh"),
        env=build_env(tmp_path / "cache"),
    )
    assert result.returncode == 4
    assert "sha256 mismatch" in result.stderr
    assert f"expected {pinned}" in result.stderr


def test_download_resumes_after_a_broken_connection(tmp_path: Path, http_server: Callable[..., str]) -> None:
    data = bytes(range(256)) * 4096  # 1 MiB
    requests_seen: list[str | None] = []

    def handle(req: http.server.BaseHTTPRequestHandler) -> None:
        rng = req.headers.get("Range")
        requests_seen.append(rng)
        if rng is None:
            # promise everything, send a third, then drop the connection
            req.send_response(200)
            req.send_header("Content-Length", str(len(data)))
            req.end_headers()
            req.wfile.write(data[: len(data) // 3])
            req.wfile.flush()
            req.close_connection = True
            return
        start = int(rng.removeprefix("bytes=").split("-")[0])
        req.send_response(206)
        req.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        req.send_header("Content-Length", str(len(data) - start))
        req.end_headers()
        req.wfile.write(data[start:])

    base = http_server(handle)
    sha = hashlib.sha256(data).hexdigest()
    path, got = Downloader(tmp_path / "cache", retries=3).fetch(f"{base}/a.tar.gz", sha256=sha)
    assert got == sha
    assert path.read_bytes() == data
    assert path == tmp_path / "cache" / "sha256" / sha
    assert requests_seen[0] is None
    assert any(r is not None and r != "bytes=0-" for r in requests_seen[1:]), requests_seen
    # content-addressed: a second fetch is served from the cache without asking the server
    requests_seen.clear()
    assert Downloader(tmp_path / "cache").fetch(f"{base}/a.tar.gz", sha256=sha)[0] == path
    assert requests_seen == []
    with pytest.raises(SourceError, match="sha256 mismatch"):
        Downloader(tmp_path / "other").fetch(f"{base}/a.tar.gz", sha256="1" * 64)


def test_nvcc_mismatch_fails_before_building(dswheels_cache: Path, tmp_path: Path) -> None:
    require_cuda()
    out = tmp_path / "wh"
    start = time.monotonic()
    result = dswheels(
        "build",
        "--matrix",
        str(DATA / "matrix-cuda.yml"),
        "--cell",
        CUDA_CELL,
        "--nvcc",
        "13.2",
        "--torch-index",
        "pip",
        "--out",
        str(out),
        env=build_env(dswheels_cache, CUDA_HOME=str(CUDA_HOME), GITHUB_ACTIONS="true"),
    )
    assert result.returncode == 9, result.stdout + result.stderr
    # under GitHub Actions: an error annotation, after the group was closed (or GitHub would hide it)
    annotation = result.stdout.index("::error::the plan builds with nvcc 13.2")
    assert result.stdout.rindex("::endgroup::", 0, annotation) > result.stdout.rindex("::group::", 0, annotation)
    assert "the plan builds with nvcc 13.2, and no CUDA 13.2 toolkit was found" in result.stderr
    assert f"{CUDA_HOME}: nvcc 13.0" in result.stderr
    assert "--nvcc" in result.stderr  # what to do
    assert time.monotonic() - start < 60  # nothing was downloaded or installed first
    assert _no_wheels(out) == []


def test_failing_op_is_named_and_keep_going_reports_all(dswheels_cache: Path, tmp_path: Path) -> None:
    """The CPU accelerator's deepspeed_ccl_comm needs oneCCL: a real compile error."""
    require_cuda()
    out = tmp_path / "wh"
    # a stale wheel of the failing cell from an earlier run must not survive the failed build
    stale = out / "cpu" / "deepspeed-0.19.8+cputorch2.13-cp311-cp311-linux_x86_64.whl"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"old")
    start = time.monotonic()
    result = dswheels(
        "build",
        "--matrix",
        str(DATA / "matrix-failing.yml"),
        "--cell",
        f"{CPU_CELL} {CUDA_CELL}",
        "--nvcc",
        "13.2",
        "--keep-going",
        "--torch-index",
        "pip",
        "--out",
        str(out),
        env=build_env(dswheels_cache),
    )
    record_time("failing op + nvcc mismatch (--keep-going)", time.monotonic() - start)
    assert result.returncode == 5, result.stdout + result.stderr  # the first failure's code
    err = result.stderr
    assert f"{CPU_CELL}: compiling deepspeed_ccl_comm failed" in err
    assert "oneapi/ccl.hpp" in err  # the relevant lines of the log, not just its end
    log = re.search(r"full log: (\S+\.log)", err)
    assert log is not None
    assert Path(log.group(1)).is_file()
    # --keep-going went on to the CUDA cell, which failed for its own reason
    assert "no CUDA 13.2 toolkit was found" in err
    assert "2 of 2 cell(s) failed" in err
    assert "FAILED  " + CPU_CELL in result.stdout
    assert "FAILED  " + CUDA_CELL in result.stdout
    assert _no_wheels(out) == []


def test_local_build_and_install(cpu_build: Built, dswheels_cache: Path, tmp_path: Path) -> None:
    """No cell named: build for the interpreter dswheels runs in (its torch), then --install into it."""
    require_compilers()
    uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    require(Path(uv).exists(), "uv is needed to make the test environment")
    venv = tmp_path / "env"
    subprocess.run([uv, "venv", "-q", "--python", "3.11", str(venv)], check=True)
    python = venv / "bin" / "python"
    pip_args = (
        ["--find-links", "/opt/wheels"]
        if Path("/opt/wheels").is_dir()
        else ["--index", "https://download.pytorch.org/whl/cpu"]
    )
    root = Path(__file__).resolve().parents[2]
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(python), *pip_args, "torch==2.13.0", "-e", str(root)], check=True
    )
    start = time.monotonic()
    out = tmp_path / "wh"
    try:
        result = subprocess.run(
            [
                str(python),
                "-m",
                "dswheels",
                "build",
                "--matrix",
                str(DATA / "matrix-cpu.yml"),
                "--out",
                str(out),
                "--install",
                # compile in cpu_build's cached venv (same torch, so its compiler-cache entries hit);
                # the cell is still planned from, and the wheel installed into, this environment
                "--interpreter",
                "venv",
                "--torch-index",
                "pip",
            ],
            capture_output=True,
            text=True,
            env=build_env(dswheels_cache),
            cwd=tmp_path,
            timeout=1800,
            check=False,
        )
    finally:
        stop_sccache(build_env(dswheels_cache))  # the build's sccache server, where auto picked sccache
    record_time("local build + --install", time.monotonic() - start)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert (
        f"building for this machine: Python 3.11, torch 2.13.0+cpu of this environment -> {CPU_CELL}" in result.stdout
    )
    assert "(reused, torch 2.13.0+cpu)" in result.stdout
    probe = (
        "import deepspeed, importlib; from deepspeed.git_version_info import installed_ops;"
        "m = importlib.import_module('deepspeed.ops.adam.cpu_adam_op');"
        "print(deepspeed.__version__, installed_ops['cpu_adam'])"
    )
    check = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, check=False, cwd=tmp_path)
    assert check.returncode == 0, check.stderr
    assert check.stdout.split()[-2:] == ["0.19.8+cputorch2.13", "1"]
