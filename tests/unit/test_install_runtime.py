"""install's glibc/libstdc++ check: the manifest read from beside a wheel, and the refusal.

The index is a local directory (read_manifest reads file URLs the way it reads HTTP ones; the
HTTP path is exercised end to end in tests/integration/test_runtime_floor.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dswheels.doctor.machine_facts import LinuxRuntime
from dswheels.install.step import check_runtime
from dswheels.kernel.binaries.linux_runtime import RuntimeFloor
from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import EnvironmentMismatchError
from dswheels.kernel.index_files import IndexFile
from dswheels.kernel.manifest import manifest_name, render_manifest
from dswheels.kernel.naming import parse_wheel
from dswheels.stores.served_index import read_manifest
from tests.unit.test_manifest_runtime import _manifest

WHEEL = "deepspeed-0.19.8+cputorch2.13-cp311-cp311-linux_x86_64.whl"
DEBIAN12 = LinuxRuntime(
    glibc="glibc 2.36",
    libstdcxx="/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30",
    glibcxx="3.4.30",
    cxxabi="1.3.13",
    how="loaded by torch",
)
RHEL9 = LinuxRuntime(glibc="glibc 2.34", libstdcxx="/usr/lib64/libstdc++.so.6.0.29", glibcxx="3.4.29", cxxabi="1.3.13")


def _published(
    tmp_path: Path, runtime: RuntimeFloor | None, *, sha256: str = "ab" * 32, manifest: bool = True
) -> IndexFile:
    files = tmp_path / "files"
    files.mkdir(parents=True, exist_ok=True)
    (files / WHEEL).write_bytes(b"not read")
    if manifest:
        (files / manifest_name(WHEEL)).write_text(render_manifest(_manifest(runtime=runtime)), encoding="utf-8")
    return IndexFile(
        filename=WHEEL,
        url=(files / WHEEL).as_uri().replace("+", "%2B"),
        sha256=sha256,
        wheel=parse_wheel(WHEEL),
    )


def test_the_manifest_beside_the_wheel_is_read(tmp_path: Path) -> None:
    floor = RuntimeFloor(glibc=(2, 34), glibcxx=(3, 4, 30), cxxabi=(1, 3, 13))
    published = read_manifest(_published(tmp_path, floor))
    assert published.runtime == floor
    assert published.manifest_url.endswith(
        "/files/deepspeed-0.19.8%2Bcputorch2.13-cp311-cp311-linux_x86_64.manifest.json"
    )
    assert published.note == ""


def test_absent_foreign_and_old_manifests_give_no_runtime(tmp_path: Path) -> None:
    absent = read_manifest(_published(tmp_path / "a", None, manifest=False))
    assert absent.runtime is None
    assert absent.note == "the index has no build manifest beside the wheel"
    other = read_manifest(_published(tmp_path / "b", RuntimeFloor(glibcxx=(3, 4, 30)), sha256="cd" * 32))
    assert other.runtime is None
    assert "describes other bytes than the wheel" in other.note
    windows = read_manifest(_published(tmp_path / "c", None))
    assert windows.runtime is None
    assert "predates `runtime`" in windows.note
    file = _published(tmp_path / "d", None)
    (tmp_path / "d" / "files" / manifest_name(WHEEL)).write_text(json.dumps({"schema": "x"}), encoding="utf-8")
    broken = read_manifest(file)
    assert broken.runtime is None
    assert "manifest schema 'x'" in broken.note


def test_install_refuses_a_wheel_above_the_system(tmp_path: Path) -> None:
    file = _published(tmp_path, RuntimeFloor(glibc=(2, 34), glibcxx=(3, 4, 30), cxxabi=(1, 3, 13)))
    check_runtime(DEBIAN12, file, load_compat())  # Debian 12 has it
    with pytest.raises(EnvironmentMismatchError) as caught:
        check_runtime(RHEL9, file, load_compat())
    error = caught.value
    assert error.exit_code == 9
    assert error.message == f"{WHEEL} needs a newer glibc/libstdc++ than this environment loads; nothing was installed"
    assert error.details is not None
    assert "its extensions need glibc 2.34, GLIBCXX 3.4.30 (libstdc++ of GCC >= 12.1), CXXABI 1.3.13" in error.details
    assert "this system has glibc 2.34; /usr/lib64/libstdc++.so.6.0.29 defines up to GLIBCXX_3.4.29" in error.details
    assert (
        'missing: GLIBCXX_3.4.30 > 3.4.29: importing an op would fail with "version `GLIBCXX_3.4.30\' not found"'
        in (error.details)
    )
    assert error.hint is not None
    assert "conda env whose libstdc++ is newer" in error.hint


def test_install_without_a_manifest_goes_on(tmp_path: Path) -> None:
    file = _published(tmp_path, None, manifest=False)
    check_runtime(RHEL9, file, load_compat())  # no exception: a notice and a warning only


def test_install_with_an_unreadable_libstdcxx_warns_and_goes_on(tmp_path: Path) -> None:
    file = _published(tmp_path, RuntimeFloor(glibc=(2, 34), glibcxx=(3, 4, 30)))
    unread = LinuxRuntime(glibc="glibc 2.36", libstdcxx="", glibcxx="", cxxabi="", error="no libstdc++.so.6 found")
    check_runtime(unread, file, load_compat())  # no refusal on what could not be read
    below = LinuxRuntime(glibc="glibc 2.31", libstdcxx="", glibcxx="", cxxabi="", error="no libstdc++.so.6 found")
    with pytest.raises(EnvironmentMismatchError, match="needs a newer glibc/libstdc"):
        check_runtime(below, file, load_compat())  # but what was read still counts
