"""Which C/C++ runtime a Linux extension needs: the symbol versions it asks of glibc and libstdc++.

An ELF shared object lists, for each library it links (``DT_NEEDED``), the symbol versions it
requires: the ``.gnu.version_r`` section (``SHT_GNU_verneed``), a chain of ``Elf64_Verneed``
records (one per library) each with a chain of ``Elf64_Vernaux`` records (one per version
name), names in the string table the section links to. The dynamic loader refuses a library
that lacks one of them (``version `GLIBCXX_3.4.32' not found``), so the highest
``GLIBC_x.y``, ``GLIBCXX_3.4.n`` and ``CXXABI_1.3.n`` over every extension of a wheel is the
wheel's *floor*: the oldest glibc and libstdc++ it can load with. torch's own libraries are
separate ``DT_NEEDED`` entries that carry no such versions; nothing is left out.

This reads the bytes directly (like :mod:`dswheels.kernel.binaries.fatbin`): no binutils, no
subprocess, so it runs wherever ``dswheels verify`` runs, Windows included. The format is the
GNU symbol-versioning extension of the System V ABI (the ``readelf --version-info`` view);
the integration tests compare this reader with ``readelf`` on real builds.
"""

from __future__ import annotations

import contextlib
import re
import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from dswheels.kernel.versions import VersionTuple, format_version, parse_version

__all__ = [
    "FAMILIES",
    "ElfError",
    "LibstdcxxRelease",
    "PublishedRuntime",
    "RuntimeFloor",
    "RuntimeJudgement",
    "defined_maximum",
    "exceeds",
    "floor_of",
    "gcc_providing",
    "judge_runtime",
    "version_defs",
    "version_needs",
]

SHT_GNU_VERNEED = 0x6FFFFFFE
SHT_GNU_VERDEF = 0x6FFFFFFD
VER_FLG_BASE = 0x1
_SHDR = struct.Struct("<IIQQQQIIQQ")  # Elf64_Shdr
_VERNEED = struct.Struct("<HHIII")  # vn_version, vn_cnt, vn_file, vn_aux, vn_next
_VERNAUX = struct.Struct("<IHHII")  # vna_hash, vna_flags, vna_other, vna_name, vna_next
_VERDEF = struct.Struct("<HHHHIII")  # vd_version, vd_flags, vd_ndx, vd_cnt, vd_hash, vd_aux, vd_next
_VERDAUX = struct.Struct("<II")  # vda_name, vda_next

# version-name prefix -> the floor's field (and how people write it)
FAMILIES = {"GLIBC": "glibc", "GLIBCXX": "glibcxx", "CXXABI": "cxxabi"}
_NAME_RE = re.compile(r"^(GLIBC|GLIBCXX|CXXABI)_([0-9]+(?:\.[0-9]+)*)$")


class ElfError(ValueError):
    """Bytes that claim to be an ELF shared object but cannot be read as one."""


# A soname is a file name (at most 255 bytes, NAME_MAX) and version names are shorter: a longer
# "name" is a broken file, and the bound keeps what a hostile file yields proportional to it.
_MAX_NAME = 255
# The .gnu.version index of a version is an Elf_Half (the top bit marks a hidden symbol), so no
# object has more version records than this; the bound holds even where records would fit.
_MAX_RECORDS = 0x10000


def _cstr(data: bytes, offset: int) -> str:
    end = data.find(b"\0", offset, offset + _MAX_NAME + 1)
    if end < 0:
        if offset + _MAX_NAME + 1 < len(data):
            raise ElfError(f"the name at {offset:#x} is longer than {_MAX_NAME} bytes (no soname or version is)")
        raise ElfError(f"string at {offset:#x} runs past the end of the file")
    return data[offset:end].decode("ascii", "replace")


def _section_headers(data: bytes) -> list[tuple[int, ...]] | None:
    """The section headers of an ELF64 little-endian object; ``None`` for anything else."""
    if len(data) < 64 or data[:4] != b"\x7fELF":
        return None
    if data[4] != 2 or data[5] != 1:  # ELFCLASS64, ELFDATA2LSB
        return None
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    if shoff == 0 or shnum == 0:
        raise ElfError("no section headers (the symbol versions cannot be found)")
    if shentsize < _SHDR.size or shoff + shnum * shentsize > len(data):
        raise ElfError("section headers run past the end of the file")
    return [_SHDR.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]


class _Records:
    """The records read from one version section: each may be read once and none may overlap
    another (a linker lays them out one after the other), so a walk over links that point back or
    into each other is refused, not repeated: the work is linear in the section's size.

    One exception, which real files have: the verdefs of a library's soname and of its one
    version may share their name record (libjansson.so.4). A verdef reads one name record, so
    those are only kept inside the section (:meth:`inside`), never claimed.
    """

    def __init__(self, start: int, size: int, where: str) -> None:
        self._start, self._end, self._where = start, start + size, where
        self._used = bytearray(size)
        self._count = 0

    def inside(self, at: int, size: int, what: str) -> None:
        if at + size > self._end:
            raise ElfError(f"{self._where} {what} runs past its section")

    def claim(self, at: int, size: int, what: str) -> None:
        self.inside(at, size, what)
        lo, hi = at - self._start, at - self._start + size
        if self._used.find(1, lo, hi) >= 0:
            raise ElfError(
                f"{self._where} is malformed: the {what} at {at:#x} overlaps a record already read "
                "(its links point back or into each other)"
            )
        self._used[lo:hi] = b"\x01" * size
        self._count += 1
        if self._count > _MAX_RECORDS:
            raise ElfError(f"{self._where} is malformed: more than {_MAX_RECORDS} version records")


def _chain(
    data: bytes, headers: list[tuple[int, ...]], sh_type: int, record: struct.Struct, where: str
) -> Iterator[tuple[int, tuple[int, ...], int, _Records]]:
    """Every record of the ``sh_type`` section (``.gnu.version_r``/``_d``): its offset, its fields, the
    string table's offset and the records read so far (to claim the auxiliary records with). The
    records chain by their last field (the offset to the next; 0 ends the chain), at most the
    section's ``sh_info`` of them. An object has one such section: a second is refused (it could
    make the same bytes be read again)."""
    sections = [h for h in headers if h[1] == sh_type]
    if len(sections) > 1:
        raise ElfError(f"{where} is malformed: {len(sections)} sections of its type (an object has one)")
    for _name, _type, _flags, _addr, offset, size, link, count, _align, _entsize in sections:
        if link >= len(headers) or offset + size > len(data):
            raise ElfError(f"{where} points outside the file")
        strtab = headers[link][4]
        records = _Records(offset, size, where)
        entry = offset
        for _ in range(count):
            records.claim(entry, record.size, "entry")
            fields = record.unpack_from(data, entry)
            yield entry, fields, strtab, records
            if fields[-1] == 0:
                break
            entry += fields[-1]


def version_needs(data: bytes) -> dict[str, tuple[str, ...]] | None:
    """Library -> the symbol versions an ELF64 little-endian object needs from it.

    ``None`` for anything that is not such an ELF (a Windows ``.pyd``); ``{}`` for an ELF that
    needs no versioned symbol. Raises :class:`ElfError` for a truncated or inconsistent file,
    and for records that overlap or link back (each record is read at most once).

    >>> version_needs(b"MZ not an elf") is None
    True
    """
    headers = _section_headers(data)
    if headers is None:
        return None
    needs: dict[str, list[str]] = {}
    for entry, fields, strtab, records in _chain(data, headers, SHT_GNU_VERNEED, _VERNEED, ".gnu.version_r"):
        _version, cnt, file_name, aux_offset, _next = fields
        names = needs.setdefault(_cstr(data, strtab + file_name), [])
        aux = entry + aux_offset
        for _ in range(cnt):
            records.claim(aux, _VERNAUX.size, "version record")
            _hash, _vflags, _other, name, aux_next = _VERNAUX.unpack_from(data, aux)
            names.append(_cstr(data, strtab + name))
            if aux_next == 0:
                break
            aux += aux_next
    return {lib: tuple(names) for lib, names in needs.items()}


def version_defs(data: bytes) -> tuple[str, ...] | None:
    """The symbol versions an ELF64 little-endian library *defines* (its ``.gnu.version_d``).

    The section (``SHT_GNU_verdef``) is a chain of ``Elf64_Verdef`` records, one per version,
    each followed by ``Elf64_Verdaux`` records whose first names the version (the others name
    the versions it inherits from). The record flagged ``VER_FLG_BASE`` names the file itself
    (its soname) and is left out. In file order: ``GLIBCXX_3.4``, ..., ``CXXABI_1.3.15`` for a
    libstdc++. ``None`` for anything that is not such an ELF; ``()`` for one without versions.
    Raises :class:`ElfError` for a truncated or inconsistent file (overlapping records included).

    >>> version_defs(b"MZ not an elf") is None
    True
    """
    headers = _section_headers(data)
    if headers is None:
        return None
    names: list[str] = []
    for entry, fields, strtab, records in _chain(data, headers, SHT_GNU_VERDEF, _VERDEF, ".gnu.version_d"):
        _version, vd_flags, _ndx, cnt, _hash, aux_offset, _next = fields
        if cnt:
            aux = entry + aux_offset
            records.inside(aux, _VERDAUX.size, "name record")
            name, _aux_next = _VERDAUX.unpack_from(data, aux)
            if not vd_flags & VER_FLG_BASE:
                names.append(_cstr(data, strtab + name))
    return tuple(names)


def defined_maximum(names: Iterable[str]) -> RuntimeFloor:
    """The newest GLIBC, GLIBCXX and CXXABI version among the versions a library defines.

    >>> defined_maximum(["GLIBCXX_3.4", "GLIBCXX_3.4.30", "CXXABI_1.3.13", "CXXABI_TM_1", "CXXABI_FLOAT128"])
    RuntimeFloor(glibc=None, glibcxx=(3, 4, 30), cxxabi=(1, 3, 13), private=())
    """
    floor = floor_of([{"": tuple(names)}])
    return RuntimeFloor(glibc=floor.glibc, glibcxx=floor.glibcxx, cxxabi=floor.cxxabi)


@dataclass(frozen=True, slots=True)
class LibstdcxxRelease:
    """A GCC release and the newest symbol versions its libstdc++.so.6 defines (compat.yml)."""

    gcc: VersionTuple
    glibcxx: VersionTuple
    cxxabi: VersionTuple


def _floor_version(family: str, text: object) -> VersionTuple | None:
    if text is None or text == "":
        return None
    if isinstance(text, str):
        with contextlib.suppress(ValueError):
            return parse_version(text)
    msg = f"{family} is not a version: {text!r}"
    raise ValueError(msg)


@dataclass(frozen=True, slots=True)
class RuntimeFloor:
    """Highest version needed per family (``None``: none needed); also used for a promised maximum.

    ``private`` lists needs no other build of the library satisfies (``GLIBC_PRIVATE``).
    """

    glibc: VersionTuple | None = None
    glibcxx: VersionTuple | None = None
    cxxabi: VersionTuple | None = None
    private: tuple[str, ...] = ()

    def get(self, family: str) -> VersionTuple | None:
        value: VersionTuple | None = getattr(self, family)
        return value

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> RuntimeFloor:
        """Inverse of :meth:`as_json`; ``ValueError`` naming the family whose value is not a version.

        >>> RuntimeFloor.from_json({"glibc": "2.35", "glibcxx": "3.4.30", "cxxabi": None})
        RuntimeFloor(glibc=(2, 35), glibcxx=(3, 4, 30), cxxabi=None, private=())
        """
        values = {family: _floor_version(family, data.get(family)) for family in FAMILIES.values()}
        private = data.get("private")
        return cls(
            glibc=values["glibc"],
            glibcxx=values["glibcxx"],
            cxxabi=values["cxxabi"],
            private=tuple(p.strip() for p in private.split(",")) if isinstance(private, str) and private else (),
        )

    def as_json(self) -> dict[str, str | None]:
        """``{"glibc": "2.34", "glibcxx": "3.4.30", "cxxabi": "1.3.9"}`` (``null`` where none is needed)."""
        data: dict[str, str | None] = {
            family: (format_version(v) if (v := self.get(family)) is not None else None) for family in FAMILIES.values()
        }
        if self.private:
            data["private"] = ", ".join(self.private)
        return data

    def describe(self, libstdcxx: Sequence[LibstdcxxRelease] = ()) -> str:
        """``glibc 2.34, GLIBCXX 3.4.30 (libstdc++ of GCC >= 12.1), CXXABI 1.3.9``."""
        parts = []
        for prefix, family in FAMILIES.items():
            value = self.get(family)
            if value is None:
                continue
            text = f"{'glibc' if family == 'glibc' else prefix} {format_version(value)}"
            if family == "glibcxx" and (gcc := gcc_providing(value, libstdcxx)):
                text += f" (libstdc++ of GCC >= {gcc})"
            parts.append(text)
        parts += [f"{name} (only the exact glibc it was built with)" for name in self.private]
        return ", ".join(parts) or "no versioned glibc or libstdc++ symbol"


def gcc_providing(glibcxx: VersionTuple, libstdcxx: Sequence[LibstdcxxRelease]) -> str:
    """The first GCC release whose libstdc++ defines ``GLIBCXX_<glibcxx>`` ("" if unknown).

    >>> table = [LibstdcxxRelease((11, 1), (3, 4, 29), (1, 3, 13)), LibstdcxxRelease((12, 1), (3, 4, 30), (1, 3, 13))]
    >>> gcc_providing((3, 4, 30), table), gcc_providing((3, 4, 31), table)
    ('12.1', '')
    """
    for release in sorted(libstdcxx, key=lambda r: r.gcc):
        if release.glibcxx >= glibcxx:
            return format_version(release.gcc)
    return ""


def floor_of(needs: Iterable[Mapping[str, Sequence[str]]]) -> RuntimeFloor:
    """The highest GLIBC, GLIBCXX and CXXABI version over the version needs of some objects.

    >>> floor_of([{"libc.so.6": ("GLIBC_2.2.5", "GLIBC_2.34")}, {"libstdc++.so.6": ("GLIBCXX_3.4.9", "CXXABI_1.3")}])
    RuntimeFloor(glibc=(2, 34), glibcxx=(3, 4, 9), cxxabi=(1, 3), private=())
    """
    best: dict[str, VersionTuple] = {}
    private: set[str] = set()
    for per_lib in needs:
        for names in per_lib.values():
            for name in names:
                if name.endswith("_PRIVATE"):
                    private.add(name)
                    continue
                match = _NAME_RE.match(name)
                if match is None:  # GCC_3.0 (libgcc_s), CXXABI_FLOAT128, libraries' own versions
                    continue
                family, version = FAMILIES[match.group(1)], parse_version(match.group(2))
                if version > best.get(family, ()):
                    best[family] = version
    return RuntimeFloor(
        glibc=best.get("glibc"),
        glibcxx=best.get("glibcxx"),
        cxxabi=best.get("cxxabi"),
        private=tuple(sorted(private)),
    )


def exceeds(floor: RuntimeFloor, limit: RuntimeFloor) -> list[str]:
    """What in ``floor`` is above ``limit`` (a family the limit leaves ``None`` is unlimited).

    >>> exceeds(RuntimeFloor(glibc=(2, 38), glibcxx=(3, 4, 30)), RuntimeFloor(glibc=(2, 35), glibcxx=(3, 4, 30)))
    ['GLIBC_2.38 > 2.35']
    """
    problems = []
    for prefix, family in FAMILIES.items():
        need, most = floor.get(family), limit.get(family)
        if need is not None and most is not None and need > most:
            problems.append(f"{prefix}_{format_version(need)} > {format_version(most)}")
    problems += [f"{name} (ties the wheel to one glibc build)" for name in floor.private]
    return problems


@dataclass(frozen=True, kw_only=True, slots=True)
class RuntimeJudgement:
    """A need (a wheel's floor) against a limit (the promised maximum, or what a system defines)."""

    need: RuntimeFloor
    limit: RuntimeFloor
    problems: tuple[str, ...]  # what in the need is above the limit (:func:`exceeds`)
    unknown: tuple[str, ...]  # families the need names and the limit does not ("GLIBCXX")

    @property
    def ok(self) -> bool:
        return not self.problems


def judge_runtime(need: RuntimeFloor, limit: RuntimeFloor) -> RuntimeJudgement:
    """The one judgement of a glibc/libstdc++ need, for ``verify`` (against the promise) and ``doctor``/``install``
    (against the system): a family the limit leaves ``None`` is unlimited, and ``unknown`` says which.

    >>> j = judge_runtime(RuntimeFloor(glibc=(2, 38), glibcxx=(3, 4, 30)), RuntimeFloor(glibc=(2, 35)))
    >>> j.problems, j.unknown
    (('GLIBC_2.38 > 2.35',), ('GLIBCXX',))
    """
    unknown = tuple(
        prefix for prefix, family in FAMILIES.items() if need.get(family) is not None and limit.get(family) is None
    )
    return RuntimeJudgement(need=need, limit=limit, problems=tuple(exceeds(need, limit)), unknown=unknown)


@dataclass(frozen=True, slots=True)
class PublishedRuntime:
    """The build manifest beside a published wheel, as far as its ``runtime`` goes."""

    filename: str  # the wheel
    manifest_url: str
    runtime: RuntimeFloor | None  # None: no manifest, an unreadable one, or one from before `runtime`
    note: str = ""  # why runtime is None
