"""Reading the published set (a directory of wheels, or GitHub release assets) and writing the site.

The pages come from :func:`dswheels.core.index.site.render_site`; this module supplies the facts
they show (sha256, size, METADATA of every wheel) and writes the site so that a failed run
leaves the previous one whole: the pages go into a staging directory beside the target,
which replaces it only once complete (see :func:`write_site`).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

import requests

from dswheels.core.digests import is_sha256
from dswheels.core.index.files import IndexFile, parse_project_page, project_page_url
from dswheels.core.index.links import metadata_name
from dswheels.core.index.site import FILES_DIR, MARKER
from dswheels.core.jsondoc import parse_json
from dswheels.core.locations import PUBLISHED
from dswheels.core.naming import PROJECT, PublishedWheel, WheelNameError, parse_wheel
from dswheels.core.wheel.manifest import ManifestError, manifest_name, parse_manifest
from dswheels.effects.files import (
    TEMP_PREFIX,
    exclusive,
    failing_as,
    link_opened,
    open_regular,
    read_bounded,
    replace_dir,
    staging_dir,
    sweep,
    write_text_atomic,
)
from dswheels.effects.http import MAX_PAGE_BYTES, TIMEOUTS, read_limited
from dswheels.effects.http import session as http_session
from dswheels.effects.index_read import MAX_MANIFEST_BYTES
from dswheels.effects.wheel import MAX_METADATA_BYTES, read_admitted
from dswheels.errors import ConfigError, PublishError, SourceError
from dswheels.log import get_reporter

__all__ = [
    "LEDGER",
    "LedgerEntry",
    "LocalWheel",
    "list_published",
    "load_ledger",
    "local_wheel",
    "scan_directory",
    "update_ledger",
    "write_site",
]

MAX_LEDGER_BYTES = 256 * 1024**2  # ~300 bytes per wheel


@dataclass(frozen=True, slots=True)
class LocalWheel:
    """A wheel on disk with the facts the index and the publishers need."""

    path: Path
    wheel: PublishedWheel
    sha256: str
    size: int
    metadata: bytes  # the wheel's .dist-info/METADATA, byte for byte (served as <wheel>.metadata)
    metadata_sha256: str
    requires_python: str | None
    metadata_path: Path | None = None  # the published <wheel>.metadata it was read from, if any


def local_wheel(path: Path, *, follow_symlinks: bool = True) -> LocalWheel:
    """Hash a wheel and read its METADATA from the wheel itself; ``PublishError`` if it is not a
    dswheels wheel. (A ``<wheel>.metadata`` beside it is never believed: it may describe another wheel.)
    ``follow_symlinks=False``: a wheel of the published directory, which must not be a link."""
    try:
        wheel = parse_wheel(path.name)
    except WheelNameError as exc:
        raise PublishError(
            f"not a dswheels wheel: {exc}",
            hint="only wheels built by `dswheels build` can be published (their names carry the torch build)",
        ) from None
    contents = read_admitted(
        path,
        wheel,
        error=PublishError,
        hint="a wheel must be what its name says, and install only DeepSpeed's own files: rebuild it "
        "with `dswheels build` (docs/hostile-input.md, what a wheel may install)",
        follow_symlinks=follow_symlinks,
    )
    meta = contents.metadata
    return LocalWheel(
        path=path,
        wheel=wheel,
        sha256=contents.sha256,
        size=contents.size,
        metadata=contents.metadata_bytes,
        metadata_sha256=hashlib.sha256(contents.metadata_bytes).hexdigest(),
        requires_python=meta.requires_python,
    )


# --- the ledger of a published directory ----------------------------------------------------------

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
    entries = {name: e for name, e in load_ledger(directory).items() if _is_regular(directory / name)}
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


def _is_regular(path: Path) -> bool:
    """A regular file, not a link to one."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def _from_ledger(path: Path, size: int, mtime_ns: int, entry: LedgerEntry | None) -> LocalWheel | None:
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


def scan_directory(directory: Path) -> list[LocalWheel]:
    """Every ``*.whl`` directly in ``directory`` (other files are ignored), with its published METADATA.

    Wheels the ledger of `dswheels publish` describes, unchanged since (size, mtime), are
    taken from it; any other wheel is read and hashed. Only regular files are read: a link,
    a FIFO or a device named ``*.whl`` is left out with a warning (publish never makes one).
    """
    if not directory.is_dir():
        raise ConfigError(
            f"no directory {directory}",
            hint=f"publish first (`dswheels publish` copies what `dswheels build` wrote to {PUBLISHED}/), "
            "or give the directory it copied the wheels to (--from DIR)",
        )
    ledger = load_ledger(directory)
    with os.scandir(directory) as listing:
        entries = sorted((e for e in listing if e.name.endswith(".whl")), key=lambda e: e.name)
    wheels = []
    for entry in entries:
        path = directory / entry.name
        info = entry.stat(follow_symlinks=False)
        if not stat.S_ISREG(info.st_mode):
            if not stat.S_ISDIR(info.st_mode):
                get_reporter().warning(f"{path} is not a regular file (a link?): left out; it was not published here")
            continue
        known = _from_ledger(path, info.st_size, info.st_mtime_ns, ledger.get(entry.name))
        wheels.append(known or local_wheel(path, follow_symlinks=False))
    return wheels


def local_index_files(wheels: Sequence[LocalWheel]) -> list[IndexFile]:
    """Index entries for a self-contained site: the files go to ``files/`` inside it."""
    return [
        IndexFile.of_wheel(
            w.wheel,
            url=f"{FILES_DIR}/{w.wheel.filename}",
            sha256=w.sha256,
            size=w.size,
            requires_python=w.requires_python,
            metadata_sha256=w.metadata_sha256,
        )
        for w in wheels
    ]


def _is_inside(path: Path, parent: Path) -> bool:
    try:
        path.resolve().relative_to(parent.resolve())
    except ValueError:
        return False
    return True


_KEPT = "and the previous site (if any) is as it was"


def check_target(out: Path, *, sources: Iterable[Path] = ()) -> None:
    """Refuse to replace a directory that is not a dswheels index, or one holding the sources
    (exit 2), or one that cannot be looked at or is a dangling link (exit 7)."""
    with failing_as(PublishError, what=f"writing the site {out}", where=out, kept=_KEPT):
        _check_target(out, sources)


def _check_target(out: Path, sources: Iterable[Path]) -> None:
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise ConfigError(
            f"refusing to replace {out}: it is not empty and was not written by `dswheels index` (no {MARKER})",
            hint="give an empty or new directory for --out",
        )
    for source in set(sources):
        if _is_inside(source, out):
            raise ConfigError(
                f"the published wheels ({source}) are inside the output directory {out}, which is replaced whole",
                hint="keep the published directory outside the site (e.g. published/ and site/)",
            )


def _link_into(source: Path, target: Path, *, size: int, sha256: str | None = None) -> None:
    """A published file into the staged ``files/``, only as dswheels vouched for it: a regular
    file (never a link: it is not followed), of ``size`` bytes (and, for the small sidecars,
    of ``sha256``). Hard-linked, or copied where the file system cannot link or the file lacks
    read bits (:func:`~dswheels.effects.files.link_opened`: the published file is never changed).

    ``PublishError`` when ``source`` is not what was vouched for; an ``OSError`` of the write
    (a full disk) is the caller's.
    """
    try:
        src = open_regular(source, follow_symlinks=False)
    except (OSError, ValueError) as exc:  # ValueError: NotRegularFileError, replaced by a link or a FIFO
        raise _not_vouched(source, exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)) from None
    with src:
        if sha256 is not None:
            if hashlib.sha256(src.read(size + 1)).hexdigest() != sha256:
                raise _not_vouched(source, "its sha256 changed")
        elif (now := os.fstat(src.fileno()).st_size) != size:
            raise _not_vouched(source, f"{now} bytes, not the {size} read")
        link_opened(src, source, target, limit=size)


def _not_vouched(source: Path, why: str) -> PublishError:
    return PublishError(
        f"{source} is not what was read a moment ago ({why}): it was changed while the site was written",
        hint="published files never change: see what else writes into the published directory, "
        "then run `dswheels index` again; the old site is left as it was",
    )


def _manifest_for(w: LocalWheel) -> tuple[Path, bytes] | None:
    """The build manifest beside a wheel and its bytes, if it describes this wheel's bytes.

    Read and checked however the wheel was vouched for (the ledger does not cover manifests):
    one that is not a regular file (a link is not followed), cannot be read or describes
    other bytes is left out with a warning.
    """
    manifest = w.path.with_name(manifest_name(w.wheel.filename))
    try:
        data = read_bounded(manifest, limit=MAX_MANIFEST_BYTES, follow_symlinks=False)
        recorded = parse_manifest(data.decode("utf-8")).wheel
    except FileNotFoundError:
        return None
    except (OSError, ValueError, ManifestError) as exc:
        get_reporter().warning(f"{manifest.name} cannot be read ({exc}): left out of the site")
        return None
    if (recorded.filename, recorded.sha256) != (w.wheel.filename, w.sha256):
        get_reporter().warning(f"{manifest.name} does not describe the wheel beside it: left out of the site")
        return None
    return manifest, data


def _stage_files(staging: Path, wheels: Sequence[LocalWheel]) -> None:
    files = staging / FILES_DIR
    files.mkdir()
    for w in wheels:
        _link_into(w.path, files / w.wheel.filename, size=w.size)
        metadata = files / metadata_name(w.wheel.filename)
        if w.metadata_path is not None:  # verified against the ledger, which publish wrote from the wheel
            _link_or_write(w.metadata_path, metadata, w.metadata)
        else:
            metadata.write_bytes(w.metadata)  # read from the wheel itself
        if (manifest := _manifest_for(w)) is not None:  # beside the wheel, where `dswheels install` looks
            path, data = manifest
            _link_or_write(path, files / path.name, data)


def _link_or_write(source: Path, target: Path, data: bytes) -> None:
    """A sidecar whose bytes were checked (``data``): linked when ``source`` still holds them, else written."""
    try:
        _link_into(source, target, size=len(data), sha256=hashlib.sha256(data).hexdigest())
    except PublishError:
        target.unlink(missing_ok=True)
        target.write_bytes(data)


def write_site(out: Path, pages: Mapping[str, str], *, wheels: Sequence[LocalWheel] = ()) -> None:
    """Write ``pages`` (and, for a self-contained site, the wheels, their .metadata and manifests) atomically.

    Everything goes into a staging directory beside ``out`` (wheels in ``files/``,
    hard-linked from the published directory) that replaces ``out`` once complete, in one
    atomic exchange where the system has one: until then the old site is whole and
    untouched, and afterwards only the new one is served. Runs on one ``out`` take turns
    (a lock on its parent folder); each first removes what a killed run left. Folders and files
    get the usual modes (0755/0644 under umask 022), so a static server running as another
    user can read them.
    """
    out = out.absolute()
    with failing_as(PublishError, what=f"writing the site {out}", where=out, kept=_KEPT):
        _write_site(out, pages, wheels)


def _write_site(out: Path, pages: Mapping[str, str], wheels: Sequence[LocalWheel]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    with exclusive(out.parent, what=f"writing {out}", error=PublishError):  # beside it: out is replaced
        check_target(out, sources=(w.path.parent for w in wheels))
        for leftover in sweep(out.parent, prefix=f"{TEMP_PREFIX}{out.name}."):
            get_reporter().info(f"removed {leftover}: left by an interrupted `dswheels index`")
        with staging_dir(out.parent, out.name) as staging:
            made: set[Path] = {staging}
            for rel, text in pages.items():
                target = staging / rel
                for folder in reversed(target.parents):
                    if folder not in made and folder.is_relative_to(staging):
                        folder.mkdir(exist_ok=True)
                        made.add(folder)
                target.write_text(text, encoding="utf-8")
            if wheels:
                _stage_files(staging, wheels)
            replace_dir(out, staging)


# --- what is published where ----------------------------------------------------------------------


def _iter_local(location: Path) -> Iterator[str]:
    """The wheels a site's project page lists, or those of a published directory: as `dswheels index`
    reads them, regular files only (a link is not followed: it is not what was published)."""
    project_page = location / "simple" / PROJECT / "index.html"
    if project_page.is_file():
        base = project_page.resolve().as_uri()
        try:
            page = read_bounded(project_page, limit=MAX_PAGE_BYTES, follow_symlinks=False)
            files = parse_project_page(page.decode("utf-8", "replace"), base)
        except (OSError, ValueError) as exc:
            raise SourceError(f"cannot read the published index {project_page}: {exc}") from None
        yield from (f.filename for f in files)
        return
    yield from (p.name for p in location.iterdir() if p.name.endswith(".whl") and _is_regular(p))


def list_published(location: str, *, session: requests.Session | None = None) -> list[str]:
    """The wheel filenames published at a directory or an index URL.

    A directory is a generated site (its ``simple/deepspeed/index.html`` is read) or a
    directory of wheels. A URL is a site root, a PEP 503 index (``.../simple/``) or a
    project page; a 404 there means nothing is published yet.
    """
    scheme = urlsplit(location).scheme
    if scheme in ("http", "https"):
        url = project_page_url(location)
        http = session or http_session()
        try:
            response = http.get(url, timeout=TIMEOUTS.for_request, headers={"Accept": "text/html"}, stream=True)
        except requests.RequestException as exc:
            raise SourceError(f"cannot read the published index at {url}: {exc}") from None
        with response:
            if response.status_code == 404:
                return []
            if response.status_code != 200:
                raise SourceError(f"cannot read the published index at {url}: HTTP {response.status_code}")
            body = read_limited(response, limit=MAX_PAGE_BYTES, what=url, error=SourceError)
        try:
            return [f.filename for f in parse_project_page(body.decode("utf-8", "replace"), response.url)]
        except ValueError as exc:
            raise SourceError(str(exc)) from None
    path = None
    if scheme == "file":
        path = Path(url2pathname(urlsplit(location).path))
    elif scheme == "" or len(scheme) == 1:  # a path (C:\\... on Windows parses as scheme "c")
        path = Path(location)
    if path is None or not path.is_dir():
        raise ConfigError(
            f"--skip-published {location!r} is neither a directory nor an http(s) URL",
            hint="give the site URL (https://OWNER.github.io/REPO/), its simple/ index, or a local directory",
        )
    return sorted(_iter_local(path))
