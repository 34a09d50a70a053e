"""``dswheels cibw --finish``: the manifests of wheels cibuildwheel built, accepted downstream.

cibuildwheel cannot build here, so the wheelhouse it would leave is made of the session's
real Linux CPU wheel (no extra DeepSpeed build): as is for a Linux job, and, for the Windows
job the workflow runs, rewritten into a win_amd64 wheel with the layout cibuildwheel gives
(``cpu_adam_op.cp311-win_amd64.pyd``, the WHEEL tag, RECORD). The extension's bytes stay a
stand-in there (no Windows compiler here): what ``--finish`` reads on Windows is the layout,
git_version_info_installed.py and the op builders, not the machine code. Each manifest must
then pass ``dswheels verify --static``, ``dswheels publish`` and ``dswheels index``.
"""

from __future__ import annotations

import json
import re
import shutil
import time
import zipfile
from pathlib import Path

import pytest

from dswheels.core.manifest import manifest_name, parse_manifest
from dswheels.core.wheelfile import INSTALLED_INFO, dist_info_dir, parse_installed_info, render_record
from tests.conftest import DATA
from tests.integration.conftest import CPU_CELL, Built, dswheels, record_time

pytestmark = pytest.mark.integration

WIN_CELL = CPU_CELL.replace("linux_x86_64", "win_amd64")


def _job(tmp_path: Path, matrix: Path, cell: str) -> Path:
    out = tmp_path / "cibw"
    result = dswheels("cibw", "--matrix", str(matrix), "--cell", cell, "--out", str(out), "--no-source")
    assert result.returncode == 0, result.stdout + result.stderr
    job = json.loads((out / "job.json").read_text(encoding="utf-8"))
    assert job["schema"] == "dswheels.cibw-job/1"
    assert job["cells"] == [cell]
    assert job["env"]["DS_BUILD_CPU_ADAM"] == "1"
    assert "--finish" in result.stdout + result.stderr  # it says what to run after cibuildwheel
    return out


def _finish(matrix: Path, cell: str, out: Path, wheelhouse: Path, **env: str) -> tuple[int, str]:
    import os

    result = dswheels(
        "cibw",
        "--matrix",
        str(matrix),
        "--cell",
        cell,
        "--out",
        str(out),
        "--finish",
        str(wheelhouse),
        env={**os.environ, **env},
    )
    return result.returncode, result.stdout + result.stderr


def _downstream(wheelhouse: Path, tmp_path: Path, wheel_name: str) -> None:
    """verify --static, publish to a directory and index: all take the new manifest."""
    verify = dswheels("verify", *(str(p) for p in sorted(wheelhouse.glob("*.whl"))), "--static")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    published, site = tmp_path / "published", tmp_path / "site"
    publish = dswheels("publish", str(wheelhouse), "--dir", str(published))
    assert publish.returncode == 0, publish.stdout + publish.stderr
    assert (published / manifest_name(wheel_name)).is_file() or any(published.rglob(manifest_name(wheel_name)))
    index = dswheels("index", "--from", str(published), "--out", str(site), "--site-url", "http://127.0.0.1:1/")
    assert index.returncode == 0, index.stdout + index.stderr
    quoted = wheel_name.replace("+", "%2B")
    pages = [p.read_text(encoding="utf-8") for p in site.rglob("index.html")]
    assert any(wheel_name in page or quoted in page for page in pages), "the index lists the wheel"


def test_finish_writes_the_manifest_of_a_linux_wheel(cpu_build: Built, tmp_path: Path) -> None:
    start = time.monotonic()
    matrix = DATA / "matrix-cpu.yml"
    out = _job(tmp_path, matrix, CPU_CELL)
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    wheel = Path(shutil.copy2(cpu_build.wheel, wheelhouse))  # what cibuildwheel would leave: the wheel alone
    code, text = _finish(matrix, CPU_CELL, out, wheelhouse)
    assert code == 0, text
    path = wheelhouse / manifest_name(wheel.name)
    assert str(path) in text
    made = parse_manifest(path.read_text(encoding="utf-8"))
    built = parse_manifest(cpu_build.manifest.read_text(encoding="utf-8"))
    assert made.producer == "cibuildwheel"
    assert made.cell_id == CPU_CELL
    assert made.wheel == built.wheel  # same bytes: same size and sha256
    assert made.plan == built.plan
    assert [(o.name, o.extension, o.module, o.size) for o in made.ops_built] == [
        (o.name, o.extension, o.module, o.size) for o in built.ops_built
    ]
    assert all(o.seconds is None for o in made.ops_built)  # not observed
    assert made.runtime == built.runtime  # the floor, read from the wheel
    assert made.env["DS_BUILD_CPU_ADAM"] == "1"
    assert made.accelerator == "cpu"
    assert "Linux runtime floor: glibc" in text
    _downstream(wheelhouse, tmp_path, wheel.name)
    record_time("cibw --finish, Linux wheel (+verify, publish, index)", time.monotonic() - start)


def _windows_wheel(linux: Path, into: Path) -> Path:
    """The Linux CPU wheel with cibuildwheel's win_amd64 layout, holding cpu_adam only."""
    name = linux.name.replace("linux_x86_64", "win_amd64")
    with zipfile.ZipFile(linux) as src:
        names = src.namelist()
        dist_info = dist_info_dir(names)
        files: list[tuple[str, bytes]] = []
        for member in names:
            data = src.read(member)
            if member.endswith(".so"):
                if "cpu_adam_op" not in member:
                    continue  # the shm op is POSIX-only: not planned on Windows
                member = re.sub(r"\.cpython-311-x86_64-linux-gnu\.so$", ".cp311-win_amd64.pyd", member)  # noqa: PLW2901
                data = b"MZ" + b"\0" * 62 + b"stand-in for a PE image built by MSVC"
            elif member == INSTALLED_INFO:
                info = parse_installed_info(data.decode())
                ops = {op: (op == "cpu_adam") and bool(v) for op, v in info.installed_ops.items()}
                data = re.sub(r"installed_ops=\{[^}]*\}", f"installed_ops={ops!r}", data.decode()).encode()
            elif member == f"{dist_info}/WHEEL":
                data = data.replace(b"-linux_x86_64", b"-win_amd64")
            elif member == f"{dist_info}/RECORD":
                continue
            files.append((member, data))
    record = f"{dist_info}/RECORD"
    path = into / name
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
        for member, data in files:
            dst.writestr(member, data)
        dst.writestr(record, render_record(files, record_path=record))
    return path


def test_finish_writes_the_manifest_of_a_windows_wheel(cpu_build: Built, tmp_path: Path) -> None:
    start = time.monotonic()
    matrix = tmp_path / "matrix.yml"
    matrix.write_text(
        (DATA / "matrix-cpu.yml")
        .read_text()
        .replace("[linux_x86_64]", "[win_amd64]")
        .replace("linux_x86_64:", "win_amd64:")
        .replace("ubuntu-22.04", "windows-2022")
        .replace("[cpu_adam, deepspeed_shm_comm]", "[cpu_adam]")
    )
    out = _job(tmp_path, matrix, WIN_CELL)
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    wheel = _windows_wheel(cpu_build.wheel, wheelhouse)
    code, text = _finish(matrix, WIN_CELL, out, wheelhouse, VCToolsVersion="14.44.35207")
    assert code == 0, text
    made = parse_manifest((wheelhouse / manifest_name(wheel.name)).read_text(encoding="utf-8"))
    assert made.producer == "cibuildwheel"
    assert made.runtime is None  # no ELF: no glibc floor on Windows
    assert [(o.name, o.extension) for o in made.ops_built] == [
        ("cpu_adam", "deepspeed/ops/adam/cpu_adam_op.cp311-win_amd64.pyd")
    ]
    assert made.toolchain["msvc"] == "14.44.35207"  # what was active on the builder
    assert made.plan["toolchain"]["linux_runtime"] is None  # type: ignore[index]
    _downstream(wheelhouse, tmp_path, wheel.name)
    record_time("cibw --finish, win_amd64 wheel (+verify, publish, index)", time.monotonic() - start)


def test_finish_refuses_what_the_job_did_not_build(cpu_build: Built, tmp_path: Path) -> None:
    matrix = DATA / "matrix-cpu.yml"
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    # no job record: --finish needs the configuring run's --out
    code, text = _finish(matrix, CPU_CELL, tmp_path / "nowhere", wheelhouse)
    assert code == 2, text
    assert "no job.json in" in text
    out = _job(tmp_path, matrix, CPU_CELL)
    # no wheel: cibuildwheel wrote elsewhere
    code, text = _finish(matrix, CPU_CELL, out, wheelhouse)
    assert code == 5, text
    assert f"no wheel in {wheelhouse} for 1 cell(s): {CPU_CELL}" in text
    # a wheel short of a planned op gets no manifest
    with zipfile.ZipFile(cpu_build.wheel) as src, zipfile.ZipFile(wheelhouse / cpu_build.wheel.name, "w") as dst:
        for member in src.namelist():
            if "shm_comm" not in member or not member.endswith(".so"):
                dst.writestr(member, src.read(member))
    code, text = _finish(matrix, CPU_CELL, out, wheelhouse)
    assert code == 5, text
    assert "lacks planned op(s): deepspeed_shm_comm: no extension file in the wheel" in text
    assert not list(wheelhouse.glob("*.manifest.json"))
