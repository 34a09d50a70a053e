"""The qemu host of linux_aarch64 cells on x86_64 Linux (dswheels.platforms.qemu): how it reads binfmt_misc, what
it says when arm64 programs cannot run, the commands it runs in the root, and what the build hands the root."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from dswheels.building.effects.emulated import PYPI_SIMPLE, inner_argv
from dswheels.host.cache import CacheLayout
from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import EnvironmentMismatchError
from dswheels.kernel.model import OS, Platform, Python
from dswheels.kernel.sources import TorchSource, TorchSourceKind
from dswheels.platforms import platform_module
from dswheels.platforms.hosts import HostChoice, HostKind, QemuSettings
from dswheels.platforms.qemu.emulator import Emulator, find_emulator, need_binfmt, need_qemu, parse_binfmt, read_binfmt
from dswheels.platforms.qemu.machine import QemuMachine, in_root, launcher_text, venv_platform
from dswheels.platforms.qemu.root import CA_BUNDLE, RootSpec, ensure_root, root_glibc, root_python, share_network

# what Debian's qemu-user-static registers (update-binfmts --display qemu-aarch64, /proc/sys/fs/binfmt_misc)
DEBIAN_ENTRY = """enabled
interpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P
flags: PF
offset 0
magic 7f454c460201010000000000000000000200b700
mask ffffffffffffff00fffffffffffffffffeffffff
"""


def _binfmt_dir(tmp_path: Path, **entries: str) -> Path:
    directory = tmp_path / "binfmt_misc"
    directory.mkdir()
    (directory / "register").write_text("", encoding="ascii")
    (directory / "status").write_text("enabled\n", encoding="ascii")
    for name, text in entries.items():
        (directory / name.replace("_", "-")).write_text(text, encoding="ascii")
    return directory


def test_binfmt_entries_are_read_as_the_kernel_lists_them(tmp_path: Path) -> None:
    python = "enabled\ninterpreter /usr/bin/python3.11\nflags: \noffset 0\nmagic a70d0d0a\n"
    found = read_binfmt(_binfmt_dir(tmp_path, python3_11=python, qemu_aarch64=DEBIAN_ENTRY))
    assert found is not None
    assert (found.name, found.enabled, found.fixed) == ("qemu-aarch64", True, True)
    assert Emulator(qemu="/usr/bin/qemu-aarch64-static", binfmt=found).runs_children
    assert read_binfmt(tmp_path / "not-mounted") is None
    assert parse_binfmt("x", DEBIAN_ENTRY.replace("b700", "3e00")) is None  # an x86_64 entry is not ours


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        (None, "no binfmt_misc entry runs arm64 programs (or binfmt_misc is not mounted)"),
        (DEBIAN_ENTRY.replace("enabled", "disabled", 1), "the binfmt_misc entry qemu-aarch64 is disabled"),
        (DEBIAN_ENTRY.replace("flags: PF", "flags: P"), "lacks the F flag"),
    ],
)
def test_a_build_without_binfmt_says_what_to_do(tmp_path: Path, entry: str | None, says: str) -> None:
    directory = _binfmt_dir(tmp_path, **({"qemu_aarch64": entry} if entry else {}))
    emulator = Emulator(qemu="/usr/bin/qemu-aarch64-static", binfmt=read_binfmt(directory))
    assert not emulator.runs_children
    with pytest.raises(EnvironmentMismatchError) as err:
        need_binfmt(emulator, what="a build in the arm64 root")
    assert says in err.value.message
    hint = err.value.hint or ""
    assert "update-binfmts --enable qemu-aarch64" in hint
    assert "mount -t binfmt_misc" in hint
    assert "register it on the host" in hint  # a container shares its host's kernel


def test_no_qemu_at_all_names_the_packages() -> None:
    missing = find_emulator({"PATH": ""}, binfmt_dir=Path("/nonexistent"))
    assert missing == Emulator(qemu=None, binfmt=None)
    with pytest.raises(EnvironmentMismatchError, match="qemu-aarch64 is not installed") as err:
        need_qemu(missing)
    assert "qemu-user-static binfmt-support" in (err.value.hint or "")


def test_the_platform_chooses_qemu_only_on_x86_64_linux_when_asked() -> None:
    arm = platform_module(Platform.LINUX_AARCH64)
    qemu = HostChoice(qemu=QemuSettings())
    assert arm.host(qemu, here=OS.LINUX, machine="x86_64").kind is HostKind.QEMU
    assert arm.host(HostChoice(), here=OS.LINUX, machine="x86_64").kind is HostKind.NONE
    assert arm.host(qemu, here=OS.LINUX, machine="aarch64").kind is HostKind.NATIVE  # an arm64 runner, a Grace


def test_a_command_in_the_root_sees_only_what_it_is_given(tmp_path: Path) -> None:
    root, out = tmp_path / "root", tmp_path / "out"
    command = in_root(root, ["/opt/dswheels/venv/bin/python", "-m", "dswheels", "build"], visible=[out, out],
                      env={"HOME": "/root", "PATH": "/usr/bin"})  # fmt: skip
    # a private mount namespace: nothing it mounts outlives it or shows on this machine
    assert command[:5] == ["unshare", "--mount", "--propagation", "private", "--"]
    script = command[7]
    assert f"mount -t proc proc {root}/proc" in script
    assert f"mount -t sysfs sysfs {root}/sys" in script
    assert script.count(f"mount --bind {out} {root}{out}") == 1  # at the same path inside, once
    assert f"exec chroot {root} /usr/bin/env -i HOME=/root PATH=/usr/bin" in script
    assert command[8:] == ["sh", "/opt/dswheels/venv/bin/python", "-m", "dswheels", "build"]
    assert shlex.split(script.splitlines()[-1])[-1] == "$@"


def test_the_launcher_runs_the_venvs_python_under_qemu_with_the_roots_libraries() -> None:
    python = Path("/c/verify/venv-1/env/bin/python")
    text = launcher_text("/usr/bin/qemu-aarch64-static", Path("/c/qemu/root"), python, cpu="neoverse-n1")
    assert text.splitlines() == [
        "#!/bin/sh",
        "QEMU_LD_PREFIX=/c/qemu/root",  # the children binfmt_misc starts inherit both
        "QEMU_CPU=neoverse-n1",
        "export QEMU_LD_PREFIX QEMU_CPU",
        'exec /usr/bin/qemu-aarch64-static /c/verify/venv-1/env/bin/python "$@"',
    ]
    assert "QEMU_CPU" not in launcher_text("/q", Path("/r"), python)  # qemu's default: max


def test_an_armv8_2_a_wheel_runs_as_graviton2s_core_under_qemu() -> None:
    baseline = load_compat().baseline_for("aarch64")
    assert (baseline.name, baseline.qemu_cpu) == ("armv8.2-a", "neoverse-n1")


def test_the_build_hands_the_root_its_plan_and_where_to_write(tmp_path: Path) -> None:
    plan, out, wheels = tmp_path / "out" / "plans" / "c.json", tmp_path / "out", tmp_path / "torch-wheels"
    cache = CacheLayout(tmp_path / "cache")
    common = {"out": out, "cache": cache, "ops": (), "jobs": 2, "debug_symbols": False, "pypi": None}
    argv, seen = inner_argv(plan, "C", torch_source=TorchSource(TorchSourceKind.PLAN), **common)  # type: ignore[arg-type]
    assert argv == ["build", "--plan", str(plan), "--cell", "C", "--out", str(out), "--cache-dir", str(cache.root),
                    "--jobs", "2"]  # fmt: skip
    assert seen == [out, plan.parent]
    # this machine's pip configuration names its own indexes and folders: the root's pip has none
    argv, _ = inner_argv(plan, "C", torch_source=TorchSource(TorchSourceKind.PIP), **common)  # type: ignore[arg-type]
    assert argv[-2:] == ["--torch-index", PYPI_SIMPLE]
    # a folder of wheels is handed over at the same path
    links = TorchSource(TorchSourceKind.LINKS, str(wheels))
    argv, seen = inner_argv(plan, "C", torch_source=links, **{**common, "ops": ("cpu_adam",)})  # type: ignore[arg-type]
    assert argv[-4:] == ["--torch-index", str(wheels), "--ops", "cpu_adam"]
    assert wheels in seen


def test_the_root_reaches_the_network_as_this_machine_does(tmp_path: Path) -> None:
    here, root = tmp_path / "here", tmp_path / "root"
    (here / "etc" / "ssl" / "certs").mkdir(parents=True)
    (here / "etc" / "resolv.conf").write_text("nameserver 10.0.0.1\n", encoding="ascii")
    (here / CA_BUNDLE).write_text("system bundle\n", encoding="ascii")
    proxy = tmp_path / "proxy-ca.pem"
    proxy.write_text("a proxy's bundle\n", encoding="ascii")
    (root / "etc" / "ssl" / "certs").mkdir(parents=True)
    (root / CA_BUNDLE).symlink_to("/usr/share/ca-certificates/debian.crt")  # a link in a real root: replaced
    share_network(root, {"REQUESTS_CA_BUNDLE": str(proxy)}, here)
    assert (root / "etc" / "resolv.conf").read_text(encoding="ascii") == "nameserver 10.0.0.1\n"
    assert not (root / CA_BUNDLE).is_symlink()
    assert (root / CA_BUNDLE).read_text(encoding="ascii") == "a proxy's bundle\n"
    share_network(root, {}, here)  # none named: the system's
    assert (root / CA_BUNDLE).read_text(encoding="ascii") == "system bundle\n"


def test_a_given_root_needs_python_and_a_complete_one_is_used_as_it_is(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentMismatchError, match="has no usr/bin/python3"):
        root_python(tmp_path)
    (tmp_path / "usr" / "bin").mkdir(parents=True)
    (tmp_path / "usr" / "bin" / "python3").symlink_to("python3.11")
    assert root_python(tmp_path) == "3.11"
    cache = CacheLayout(tmp_path / "cache")
    emulator = Emulator(qemu=None, binfmt=None)
    assert ensure_root(tmp_path, cache=cache, emulator=emulator, spec=RootSpec(), log=None) == tmp_path.resolve()
    spec = RootSpec()
    assert spec.key.startswith("bookworm-arm64-")
    assert spec.key != RootSpec(suite="trixie").key
    made = cache.qemu_root(spec.key)
    assert made.parent == cache.root / "qemu"
    marker = {"suite": "bookworm"}
    (made).mkdir(parents=True)
    (made / ".dswheels-root.json").write_text(json.dumps(marker), encoding="utf-8")
    (made / "usr" / "bin").mkdir(parents=True)
    (made / "usr" / "bin" / "python3.11").write_bytes(b"\x7fELF")
    (made / "usr" / "bin" / "python3").symlink_to("python3.11")
    # complete (marker and Python): used as it is, nothing run
    assert ensure_root(None, cache=cache, emulator=emulator, spec=spec, log=None) == made


def test_making_a_root_needs_root_and_binfmt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dswheels.platforms.qemu import root

    cache, emulator = CacheLayout(tmp_path / "cache"), Emulator(qemu="/usr/bin/qemu-aarch64-static", binfmt=None)
    monkeypatch.setattr(root, "running_as_root", lambda: False)
    with pytest.raises(EnvironmentMismatchError, match="needs root") as err:
        ensure_root(None, cache=cache, emulator=emulator, spec=RootSpec(), log=None)
    assert "debootstrap --arch=arm64 --variant=minbase" in (err.value.hint or "")
    assert "--qemu-root DIR" in (err.value.hint or "")
    monkeypatch.setattr(root, "running_as_root", lambda: True)
    with pytest.raises(EnvironmentMismatchError, match="debootstrap's second stage"):
        ensure_root(None, cache=cache, emulator=emulator, spec=RootSpec(), log=None)
    assert not cache.qemu_root(RootSpec().key).exists()  # nothing half-made


def test_the_venv_takes_wheels_up_to_the_roots_glibc(tmp_path: Path) -> None:
    """verify's venv in the root gets what pip run there would take: Debian 12's glibc 2.36 takes a wheel auditwheel
    tagged manylinux_2_35 in that root (uv refused it for the manylinux_2_28 target once)."""
    root = tmp_path / "root"
    assert root_glibc(root) is None
    libc = root / "usr" / "lib" / "aarch64-linux-gnu" / "libc.so.6"
    libc.parent.mkdir(parents=True)
    banner = b"GNU C Library (Debian GLIBC 2.36-9+deb12u14) stable release version 2.36.\n"
    libc.write_bytes(b"\x7fELF" + b"\0" * 4096 + banner + b"\0" * 64)
    assert root_glibc(root) == (2, 36)
    assert venv_platform(root_glibc(root)) == "aarch64-manylinux_2_36"
    assert venv_platform(None) == "aarch64-manylinux_2_28"  # unread: the floor every aarch64 wheel we make keeps


def test_verifys_venv_in_the_root_asks_uv_for_the_roots_glibc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The venv verify makes of the root's Python is filled for the root's glibc (2.36 here), not a fixed 2.28."""
    root = tmp_path / "root"
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "usr" / "bin" / "python3").symlink_to("python3.11")
    libc = root / "usr" / "lib" / "aarch64-linux-gnu" / "libc.so.6"
    libc.parent.mkdir(parents=True)
    libc.write_bytes(b"\x7fELF\0GNU C Library (Debian GLIBC 2.36-9+deb12u14) stable release version 2.36.\n")
    commands: list[list[str]] = []
    monkeypatch.setattr(
        "dswheels.platforms.qemu.machine.proc.run", lambda argv, **_: commands.append(list(map(str, argv)))
    )
    monkeypatch.setattr("dswheels.platforms.qemu.machine.find_uv", lambda: "uv")
    machine = QemuMachine(root=root, emulator=Emulator(qemu="/usr/bin/qemu-aarch64-static", binfmt=None))
    machine.venv(Python((3, 11)), where=tmp_path, requirements=["torch==2.10.0"], index_args=[], cpu=None, log=None)
    uv = next(c for c in commands if c[:3] == ["uv", "pip", "install"])
    assert uv[uv.index("--python-platform") + 1] == "aarch64-manylinux_2_36"
