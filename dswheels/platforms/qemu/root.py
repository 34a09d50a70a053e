"""The arm64 Linux root the qemu host runs: given (``--qemu-root``), or made once under the cache by debootstrap.

Debian's own tools make it, from Debian's archive: ``debootstrap --arch=arm64`` unpacks the packages
and runs their scripts in the new root under qemu (binfmt_misc), as root. What the root holds is what
an arm64 build machine needs and nothing of this one: Python with venv and its headers, GCC (the
suite's: Debian 12 bookworm has Python 3.11 and GCC 12.2), binutils and the CA certificates. The root
is made in a staging folder and put in place only when complete (:data:`MARKER`), so a failed or
interrupted debootstrap leaves nothing a later build would take for a root.

Each run copies this machine's ``resolv.conf`` and CA bundle into it: the root reaches the network
(PyPI, for torch) as this machine does, through the same resolver and the same trusted proxies.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from dswheels.host import proc
from dswheels.host.cache import CacheLayout
from dswheels.host.files import exclusive, read_bounded, staging_dir, write_text_atomic
from dswheels.host.log import get_reporter
from dswheels.kernel.errors import EnvironmentMismatchError
from dswheels.platforms.qemu.emulator import Emulator, need_binfmt

__all__ = [
    "CA_BUNDLE",
    "MARKER",
    "ROOT_PACKAGES",
    "RootSpec",
    "ensure_root",
    "root_glibc",
    "root_python",
    "share_network",
]

MARKER = ".dswheels-root.json"
ROOT_PACKAGES = ("python3", "python3-venv", "python3-dev", "g++", "make", "binutils", "ca-certificates")
CA_BUNDLE = "etc/ssl/certs/ca-certificates.crt"  # in the root: the CA bundle every client there is told to use
# the variables that may name this machine's CA bundle, in the order its clients read them
_BUNDLE_VARIABLES = ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE", "PIP_CERT")


@dataclass(frozen=True, slots=True)
class RootSpec:
    """What root to make: a Debian suite for arm64, from a mirror, with :data:`ROOT_PACKAGES`."""

    suite: str = "bookworm"
    mirror: str = "http://deb.debian.org/debian"

    @property
    def key(self) -> str:
        """The cache's name of such a root: the suite and a digest of what it is made of."""
        made_of = "\n".join([self.suite, self.mirror, *ROOT_PACKAGES])
        return f"{self.suite}-arm64-{hashlib.sha256(made_of.encode()).hexdigest()[:12]}"


def running_as_root() -> bool:
    """This process runs as root (debootstrap, chroot and mount namespaces need it); never on Windows."""
    if sys.platform == "win32":
        return False
    return os.geteuid() == 0


def _complete(root: Path) -> bool:
    return (root / MARKER).is_file() and (root / "usr" / "bin" / "python3").exists()


def root_python(root: Path) -> str:
    """The root's Python minor (``3.11``), from its ``python3`` link (EnvironmentMismatchError: none)."""
    link = root / "usr" / "bin" / "python3"
    try:
        target = link.readlink()
    except OSError:
        raise EnvironmentMismatchError(
            f"{root} has no usr/bin/python3: not an arm64 root with Python",
            hint=f"make one with debootstrap (it needs {', '.join(ROOT_PACKAGES)}), or leave --qemu-root out",
        ) from None
    return Path(target).name.removeprefix("python")


# glibc's banner in its libc.so.6 ("GNU C Library (Debian GLIBC 2.36-9+deb12u14) stable release version 2.36.")
_GLIBC_BANNER = re.compile(rb"GNU C Library [^\n]{0,200}? release version ([0-9]+)\.([0-9]+)")
_LIBC = (
    "usr/lib/aarch64-linux-gnu/libc.so.6",  # Debian and Ubuntu (merged /usr)
    "lib/aarch64-linux-gnu/libc.so.6",
    "usr/lib64/libc.so.6",  # RHEL and its rebuilds
    "lib64/libc.so.6",
)


def root_glibc(root: Path) -> tuple[int, int] | None:
    """The root's glibc (``(2, 36)``), from its libc.so.6's banner: what pip run there accepts manylinux tags up to."""
    for rel in _LIBC:
        path = root / rel
        if path.is_file():
            match = _GLIBC_BANNER.search(read_bounded(path, limit=64 << 20))
            return (int(match.group(1)), int(match.group(2))) if match else None
    return None


def ensure_root(
    given: Path | None, *, cache: CacheLayout, emulator: Emulator, spec: RootSpec, log: Path | None
) -> Path:
    """The root to run in: ``given`` as it is, else the cache's, made by debootstrap when absent (as root)."""
    if given is not None:
        root = given.expanduser().resolve()
        root_python(root)  # a root with Python, or a clear error
        return root
    root = cache.qemu_root(spec.key)
    if _complete(root):
        return root
    with exclusive(root.with_name(f".{root.name}.lock"), what="making the arm64 root", error=EnvironmentMismatchError):
        if not _complete(root):
            _debootstrap(root, emulator=emulator, spec=spec, log=log)
    return root


def _debootstrap(root: Path, *, emulator: Emulator, spec: RootSpec, log: Path | None) -> None:
    """Make ``root`` with debootstrap in a staging folder beside it, then put it in place."""
    if not running_as_root():
        raise EnvironmentMismatchError(
            "making the arm64 root needs root (debootstrap installs packages and runs their scripts)",
            hint=f"run once as root, or make it yourself (`debootstrap --arch=arm64 --variant=minbase "
            f"--include={','.join(ROOT_PACKAGES)} {spec.suite} DIR {spec.mirror}`) and pass --qemu-root DIR",
        )
    need_binfmt(emulator, what="debootstrap's second stage (the root's packages configured under qemu)")
    if proc.find_tool("debootstrap") is None:
        raise EnvironmentMismatchError("debootstrap is not installed", hint="apt-get install debootstrap")
    reporter = get_reporter()
    reporter.info(f"making an arm64 Debian {spec.suite} root at {root} (debootstrap under qemu; minutes)")
    root.parent.mkdir(parents=True, exist_ok=True)
    with staging_dir(root.parent, root.name) as staging:
        proc.run(
            [
                "debootstrap",
                "--arch=arm64",
                "--variant=minbase",
                f"--include={','.join(ROOT_PACKAGES)}",
                spec.suite,
                staging,
                spec.mirror,
            ],
            log_file=log,
            stream=False,
            heartbeat=60,
            heartbeat_label="debootstrap",
            error=EnvironmentMismatchError,
            what="debootstrap",
        )
        marker = {"suite": spec.suite, "mirror": spec.mirror, "packages": list(ROOT_PACKAGES), "key": spec.key}
        write_text_atomic(staging / MARKER, json.dumps(marker, indent=2) + "\n")
        shutil.rmtree(root, ignore_errors=True)
        staging.rename(root)


def _bundle(environ: Mapping[str, str], here: Path) -> Path:
    """This machine's CA bundle: the one its variables name, else the system's."""
    named = (Path(value) for name in _BUNDLE_VARIABLES if (value := environ.get(name)))
    return next((p for p in named if p.is_file()), here / CA_BUNDLE)


def share_network(root: Path, environ: Mapping[str, str], here: Path = Path("/")) -> None:
    """This machine's resolver and CA bundle in the root (a file this machine lacks is left as the root has it)."""
    for source, rel in ((here / "etc" / "resolv.conf", "etc/resolv.conf"), (_bundle(environ, here), CA_BUNDLE)):
        if source.is_file():
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink():
                target.unlink()
            shutil.copyfile(source, target)
