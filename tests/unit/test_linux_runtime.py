"""The glibc/libstdc++ floor: the ELF ``.gnu.version_r`` reader, the floor and the promise.

The reader runs on a real shared object checked in as a fixture (tests/data/elf: how it was
made, and the ``readelf --version-info`` view the expected values come from); the integration
test compares it with readelf on objects compiled at test time and on DeepSpeed extensions.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
import struct
from importlib import resources
from pathlib import Path

import pytest

from dswheels.kernel.binaries.linux_runtime import (
    SHT_GNU_VERDEF,
    SHT_GNU_VERNEED,
    ElfError,
    LibstdcxxRelease,
    RuntimeFloor,
    defined_maximum,
    exceeds,
    floor_of,
    gcc_providing,
    version_defs,
    version_needs,
)
from dswheels.kernel.compat import CompatDataError, load_compat, parse_compat
from dswheels.kernel.versions import parse_version
from tests.conftest import DATA

COMPAT = load_compat()
FIXTURE = DATA / "elf" / "libfixture.so"
FIXTURE_NEEDS = {
    "libgcc_s.so.1": ("GCC_3.0",),
    "libc.so.6": ("GLIBC_2.2.5",),
    "libstdc++.so.6": ("CXXABI_1.3", "GLIBCXX_3.4.21", "GLIBCXX_3.4", "GLIBCXX_3.4.11", "GLIBCXX_3.4.30"),
}
_SHDR = struct.Struct("<IIQQQQIIQQ")


def _fixture() -> bytearray:
    return bytearray(FIXTURE.read_bytes())


def _verneed_header(data: bytearray, sh_type: int = SHT_GNU_VERNEED) -> int:
    """The file offset of the SHT_GNU_VERNEED (or ``sh_type``) section header (to corrupt it)."""
    shoff: int = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    for i in range(shnum):
        at: int = shoff + i * shentsize
        if _SHDR.unpack_from(data, at)[1] == sh_type:
            return at
    raise AssertionError(f"the fixture has no section of type {sh_type:#x}")


# --- the reader ----------------------------------------------------------------------------------


def test_the_fixture_reads_as_readelf_shows_it() -> None:
    assert version_needs(bytes(_fixture())) == FIXTURE_NEEDS


def test_the_floor_of_the_fixture() -> None:
    floor = floor_of([FIXTURE_NEEDS])
    assert floor == RuntimeFloor(glibc=(2, 2, 5), glibcxx=(3, 4, 30), cxxabi=(1, 3))
    # GCC_3.0 is libgcc_s's own version: no family of the floor


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"MZ\x90\x00" + bytes(100),  # a Windows .pyd
        b"\x7fELF" + bytes(10),  # too short to be an ELF header
        b"\x7fELF\x01\x01" + bytes(100),  # ELFCLASS32
        b"\x7fELF\x02\x02" + bytes(100),  # big-endian
    ],
)
def test_what_is_no_elf64_le_object_gives_none(data: bytes) -> None:
    assert version_needs(data) is None


def test_an_object_without_version_needs_gives_an_empty_map() -> None:
    data = _fixture()
    struct.pack_into("<I", data, _verneed_header(data) + 4, 1)  # the section's type -> SHT_PROGBITS
    assert version_needs(bytes(data)) == {}


def test_broken_objects_raise_elf_error() -> None:
    data = _fixture()
    header = _verneed_header(data)
    with pytest.raises(ElfError, match="section headers run past the end"):
        version_needs(bytes(data[: len(data) - 10]))  # section headers are at the end of the file
    no_headers = bytearray(data)
    struct.pack_into("<Q", no_headers, 0x28, 0)
    with pytest.raises(ElfError, match="no section headers"):
        version_needs(bytes(no_headers))
    bad_link = bytearray(data)
    struct.pack_into("<I", bad_link, header + 40, 999)  # sh_link -> no such section
    with pytest.raises(ElfError, match="points outside the file"):
        version_needs(bytes(bad_link))
    bad_count = bytearray(data)
    struct.pack_into("<I", bad_count, header + 44, 9)  # sh_info: 9 entries, the section holds 3
    offset, size = _SHDR.unpack_from(data, header)[4:6]
    struct.pack_into("<I", bad_count, offset + 0x40 + 12, size - 0x40)  # the last entry's vn_next: the section's end
    with pytest.raises(ElfError, match="entry runs past its section"):
        version_needs(bytes(bad_count))
    bad_name = bytearray(data)
    struct.pack_into("<I", bad_name, offset + 4, len(data))  # vn_file of the first entry: past the end
    with pytest.raises(ElfError, match="runs past the end of the file"):
        version_needs(bytes(bad_name))


VERDEF_FIXTURE = DATA / "elf" / "libverdef.so"
# readelf --version-info libverdef.so (tests/data/elf/README.md), the BASE entry left out
VERDEF_NAMES = ("GLIBCXX_3.4", "GLIBCXX_3.4.29", "GLIBCXX_3.4.30", "CXXABI_1.3", "CXXABI_1.3.13", "CXXABI_TM_1")


def test_the_verdef_fixture_reads_as_readelf_shows_it() -> None:
    assert version_defs(VERDEF_FIXTURE.read_bytes()) == VERDEF_NAMES


def test_the_newest_defined_version_per_family() -> None:
    defined = defined_maximum(VERDEF_NAMES)
    assert defined == RuntimeFloor(glibcxx=(3, 4, 30), cxxabi=(1, 3, 13))  # CXXABI_TM_1 is no CXXABI_1.3.n
    # a wheel needing GCC 12's libstdc++ fits it, one needing GCC 13's does not
    assert exceeds(RuntimeFloor(glibcxx=(3, 4, 30), cxxabi=(1, 3, 13)), defined) == []
    assert exceeds(RuntimeFloor(glibcxx=(3, 4, 32)), defined) == ["GLIBCXX_3.4.32 > 3.4.30"]


def test_an_object_that_defines_no_versions() -> None:
    # libfixture.so only needs versions; it defines none
    assert version_defs(bytes(_fixture())) == ()
    assert defined_maximum(()) == RuntimeFloor()
    assert version_defs(b"MZ\x90\x00" + bytes(100)) is None


def test_a_broken_verdef_section_raises_elf_error() -> None:
    data = bytearray(VERDEF_FIXTURE.read_bytes())
    header = _verneed_header(data, SHT_GNU_VERDEF)
    offset, size = _SHDR.unpack_from(data, header)[4:6]
    bad_link = bytearray(data)
    struct.pack_into("<I", bad_link, header + 40, 999)
    with pytest.raises(ElfError, match=r"\.gnu\.version_d points outside the file"):
        version_defs(bytes(bad_link))
    bad_count = bytearray(data)
    struct.pack_into("<I", bad_count, header + 44, 99)  # sh_info: 99 entries, the section holds 7
    last = 0xC0  # the CXXABI_TM_1 entry (readelf's offsets): its vd_next now points past the section
    struct.pack_into("<I", bad_count, offset + last + 16, size - last)
    with pytest.raises(ElfError, match="entry runs past its section"):
        version_defs(bytes(bad_count))
    bad_aux = bytearray(data)
    struct.pack_into("<I", bad_aux, offset + 0x1C + 12, size)  # GLIBCXX_3.4's vd_aux: past the section
    with pytest.raises(ElfError, match="name record runs past its section"):
        version_defs(bytes(bad_aux))
    bad_name = bytearray(data)
    struct.pack_into("<I", bad_name, offset + 0x1C + 20, len(data))  # its vda_name: past the end of the file
    with pytest.raises(ElfError, match="runs past the end of the file"):
        version_defs(bytes(bad_name))


# --- floor, promise, words -----------------------------------------------------------------------


def test_floor_takes_the_highest_per_family_and_keeps_private_needs() -> None:
    floor = floor_of(
        [
            {"libc.so.6": ("GLIBC_2.17", "GLIBC_2.34", "GLIBC_2.2.5"), "libm.so.6": ("GLIBC_2.29",)},
            {"libstdc++.so.6": ("GLIBCXX_3.4.9", "GLIBCXX_3.4.30", "CXXABI_1.3.13", "CXXABI_FLOAT128")},
            {"libc.so.6": ("GLIBC_PRIVATE",), "libtorch.so": ()},
        ]
    )
    assert floor == RuntimeFloor(glibc=(2, 34), glibcxx=(3, 4, 30), cxxabi=(1, 3, 13), private=("GLIBC_PRIVATE",))
    assert floor_of([]) == RuntimeFloor()


def test_exceeds_names_each_family_above_the_limit() -> None:
    promise = COMPAT.linux_runtime_floor
    assert exceeds(RuntimeFloor(glibc=(2, 28), glibcxx=(3, 4, 24), cxxabi=(1, 3, 11)), promise) == []
    assert exceeds(RuntimeFloor(glibc=(2, 39), glibcxx=(3, 4, 32), cxxabi=(1, 3, 9)), promise) == [
        "GLIBC_2.39 > 2.28",
        "GLIBCXX_3.4.32 > 3.4.24",
    ]
    assert exceeds(RuntimeFloor(private=("GLIBC_PRIVATE",)), promise) == [
        "GLIBC_PRIVATE (ties the wheel to one glibc build)"
    ]
    # a family the limit leaves open is not judged
    assert exceeds(RuntimeFloor(glibc=(2, 99)), RuntimeFloor(glibcxx=(3, 4, 30))) == []


def test_words_and_json() -> None:
    floor = RuntimeFloor(glibc=(2, 34), glibcxx=(3, 4, 30), cxxabi=(1, 3, 9))
    assert floor.describe(COMPAT.libstdcxx) == "glibc 2.34, GLIBCXX 3.4.30 (libstdc++ of GCC >= 12.1), CXXABI 1.3.9"
    assert floor.as_json() == {"glibc": "2.34", "glibcxx": "3.4.30", "cxxabi": "1.3.9"}
    assert RuntimeFloor(glibc=(2, 17)).as_json() == {"glibc": "2.17", "glibcxx": None, "cxxabi": None}
    assert RuntimeFloor().describe() == "no versioned glibc or libstdc++ symbol"


def test_the_gcc_whose_libstdcxx_a_version_needs() -> None:
    assert gcc_providing((3, 4, 30), COMPAT.libstdcxx) == "12.1"
    assert gcc_providing((3, 4, 32), COMPAT.libstdcxx) == "13.2"
    assert gcc_providing((3, 4, 22), COMPAT.libstdcxx) == "6.1"
    assert gcc_providing((3, 4, 99), COMPAT.libstdcxx) == ""
    assert gcc_providing((3, 4, 29), COMPAT.libstdcxx) == "11.1"


# --- compat.yml ----------------------------------------------------------------------------------


def test_the_shipped_promise_is_auditwheels_manylinux_2_28_policy() -> None:
    """The promise in glibc/GLIBCXX/CXXABI numbers is exactly what auditwheel (the judge of the tag) allows
    for manylinux_2_28, read from the policy file of the auditwheel installed here."""
    promise = COMPAT.linux_runtime_floor
    assert COMPAT.linux_runtime_tag == "manylinux_2_28_x86_64"
    policies = json.loads((resources.files("auditwheel") / "policy" / "manylinux-policy.json").read_text())
    (policy,) = [p for p in policies if p["name"] == "manylinux_2_28"]
    newest = {
        family: max(parse_version(v) for v in versions if re.fullmatch(r"[\d.]+", v))
        for family, versions in policy["symbol_versions"]["x86_64"].items()
        if family in ("GLIBC", "GLIBCXX", "CXXABI")
    }
    assert promise == RuntimeFloor(glibc=newest["GLIBC"], glibcxx=newest["GLIBCXX"], cxxabi=newest["CXXABI"])
    assert "RHEL" in COMPAT.linux_runtime_systems
    image = COMPAT.runner_images["manylinux_2_28"]
    assert (image.glibc, image.glibcxx) == (promise.glibc, promise.glibcxx)  # the container builds at the promise
    newer = COMPAT.runner_images["ubuntu-24.04"]
    assert exceeds(RuntimeFloor(glibc=newer.glibc, glibcxx=newer.glibcxx), promise)


def test_runtime_floor_takes_cxxabi_from_the_libstdcxx_of_that_glibcxx() -> None:
    assert COMPAT.runtime_floor(glibc=(2, 31), glibcxx=(3, 4, 28)) == RuntimeFloor(
        glibc=(2, 31), glibcxx=(3, 4, 28), cxxabi=(1, 3, 12)
    )
    with pytest.raises(ValueError, match=r"GLIBCXX 3\.4\.99 is no GCC release's newest version"):
        COMPAT.runtime_floor(glibc=(2, 35), glibcxx=(3, 4, 99))


def test_gcc_min_of_torch_headers() -> None:
    assert COMPAT.gcc_min((2, 14)) == (11, COMPAT.torch_gcc_min[0][2])
    assert COMPAT.gcc_min((2, 13)) == (0, "")


def _raw_compat() -> dict[str, object]:
    import yaml

    path = Path(__file__).parents[2] / "dswheels" / "compat.yml"
    data: dict[str, object] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data


def test_compat_data_errors() -> None:
    data = _raw_compat()
    rows = data["libstdcxx_releases"]
    assert isinstance(rows, list)
    data["libstdcxx_releases"] = list(reversed(rows))
    with pytest.raises(CompatDataError, match="in GCC release order"):
        parse_compat(data)
    data = _raw_compat()
    promise = data["linux_runtime_floor"]
    assert isinstance(promise, dict)
    promise["glibcxx"] = "3.4.99"
    with pytest.raises(CompatDataError, match=r"linux_runtime_floor\.glibcxx"):
        parse_compat(data)


def test_release_table_is_monotonic() -> None:
    table: tuple[LibstdcxxRelease, ...] = COMPAT.libstdcxx
    for older, newer in itertools.pairwise(table):
        assert older.gcc < newer.gcc
        assert older.glibcxx < newer.glibcxx
        assert older.cxxabi <= newer.cxxabi
    assert dataclasses.is_dataclass(table[0])
