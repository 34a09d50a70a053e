"""The arm64 root as an :class:`~dswheels.platforms.hosts.EmulatedMachine`: dswheels itself runs there.

A build in the root is the same ``dswheels build`` an arm64 runner runs, from this machine's dswheels:
its code is copied into a venv of the root's Python (:func:`install_dswheels`) beside the same releases of
its dependencies, which uv fetches here for ``aarch64-manylinux_2_28`` (their arm64 wheels; nothing is
compiled for them). Then every command runs in a private mount namespace (``unshare --mount``, nothing
leaks to this machine's mounts): the folders this machine hands over bound at the same paths, ``/proc``
and ``/sys`` mounted, and ``chroot`` into the root with a clean environment. The kernel runs each arm64
program through qemu (binfmt_misc, :mod:`.emulator`), the build's compilers and ``uv`` included.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import shlex
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import dswheels
from dswheels.host import proc
from dswheels.host.cache import CacheLayout
from dswheels.host.log import get_reporter
from dswheels.host.venvs import find_uv
from dswheels.kernel.errors import BuildError, DswheelsError, EnvironmentMismatchError
from dswheels.kernel.model import Python
from dswheels.kernel.versions import format_version
from dswheels.platforms.qemu.emulator import Emulator, need_binfmt, need_qemu
from dswheels.platforms.qemu.host_gcc import CROSS_BIN, HostGcc
from dswheels.platforms.qemu.root import CA_BUNDLE, root_glibc, root_python, running_as_root, share_network

__all__ = ["DSWHEELS_VENV", "QemuMachine", "in_root", "install_dswheels", "launcher_text", "venv_platform"]

DSWHEELS_VENV = "/opt/dswheels/venv"  # in the root: the venv dswheels runs from
_STAMP = ".dswheels-code"  # in that venv: the digest of the dswheels code copied there
# dswheels' dependencies (pyproject.toml, Linux's: auditwheel and its pyelftools, pure Python, tag the wheel with
# its floor there as on a runner): the root gets this machine's releases of them
_DEPENDENCIES = ("auditwheel", "pyelftools", "packaging", "pyyaml", "requests", "urllib3", "uv")
_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# what a command in the root inherits from this machine's environment (the rest is set, not inherited)
_PASSED = (
    "GITHUB_ACTIONS",
    "CI",
    "NO_COLOR",
    "FORCE_COLOR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "DSWHEELS_DEBUG",
)


def in_root(
    root: Path,
    argv: Sequence[str],
    *,
    visible: Sequence[Path],
    env: Mapping[str, str],
    compilers: HostGcc | None = None,
) -> list[str]:
    """The command that runs ``argv`` in ``root``: a private mount namespace with ``/proc`` and ``visible``
    (this machine's folders, bound at the same paths), this machine's cross GCC when ``compilers`` names it
    (:mod:`.host_gcc`), then ``chroot`` with ``env`` as the whole environment.

    >>> cmd = in_root(Path("/r"), ["python3", "-V"], visible=[Path("/out")], env={"HOME": "/root"})
    >>> cmd[:5], "mount --bind /out /r/out" in cmd[7]
    (['unshare', '--mount', '--propagation', 'private', '--'], True)
    """
    lines = [
        "set -e",
        f"mount -t proc proc {shlex.quote(str(root / 'proc'))}",
        f"mount -t sysfs sysfs {shlex.quote(str(root / 'sys'))}",  # torch's cpuinfo reads the CPU lists there
    ]
    for path in dict.fromkeys(p.resolve() for p in visible):
        inside = shlex.quote(str(root / path.relative_to(path.anchor)))
        lines += [f"mkdir -p {inside}", f"mount --bind {shlex.quote(str(path))} {inside}"]
    if compilers is not None:
        lines += compilers.lines(root)
    assignments = " ".join(shlex.quote(f"{k}={v}") for k, v in sorted(env.items()))
    lines.append(f'exec chroot {shlex.quote(str(root))} /usr/bin/env -i {assignments} "$@"')
    return ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", "\n".join(lines), "sh", *argv]


def _code_digest(package: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def install_dswheels(root: Path, *, log: Path | None) -> Path:
    """This machine's dswheels, with the same releases of its dependencies, in a venv of the root's Python
    (done again when the code differs); returns the venv's site-packages as this machine sees it."""
    python = root_python(root)
    venv = root / DSWHEELS_VENV.lstrip("/")
    site = venv / "lib" / f"python{python}" / "site-packages"
    package = Path(dswheels.__file__).parent
    digest = _code_digest(package)
    stamp = venv / _STAMP
    if stamp.is_file() and stamp.read_text(encoding="ascii").strip() == digest:
        return site
    get_reporter().info(f"installing this dswheels into the arm64 root ({root}, Python {python})")
    if not (venv / "bin" / "python").exists():
        proc.run(
            ["chroot", root, "/usr/bin/python3", "-m", "venv", "--without-pip", DSWHEELS_VENV],
            log_file=log,
            error=EnvironmentMismatchError,
            what="python3 -m venv (in the arm64 root)",
        )
    pins = [f"{name}=={importlib.metadata.version(name)}" for name in _DEPENDENCIES]
    proc.run(
        [
            find_uv(),
            "pip",
            "install",
            "--target",
            site,
            "--python-platform",
            "aarch64-manylinux_2_28",
            "--python-version",
            python,
            *pins,
        ],
        log_file=log,
        error=EnvironmentMismatchError,
        what="uv pip install (dswheels' dependencies for the arm64 root)",
    )
    shutil.rmtree(site / "dswheels", ignore_errors=True)
    shutil.copytree(package, site / "dswheels", ignore=shutil.ignore_patterns("__pycache__"))
    stamp.write_text(digest + "\n", encoding="ascii")
    return site


@dataclass(frozen=True, slots=True)
class QemuMachine:
    """An arm64 root under qemu-user: :class:`~dswheels.platforms.hosts.EmulatedMachine`."""

    root: Path
    emulator: Emulator
    compilers: HostGcc | None = None  # this machine's cross GCC, run natively in the root; None: the root's own

    def describe(self) -> str:
        gcc = f", compiling with {self.compilers.describe()}" if self.compilers else ""
        python = root_python(self.root)
        return f"an arm64 root ({self.root.name}, Python {python}) under {self.emulator.describe()}{gcc}"

    def environment(self, cache: CacheLayout, environ: Mapping[str, str]) -> dict[str, str]:
        """The whole environment of a command in the root: set here, a few variables passed on."""
        return {
            "PATH": f"{CROSS_BIN}:{_PATH}" if self.compilers else _PATH,
            "HOME": "/root",
            "LANG": "C.UTF-8",
            "TMPDIR": "/tmp",  # noqa: S108 - the root's own /tmp
            # this machine's CA bundle (share_network), for every client: OpenSSL, requests (else certifi's), pip
            **dict.fromkeys(("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT"), f"/{CA_BUNDLE}"),
            "UV_CACHE_DIR": str(cache.uv),
            "DSWHEELS_CACHE": str(cache.root),
            **{k: v for k in _PASSED if (v := environ.get(k))},
        }

    def run_dswheels(
        self, argv: Sequence[str], *, visible: Sequence[Path], cache: CacheLayout, log: Path, timeout: float | None
    ) -> None:
        import os  # noqa: PLC0415 - the environment is read where it is used

        need_binfmt(self.emulator, what="a build in the arm64 root")
        if not running_as_root():
            raise EnvironmentMismatchError(
                "a build in the arm64 root needs root (a private mount namespace and chroot)",
                hint="run dswheels build as root (the nox session does), or on an arm64 machine",
            )
        share_network(self.root, os.environ)
        install_dswheels(self.root, log=log)
        cache.root.mkdir(parents=True, exist_ok=True)
        command = in_root(
            self.root,
            [f"{DSWHEELS_VENV}/bin/python", "-m", "dswheels", *argv],
            visible=[cache.root, *visible],
            env=self.environment(cache, os.environ),
            compilers=self.compilers,
        )
        try:
            proc.run(
                command,
                log_file=log,
                heartbeat=300,
                heartbeat_label="dswheels in the arm64 root",
                timeout=timeout,
                error=BuildError,
                what="dswheels build (in the arm64 root, under qemu)",
            )
        except DswheelsError as exc:
            raise exc.with_hint(f"the build in the root logged to {log}") from None

    def venv(
        self,
        python: Python,
        *,
        where: Path,
        requirements: Sequence[str],
        index_args: Sequence[str],
        cpu: str | None,
        log: Path | None,
    ) -> Path:
        """A venv of the root's Python at ``where``, made by that Python run explicitly under qemu (one process:
        no binfmt_misc, no root needed), filled by uv here for ``aarch64-manylinux_2_28``; returns the launcher
        script beside it (:func:`launcher_text`), which runs it as qemu's CPU model ``cpu``."""
        qemu = need_qemu(self.emulator)
        minor = root_python(self.root)
        if format_version(python.version) != minor or python.free_threaded:
            raise EnvironmentMismatchError(
                f"the arm64 root has Python {minor}; the wheel is for Python {python}",
                hint="verify it in a root of a Debian or Ubuntu release with that Python (--qemu-root DIR)",
            )
        env = where / "env"
        proc.run(
            [qemu, "-L", self.root, self.root / "usr" / "bin" / f"python{minor}", "-m", "venv", "--without-pip", env],
            log_file=log,
            error=EnvironmentMismatchError,
            what="python -m venv (under qemu)",
        )
        site = env / "lib" / f"python{minor}" / "site-packages"
        proc.run(
            [
                find_uv(),
                "pip",
                "install",
                "--target",
                site,
                "--python-platform",
                venv_platform(root_glibc(self.root)),
                "--python-version",
                minor,
                *index_args,
                *requirements,
            ],
            log_file=log,
            heartbeat_label="uv pip install (for aarch64)",
            error=EnvironmentMismatchError,
            what="uv pip install (the venv's packages, for aarch64)",
        )
        launcher = where / "python"
        launcher.write_text(launcher_text(qemu, self.root, env / "bin" / "python", cpu=cpu), encoding="utf-8")
        launcher.chmod(0o755)
        return launcher


# the newest aarch64 glibc uv 0.13 names a target for (--python-platform aarch64-manylinux_2_40)
_UV_NEWEST_GLIBC = (2, 40)


def venv_platform(glibc: tuple[int, int] | None) -> str:
    """uv's target for a venv of the root: the root's glibc, as pip run there takes wheels (a wheel tagged
    manylinux_2_35 installs in Debian 12's root, glibc 2.36); manylinux_2_28's where it cannot be read.

    >>> venv_platform((2, 36)), venv_platform(None), venv_platform((2, 41))
    ('aarch64-manylinux_2_36', 'aarch64-manylinux_2_28', 'aarch64-manylinux_2_40')
    """
    major, minor = min(glibc or (2, 28), _UV_NEWEST_GLIBC)
    return f"aarch64-manylinux_{major}_{minor}"


def launcher_text(qemu: str, root: Path, python: Path, *, cpu: str | None = None) -> str:
    """A script that runs ``python`` (an arm64 interpreter) under qemu: its libraries looked up in ``root`` first
    (``QEMU_LD_PREFIX``), as the CPU model ``cpu`` (``QEMU_CPU``; None: qemu's ``max``, every feature it has),
    this machine's paths as they are. Both variables are inherited by the children binfmt_misc starts.

    >>> print(launcher_text("/usr/bin/qemu-aarch64-static", Path("/r"), Path("/v/env/bin/python"), cpu="neoverse-n1"))
    #!/bin/sh
    QEMU_LD_PREFIX=/r
    QEMU_CPU=neoverse-n1
    export QEMU_LD_PREFIX QEMU_CPU
    exec /usr/bin/qemu-aarch64-static /v/env/bin/python "$@"
    <BLANKLINE>
    """
    assignments = {"QEMU_LD_PREFIX": str(root), **({"QEMU_CPU": cpu} if cpu else {})}
    lines = ["#!/bin/sh", *(f"{k}={shlex.quote(v)}" for k, v in assignments.items()), f"export {' '.join(assignments)}"]
    return "\n".join([*lines, f'exec {shlex.quote(qemu)} {shlex.quote(str(python))} "$@"', ""])
