"""What an extension's bytes say, whatever the format: ELF (``.so``) or PE (``.pyd``).

One typed record per extension file: its GPU code (:mod:`dswheels.kernel.binaries.fatbin`), what it
needs from the system at load time (the glibc/libstdc++ symbol versions of an ELF file,
:mod:`dswheels.kernel.binaries.linux_runtime`; the DLLs of a PE file, :mod:`dswheels.kernel.binaries.pe`) and, once
disassembled, its CPU instruction level (:mod:`dswheels.kernel.binaries.isa`, filled in by
:mod:`dswheels.host.extensions`, which runs ``objdump``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from dswheels.kernel.binaries.a64 import elf_machine
from dswheels.kernel.binaries.fatbin import FatbinError, GpuCode, gpu_code
from dswheels.kernel.binaries.isa import IsaReport
from dswheels.kernel.binaries.linux_runtime import ElfError, version_needs
from dswheels.kernel.binaries.pe import PeError, read_pe

__all__ = ["BinaryError", "ExtensionBinary", "read_extension"]


class BinaryError(ValueError):
    """An extension file that claims a format (ELF, PE) but cannot be read as it."""


@dataclass(frozen=True, slots=True)
class ExtensionBinary:
    member: str  # path inside the wheel
    format: str  # "elf" | "pe" | "unknown"
    size: int
    machine: str = ""  # "x86-64" (PE); "x86_64" | "aarch64" (ELF); "" where not read
    gpu: GpuCode | None = None  # None: no device code
    version_needs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # ELF: library -> symbol versions
    dll_imports: tuple[str, ...] = ()  # PE: DLLs loaded with the extension
    delay_imports: tuple[str, ...] = ()  # PE: DLLs loaded on first use
    isa: IsaReport | None = None  # None: not disassembled
    records_native: bool = False  # its bytes record -march=native or -mcpu=native (a build that tuned to its host)

    @property
    def name(self) -> str:
        """The file name without its folder."""
        return self.member.rsplit("/", 1)[-1]

    def with_isa(self, isa: IsaReport) -> ExtensionBinary:
        return replace(self, isa=isa)


def read_extension(member: str, data: bytes) -> ExtensionBinary:
    """Read one extension's bytes; raises :class:`BinaryError` for a broken ELF, PE or fatbin.

    >>> read_extension("x/y.so", b"plain text").format
    'unknown'
    """
    native = b"-march=native" in data or b"-mcpu=native" in data
    try:
        needs = version_needs(data)
        image = read_pe(data) if needs is None else None
        gpu = gpu_code(data)
    except (ElfError, PeError, FatbinError) as exc:
        raise BinaryError(f"{member}: {exc}") from None
    if needs is not None:
        return ExtensionBinary(
            member=member,
            format="elf",
            size=len(data),
            machine=elf_machine(data) or "",
            gpu=gpu,
            version_needs=needs,
            records_native=native,
        )
    if image is not None:
        return ExtensionBinary(
            member=member,
            format="pe",
            size=len(data),
            machine=image.machine_name,
            gpu=gpu,
            dll_imports=image.imports,
            delay_imports=image.delay_imports,
            records_native=native,
        )
    return ExtensionBinary(member=member, format="unknown", size=len(data), records_native=native)
