"""This machine's aarch64 cross GCC in the arm64 root (dswheels.platforms.qemu.host_gcc): when it is used, what the
root's namespace gets, and what a build says when it is not there. The compile itself, with the real cross GCC in
the real root, is tests/integration/test_qemu_aarch64.py's (marker qemu)."""

from __future__ import annotations

import argparse
import dataclasses
import io
import os
import shlex
from pathlib import Path

import pytest

from dswheels.cli.shared import qemu_settings
from dswheels.host.cache import CacheLayout
from dswheels.host.log import TerminalReporter, reset_reporter, set_reporter
from dswheels.kernel.errors import EnvironmentMismatchError
from dswheels.kernel.platform_traits import QemuCompilers
from dswheels.platforms.qemu.emulator import Emulator
from dswheels.platforms.qemu.host_gcc import CROSS_BIN, HostGcc, find_host_gcc, gcc_build, root_gcc_major
from dswheels.platforms.qemu.machine import QemuMachine, in_root
from dswheels.platforms.qemu.platform_host import choose_compilers

# Debian 12's files of g++-12-aarch64-linux-gnu, libc6-dev-arm64-cross and libc6 (amd64) that the root needs
HOST_FILES = (
    "usr/bin/aarch64-linux-gnu-g++-12",
    "usr/bin/aarch64-linux-gnu-gcc-12",
    "usr/lib/gcc-cross/aarch64-linux-gnu/12/cc1plus",
    "usr/aarch64-linux-gnu/lib/libc.so",
    "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
)


def _host(tmp_path: Path, *, leave_out: str = "") -> Path:
    here = tmp_path / "here"
    for rel in HOST_FILES:
        if rel != leave_out:
            (here / rel).parent.mkdir(parents=True, exist_ok=True)
            (here / rel).write_bytes(b"\x7fELF")
    (here / "lib64").mkdir()
    # Debian's loader link, absolute: in the root it must be the file itself that is bound
    (here / "lib64" / "ld-linux-x86-64.so.2").symlink_to(here / "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")
    return here


def _root(tmp_path: Path, major: str = "12") -> Path:
    root = tmp_path / "root"
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "usr" / "bin" / "g++").symlink_to(f"g++-{major}")  # Debian's g++ package: g++ -> g++-12
    return root


def test_the_cross_gcc_of_the_roots_major_is_found(tmp_path: Path) -> None:
    found = find_host_gcc(_root(tmp_path), here=_host(tmp_path), machine="x86_64")
    assert found == HostGcc(major="12", here=tmp_path / "here")


@pytest.mark.parametrize(
    ("leave_out", "says"),
    [
        ("usr/bin/aarch64-linux-gnu-g++-12", "g++-12-aarch64-linux-gnu"),
        ("usr/lib/gcc-cross/aarch64-linux-gnu/12/cc1plus", "g++-12-aarch64-linux-gnu"),
        ("usr/aarch64-linux-gnu/lib/libc.so", "libc6-dev-arm64-cross"),
    ],
)
def test_a_missing_piece_is_named_by_its_package(tmp_path: Path, leave_out: str, says: str) -> None:
    found = find_host_gcc(_root(tmp_path), here=_host(tmp_path, leave_out=leave_out), machine="x86_64")
    assert isinstance(found, str)
    assert says in found
    assert "the root's GCC is 12" in found


def test_another_major_in_the_root_is_not_matched_by_this_ones(tmp_path: Path) -> None:
    # a root of another release (GCC 14) with this machine's GCC 12 cross compiler: not the root's compiler
    found = find_host_gcc(_root(tmp_path, major="14"), here=_host(tmp_path), machine="x86_64")
    assert isinstance(found, str)
    assert "g++-14-aarch64-linux-gnu" in found


def test_only_an_x86_64_machine_runs_it_natively(tmp_path: Path) -> None:
    found = find_host_gcc(_root(tmp_path), here=_host(tmp_path), machine="aarch64")
    assert found == "this machine is aarch64: the cross GCC runs natively in the root only on x86_64"


def test_the_roots_major_from_its_link_or_its_one_gcc_folder(tmp_path: Path) -> None:
    assert root_gcc_major(_root(tmp_path)) == "12"
    bare = tmp_path / "bare"
    assert root_gcc_major(bare) is None
    (bare / "usr" / "lib" / "gcc" / "aarch64-linux-gnu" / "13").mkdir(parents=True)
    assert root_gcc_major(bare) == "13"
    (bare / "usr" / "lib" / "gcc" / "aarch64-linux-gnu" / "14").mkdir()
    assert root_gcc_major(bare) is None  # two GCCs and no g++ link: which one c++ is cannot be told


def test_the_root_gets_it_read_only_and_the_names_first_on_path(tmp_path: Path) -> None:
    here, root = _host(tmp_path), tmp_path / "root"
    gcc = HostGcc(major="12", here=here)
    script = in_root(root, ["c++", "--version"], visible=[], env={"PATH": "/usr/bin"}, compilers=gcc)[7]
    lines = script.splitlines()
    loader = here / "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
    for source, target in (
        (here / "usr", "opt/dswheels/x86/usr"),
        (loader, "lib64/ld-linux-x86-64.so.2"),  # the file, not Debian's absolute link to it
        (here / "usr/lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu"),
        (here / "usr/aarch64-linux-gnu", "usr/aarch64-linux-gnu"),  # the cross libc.so names this path
    ):
        inside = root / target
        assert f"mount --bind {source} {inside}" in lines
        assert f"mount -o remount,bind,ro {inside}" in lines  # nothing in the root writes to this machine
    assert f"touch {root}/lib64/ld-linux-x86-64.so.2" in script  # a file's mount point is a file
    # the names on a tmpfs of the namespace: nothing of them is left in the root
    assert f"mount -t tmpfs -o mode=0755 tmpfs {root}{CROSS_BIN}" in lines
    links = {shlex.split(ln)[-1].rsplit("/", 1)[-1]: shlex.split(ln)[2] for ln in lines if ln.startswith("ln -s")}
    names = {"cc", "c++", "gcc", "g++", "gcc-12", "g++-12"}
    names |= {f"aarch64-linux-gnu-{n}" for n in ("gcc", "g++", "cc", "c++", "gcc-12", "g++-12")}
    assert set(links) == names  # Python's sysconfig names aarch64-linux-gnu-gcc; torch's ninja c++
    assert links["c++"] == links["aarch64-linux-gnu-g++"] == "/opt/dswheels/x86/usr/bin/aarch64-linux-gnu-g++-12"
    assert links["cc"] == links["gcc-12"] == "/opt/dswheels/x86/usr/bin/aarch64-linux-gnu-gcc-12"
    assert lines.index(f"mount -t tmpfs -o mode=0755 tmpfs {root}{CROSS_BIN}") < len(lines) - 1  # before chroot
    assert lines[-1].startswith("exec chroot")
    # without it, the root is left as it is
    assert "x86" not in in_root(root, ["c++"], visible=[], env={})[7]


def test_a_build_with_it_has_its_names_first_on_path(tmp_path: Path) -> None:
    machine = QemuMachine(root=tmp_path, emulator=Emulator(qemu=None, binfmt=None), compilers=HostGcc(major="12"))
    cache = CacheLayout(tmp_path / "cache")
    assert machine.environment(cache, {})["PATH"].split(":")[0] == CROSS_BIN
    emulated = QemuMachine(root=tmp_path, emulator=Emulator(qemu=None, binfmt=None))
    assert CROSS_BIN not in emulated.environment(cache, {})["PATH"]


def test_what_each_choice_does_without_the_cross_gcc(tmp_path: Path) -> None:
    root, here, host = _root(tmp_path), tmp_path / "nothing", _host(tmp_path)
    assert choose_compilers(root, QemuCompilers.EMULATED, here=host) is None  # asked for the root's own
    with pytest.raises(EnvironmentMismatchError, match=r"--qemu-compilers host: .*g\+\+-12-aarch64") as err:
        choose_compilers(root, QemuCompilers.HOST, here=here)
    assert "apt-get install g++-12-aarch64-linux-gnu" in (err.value.hint or "")  # the root's major, not the newest
    said = io.StringIO()
    token = set_reporter(TerminalReporter(stream=said))
    try:
        assert choose_compilers(root, QemuCompilers.AUTO, here=here) is None  # goes on, emulated, and says so
    finally:
        reset_reporter(token)
    assert said.getvalue().startswith("warning: this machine lacks GCC 12's aarch64 cross compiler")
    assert "compiling with the root's own GCC under qemu" in said.getvalue()
    assert choose_compilers(root, QemuCompilers.AUTO, here=host) == HostGcc(major="12", here=host)


def test_the_command_line_choice_reaches_the_settings() -> None:
    args = argparse.Namespace(qemu=True, qemu_root=None, qemu_compilers="emulated")
    settings = qemu_settings(args)
    assert settings is not None
    assert settings.compilers is QemuCompilers.EMULATED
    verify_args = argparse.Namespace(qemu=True, qemu_root=None)  # verify compiles nothing: no such flag
    assert qemu_settings(verify_args).compilers is QemuCompilers.EMULATED  # type: ignore[union-attr]


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the cross GCC is x86_64-hosted")
def test_this_machines_own_cross_gcc_is_found_when_installed(tmp_path: Path) -> None:
    """On a machine with Debian's g++-aarch64-linux-gnu (CI installs it), the real files satisfy the finder."""
    if not Path("/usr/bin/aarch64-linux-gnu-g++").exists():
        pytest.skip("g++-aarch64-linux-gnu is not installed here")
    major = Path("/usr/bin/aarch64-linux-gnu-g++").resolve().name.rsplit("-", 1)[-1]
    found = find_host_gcc(_root(tmp_path, major=major))
    assert isinstance(found, HostGcc)
    assert (found.major, found.here) == (major, Path("/"))
    assert found.build.split()[-1].startswith(f"{major}.")  # "Debian 12.2.0-14", read from the real driver


def test_the_builds_are_read_from_the_drivers_and_a_difference_is_said(tmp_path: Path) -> None:
    """Debian 12's cross GCC (12.2.0-14) and its arm64 GCC (12.2.0-14+deb12u1, with the CVE-2023-4039 fix) are the
    same release, not the same build: the build says so (their protected frames differ: test_qemu_aarch64)."""
    here, root = _host(tmp_path), _root(tmp_path)
    (here / "usr/bin/aarch64-linux-gnu-g++-12").write_bytes(b"\x7fELF\0%s %s%s\n\0(Debian 12.2.0-14) \0")
    root_driver = root / "usr/bin/aarch64-linux-gnu-g++-12"
    root_driver.write_bytes(b"\x7fELF\0(Debian 12.2.0-14+deb12u1) \0")
    assert gcc_build(root_driver) == "Debian 12.2.0-14+deb12u1"
    gcc = find_host_gcc(root, here=here, machine="x86_64")
    assert isinstance(gcc, HostGcc)
    assert (gcc.build, gcc.root_build, gcc.same_build) == ("Debian 12.2.0-14", "Debian 12.2.0-14+deb12u1", False)
    assert "CVE-2023-4039" in gcc.differences()
    assert "the same GCC release with other distribution patches" in gcc.differences()
    ubuntu = dataclasses.replace(gcc, build="Ubuntu 12.3.0-17ubuntu1")  # Ubuntu 24.04's g++-12-aarch64-linux-gnu
    assert "another GCC release" in ubuntu.differences()
    assert "Debian 12.2.0-14, the root's Debian 12.2.0-14+deb12u1" in gcc.describe()  # in the manifest's machine
    root_driver.write_bytes(b"\x7fELF\0(Debian 12.2.0-14) \0")
    same = find_host_gcc(root, here=here, machine="x86_64")
    assert isinstance(same, HostGcc)
    assert same.same_build
    assert same.differences() == ""
