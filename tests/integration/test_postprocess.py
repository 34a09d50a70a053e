"""Post-processing of a wheel with a real (tiny) ELF extension: strip, debug symbols, baseline, RECORD."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from dswheels.building.effects.postprocess import postprocess_wheel
from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import BuildError
from dswheels.kernel.wheel_contents import render_record
from tests.conftest import DATA, require

pytestmark = pytest.mark.integration

SO = "deepspeed/ops/adam/cpu_adam_op.cpython-311-x86_64-linux-gnu.so"
DIST = "deepspeed-0.19.8+cputorch2.13.dist-info"
METADATA = "Metadata-Version: 2.4\nName: deepspeed\nVersion: 0.19.8+cputorch2.13\nRequires-Dist: torch>=2.0.0\n\nx\n"


def _so(tmp: Path, march: str) -> bytes:
    require(shutil.which("gcc") is not None and shutil.which("objcopy") is not None, "gcc and binutils")
    src = tmp / "op.c"
    src.write_text(
        "float scale(float *a, int n) { float s = 0; for (int i = 0; i < n; i++) s += a[i] * 1.5f; return s; }\n"
    )
    out = tmp / "op.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O3", "-g", f"-march={march}", str(src), "-o", str(out)], check=True)
    return out.read_bytes()


def _wheel(tmp: Path, so: bytes) -> Path:
    files = [("deepspeed/__init__.py", b""), (SO, so), (f"{DIST}/METADATA", METADATA.encode())]
    files.append((f"{DIST}/RECORD", render_record(files, record_path=f"{DIST}/RECORD").encode()))
    wheel = tmp / "dist" / "deepspeed-0.19.8+cputorch2.13-cp311-cp311-linux_x86_64.whl"
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, data in files:
            zf.writestr(name, data)
    return wheel


def _sections(path: Path) -> str:
    return subprocess.run(["readelf", "-S", "-W", str(path)], capture_output=True, text=True, check=True).stdout


def test_debug_symbols_go_to_a_separate_archive(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, _so(tmp_path, "x86-64-v2"))
    forbidden = load_compat().cpu_baselines["x86-64-v2"].forbidden_registers
    done = postprocess_wheel(
        wheel,
        staging=tmp_path / "staged",
        torch=(2, 13),
        strip=True,
        keep_debug=True,
        forbidden_registers=forbidden,
        log_file=None,
    )
    assert done.stripped_bytes > 0
    assert done.isa[SO].ok
    assert done.debug_archive is not None
    with zipfile.ZipFile(done.wheel) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    stripped = tmp_path / "stripped.so"
    stripped.write_bytes(members[SO])
    sections = _sections(stripped)
    assert ".debug_info" not in sections
    assert ".gnu_debuglink" in sections
    with tarfile.open(done.debug_archive) as tar:
        debug = tar.extractfile(SO + ".debug")
        assert debug is not None
        (tmp_path / "x.debug").write_bytes(debug.read())
    assert ".debug_info" in _sections(tmp_path / "x.debug")
    assert "Requires-Dist: torch==2.13.*" in members[f"{DIST}/METADATA"].decode()
    rows = list(csv.reader(io.StringIO(members[f"{DIST}/RECORD"].decode())))
    for name, digest, _size in rows[:-1]:
        assert (
            digest == "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(members[name]).digest()).rstrip(b"=").decode()
        )


def test_native_code_is_caught(tmp_path: Path) -> None:
    """What -march=native (or any AVX) code looks like to the baseline proof."""
    wheel = _wheel(tmp_path, _so(tmp_path, "x86-64-v3"))
    forbidden = load_compat().cpu_baselines["x86-64-v2"].forbidden_registers
    done = postprocess_wheel(
        wheel,
        staging=tmp_path / "staged",
        torch=(2, 13),
        strip=True,
        keep_debug=False,
        forbidden_registers=forbidden,
        log_file=None,
    )
    assert not done.isa[SO].ok
    # GCC's x86-64-v3 code: AVX on vector registers, and BMI (shlx, ...) on general ones
    assert done.isa[SO].kinds[0] == "AVX (VEX-encoded) instructions"
    assert set(done.isa[SO].kinds) <= {"AVX (VEX-encoded) instructions", "x86-64-v3 instructions (BMI, LZCNT, MOVBE)"}


def test_not_a_wheel(tmp_path: Path) -> None:
    bad = tmp_path / "x.whl"
    bad.write_bytes(b"no zip")
    with pytest.raises((BuildError, zipfile.BadZipFile)):
        postprocess_wheel(
            bad,
            staging=tmp_path / "s",
            torch=(2, 13),
            strip=True,
            keep_debug=False,
            forbidden_registers=(),
            log_file=None,
        )


def test_a_windows_wheel_is_read_like_a_linux_one(tmp_path: Path) -> None:
    """strip=False: nothing stripped, but the .pyd's GPU code, DLL imports and ISA are read (PE via objdump)."""
    require(shutil.which("objdump") is not None, "binutils' objdump")
    pyd = "deepspeed/ops/adam/fused_adam_op.cp311-win_amd64.pyd"
    data = (DATA / "pe" / "fixture.pyd").read_bytes()
    files = [(pyd, data), (f"{DIST}/METADATA", METADATA.encode())]
    files.append((f"{DIST}/RECORD", render_record(files, record_path=f"{DIST}/RECORD").encode()))
    wheel = tmp_path / "deepspeed-0.19.8+cu130torch2.14-cp311-cp311-win_amd64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, member in files:
            zf.writestr(name, member)
    done = postprocess_wheel(
        wheel,
        staging=tmp_path / "staged",
        torch=(2, 14),
        strip=False,
        keep_debug=False,
        forbidden_registers=load_compat().cpu_baselines["x86-64-v2"].forbidden_registers,
        log_file=None,
    )
    assert done.stripped_bytes == 0
    binary = done.binaries[pyd]
    assert binary.format == "pe"
    assert binary.dll_imports == ("c10.dll", "mystery.dll", "KERNEL32.dll", "msvcrt.dll")
    assert done.gpu[pyd] == binary.gpu
    assert binary.gpu is not None
    assert binary.gpu.sass == (75, 80)
    assert done.isa[pyd].instructions > 0
    assert pyd not in done.needs  # no glibc needs on Windows


def test_the_floor_tag_renames_the_wheel_and_its_debug_archive(tmp_path: Path) -> None:
    """auditwheel judges the post-processed wheel; it and its debug symbols take the tag (manylinux_2_5: the op
    needs only GLIBC_2.2.5), its WHEEL file says the same, and RECORD still holds."""
    from dswheels.building.effects.floor_tag import tag_with_floor
    from tests.support.planned import planned_cell

    plain = _wheel(tmp_path, _so(tmp_path, "x86-64-v2"))
    with zipfile.ZipFile(plain) as src:
        members = [(n, src.read(n)) for n in src.namelist() if not n.endswith("RECORD")]
    members.append((f"{DIST}/WHEEL", b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp311-cp311-linux_x86_64\n"))
    members.append((f"{DIST}/RECORD", render_record(members, record_path=f"{DIST}/RECORD").encode()))
    with zipfile.ZipFile(plain, "w") as zf:
        for name, data in members:
            zf.writestr(name, data)
    compat = load_compat()
    done = postprocess_wheel(
        plain,
        staging=tmp_path / "staged",
        torch=(2, 13),
        strip=True,
        keep_debug=True,
        forbidden_registers=compat.cpu_baselines["x86-64-v2"].forbidden_registers,
        log_file=None,
    )
    tagged, verdict = tag_with_floor(planned_cell("ds0.19.8-torch2.13-cpu-cp311-linux_x86_64"), done, compat, log=None)
    assert verdict is not None
    assert verdict.tag == "manylinux_2_5_x86_64"
    assert tagged.wheel.name == "deepspeed-0.19.8+cputorch2.13-cp311-cp311-manylinux_2_5_x86_64.whl"
    assert tagged.debug_archive is not None
    assert tagged.debug_archive.name == "deepspeed-0.19.8+cputorch2.13-cp311-cp311-manylinux_2_5_x86_64.debug.tar.gz"
    assert not done.wheel.exists()
    with zipfile.ZipFile(tagged.wheel) as zf:
        files = {n: zf.read(n) for n in zf.namelist()}
    assert "Tag: cp311-cp311-manylinux_2_5_x86_64" in files[f"{DIST}/WHEEL"].decode().splitlines()
    rows = list(csv.reader(io.StringIO(files[f"{DIST}/RECORD"].decode())))
    for name, digest, _size in rows[:-1]:
        assert (
            digest == "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(files[name]).digest()).rstrip(b"=").decode()
        )


def test_a_temporary_folder_on_another_file_system_is_no_obstacle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TMPDIR on a tmpfs (Fedora's and Arch's /tmp; the arm64 root's /tmp with the cache bound in, under qemu) and
    the staging folder on disk: the repacked wheel is written beside its place, not renamed across file systems
    (EXDEV: the build in the root failed so)."""
    shm = Path("/dev/shm")
    require(shm.is_dir() and shm.stat().st_dev != tmp_path.stat().st_dev, "a tmpfs apart from the test's folder")
    tmp = shm / f"dsw-test-{tmp_path.name}"
    tmp.mkdir()
    try:
        monkeypatch.setenv("TMPDIR", str(tmp))
        monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
        wheel = _wheel(tmp_path, _so(tmp_path, "x86-64-v2"))
        done = postprocess_wheel(wheel, staging=tmp_path / "staged", torch=(2, 13), strip=True, keep_debug=False,
                                 forbidden_registers=(), log_file=None)  # fmt: skip
        assert done.wheel.parent == tmp_path / "staged"
        assert zipfile.ZipFile(done.wheel).testzip() is None
        assert sorted(p.name for p in done.wheel.parent.iterdir()) == [done.wheel.name]  # no temporary file left
    finally:
        shutil.rmtree(tmp)
