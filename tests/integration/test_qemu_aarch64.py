"""linux_aarch64 CPU code under qemu-user: DeepSpeed 0.19.8's own SVE path (``csrc/includes/sve.h``) in an AdamW
step (tests/data/a64/adam_driver.cpp) compiled for aarch64 with dswheels' flags and with DeepSpeed's own, judged
by the reader ``dswheels verify`` uses and run as Graviton2's core (qemu's ``neoverse-n1``, the armv8.2-a
baseline's ``qemu_cpu``) and as qemu's default CPU (``max``: every feature, SVE2 included).

Two means (docs/build.md#linux-aarch64-under-qemu says what each proves):

* cross: Debian's ``g++-aarch64-linux-gnu`` here, each program run by ``qemu-aarch64`` explicitly with the cross
  libraries (``-L``; no binfmt_misc, no root): a few seconds, run by ``nox -s tests`` (.ci/run installs both). A
  cross compiler has no ``-march=native``: DeepSpeed's flags on an SVE runner are spelled as what GCC resolves
  ``native`` to on GitHub's arm64 runner (Neoverse N2: ``-mcpu=neoverse-n2``).
* root (marker ``qemu``): an arm64 Debian root (``DSWHEELS_QEMU_ROOT``, else the one ``dswheels build --qemu``
  made in the cache), its own GCC run natively there through binfmt_misc, with ``-march=native`` itself and an
  N2's ``/proc/cpuinfo`` (tests/data/a64/cpuinfo-neoverse-n2, a stand-in) in place of this machine's. Run by
  ``nox -s aarch64`` after its build (``nox -s tests`` leaves them out: the root takes minutes to make).
"""

from __future__ import annotations

import math
import os
import re
import shutil
import signal
import subprocess
import tarfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from dswheels.building.effects.flag_recorder import fetch_sdists
from dswheels.cli import main as cli_main
from dswheels.host.cache import CacheLayout
from dswheels.host.downloads import Downloader
from dswheels.host.extensions import read_extension_binary
from dswheels.kernel.binaries.isa import IsaReport
from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import VerifyError
from dswheels.kernel.naming import parse_wheel
from dswheels.platforms.qemu.emulator import find_emulator
from dswheels.platforms.qemu.host_gcc import CROSS_BIN, HostGcc, find_host_gcc
from dswheels.platforms.qemu.machine import DSWHEELS_VENV, in_root, install_dswheels
from dswheels.platforms.qemu.root import CA_BUNDLE, MARKER, RootSpec, root_python, running_as_root, share_network
from dswheels.verify.ds_report import parse_ds_report
from tests.conftest import DATA, require
from tests.support.servers import StaticServer

pytestmark = pytest.mark.integration

BASELINE = load_compat().baseline_for("aarch64")
DRIVER = DATA / "a64" / "adam_driver.cpp"
N2_CPUINFO = DATA / "a64" / "cpuinfo-neoverse-n2"
N = 1000  # not a multiple of any vector width: SVE's predicated tail runs too
TOLERANCE = 1e-5  # verify's DeepSpeedCPUAdam-against-AdamW tolerance
SIGILL = {-signal.SIGILL, 128 + signal.SIGILL}  # killed, or qemu's exit status after its message


@dataclass(frozen=True)
class Aarch64:
    """What runs an arm64 program here: qemu explicitly, with a library prefix."""

    qemu: str
    prefix: Path  # the arm64 libraries' root (-L)

    def run(self, program: Path, *args: str, cpu: str | None) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "QEMU_LD_PREFIX": str(self.prefix)}
        env.pop("QEMU_CPU", None)
        if cpu:
            env["QEMU_CPU"] = cpu
        return subprocess.run([self.qemu, str(program), *args], env=env, capture_output=True, text=True, check=False)


def _reference(n: int) -> list[tuple[float, float, float]]:
    """The driver's AdamW step in double precision (its inputs are float32 of the same formulas)."""
    beta1, beta2, lr, eps, wd = 0.9, 0.999, 1e-3, 1e-8, 0.01
    bc1, bc2 = 1 - beta1**3, 1 / math.sqrt(1 - beta2**3)
    out = []
    for i in range(n):
        p, g = 0.5 * math.sin(i), 0.1 * math.cos(0.7 * i)
        m = 0.01 * math.sin(0.3 * i) * beta1 + g * (1 - beta1)
        v = 0.001 * (1 + math.cos(i)) * beta2 + g * g * (1 - beta2)
        out.append((p * (1 - lr * wd) - lr / bc1 * m / (math.sqrt(v) * bc2 + eps), m, v))
    return out


def _check_step(result: subprocess.CompletedProcess[str], *, sve: bool) -> None:
    assert result.returncode == 0, result.stderr
    head, *lines = result.stdout.splitlines()
    assert head == f"sve {int(sve)}"  # which path ran: DeepSpeed's SVE one, or the NEON loop
    got = [tuple(float(x) for x in line.split()) for line in lines]
    assert len(got) == N
    worst = max(abs(a - b) for row, ref in zip(got, _reference(N), strict=True) for a, b in zip(row, ref, strict=True))
    assert worst < TOLERANCE, worst


def _judge(program: Path) -> IsaReport:
    """The reader ``dswheels verify`` judges an aarch64 extension with, against the armv8.2-a baseline."""
    binary = read_extension_binary(
        program.name,
        program.read_bytes(),
        tmp=program.parent,
        forbidden_registers=None,
        objdump=None,
        error=VerifyError,
        forbidden_features=BASELINE.forbidden_features,
    )
    assert binary.machine == "aarch64"
    assert binary.isa is not None
    return binary.isa


@pytest.fixture(scope="module")
def deepspeed_includes(dswheels_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """DeepSpeed 0.19.8's csrc/includes/sve.h, from its PyPI sdist (verified by sha256)."""
    with Downloader(dswheels_cache / "sources") as downloader:
        [sdist] = fetch_sdists(["0.19.8"], downloader=downloader, pypi_json=load_compat().sdist_json).values()
    out = tmp_path_factory.mktemp("ds-includes")
    with tarfile.open(sdist) as archive:
        member = archive.getmember("deepspeed-0.19.8/csrc/includes/sve.h")
        reader = archive.extractfile(member)
        assert reader is not None
        (out / "sve.h").write_bytes(reader.read())
    return out


# --- cross: Debian's aarch64 cross GCC, qemu run explicitly ------------------------------------------------------

_CROSS_GXX = "aarch64-linux-gnu-g++"
_CROSS_LIBS = Path("/usr/aarch64-linux-gnu")  # the cross libc and libstdc++ (libc6-arm64-cross, libstdc++6-arm64-cross)


@pytest.fixture(scope="module")
def cross() -> Aarch64:
    qemu = find_emulator().qemu
    require(shutil.which(_CROSS_GXX) is not None, f"no {_CROSS_GXX} (apt-get install g++-aarch64-linux-gnu)")
    require(qemu is not None, "no qemu-aarch64 (apt-get install qemu-user-static)")
    assert qemu is not None
    return Aarch64(qemu=qemu, prefix=_CROSS_LIBS)


def _cross_build(includes: Path, out: Path, flags: Sequence[str]) -> Path:
    # -Wl,-rpath: none needed; the cross libraries are found through QEMU_LD_PREFIX
    subprocess.run([_CROSS_GXX, "-O3", *flags, "-I", str(includes), str(DRIVER), "-o", str(out)], check=True)
    return out


def test_dswheels_flags_keep_deepspeeds_adam_step_in_armv8_2_a_and_it_runs_as_graviton2s_core(
    cross: Aarch64, deepspeed_includes: Path, tmp_path: Path
) -> None:
    # what the patched builders say on aarch64 (building/patches.py: cpu_arch(), simd_width())
    program = _cross_build(deepspeed_includes, tmp_path / "adam", [BASELINE.gcc, BASELINE.simd])
    isa = _judge(program)
    assert isa.ok, isa.examples
    assert BASELINE.qemu_cpu == "neoverse-n1"
    _check_step(cross.run(program, str(N), cpu=BASELINE.qemu_cpu), sve=False)


def test_deepspeeds_sve_path_from_an_n2_runner_fails_the_baseline_and_graviton2s_core(
    cross: Aarch64, deepspeed_includes: Path, tmp_path: Path
) -> None:
    # DeepSpeed's own flags on GitHub's arm64 runner: -march=native (GCC: the N2's armv9-a+sve2) and -D__SVE__
    program = _cross_build(deepspeed_includes, tmp_path / "adam", ["-mcpu=neoverse-n2", "-D__SVE__"])
    isa = _judge(program)
    assert not isa.ok
    assert any("SVE" in kind for kind in isa.kinds), isa.kinds
    assert cross.run(program, str(N), cpu=BASELINE.qemu_cpu).returncode in SIGILL
    # qemu's default CPU has SVE: there DeepSpeed's SVE path runs, and right. A load under qemu proves the
    # baseline only as the baseline's core (verify runs the wheel as it), never as qemu's default
    _check_step(cross.run(program, str(N), cpu=None), sve=True)


# --- root: the arm64 root's own GCC, natively there through binfmt_misc ------------------------------------------


@pytest.fixture(scope="module")
def arm64_root() -> Path:
    given = os.environ.get("DSWHEELS_QEMU_ROOT")
    root = Path(given) if given else CacheLayout.here().qemu_root(RootSpec().key)
    require(
        (root / "usr" / "bin" / "python3").exists() and (bool(given) or (root / MARKER).is_file()),
        f"no arm64 root at {root} (DSWHEELS_QEMU_ROOT, or `dswheels build --qemu` makes one)",
    )
    return root


@pytest.fixture(scope="module")
def in_arm64_root(arm64_root: Path) -> Path:
    """The root, where commands run in it: as root, with binfmt_misc's qemu-aarch64 entry."""
    require(running_as_root(), "chroot and a mount namespace need root")
    require(find_emulator().runs_children, "binfmt_misc has no enabled qemu-aarch64 entry with the F flag")
    return arm64_root


def _in_root(
    root: Path, work: Path, script: str, *, cpu: str | None = None, compilers: HostGcc | None = None
) -> subprocess.CompletedProcess[str]:
    path = f"{CROSS_BIN}:/usr/bin:/bin:/usr/sbin:/sbin" if compilers else "/usr/bin:/bin:/usr/sbin:/sbin"
    env = {"PATH": path, "LANG": "C.UTF-8", **({"QEMU_CPU": cpu} if cpu else {})}
    command = in_root(root, ["/bin/sh", "-ec", script], visible=[work], env=env, compilers=compilers)
    return subprocess.run(command, capture_output=True, text=True, check=False)


def _sections(obj: Path, names: Sequence[str]) -> dict[str, bytes]:
    with obj.open("rb") as f:
        elf = ELFFile(f)
        return {name: section.data() for name in names if (section := elf.get_section_by_name(name)) is not None}


def _root_build(root: Path, includes: Path, work: Path, flags: str, *, cpuinfo: Path | None = None) -> Path:
    shutil.copy(DRIVER, work / DRIVER.name)
    shutil.copy(includes / "sve.h", work / "sve.h")
    program = work / "adam"
    # the N2's /proc/cpuinfo over qemu's (this x86_64 machine's), in the command's own mount namespace
    swap = f"mount --bind {cpuinfo} /proc/cpuinfo\n" if cpuinfo else ""
    done = _in_root(root, work, f"{swap}g++ -O3 {flags} -I {work} {work / DRIVER.name} -o {program}")
    assert done.returncode == 0, done.stderr
    return program


@pytest.mark.qemu
def test_deepspeeds_native_flags_put_back_fail_the_baseline_in_the_root(
    in_arm64_root: Path, deepspeed_includes: Path, tmp_path: Path
) -> None:
    root = in_arm64_root
    shutil.copy(N2_CPUINFO, tmp_path / "cpuinfo")
    native = _root_build(root, deepspeed_includes, tmp_path, "-march=native -D__SVE__", cpuinfo=tmp_path / "cpuinfo")
    isa = _judge(native)
    assert not isa.ok
    assert _in_root(root, tmp_path, f"{native} {N}", cpu=BASELINE.qemu_cpu).returncode in SIGILL
    portable = tmp_path / "portable"
    portable.mkdir()
    program = _root_build(root, deepspeed_includes, portable, f"{BASELINE.gcc} {BASELINE.simd}")
    assert _judge(program).ok
    _check_step(_in_root(root, portable, f"{program} {N}", cpu=BASELINE.qemu_cpu), sve=False)


@pytest.mark.qemu
def test_this_machines_cross_gcc_in_the_root_emits_the_roots_gccs_code(
    in_arm64_root: Path, deepspeed_includes: Path, tmp_path: Path
) -> None:
    """What `dswheels build --qemu` compiles with (--qemu-compilers auto/host): Debian's x86_64-hosted cross GCC of
    the root's release, run natively in the root, against the root's own arm64 GCC, emulated, on DeepSpeed's sve.h
    in the AdamW driver with an op build's flags: every byte of the object's code and data is the same without the
    stack protector. With it (Python's CFLAGS give -fstack-protector-strong) the two are the same only where they
    are the same distribution build: Debian 12's root GCC (12.2.0-14+deb12u1) has the CVE-2023-4039 fix, which
    lays out AArch64's protected frames otherwise, and its cross GCC (12.2.0-14) has not; the build says so. Then
    the cross-built program, linked in the root, runs the step as Graviton2's core."""
    root = in_arm64_root
    gcc = find_host_gcc(root)
    require(isinstance(gcc, HostGcc), str(gcc))
    assert isinstance(gcc, HostGcc)
    assert gcc.build.startswith(f"Debian {gcc.major}.")
    assert gcc.root_build.startswith(f"Debian {gcc.major}.")
    flags = f"-O3 -fPIC -fwrapv -g0 -std=c++17 {BASELINE.gcc} {BASELINE.simd}"
    code = (".text", ".text.startup", ".rodata", ".rodata.cst16", ".rodata.cst4", ".data", ".bss")
    objects: dict[tuple[str, str], Path] = {}
    for name, compilers in (("own", None), ("host", gcc)):
        work = tmp_path / name
        work.mkdir()
        shutil.copy(DRIVER, work / DRIVER.name)
        shutil.copy(deepspeed_includes / "sve.h", work / "sve.h")
        for protector in ("-fno-stack-protector", "-fstack-protector-strong"):
            obj = work / f"adam{protector}.o"
            script = f"g++ -c {flags} {protector} -I {work} {work / DRIVER.name} -o {obj}"
            done = _in_root(root, work, script, compilers=compilers)
            assert done.returncode == 0, done.stderr
            objects[name, protector] = obj
    plain = [_sections(objects[n, "-fno-stack-protector"], code) for n in ("own", "host")]
    assert ".text" in plain[0]
    assert plain[0] == plain[1]
    protected = [_sections(objects[n, "-fstack-protector-strong"], code) for n in ("own", "host")]
    assert (protected[0] == protected[1]) == gcc.same_build, (gcc.build, gcc.root_build)
    assert bool(gcc.differences()) != gcc.same_build  # what the build warns of
    program = tmp_path / "host" / "adam"
    obj = objects["host", "-fstack-protector-strong"]
    linked = _in_root(root, tmp_path / "host", f"g++ {obj} -o {program}", compilers=gcc)
    assert linked.returncode == 0, linked.stderr
    assert _judge(program).ok
    _check_step(_in_root(root, tmp_path / "host", f"{program} {N}", cpu=BASELINE.qemu_cpu), sve=False)


@pytest.mark.qemu
def test_the_a64_fixtures_are_what_the_roots_gcc_makes(in_arm64_root: Path, tmp_path: Path) -> None:
    shutil.copy(DATA / "a64" / "adam_step.c", tmp_path / "adam_step.c")
    out = tmp_path / "libadam.so"
    flags = "-O3 -shared -fPIC -nostdlib -Wl,--build-id=none -Wl,-z,max-page-size=4096 -s"  # make.sh's
    done = _in_root(
        in_arm64_root, tmp_path, f"gcc {flags} {BASELINE.gcc} {BASELINE.simd} -o {out} {out.parent}/adam_step.c"
    )
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == (DATA / "a64" / "libadam-armv8.2-a.so").read_bytes()


@pytest.mark.qemu
def test_the_roots_python_runs_explicitly_under_qemu_as_graviton2s_core(arm64_root: Path) -> None:
    # how verify runs the wheel's venv: one process, qemu started here, no binfmt_misc or root needed
    qemu = find_emulator().qemu
    require(qemu is not None, "no qemu-aarch64 (apt-get install qemu-user-static)")
    assert qemu is not None
    python = arm64_root / "usr" / "bin" / "python3"
    done = Aarch64(qemu=qemu, prefix=arm64_root).run(
        python, "-c", "import platform, sys; print(platform.machine(), sys.version_info[:2])", cpu=BASELINE.qemu_cpu
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == "aarch64"


# --- a Grace user's path: the served index, `dswheels install` on the arm64 machine ---------------------------------


@pytest.mark.qemu
def test_an_arm64_user_installs_the_served_wheel_with_dswheels_install(in_arm64_root: Path, tmp_path: Path) -> None:
    """The wheel `nox -s aarch64` built (DSWHEELS_AARCH64_WHEEL) published, indexed and served on loopback; then, on
    the arm64 machine itself (dswheels and a venv with torch's aarch64 wheel in the root, every program emulated as
    a Neoverse N1), `dswheels install --index URL` detects aarch64, picks that wheel from its partition, installs it
    with pip and loads every op; `ds_report` there, the venv activated, lists them. (An x86_64 machine's facts get
    nothing from such an index: tests/unit/test_doctor_published.py.)"""
    given = os.environ.get("DSWHEELS_AARCH64_WHEEL")
    require(bool(given) and Path(str(given)).is_file(), "no DSWHEELS_AARCH64_WHEEL (nox -s aarch64 sets it)")
    wheel = Path(str(given))
    root = in_arm64_root
    published, site = tmp_path / "published", tmp_path / "site"
    assert cli_main(["publish", str(wheel), "--dir", str(published)]) == 0
    with StaticServer(site) as server:
        assert cli_main(["index", "--from", str(published), "--out", str(site), "--site-url", server.url]) == 0
        cache = CacheLayout.here().emulated
        share_network(root, os.environ)
        install_dswheels(root, log=tmp_path / "install-dswheels.log")
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": "/root",
            "LANG": "C.UTF-8",
            "QEMU_CPU": str(BASELINE.qemu_cpu),  # neoverse-n1
            "UV_CACHE_DIR": str(cache.uv),  # torch's aarch64 wheel as the build downloaded it
            **dict.fromkeys(("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT"), f"/{CA_BUNDLE}"),
        }
        venv = tmp_path / "user"
        uv = f"{DSWHEELS_VENV}/lib/python{root_python(root)}/site-packages/bin/uv"
        torch = parse_wheel(wheel.name).cell.torch
        version = load_compat().torch[torch].latest
        script = "\n".join(
            [
                f"{uv} venv --seed --python /usr/bin/python3 {venv}",  # as python -m venv: pip, setuptools
                f"{uv} pip install --python {venv}/bin/python --index https://pypi.org/simple/ torch=={version}",
                (
                    f"{DSWHEELS_VENV}/bin/python -m dswheels install --index {server.url} "
                    f"--python {venv}/bin/python --installer pip"
                ),
                f"PATH={venv}/bin:$PATH ds_report",  # as in the activated venv (ninja found there)
            ]
        )
        command = in_root(root, ["/bin/sh", "-ec", script], visible=[tmp_path, cache.root], env=env)
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=1800)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    out = done.stdout + done.stderr
    assert f"ok install {wheel.name}" in out  # the one wheel picked, by its name
    with zipfile.ZipFile(wheel) as zf:  # the ops the wheel carries: one extension each
        built = {Path(n).name.split("_op.")[0] for n in zf.namelist() if n.endswith(".so")}
    loaded = re.search(r"installed deepspeed \S+ into \S+: ([0-9]+) prebuilt ops load without JIT \(([^)]*)\)", out)
    assert loaded, out[-3000:]
    assert set(loaded.group(2).split(", ")) == built
    report = parse_ds_report(done.stdout)
    assert set(report.installed) == built, (report.installed, built)
    assert report.torch_version.startswith(f"{version}")
