"""The PE/COFF reader (``dswheels.kernel.binaries.pe``) and the format-agnostic extension reader on real files.

``tests/data/pe/fixture.pyd`` is a real x86-64 DLL with a real fatbin in ``.nv_fatb`` (how it is
made: tests/data/pe/README.md). The reader is compared with pefile (an independent reader) and
with the fatbin file nvcc wrote; the property tests feed it random and damaged bytes.
"""

from __future__ import annotations

import struct

import pefile
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dswheels.kernel.binaries.extension import BinaryError, read_extension
from dswheels.kernel.binaries.fatbin import GpuCode, fatbin_section, gpu_code
from dswheels.kernel.binaries.pe import PeError, is_pe, read_pe
from tests.conftest import DATA

FIXTURE = (DATA / "pe" / "fixture.pyd").read_bytes()
FATBIN = (DATA / "pe" / "kernel.fatbin").read_bytes()
ELF = (DATA / "elf" / "libfixture.so").read_bytes()


def test_reads_the_fixture_as_pefile_does() -> None:
    image = read_pe(FIXTURE)
    assert image is not None
    assert image.machine_name == "x86-64"
    assert image.pe32_plus
    reference = pefile.PE(data=FIXTURE)
    assert list(image.imports) == [entry.dll.decode() for entry in reference.DIRECTORY_ENTRY_IMPORT]
    assert image.imports == ("c10.dll", "mystery.dll", "KERNEL32.dll", "msvcrt.dll")
    assert image.delay_imports == ()
    assert [s.name for s in image.sections] == [s.Name.rstrip(b"\0").decode() for s in reference.sections]


def test_the_nv_fatb_section_is_the_fatbin_nvcc_wrote() -> None:
    assert fatbin_section(FIXTURE) == FATBIN
    assert gpu_code(FIXTURE) == GpuCode(sass=(75, 80), ptx=(80,))


def test_elf_and_pe_through_one_reader() -> None:
    pe = read_extension("deepspeed/ops/x/fixture.pyd", FIXTURE)
    assert (pe.format, pe.machine, pe.gpu) == ("pe", "x86-64", GpuCode(sass=(75, 80), ptx=(80,)))
    assert pe.dll_imports[0] == "c10.dll"
    assert pe.version_needs == {}
    elf = read_extension("deepspeed/ops/x/libfixture.so", ELF)
    assert elf.format == "elf"
    assert elf.dll_imports == ()
    assert "GLIBCXX_3.4.30" in elf.version_needs["libstdc++.so.6"]
    assert read_extension("x.pyd", b"MZ" + b"\0" * 10).format == "unknown"


def test_not_pe_is_none_and_broken_pe_is_an_error() -> None:
    assert read_pe(ELF) is None
    assert not is_pe(b"")
    table = _pe_offset() + 24 + int(struct.unpack_from("<H", FIXTURE, _pe_offset() + 20)[0])
    with pytest.raises(PeError, match="section table"):
        read_pe(FIXTURE[: table + 40])
    with pytest.raises(BinaryError, match=r"^x\.pyd: the optional header"):
        read_extension("x.pyd", FIXTURE[: _pe_offset() + 40])


def _pe_offset() -> int:
    return int(struct.unpack_from("<I", FIXTURE, 0x3C)[0])


def test_a_wrong_optional_header_magic_is_named() -> None:
    data = bytearray(FIXTURE)
    struct.pack_into("<H", data, _pe_offset() + 24, 0x1234)
    with pytest.raises(PeError, match="optional header magic 0x1234"):
        read_pe(bytes(data))


def test_an_import_name_outside_the_file_is_an_error() -> None:
    image = read_pe(FIXTURE)
    assert image is not None
    data = bytearray(FIXTURE)
    opt = _pe_offset() + 24
    import_rva = struct.unpack_from("<I", data, opt + 112 + 8)[0]
    idata = next(s for s in image.sections if s.virtual_address <= import_rva < s.virtual_address + s.virtual_size)
    descriptor = idata.raw_offset + import_rva - idata.virtual_address
    struct.pack_into("<I", data, descriptor + 12, 0x7FFF_FFF0)  # Name RVA of the first DLL
    with pytest.raises(PeError, match="in no section"):
        read_pe(bytes(data))


def _read(data: bytes) -> None:
    try:
        read_extension("x.pyd", data)
    except BinaryError:
        return


@settings(max_examples=300, deadline=1000)
@given(st.binary(max_size=4096))
def test_any_bytes_give_a_result_or_a_typed_error(data: bytes) -> None:
    _read(data)
    _read(b"MZ" + data)


@settings(max_examples=300, deadline=1000)
@given(
    st.lists(st.tuples(st.integers(0, len(FIXTURE) - 1), st.integers(0, 255)), max_size=12),
    st.integers(64, len(FIXTURE)),
)
def test_damaged_fixture_gives_a_result_or_a_typed_error(patches: list[tuple[int, int]], length: int) -> None:
    """Bytes changed anywhere in a real DLL, then cut: never a traceback, never a hang."""
    data = bytearray(FIXTURE)
    for offset, value in patches:
        data[offset] = value
    _read(bytes(data[:length]))


@settings(max_examples=200, deadline=1000)
@given(st.integers(0, 0x3FF), st.integers(0, 2**32 - 1))
def test_header_fields_set_to_any_value(offset: int, value: int) -> None:
    """Every 32-bit field of the headers (e_lfanew, counts, sizes, RVAs) at any value."""
    data = bytearray(FIXTURE)
    struct.pack_into("<I", data, offset, value)
    _read(bytes(data))


def test_an_extension_that_records_march_native_says_so() -> None:
    """verify's "no -march=native" check reads it from here (each extension's bytes are read once)."""
    assert not read_extension("x.so", ELF).records_native
    assert read_extension("x.so", ELF + b"GNU C++17 -O3 -march=native\0").records_native
    assert read_extension("x.pyd", FIXTURE + b"-mcpu=native").records_native
