"""The ledger of a published directory: what `dswheels publish --dir` knew of each wheel when it
wrote it, so that listing the directory (`dswheels index`) need not read every wheel again."""

from __future__ import annotations

import hashlib
import json
import stat
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from dswheels.host.files import read_bounded, write_text_atomic
from dswheels.host.wheel_file import MAX_METADATA_BYTES
from dswheels.kernel.digests import is_sha256
from dswheels.kernel.index_links import metadata_name
from dswheels.kernel.jsondoc import parse_json
from dswheels.kernel.naming import parse_wheel
from dswheels.stores.wheel_ref import LocalWheel

__all__ = ["LEDGER", "LedgerEntry", "from_ledger", "is_regular", "load_ledger", "update_ledger"]

MAX_LEDGER_BYTES = 256 * 1024**2  # ~300 bytes per wheel

LEDGER = ".dswheels-ledger.json"
_LEDGER_SCHEMA = "dswheels.ledger/1"


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """What `dswheels publish --dir` knew of a wheel when it wrote it (published files never change)."""

    size: int
    mtime_ns: int
    sha256: str
    metadata_sha256: str
    requires_python: str | None


def load_ledger(directory: Path) -> dict[str, LedgerEntry]:
    """The ledger beside the published wheels; empty when missing or unreadable (then every wheel is read)."""
    try:  # publish writes it: a link, a FIFO or a device in its place is not it
        data = parse_json(read_bounded(directory / LEDGER, limit=MAX_LEDGER_BYTES, follow_symlinks=False), what=LEDGER)
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("schema") != _LEDGER_SCHEMA or not isinstance(data.get("files"), dict):
        return {}
    entries: dict[str, LedgerEntry] = {}
    for name, entry in data["files"].items():
        if isinstance(entry, dict) and (parsed := _ledger_entry(entry)) is not None:
            entries[str(name)] = parsed
    return entries


def _ledger_entry(entry: dict[str, object]) -> LedgerEntry | None:
    """One entry, only if every field has its type (a damaged entry means: read that wheel again)."""
    size, mtime, sha, meta_sha, rp = (
        entry.get(k) for k in ("size", "mtime_ns", "sha256", "metadata_sha256", "requires_python")
    )
    ints_ok = all(isinstance(v, int) and not isinstance(v, bool) for v in (size, mtime))
    hashes_ok = all(isinstance(v, str) and is_sha256(v) for v in (sha, meta_sha))
    if not ints_ok or not hashes_ok or not (rp is None or isinstance(rp, str)):
        return None
    return LedgerEntry(
        size=int(str(size)),
        mtime_ns=int(str(mtime)),
        sha256=str(sha),
        metadata_sha256=str(meta_sha),
        requires_python=rp if isinstance(rp, str) else None,
    )


def update_ledger(directory: Path, wheels: Sequence[LocalWheel]) -> None:
    """Record the published wheels' facts (after they are in place) so the index need not re-read them."""
    entries = {name: e for name, e in load_ledger(directory).items() if is_regular(directory / name)}
    for wheel in wheels:
        stat = (directory / wheel.wheel.filename).lstat()
        entries[wheel.wheel.filename] = LedgerEntry(
            size=stat.st_size,
            mtime_ns=stat.st_mtime_ns,
            sha256=wheel.sha256,
            metadata_sha256=wheel.metadata_sha256,
            requires_python=wheel.requires_python,
        )
    data = {"schema": _LEDGER_SCHEMA, "files": {name: asdict(entries[name]) for name in sorted(entries)}}
    write_text_atomic(directory / LEDGER, json.dumps(data, indent=0, sort_keys=True) + "\n")


def is_regular(path: Path) -> bool:
    """A regular file, not a link to one."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def from_ledger(path: Path, size: int, mtime_ns: int, entry: LedgerEntry | None) -> LocalWheel | None:
    """The wheel as the ledger knows it, if the file and its .metadata are untouched since."""
    if entry is None or (size, mtime_ns) != (entry.size, entry.mtime_ns):
        return None
    sidecar = path.with_name(metadata_name(path.name))
    try:
        metadata = read_bounded(sidecar, limit=MAX_METADATA_BYTES, follow_symlinks=False)
        wheel = parse_wheel(path.name)
    except (OSError, ValueError):
        return None
    if hashlib.sha256(metadata).hexdigest() != entry.metadata_sha256:
        return None
    return LocalWheel(
        path=path,
        wheel=wheel,
        sha256=entry.sha256,
        size=entry.size,
        metadata=metadata,
        metadata_sha256=entry.metadata_sha256,
        requires_python=entry.requires_python,
        metadata_path=sidecar,
    )
