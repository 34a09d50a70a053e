"""This machine's aarch64 cross GCC, run natively inside the arm64 root: the build's compiler at this machine's speed.

Under qemu-user every program of a build in the root is emulated, and the compiler is nearly all of its time:
``cc1plus`` parsing torch's headers took over an hour per op on this kind of machine (2 cores), where the same
compile takes half a minute natively. Debian's x86_64-hosted GCC for aarch64 (``g++-aarch64-linux-gnu``) is the
GCC release of the root's own arm64 GCC, built from the same sources for another host; it emits the same
AArch64 code for the same flags. So when this machine has the cross GCC of the root's GCC major, the root's
namespace gets it (:func:`find_host_gcc`):

- this machine's ``/usr``, read-only, at ``/opt/dswheels/x86/usr``: the driver finds its ``cc1plus``, ``as``
  and ``ld`` relative to itself there;
- the x86_64 loader and libraries where that loader looks (``/lib64``, ``/usr/lib/x86_64-linux-gnu``: an arm64
  root has neither), and the cross libc's folder at its own path (``/usr/aarch64-linux-gnu``: its ``libc.so``
  names it);
- links named as the compilers (``gcc``, ``g++``, ``cc``, ``c++``, Debian's ``aarch64-linux-gnu-`` names,
  which Python's sysconfig gives setuptools, and each with ``-MAJOR``) first on ``PATH``.

The kernel runs an x86_64 program in the chroot natively; only arm64 ones go through binfmt_misc. Everything
else is the runner's build: DeepSpeed's setup.py and op builders deciding on aarch64, torch's aarch64 wheel,
the root's headers (``/usr/include``, the cross GCC's system folder, is the root's), dswheels itself, binutils'
strip, auditwheel. ``--qemu-compilers emulated`` builds with the root's own arm64 GCC instead.
"""

from __future__ import annotations

import platform
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from dswheels.host.files import read_bounded
from dswheels.kernel.numbers import is_ascii_digits

__all__ = ["CROSS_BIN", "Bind", "HostGcc", "find_host_gcc", "gcc_build", "root_gcc_major"]

TRIPLET = "aarch64-linux-gnu"
HOST_USR = "/opt/dswheels/x86/usr"  # in the root: this machine's /usr
CROSS_BIN = "/opt/dswheels/cross/bin"  # in the root: the compilers' names (a tmpfs of the namespace), first on PATH
_LOADER = "lib64/ld-linux-x86-64.so.2"  # the x86_64 programs' interpreter (PT_INTERP)
_LIBRARIES = "usr/lib/x86_64-linux-gnu"  # where that loader looks by default (Debian's multiarch folder)


@dataclass(frozen=True, slots=True)
class Bind:
    """This machine's ``source``, read-only at ``target`` in the root's namespace (a file or a folder)."""

    source: Path
    target: str  # absolute, in the root

    def lines(self, root: Path) -> list[str]:
        """The shell lines that make it (the mount point is made first; it stays in the root, empty)."""
        at = root / self.target.lstrip("/")
        inside, source = shlex.quote(str(at)), shlex.quote(str(self.source))
        folder = self.source.is_dir()
        make = f"mkdir -p {inside}" if folder else f"mkdir -p {shlex.quote(str(at.parent))} && touch {inside}"
        return [make, f"mount --bind {source} {inside}", f"mount -o remount,bind,ro {inside}"]


@dataclass(frozen=True, slots=True)
class HostGcc:
    """Debian's x86_64-hosted GCC ``major`` for aarch64 on this machine (``here``), for the root's namespace."""

    major: str
    here: Path = Path("/")
    build: str = ""  # its distribution's build, as it prints it (``Debian 12.2.0-14``; '' unread)
    root_build: str = ""  # the root's own GCC's (``Debian 12.2.0-14+deb12u1``)

    @property
    def same_build(self) -> bool:
        """Both builds read, and the same (unread: not known to be the same)."""
        return self.build == self.root_build != ""

    def describe(self) -> str:
        builds = f"{self.build or '?'}, the root's {self.root_build or '?'}"
        return f"this machine's {TRIPLET}-g++-{self.major} ({builds}; x86_64-hosted), natively"

    def differences(self) -> str:
        """What a build should say when this GCC is not the root's own build ('' when it is)."""
        if self.same_build:
            return ""
        same_release = _release(self.build) == _release(self.root_build) != ""
        kind = "the same GCC release with other distribution patches" if same_release else "another GCC release"
        return (
            f"this machine's cross GCC is {self.build or '?'}, the root's own GCC {self.root_build or '?'}: {kind}, "
            "so some functions' code can differ (Debian 12: the root's has the CVE-2023-4039 fix, AArch64's stack "
            "protector frame, and the cross GCC not; docs/build.md#linux-aarch64-under-qemu); --qemu-compilers "
            "emulated compiles with the root's own"
        )

    def binds(self) -> tuple[Bind, ...]:
        here = self.here
        return (
            Bind(here / "usr", HOST_USR),
            Bind((here / _LOADER).resolve(), f"/{_LOADER}"),
            Bind(here / _LIBRARIES, f"/{_LIBRARIES}"),
            Bind(here / "usr" / TRIPLET, f"/usr/{TRIPLET}"),
        )

    def links(self) -> dict[str, str]:
        """The compilers' names in :data:`CROSS_BIN` and what each links to (in the root)."""
        names: dict[str, str] = {}
        for plain, driver in (("gcc", "gcc"), ("cc", "gcc"), ("g++", "g++"), ("c++", "g++")):
            target = f"{HOST_USR}/bin/{TRIPLET}-{driver}-{self.major}"
            for name in (plain, f"{TRIPLET}-{plain}"):
                names[name] = target
                if plain in ("gcc", "g++"):
                    names[f"{name}-{self.major}"] = target
        return names

    def lines(self, root: Path) -> list[str]:
        """The shell lines that put it in the root's namespace: the binds, then the links on a tmpfs."""
        lines = [line for bind in self.binds() for line in bind.lines(root)]
        folder = shlex.quote(str(root / CROSS_BIN.lstrip("/")))
        lines += [f"mkdir -p {folder}", f"mount -t tmpfs -o mode=0755 tmpfs {folder}"]
        lines += [f"ln -s {shlex.quote(t)} {folder}/{shlex.quote(n)}" for n, t in sorted(self.links().items())]
        return lines


def _release(build: str) -> str:
    """GCC's own version in a distribution's build (``Debian 12.2.0-14+deb12u1`` -> ``12.2.0``; '' unread).

    >>> _release("Debian 12.2.0-14+deb12u1"), _release("Ubuntu 12.3.0-17ubuntu1"), _release("")
    ('12.2.0', '12.3.0', '')
    """
    match = re.search(r"([0-9]+\.[0-9]+\.[0-9]+)", build)
    return match.group(1) if match else ""


# GCC's --with-pkgversion in its driver, as --version prints it: "g++ (Debian 12.2.0-14+deb12u1) 12.2.0"
_PKGVERSION = re.compile(rb"\(((?:Debian|Ubuntu|GCC)(?: [0-9][^()\x00\n]{0,80})?)\) ")


def gcc_build(driver: Path) -> str:
    """The distribution build a GCC driver says it is (``Debian 12.2.0-14``), read from the file ('' unread)."""
    if not driver.is_file():
        return ""
    match = _PKGVERSION.search(read_bounded(driver, limit=64 << 20))
    return match.group(1).decode("ascii", "replace") if match else ""


def root_gcc_major(root: Path) -> str | None:
    """The root's own GCC major (``12``): its ``g++`` link (Debian's ``g++ -> g++-12``), else its GCC folder."""
    link = root / "usr" / "bin" / "g++"
    if link.is_symlink() and (match := re.fullmatch(r"(?:.*-)?g\+\+-([0-9]+)", link.readlink().name)):
        return match.group(1)
    majors = sorted(p.name for p in (root / "usr" / "lib" / "gcc" / TRIPLET).glob("*") if is_ascii_digits(p.name))
    return majors[-1] if len(majors) == 1 else None


def find_host_gcc(root: Path, *, here: Path = Path("/"), machine: str | None = None) -> HostGcc | str:
    """This machine's cross GCC of the root's major, or why there is none to use (a sentence)."""
    machine = machine or platform.machine()
    if machine != "x86_64":
        return f"this machine is {machine}: the cross GCC runs natively in the root only on x86_64"
    major = root_gcc_major(root)
    if major is None:
        return f"the root {root} has no g++ of one GCC major to match"
    driver = here / "usr" / "bin" / f"{TRIPLET}-g++-{major}"
    needed = {
        driver: f"g++-{major}-{TRIPLET}",
        here / "usr" / "bin" / f"{TRIPLET}-gcc-{major}": f"gcc-{major}-{TRIPLET}",
        here / "usr" / "lib" / "gcc-cross" / TRIPLET / major / "cc1plus": f"g++-{major}-{TRIPLET}",
        here / "usr" / TRIPLET / "lib" / "libc.so": f"libc6-dev-arm64-cross (with g++-{major}-{TRIPLET})",
        here / _LOADER: "libc6 (this machine's x86_64 loader)",
        here / _LIBRARIES: "a Debian/Ubuntu multiarch layout",
    }
    missing = sorted({package for path, package in needed.items() if not path.exists()})
    if missing:
        return (
            f"this machine lacks GCC {major}'s aarch64 cross compiler (the root's GCC is {major}): {', '.join(missing)}"
        )
    # the root's g++-12 links to its triplet name: resolved inside the root, not on this machine
    root_driver = root / "usr" / "bin" / f"{TRIPLET}-g++-{major}"
    return HostGcc(major=major, here=here, build=gcc_build(driver), root_build=gcc_build(root_driver))
