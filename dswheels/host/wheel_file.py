"""Read a wheel file: the one reader of its names, METADATA, DeepSpeed's build info, sources and binaries.

Build post-processing, verify, inspect, smoke, index and publish all read wheels here; what the
bytes mean is :mod:`dswheels.kernel.wheel_contents`'s to say. Whatever can be wrong with the file (it
is missing, not a zip, damaged, lacks a member DeepSpeed writes, its METADATA is unreadable, or
a member would inflate past its bound) becomes the caller's error type with one wording: ``BuildError`` on the
builder, ``VerifyError`` in verify, ``ConfigError`` for a path a user gave ``inspect``,
``PublishError`` when publishing.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from dswheels.host.files import NotRegularFileError, open_regular
from dswheels.kernel.errors import DswheelsError
from dswheels.kernel.isa_variants import DISPATCH_MODULE, VariantTable, parse_variant_table, shim_path
from dswheels.kernel.naming import PublishedWheel
from dswheels.kernel.wheel_admission import admission_problems
from dswheels.kernel.wheel_contents import (
    EXTENSION_SUFFIXES,
    INSTALLED_INFO,
    OP_BUILDER_DIR,
    InstalledInfo,
    Metadata,
    WheelContentError,
    dist_info_dir,
    parse_installed_info,
    parse_metadata,
)

__all__ = [
    "MAX_EXTENSION_BYTES",
    "MAX_INSTALLED_INFO_BYTES",
    "MAX_MEMBERS_READ",
    "MAX_METADATA_BYTES",
    "MAX_SOURCES_BYTES",
    "MAX_SOURCE_BYTES",
    "WheelContents",
    "WheelMembers",
    "read_admitted",
    "read_member",
    "read_wheel",
]

# What a member may inflate to, each far above what DeepSpeed writes: a zip states each member's
# size and may lie (a 3 MB wheel can inflate to gigabytes), so both the stated size and the
# bytes actually inflated are held to these before they are read into memory.
MAX_METADATA_BYTES = 8 * 1024**2  # DeepSpeed's METADATA is ~20 KB
MAX_INSTALLED_INFO_BYTES = 1024**2  # git_version_info_installed.py is ~1 KB
MAX_SOURCE_BYTES = 1024**2  # an op builder's source: op_builder/builder.py, the largest, is ~40 KB
MAX_SOURCES_BYTES = 64 * 1024**2  # all of op_builder/ (0.19.8: 58 files, ~400 KB)
# An op's extension: a full CUDA build's are tens of MB (fused_adam for eight archs ~10 MB, the
# inference and CUTLASS ops a few hundred at most); one is in memory at a time.
MAX_EXTENSION_BYTES = 1024**3
MAX_MEMBERS_READ = 1000  # extensions or builder sources of one wheel (0.19.8: 31 ops, 58 builder files)
_HINT = "the file is damaged or not a wheel: build or download it again"


def _limit_words(limit: int) -> str:
    """``8 MiB``, ``1 GiB``: the bounds above, which are whole MiB."""
    return f"{limit >> 30} GiB" if limit >= 1024**3 and not limit % 1024**3 else f"{limit >> 20} MiB"


def read_member(archive: zipfile.ZipFile, member: str, limit: int) -> bytes:
    """``member``'s bytes, at most ``limit`` of them: WheelContentError for a member whose stated
    size is larger, or that inflates to more than its stated size says (zipfile stops at the
    stated size and then finds the CRC wrong; this does not rely on that)."""
    info = archive.getinfo(member)
    if info.file_size > limit:
        msg = (
            f"its {member} would inflate to {info.file_size:,} bytes, more than the {_limit_words(limit)} "
            "dswheels reads of such a member (a zip bomb, or not a DeepSpeed wheel)"
        )
        raise WheelContentError(msg)
    with archive.open(info) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        msg = f"its {member} inflates to more than {_limit_words(limit)} (its stated size is {info.file_size:,} bytes)"
        raise WheelContentError(msg)
    return data


def _identity(stat: os.stat_result) -> tuple[int, int, int, int]:
    """What tells one file's bytes from another's without reading them: the members are read later
    than the wheel was hashed, and must come from the same file."""
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


_READ_ERRORS = (OSError, zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, zlib.error, NotImplementedError)


class WheelMembers(Mapping[str, bytes]):
    """Some members of a wheel, read when asked for, each bounded (:func:`read_member`), and none
    kept: a wheel's extensions together may be far larger than memory, one at a time is not.
    A member that cannot be read raises the reader's ``error``."""

    def __init__(self, path: Path, names: tuple[str, ...], *, limit: int, error: type[DswheelsError]) -> None:
        self._path, self._names, self._limit, self._error = path, names, limit, error
        self._identity = _identity(path.stat())

    def __getitem__(self, member: str) -> bytes:
        if member not in self._names:
            raise KeyError(member)
        try:
            with self._path.open("rb") as handle, zipfile.ZipFile(handle) as archive:
                changed = _identity(os.fstat(handle.fileno())) != self._identity
                data = b"" if changed else read_member(archive, member, self._limit)
        except (*_READ_ERRORS, WheelContentError, KeyError) as exc:
            raise self._error(f"{self._path.name}: {exc}", hint=_HINT) from None
        if changed:
            raise self._error(f"{self._path.name} changed while it was being read", hint="read it again")
        return data

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


@dataclass(frozen=True, kw_only=True, slots=True)
class WheelContents:
    """What a wheel holds, as far as dswheels reads it."""

    path: Path
    names: tuple[str, ...]
    metadata_bytes: bytes  # .dist-info/METADATA byte for byte (an index serves it as <wheel>.metadata)
    metadata: Metadata
    installed_text: str | None  # deepspeed/git_version_info_installed.py (None: the wheel has none)
    sha256: str
    size: int
    wheel_file: str | None = None  # .dist-info/WHEEL (None: absent)
    entry_points: str | None = None  # .dist-info/entry_points.txt (None: absent)
    builder_sources: Mapping[str, str] = field(default_factory=dict)  # deepspeed/ops/op_builder/**.py, if asked
    extensions: Mapping[str, bytes] = field(default_factory=dict)  # every .so/.pyd, if asked: read when used
    # the ISA variants' dispatch (deepspeed/dswheels_isa.py) and the module of each op it names ({}: none)
    isa_sources: Mapping[str, str] = field(default_factory=dict)

    @property
    def variants(self) -> VariantTable:
        """The ops built once per ISA level, as the wheel's dispatch module says (empty: none);
        WheelContentError when it is unreadable."""
        text = self.isa_sources.get(DISPATCH_MODULE)
        if text is None:
            return VariantTable()
        try:
            return parse_variant_table(text)
        except ValueError as exc:
            raise WheelContentError(str(exc)) from None

    @property
    def installed(self) -> InstalledInfo:
        """DeepSpeed's build info; WheelContentError when the wheel has none or it is unreadable."""
        if self.installed_text is None:
            msg = f"no {INSTALLED_INFO}: not a wheel built by DeepSpeed's setup.py"
            raise WheelContentError(msg)
        return parse_installed_info(self.installed_text)


def _metadata(archive: zipfile.ZipFile, names: tuple[str, ...], file: str = "METADATA") -> bytes:
    member = f"{dist_info_dir(names)}/{file}"
    if member not in names:
        raise KeyError(member)
    return read_member(archive, member, MAX_METADATA_BYTES)


def _sources(archive: zipfile.ZipFile, names: tuple[str, ...]) -> dict[str, str]:
    """The op builders' sources, each and all together bounded."""
    wanted = [n for n in names if n.startswith(OP_BUILDER_DIR) and n.endswith(".py")]
    _at_most(wanted, "op builder sources")
    total = sum(archive.getinfo(n).file_size for n in wanted)
    if total > MAX_SOURCES_BYTES:
        msg = f"its op builder sources would inflate to {total:,} bytes, more than {_limit_words(MAX_SOURCES_BYTES)}"
        raise WheelContentError(msg)
    return {n: read_member(archive, n, MAX_SOURCE_BYTES).decode("utf-8", "replace") for n in wanted}


def _isa_sources(archive: zipfile.ZipFile, names: tuple[str, ...]) -> dict[str, str]:
    """The ISA variants' dispatch module and the module of every op it names that the wheel has, bounded."""
    if DISPATCH_MODULE not in names:
        return {}
    sources = {DISPATCH_MODULE: read_member(archive, DISPATCH_MODULE, MAX_SOURCE_BYTES).decode("utf-8", "replace")}
    try:
        ops = parse_variant_table(sources[DISPATCH_MODULE]).ops
    except ValueError:  # unreadable: WheelContents.variants says why
        return sources
    shims = [shim_path(module) for module in ops.values() if shim_path(module) in names]
    _at_most(shims, "ISA-variant op modules")
    sources.update({n: read_member(archive, n, MAX_SOURCE_BYTES).decode("utf-8", "replace") for n in shims})
    return sources


def _at_most(members: list[str], what: str) -> None:
    if len(members) > MAX_MEMBERS_READ:
        msg = f"it has {len(members)} {what}, more than the {MAX_MEMBERS_READ} dswheels reads (DeepSpeed has tens)"
        raise WheelContentError(msg)


def _digest(fh: BinaryIO) -> tuple[str, int]:
    """The sha256 and size of the open wheel: the very bytes its members were read from."""
    fh.seek(0)
    digest = hashlib.sha256()
    size = 0
    while chunk := fh.read(1 << 20):
        digest.update(chunk)
        size += len(chunk)
    return digest.hexdigest(), size


def _optional(archive: zipfile.ZipFile, names: tuple[str, ...], file: str) -> str | None:
    """A small .dist-info file's text (WHEEL, entry_points.txt); None when the wheel has none."""
    try:
        return _metadata(archive, names, file).decode("utf-8", "replace")
    except KeyError:
        return None


def read_wheel(
    path: Path,
    *,
    error: type[DswheelsError],
    built_by_deepspeed: bool = True,
    builders: bool = False,
    extensions: bool = False,
    follow_symlinks: bool = True,
) -> WheelContents:
    """Read ``path``. ``built_by_deepspeed``: it must have DeepSpeed's build info (every reader but the
    index's, which lists any dswheels-named wheel); ``builders``: also read the op builders' sources;
    ``extensions``: every extension's bytes. Only a regular file is read (a FIFO or a device is
    refused without blocking); ``follow_symlinks=False``: nor through a link (a published wheel)."""
    try:
        with open_regular(path, follow_symlinks=follow_symlinks) as fh, zipfile.ZipFile(fh) as archive:
            names = tuple(archive.namelist())
            metadata = _metadata(archive, names)
            wheel_file = _optional(archive, names, "WHEEL")
            entry_points = _optional(archive, names, "entry_points.txt")
            installed = (
                read_member(archive, INSTALLED_INFO, MAX_INSTALLED_INFO_BYTES).decode("utf-8", "replace")
                if INSTALLED_INFO in names
                else None
            )
            sources = _sources(archive, names) if builders else {}
            isa_sources = _isa_sources(archive, names)
            members = [n for n in names if n.endswith(EXTENSION_SUFFIXES)] if extensions else []
            _at_most(members, "extension files")
            binaries = WheelMembers(path, tuple(members), limit=MAX_EXTENSION_BYTES, error=error)
            digest, size = _digest(fh)
        parsed = parse_metadata(metadata)
    except FileNotFoundError:
        raise error(f"no such wheel: {path}") from None
    except NotRegularFileError as exc:
        raise error(str(exc), hint="give the wheel file itself") from None
    except KeyError as exc:
        raise error(f"{path.name} lacks {exc.args[0]}: not a DeepSpeed wheel", hint=_HINT) from None
    except _READ_ERRORS as exc:
        raise error(f"{path.name}: {exc}", hint=_HINT) from None
    except (WheelContentError, ValueError) as exc:  # ValueError: METADATA without Name or Version
        raise error(f"{path.name}: {exc}", hint=_HINT) from None
    if built_by_deepspeed and installed is None:
        raise error(f"{path.name} has no {INSTALLED_INFO}: not a wheel built by DeepSpeed's setup.py", hint=_HINT)
    return WheelContents(
        path=path,
        names=names,
        metadata_bytes=metadata,
        metadata=parsed,
        installed_text=installed,
        sha256=digest,
        size=size,
        wheel_file=wheel_file,
        entry_points=entry_points,
        builder_sources=sources,
        extensions=binaries,
        isa_sources=isa_sources,
    )


def read_admitted(
    path: Path, wheel: PublishedWheel, *, error: type[DswheelsError], hint: str, follow_symlinks: bool = True
) -> WheelContents:
    """Read ``path`` and judge it the wheel ``wheel`` names (:mod:`dswheels.kernel.wheel_admission`):
    what ``publish``, ``index`` and ``install`` let through. ``error`` lists every problem."""
    contents = read_wheel(path, error=error, built_by_deepspeed=False, follow_symlinks=follow_symlinks)
    problems = admission_problems(
        wheel,
        names=contents.names,
        metadata=contents.metadata,
        wheel_file=contents.wheel_file,
        entry_points=contents.entry_points,
    )
    if problems:
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        raise error(f"{path.name}: {problems[0]}{more}", details="\n".join(problems), hint=hint)
    return contents
