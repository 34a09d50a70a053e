"""Read a wheel file: the one reader of its names, METADATA, DeepSpeed's build info, sources and binaries.

Build post-processing, verify, inspect, smoke, index and publish all read wheels here; what the
bytes mean is :mod:`dswheels.core.wheel.contents`'s to say. Whatever can be wrong with the file (it
is missing, not a zip, damaged, lacks a member DeepSpeed writes, or its METADATA is unreadable
or absurdly large) becomes the caller's error type with one wording: ``BuildError`` on the
builder, ``VerifyError`` in verify, ``ConfigError`` for a path a user gave ``inspect``,
``PublishError`` when publishing.
"""

from __future__ import annotations

import hashlib
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from dswheels.core.naming import PublishedWheel
from dswheels.core.wheel.admission import admission_problems
from dswheels.core.wheel.contents import (
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
from dswheels.effects.files import NotRegularFileError, open_regular
from dswheels.errors import DswheelsError

__all__ = ["MAX_METADATA_BYTES", "WheelContents", "read_admitted", "read_wheel"]

MAX_METADATA_BYTES = 8 * 1024**2  # DeepSpeed's METADATA is ~20 KB
_HINT = "the file is damaged or not a wheel: build or download it again"


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
    extensions: Mapping[str, bytes] = field(default_factory=dict)  # every .so/.pyd, if asked

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
    if archive.getinfo(member).file_size > MAX_METADATA_BYTES:
        msg = f"its {member} is larger than {MAX_METADATA_BYTES >> 20} MiB"
        raise WheelContentError(msg)
    return archive.read(member)


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
            installed = archive.read(INSTALLED_INFO).decode("utf-8", "replace") if INSTALLED_INFO in names else None
            sources = {
                n: archive.read(n).decode("utf-8", "replace")
                for n in names
                if builders and n.startswith(OP_BUILDER_DIR) and n.endswith(".py")
            }
            binaries = {n: archive.read(n) for n in names if extensions and n.endswith(EXTENSION_SUFFIXES)}
            digest, size = _digest(fh)
        parsed = parse_metadata(metadata)
    except FileNotFoundError:
        raise error(f"no such wheel: {path}") from None
    except NotRegularFileError as exc:
        raise error(str(exc), hint="give the wheel file itself") from None
    except KeyError as exc:
        raise error(f"{path.name} lacks {exc.args[0]}: not a DeepSpeed wheel", hint=_HINT) from None
    except (OSError, zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, zlib.error, NotImplementedError) as exc:
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
    )


def read_admitted(
    path: Path, wheel: PublishedWheel, *, error: type[DswheelsError], hint: str, follow_symlinks: bool = True
) -> WheelContents:
    """Read ``path`` and judge it the wheel ``wheel`` names (:mod:`dswheels.core.wheel.admission`):
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
