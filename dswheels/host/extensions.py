"""Read every extension of a wheel, ELF or PE, into :class:`~dswheels.kernel.binaries.extension.ExtensionBinary`.

The bytes are read in :mod:`dswheels.kernel.binaries.extension`; what needs a tool happens here: the
CPU instruction level of x86-64 code comes from binutils' ``objdump -d``, which disassembles ELF and PE
(``pei-x86-64``) alike, so Linux and Windows extensions are judged by the same scan
(:mod:`dswheels.kernel.binaries.isa`). Without objdump the ISA is left out (``isa is None``) and the
caller decides whether that is acceptable. AArch64 code needs no tool: its fixed-width words are read
from the ELF file itself (:mod:`dswheels.kernel.binaries.a64`), on any machine.

Build post-processing, ``verify`` and ``inspect`` all call :func:`read_extensions` (or
:func:`read_extension_binary` for one file they already hold on disk).
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from dswheels.host import proc
from dswheels.kernel.binaries.a64 import A64Error, scan_a64
from dswheels.kernel.binaries.extension import BinaryError, ExtensionBinary, read_extension
from dswheels.kernel.binaries.isa import IsaReport, IsaScan
from dswheels.kernel.errors import DswheelsError

__all__ = ["disassemble", "read_extension_binary", "read_extensions"]


def disassemble(
    path: Path, *, objdump: str, forbidden_registers: Sequence[str], error: type[DswheelsError]
) -> IsaReport:
    """``objdump -d`` of one extension file, scanned line by line (the text is never held: an
    extension of a few hundred MB disassembles to gigabytes) against the baseline's forbidden registers."""
    scan = IsaScan(forbidden_registers)
    proc.run(
        [objdump, "-d", path],  # with each instruction's bytes: its encoding (VEX, EVEX) is judged too
        echo=False,
        stream=False,
        heartbeat=None,
        error=error,
        what=f"objdump -d {path.name}",
        on_line=scan.feed,
    )
    return scan.report()


def read_extension_binary(
    member: str,
    data: bytes,
    *,
    tmp: Path,
    forbidden_registers: Sequence[str] | None,
    objdump: str | None,
    error: type[DswheelsError],
    forbidden_features: Sequence[str] | None = None,
) -> ExtensionBinary:
    """One extension: its format, GPU code, runtime needs, and (with a baseline: objdump for x86-64, nothing for
    AArch64) its ISA scan."""
    try:
        binary = read_extension(member, data)
    except BinaryError as exc:
        raise error(f"cannot read the extension {exc}") from None
    if binary.machine == "aarch64":
        if forbidden_features is None:
            return binary
        try:
            return binary.with_isa(scan_a64(data, forbidden_features))
        except A64Error as exc:
            raise error(f"cannot read the extension {member}: {exc}") from None
    if objdump is None or forbidden_registers is None or binary.format == "unknown":
        return binary
    path = tmp / ("scan-" + binary.name)
    path.write_bytes(data)
    try:
        return binary.with_isa(disassemble(path, objdump=objdump, forbidden_registers=forbidden_registers, error=error))
    finally:
        path.unlink()


def read_extensions(
    extensions: Mapping[str, bytes],
    *,
    forbidden_registers: Sequence[str] | None,
    error: type[DswheelsError],
    variant_registers: Mapping[str, Sequence[str]] | None = None,
    forbidden_features: Sequence[str] | None = None,
) -> dict[str, ExtensionBinary]:
    """Every extension (member name -> bytes), in name order; an x86-64 one's ISA only where objdump is on PATH,
    scanned against ``forbidden_registers`` or, an ISA variant's (``variant_registers``), against its own level's;
    an AArch64 one's against ``forbidden_features`` (None: not scanned)."""
    levels = variant_registers or {}
    objdump = proc.find_tool("objdump")
    with tempfile.TemporaryDirectory(prefix="dsw-bin-") as tmp:
        return {
            member: read_extension_binary(
                member,
                data,
                tmp=Path(tmp),
                forbidden_registers=levels.get(member, forbidden_registers),
                objdump=objdump,
                error=error,
                forbidden_features=forbidden_features,
            )
            for member, data in sorted(extensions.items())
        }
