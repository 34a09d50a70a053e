"""After ``python -m build``: strip, prove the CPU baseline, read the runtime needs, pin torch, repack.

The wheel is rewritten member by member into a staging file; nothing is written where a
later step would publish it until the whole wheel checks out (see :mod:`dswheels.building.effects.cell`).
"""

from __future__ import annotations

import io
import tarfile
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dswheels.host import proc
from dswheels.host.extensions import read_extension_binary
from dswheels.host.files import temp_file
from dswheels.host.wheelhouse import debug_archive_name
from dswheels.kernel.binaries.extension import ExtensionBinary
from dswheels.kernel.binaries.fatbin import GpuCode
from dswheels.kernel.binaries.isa import IsaReport
from dswheels.kernel.errors import BuildError
from dswheels.kernel.versions import VersionTuple
from dswheels.kernel.wheel_contents import EXTENSION_SUFFIXES, dist_info_dir, pin_requirement, render_record, torch_pin

__all__ = ["Postprocessed", "postprocess_wheel"]


@dataclass(frozen=True, slots=True)
class Postprocessed:
    wheel: Path
    sizes: Mapping[str, int]  # extension member -> size after stripping
    isa: Mapping[str, IsaReport]  # extension member -> scan (where objdump is on PATH: ELF and PE)
    gpu: Mapping[str, GpuCode]  # extension member -> its SASS/PTX architectures (CUDA extensions)
    needs: Mapping[str, Mapping[str, tuple[str, ...]]]  # ELF extension member -> library -> symbol versions
    debug_archive: Path | None
    stripped_bytes: int  # how much stripping saved
    binaries: Mapping[str, ExtensionBinary]  # extension member -> all of the above, and a PE's DLL imports


def _strip(data: bytes, name: str, *, tmp: Path, keep_debug: bool, log_file: Path | None) -> tuple[bytes, bytes | None]:
    """Strip an ELF extension; with ``keep_debug`` also return its debug info (linked by debuglink)."""
    so = tmp / Path(name).name
    so.write_bytes(data)
    debug: bytes | None = None
    if keep_debug:
        dbg = so.with_name(so.name + ".debug")
        proc.run(
            ["objcopy", "--only-keep-debug", so, dbg],
            log_file=log_file,
            stream=False,
            echo=False,
            error=BuildError,
            what="objcopy --only-keep-debug",
        )
        debug = dbg.read_bytes()
    proc.run(
        ["strip", "--strip-unneeded", so], log_file=log_file, stream=False, echo=False, error=BuildError, what="strip"
    )
    if keep_debug:
        proc.run(
            ["objcopy", f"--add-gnu-debuglink={so.name}.debug", so.name],
            cwd=tmp,
            log_file=log_file,
            stream=False,
            echo=False,
            error=BuildError,
            what="objcopy --add-gnu-debuglink",
        )
    return so.read_bytes(), debug


@dataclass
class _Extensions:
    """What rewriting the extensions found: member name -> size after stripping, binary, debug info."""

    sizes: dict[str, int] = field(default_factory=dict)
    binaries: dict[str, ExtensionBinary] = field(default_factory=dict)
    debug_files: dict[str, bytes] = field(default_factory=dict)  # <member>.debug -> its debug info
    saved: int = 0  # bytes stripping saved


@dataclass(frozen=True, kw_only=True, slots=True)
class _Tools:
    strip: bool  # strip ELF extensions (Linux wheels)
    keep_debug: bool  # and keep their debug info in a separate archive
    objdump: str | None  # reads ELF and PE: the CPU baseline scan
    forbidden_registers: Sequence[str]
    variant_registers: Mapping[str, Sequence[str]]  # an ISA variant's extension -> its level's forbidden registers
    forbidden_features: Sequence[str]  # the AArch64 baseline's (read from the ELF, no tool)
    log_file: Path | None


def postprocess_wheel(
    wheel: Path,
    *,
    staging: Path,
    torch: VersionTuple,
    strip: bool,  # strip the extensions' symbols (the platform module decides: ELF, on Linux)
    keep_debug: bool,
    forbidden_registers: Sequence[str],
    log_file: Path | None,
    variant_registers: Mapping[str, Sequence[str]] | None = None,
    forbidden_features: Sequence[str] = (),
) -> Postprocessed:
    """Write the finished wheel (same filename) into ``staging``; each extension's code is scanned against the
    baseline's ``forbidden_registers``, an ISA variant's against its own level's (``variant_registers``)."""
    staging.mkdir(parents=True, exist_ok=True)
    out = staging / wheel.name
    can_strip = strip and proc.find_tool("strip") is not None and proc.find_tool("objcopy") is not None
    if strip and not can_strip:
        raise BuildError("strip/objcopy (binutils) are needed to post-process Linux wheels", hint="install binutils")
    tools = _Tools(
        strip=can_strip,
        keep_debug=keep_debug,
        objdump=proc.find_tool("objdump"),  # reads ELF and PE: Windows extensions are scanned too
        forbidden_registers=forbidden_registers,
        variant_registers=variant_registers or {},
        forbidden_features=forbidden_features,
        log_file=log_file,
    )
    found = _Extensions()
    with tempfile.TemporaryDirectory(prefix="dsw-pp-") as tmp_name, zipfile.ZipFile(wheel) as src:
        tmp = Path(tmp_name)
        dist_info = dist_info_dir(src.namelist())
        record_path = f"{dist_info}/RECORD"
        members: list[tuple[zipfile.ZipInfo, bytes]] = []
        for info in src.infolist():
            if info.filename == record_path:
                continue
            data = src.read(info)
            if info.filename.endswith(EXTENSION_SUFFIXES):
                data = _extension(info.filename, data, tmp=tmp, tools=tools, found=found)
            elif info.filename == f"{dist_info}/METADATA":
                text = data.decode("utf-8")
                data = pin_requirement(text, project="torch", requirement=torch_pin(torch)).encode("utf-8")
            members.append((info, data))
        # repacked beside ``out``, then renamed over it: the temporary folder may be another mount (a build in
        # the arm64 root has its /tmp in the root and the cache bound in, and rename(2) cannot cross mounts)
        with temp_file(out.parent, out.name) as repacked:
            _repack(repacked, members, record_path=record_path)
            repacked.replace(out)
        debug_archive = _debug_archive(staging / debug_archive_name(wheel.name), found.debug_files)
    binaries = found.binaries
    return Postprocessed(
        wheel=out,
        sizes=found.sizes,
        isa={name: b.isa for name, b in binaries.items() if b.isa is not None},
        gpu={name: b.gpu for name, b in binaries.items() if b.gpu is not None},
        needs={name: dict(b.version_needs) for name, b in binaries.items() if b.format == "elf"},
        debug_archive=debug_archive,
        stripped_bytes=found.saved,
        binaries=binaries,
    )


def _extension(name: str, data: bytes, *, tmp: Path, tools: _Tools, found: _Extensions) -> bytes:
    """An extension member: stripped (its debug info kept aside) and read; returns its new bytes."""
    if tools.strip:
        stripped, debug = _strip(data, name, tmp=tmp, keep_debug=tools.keep_debug, log_file=tools.log_file)
        found.saved += len(data) - len(stripped)
        data = stripped
        if debug is not None:
            found.debug_files[name + ".debug"] = debug
    found.sizes[name] = len(data)
    found.binaries[name] = read_extension_binary(
        name,
        data,
        tmp=tmp,
        forbidden_registers=tools.variant_registers.get(name, tools.forbidden_registers),
        objdump=tools.objdump,
        error=BuildError,
        forbidden_features=tools.forbidden_features,
    )
    return data


def _repack(target: Path, members: Sequence[tuple[zipfile.ZipInfo, bytes]], *, record_path: str) -> None:
    """Write the wheel's members, then a RECORD with every member's new hash and size."""
    record = render_record(((i.filename, d) for i, d in members), record_path=record_path).encode("utf-8")
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as dst:
        for info, data in members:
            _write_member(dst, info, data)
        record_info = zipfile.ZipInfo(
            record_path, date_time=members[-1][0].date_time if members else (1980, 1, 1, 0, 0, 0)
        )
        record_info.external_attr = 0o644 << 16
        _write_member(dst, record_info, record)


def _debug_archive(archive: Path, debug_files: Mapping[str, bytes]) -> Path | None:
    """The extensions' debug info as ``archive`` (a .tar.gz); None when there is none."""
    if not debug_files:
        return None
    with tarfile.open(archive, "w:gz") as tar:
        for member_name, data in sorted(debug_files.items()):
            entry = tarfile.TarInfo(member_name)
            entry.size = len(data)
            entry.mode = 0o644
            tar.addfile(entry, io.BytesIO(data))
    return archive


def _write_member(dst: zipfile.ZipFile, info: zipfile.ZipInfo, data: bytes) -> None:
    new = zipfile.ZipInfo(info.filename, date_time=info.date_time)
    new.external_attr = info.external_attr
    new.compress_type = zipfile.ZIP_DEFLATED
    new.create_system = info.create_system
    dst.writestr(new, data)
