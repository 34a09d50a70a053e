"""A Linux wheel's floor as its tag, with the real tools: auditwheel judges a real extension, verify refuses a
tag below what it needs, and pip and uv refuse a manylinux_2_28 wheel for an older platform and take it for 2.28.

The extension is compiled here (tests/data/elf/fixture.cpp, which needs GLIBCXX_3.4.30 from GCC >= 12's
libstdc++) and linked against a stand-in ``libc10.so``: a library only torch provides, which auditwheel
counts as external unless it is left out as torch's. The same extension cross-compiled for aarch64 (Debian's
cross GCC) is judged here too: auditwheel reads the wheel's CPU from its ELF files.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dswheels.building.effects.floor_tag import retag_wheel
from dswheels.host.auditwheel import judge_floor
from dswheels.host.wheel_file import read_wheel
from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import VerifyError
from dswheels.kernel.manylinux import manylinux_glibc
from dswheels.kernel.naming import parse_wheel
from dswheels.verify.effects.prove import static_part
from dswheels.verify.static_checks import Expected
from tests.conftest import DATA, require
from tests.integration.conftest import require_compilers
from tests.support.wheels import write_deepspeed_wheel, write_wheel

pytestmark = pytest.mark.integration

COMPAT = load_compat()
VERSION = "0.19.8+cputorch2.13"
EXTENSION = "deepspeed/ops/adam/cpu_adam_op.cpython-311-x86_64-linux-gnu.so"


def _extension(tmp_path: Path, cross: str = "") -> bytes:
    """fixture.cpp as an extension that also links a stand-in libc10.so (``cross``: a cross GCC's prefix)."""
    (tmp_path / "c10.c").write_text("int c10_stand_in(void) { return 10; }\n", encoding="utf-8")
    (tmp_path / "ext.cpp").write_text(
        (DATA / "elf" / "fixture.cpp").read_text(encoding="utf-8")
        + 'extern "C" int c10_stand_in(void);\nextern "C" int uses_c10(void) { return c10_stand_in(); }\n',
        encoding="utf-8",
    )
    for argv in (
        [f"{cross}gcc", "-shared", "-fPIC", "-Wl,-soname,libc10.so", "-o", "libc10.so", "c10.c"],
        [f"{cross}g++", "-shared", "-fPIC", "-O1", "-o", "ext.so", "ext.cpp", "-L.", "-lc10"],
    ):
        subprocess.run(argv, cwd=tmp_path, check=True, capture_output=True)
    return (tmp_path / "ext.so").read_bytes()


def _wheel(tmp_path: Path, tag: str, *, cross: str = "", extension: str = EXTENSION) -> Path:
    out = tmp_path / "wheels"
    out.mkdir(exist_ok=True)
    return write_wheel(
        out,
        name="deepspeed",
        version=VERSION,
        tag=f"cp311-cp311-{tag}",
        files={
            "deepspeed/__init__.py": b"",
            "deepspeed/git_version_info_installed.py": (
                f"version='{VERSION}'\ninstalled_ops={{'cpu_adam': 1}}\naccelerator_name='cpu'\n".encode()
            ),
            extension: _extension(tmp_path, cross),
        },
        requires_dist=["torch==2.13.*"],
    )


@pytest.fixture
def built(tmp_path: Path) -> Path:
    require(sys.platform.startswith("linux"), "auditwheel judges Linux wheels on Linux")
    require_compilers()
    require(shutil.which("gcc") is not None, "gcc builds the stand-in libc10.so")
    return _wheel(tmp_path, "linux_x86_64")


def test_auditwheel_judges_the_extension_with_torchs_libraries_left_out(built: Path) -> None:
    verdict = judge_floor(built, COMPAT.torch_provided_libraries, error=VerifyError)
    assert verdict.torch_libraries == ("libc10.so",)
    assert verdict.tag == verdict.symbols_tag  # only the symbol versions bound it
    glibc = manylinux_glibc(verdict.tag)
    assert glibc is not None
    assert glibc >= (2, 35)  # GLIBCXX_3.4.30: auditwheel allows it from manylinux_2_35 on
    assert "GLIBCXX_3.4.30" in verdict.versioned_symbols["libstdc++.so.6"]
    # what auditwheel says of it as it is: libc10.so is nowhere on the system, so no manylinux tag fits
    alone = judge_floor(built, (), error=VerifyError)
    assert alone.tag == "linux_x86_64"
    assert "libc10.so" in alone.describe()


def test_verify_refuses_a_tag_below_what_the_binaries_need(built: Path) -> None:
    verdict = judge_floor(built, COMPAT.torch_provided_libraries, error=VerifyError)
    expected = Expected(cell=parse_wheel(built.name).cell, ops=("cpu_adam",), cpu_baseline="x86-64-v2")

    def tag_check(wheel: Path) -> tuple[bool, str]:
        data = read_wheel(wheel, error=VerifyError, builders=True, extensions=True)
        (check,) = [c for c in static_part(data, expected, COMPAT) if c.name == "manylinux tag"]
        return check.ok, check.detail

    lied = retag_wheel(built, built.name.replace("linux_x86_64", "manylinux_2_28_x86_64"))
    ok, detail = tag_check(lied)
    assert not ok
    assert f"tagged manylinux_2_28_x86_64 (glibc 2.28), but its binaries need {verdict.tag} (auditwheel)" in detail
    honest = retag_wheel(lied, lied.name.replace("manylinux_2_28_x86_64", verdict.tag))
    assert honest.name == built.name.replace("linux_x86_64", verdict.tag)
    assert not lied.exists()  # renamed, not copied
    ok, detail = tag_check(honest)
    assert ok, detail
    # the retagged wheel's own WHEEL file says the same (pip reads the tag from both), and RECORD still holds
    data = read_wheel(honest, error=VerifyError)
    assert data.wheel_file is not None
    assert f"Tag: cp311-cp311-{verdict.tag}" in data.wheel_file.splitlines()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--no-deps",
            "--target",
            str(honest.parent / "t"),
            honest,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr  # this machine's glibc is the floor's


def test_an_aarch64_wheel_is_judged_here_and_tagged_manylinux_aarch64(tmp_path: Path) -> None:
    """The same extension cross-compiled for aarch64 (Debian's cross GCC 12): auditwheel, on this x86_64 machine,
    judges it under its aarch64 policies; the floor names the CPU, the retagged wheel is still the linux_aarch64
    cell's, and verify's tag check refuses manylinux_2_28_aarch64 for it as for x86_64."""
    require(sys.platform.startswith("linux"), "auditwheel judges Linux wheels on Linux")
    cross = "aarch64-linux-gnu-"
    require(shutil.which(f"{cross}g++") is not None, f"no {cross}g++ (apt-get install g++-aarch64-linux-gnu)")
    built = _wheel(
        tmp_path,
        "linux_aarch64",
        cross=cross,
        extension=EXTENSION.replace("x86_64-linux-gnu", "aarch64-linux-gnu"),
    )
    verdict = judge_floor(built, COMPAT.torch_provided_libraries, error=VerifyError)
    assert verdict.tag.endswith("_aarch64"), verdict.tag
    glibc = manylinux_glibc(verdict.tag)
    assert glibc is not None
    assert glibc >= (2, 35)  # GLIBCXX_3.4.30, as on x86_64
    assert verdict.torch_libraries == ("libc10.so",)
    assert judge_floor(built, (), error=VerifyError).tag == "linux_aarch64"  # no floor claimed, its own CPU's
    honest = retag_wheel(built, built.name.replace("linux_aarch64", verdict.tag))
    cell = parse_wheel(honest.name).cell
    assert cell == parse_wheel(built.name).cell
    assert str(cell.platform) == "linux_aarch64"
    expected = Expected(cell=cell, ops=("cpu_adam",), cpu_baseline="armv8.2-a")

    def tag_check(wheel: Path) -> tuple[bool, str]:
        data = read_wheel(wheel, error=VerifyError, builders=True, extensions=True)
        (check,) = [c for c in static_part(data, expected, COMPAT) if c.name == "manylinux tag"]
        return check.ok, check.detail

    ok, detail = tag_check(honest)
    assert ok, detail
    ok, detail = tag_check(retag_wheel(honest, honest.name.replace(verdict.tag, "manylinux_2_28_aarch64")))
    assert not ok
    assert f"tagged manylinux_2_28_aarch64 (glibc 2.28), but its binaries need {verdict.tag} (auditwheel)" in detail


# --- pip and uv refuse a wheel for an older platform than its tag -----------------------------------


@pytest.fixture
def links(tmp_path: Path) -> Path:
    """A find-links directory with one manylinux_2_28 wheel (nothing else could satisfy the pin)."""
    out = tmp_path / "links"
    write_deepspeed_wheel(out, variant="cpu", torch="2.13", python="cp311", platform="manylinux_2_28_x86_64")
    return out


def _pip_download(links: Path, platform: str, dest: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--isolated",
            "--no-index",
            "--no-deps",
            "--only-binary",
            ":all:",
            "--find-links",
            str(links),
            *(["--python-version", "3.11", "--platform", platform] if platform else []),
            "--dest",
            str(dest),
            f"deepspeed=={VERSION}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )


def test_pip_refuses_a_manylinux_2_28_wheel_for_2_27_and_takes_it_for_2_28(links: Path, tmp_path: Path) -> None:
    older = _pip_download(links, "manylinux_2_27_x86_64", tmp_path / "older")
    assert older.returncode != 0
    assert "No matching distribution found for deepspeed==0.19.8+cputorch2.13" in older.stderr
    same = _pip_download(links, "manylinux_2_28_x86_64", tmp_path / "same")
    assert same.returncode == 0, same.stdout + same.stderr
    assert [p.name for p in (tmp_path / "same").iterdir()] == [next(links.iterdir()).name]
    # without --platform pip asks this machine (glibc >= 2.28), which takes every manylinux_2_N up to its own
    require(sys.platform.startswith("linux"), "pip's own platform is this Linux machine's")
    here = _pip_download(links, "", tmp_path / "here")
    assert here.returncode == 0, here.stdout + here.stderr


def _uv_compile(links: Path, platform: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    assert uv is not None
    requirements = tmp_path / "requirements.in"
    requirements.write_text(f"deepspeed=={VERSION}\n", encoding="utf-8")
    return subprocess.run(
        [
            uv,
            "pip",
            "compile",
            "--no-config",
            "--no-index",
            "--find-links",
            str(links),
            "--no-deps",
            "--python-version",
            "3.11",
            "--python-platform",
            platform,
            "--no-header",
            str(requirements),
        ],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin", "UV_CACHE_DIR": str(tmp_path / "uv-cache"), "HOME": str(tmp_path)},
    )


def test_uv_refuses_it_for_an_older_platform_and_takes_it_for_2_28(links: Path, tmp_path: Path) -> None:
    # uv names targets by glibc; its oldest manylinux_2 one below 2.28 is 2.17 (x86_64-manylinux2014)
    older = _uv_compile(links, "x86_64-manylinux_2_17", tmp_path)
    assert older.returncode != 0
    assert "deepspeed==0.19.8+cputorch2.13" in older.stderr
    assert "manylinux_2_28" in older.stderr or "unsatisfiable" in older.stderr, older.stderr
    same = _uv_compile(links, "x86_64-manylinux_2_28", tmp_path)
    assert same.returncode == 0, same.stdout + same.stderr
    assert f"deepspeed=={VERSION}" in same.stdout
