"""qemu-user on this machine: its binary, and whether the kernel runs arm64 programs through it (binfmt_misc).

Two ways to run an arm64 program here, and what each needs:

* **through binfmt_misc**: the kernel hands every arm64 ELF file it is asked to run to the
  interpreter registered for it (Debian's ``qemu-user-static`` registers ``qemu-aarch64`` with the
  ``F`` flag: the interpreter is opened once, at registration, so it runs inside a chroot that lacks
  it). A program's own children (the compiler's ``cc1plus``, ``ninja``, ``uv``) run the same way:
  a build needs it. A container shares its host's kernel, and often has no ``binfmt_misc`` mounted
  or no entry: then it must be registered on the host.
* **explicitly**: ``qemu-aarch64-static -L ROOT program`` runs one program, its library paths looked
  up in ``ROOT`` first. Without binfmt its children cannot run, so only a program that starts no
  other (an interpreter loading a wheel's ops) runs this way.

:func:`find_emulator` reads both; :func:`need_binfmt` is the error that names the fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from dswheels.host import proc
from dswheels.kernel.errors import EnvironmentMismatchError

__all__ = ["BINFMT_DIR", "Binfmt", "Emulator", "find_emulator", "need_binfmt", "parse_binfmt"]

BINFMT_DIR = Path("/proc/sys/fs/binfmt_misc")
QEMU_PROGRAMS = ("qemu-aarch64-static", "qemu-aarch64")
# the ELF header of a 64-bit little-endian arm64 executable as binfmt_misc matches it (e_machine 0xb7)
_AARCH64_MAGIC = "7f454c460201010000000000000000000200b700"
_REGISTER = (
    "register qemu-aarch64 with binfmt_misc: `apt-get install qemu-user-static binfmt-support` registers it on "
    "Debian and Ubuntu; where binfmt_misc is not mounted (a container, a minimal VM), as root: "
    "`mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc && update-binfmts --enable qemu-aarch64`; "
    "in a container it is the host's kernel that must have it (register it on the host)"
)


@dataclass(frozen=True, slots=True)
class Binfmt:
    """The binfmt_misc entry that matches arm64 ELF files."""

    name: str
    enabled: bool
    interpreter: str
    flags: str

    @property
    def fixed(self) -> bool:
        """``F``: the kernel opened the interpreter at registration, so it runs arm64 programs in a chroot too."""
        return "F" in self.flags


def parse_binfmt(name: str, text: str) -> Binfmt | None:
    """A ``/proc/sys/fs/binfmt_misc/<name>`` entry, when it is the one for arm64 ELF files.

    >>> e = parse_binfmt("qemu-aarch64", "enabled\\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\\n"
    ...     "flags: PF\\noffset 0\\nmagic 7f454c460201010000000000000000000200b700\\n")
    >>> (e.enabled, e.fixed), parse_binfmt("python3.11", "enabled\\nmagic a70d0d0a\\n")
    ((True, True), None)
    """
    fields: dict[str, str] = {}
    state = ""
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if line in ("enabled", "disabled"):
            state = line
        elif key.rstrip(":") in ("interpreter", "flags", "magic"):
            fields[key.rstrip(":")] = value.strip()
    if fields.get("magic") != _AARCH64_MAGIC:
        return None
    return Binfmt(
        name=name, enabled=state == "enabled", interpreter=fields.get("interpreter", ""), flags=fields.get("flags", "")
    )


def read_binfmt(directory: Path = BINFMT_DIR) -> Binfmt | None:
    """The entry of ``directory`` (binfmt_misc) that runs arm64 programs; None: not mounted, or none."""
    try:
        entries = sorted(p for p in directory.iterdir() if p.name not in ("register", "status"))
    except OSError:
        return None
    for entry in entries:
        try:
            found = parse_binfmt(entry.name, entry.read_text(encoding="ascii", errors="replace"))
        except OSError:
            continue
        if found is not None:
            return found
    return None


@dataclass(frozen=True, slots=True)
class Emulator:
    """What this machine has to run arm64 programs."""

    qemu: str | None  # qemu-aarch64(-static) on PATH
    binfmt: Binfmt | None  # the kernel's entry for arm64 ELF files

    @property
    def runs_children(self) -> bool:
        """arm64 programs started by arm64 programs run (a build, debootstrap's second stage, a chroot)."""
        return self.binfmt is not None and self.binfmt.enabled and self.binfmt.fixed

    def describe(self) -> str:
        how = "binfmt_misc" if self.runs_children else "explicitly"
        return f"{Path(self.qemu).name if self.qemu else 'qemu-aarch64'} ({how})"


def find_emulator(env: Mapping[str, str] | None = None, *, binfmt_dir: Path = BINFMT_DIR) -> Emulator:
    """qemu-aarch64 on PATH and the binfmt_misc entry, as they are now."""
    qemu = next((found for name in QEMU_PROGRAMS if (found := proc.find_tool(name, env))), None)
    return Emulator(qemu=qemu, binfmt=read_binfmt(binfmt_dir))


def need_binfmt(emulator: Emulator, *, what: str) -> None:
    """EnvironmentMismatchError naming the fix unless arm64 programs' children run here (``what`` needs them)."""
    if emulator.runs_children:
        return
    entry = emulator.binfmt
    if entry is None:
        found = "no binfmt_misc entry runs arm64 programs (or binfmt_misc is not mounted)"
    elif not entry.enabled:
        found = f"the binfmt_misc entry {entry.name} is disabled"
    else:
        found = f"the binfmt_misc entry {entry.name} lacks the F flag (its interpreter is not reachable in a chroot)"
    raise EnvironmentMismatchError(
        f"{what} needs arm64 programs run by the kernel through qemu: {found}", hint=_REGISTER
    )


def need_qemu(emulator: Emulator) -> str:
    """The qemu-aarch64 program (EnvironmentMismatchError naming the fix when there is none)."""
    if emulator.qemu is None:
        raise EnvironmentMismatchError(
            "qemu-aarch64 is not installed: arm64 programs cannot run on this machine",
            hint="apt-get install qemu-user-static binfmt-support (Debian, Ubuntu); then " + _REGISTER,
        )
    return emulator.qemu
