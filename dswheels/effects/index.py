"""Reading the published set (a directory of wheels, or GitHub release assets) and writing the site.

The pages come from :func:`dswheels.core.index.render_site`; this module supplies the facts
they show (sha256, size, METADATA of every wheel) and writes the site so that a failed run
leaves the previous one whole: the pages go into a staging directory beside the target,
which replaces it only once complete (see :func:`write_site`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import zipfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

import requests

from dswheels.core.index import (
    FILES_DIR,
    MARKER,
    IndexFile,
    PublishedWheel,
    metadata_name,
    parse_metadata,
    parse_wheel,
)
from dswheels.core.jsondoc import parse_json
from dswheels.core.manifest import manifest_name
from dswheels.core.naming import PROJECT
from dswheels.core.pick import parse_project_page, project_page_url
from dswheels.effects.files import replace_dir, write_text_atomic
from dswheels.errors import ConfigError, PublishError, SourceError

__all__ = [
    "LEDGER",
    "LedgerEntry",
    "LocalWheel",
    "list_published",
    "load_ledger",
    "read_wheel",
    "scan_directory",
    "sha256_file",
    "update_ledger",
    "write_site",
]

_CHUNK = 1024 * 1024


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


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


def _metadata_member(archive: zipfile.ZipFile, filename: str) -> str:
    """The wheel's own ``<name>-<version>.dist-info/METADATA`` (the filename's first two fields)."""
    prefix = "-".join(filename.split("-")[:2]) + ".dist-info/"
    candidates = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1]
    exact = [n for n in candidates if n == prefix + "METADATA"]
    if exact:
        return exact[0]
    if len(candidates) == 1:
        return candidates[0]
    msg = f"no {prefix}METADATA in the wheel (found {candidates or 'none'})"
    raise ValueError(msg)


def read_wheel(path: Path, *, published_metadata: bool = False) -> LocalWheel:
    """Hash a wheel and read its METADATA; ``PublishError`` if it is not a dswheels wheel.

    With ``published_metadata``, a ``<wheel>.metadata`` beside the wheel (what `dswheels
    publish` writes, and what the index serves) is read instead of unzipping the wheel.
    """
    try:
        wheel = parse_wheel(path.name)
    except ValueError as exc:
        raise PublishError(
            f"not a dswheels wheel: {exc}",
            hint="only wheels built by `dswheels build` can be published (their names carry the torch build)",
        ) from None
    sidecar = path.with_name(metadata_name(path.name)) if published_metadata else None
    try:
        size = path.stat().st_size
        if sidecar is not None and sidecar.is_file():
            metadata = sidecar.read_bytes()
        else:
            sidecar = None
            with zipfile.ZipFile(path) as archive:
                metadata = archive.read(_metadata_member(archive, path.name))
        meta = parse_metadata(metadata)
    except (OSError, zipfile.BadZipFile, ValueError, KeyError) as exc:
        raise PublishError(f"{path}: cannot read the wheel: {exc}", hint="rebuild it with `dswheels build`") from None
    if meta.name.lower().replace("_", "-") != PROJECT or meta.version != str(wheel.version):
        raise PublishError(
            f"{path.name}: its METADATA says {meta.name} {meta.version}, its name says {PROJECT} {wheel.version}",
            hint="a renamed wheel would install under a version nobody asked for; rebuild it",
        )
    return LocalWheel(
        path=path,
        wheel=wheel,
        sha256=sha256_file(path),
        size=size,
        metadata=metadata,
        metadata_sha256=hashlib.sha256(metadata).hexdigest(),
        requires_python=meta.requires_python,
        metadata_path=sidecar,
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
    try:
        data = parse_json((directory / LEDGER).read_bytes(), what=LEDGER)
        if data.get("schema") != _LEDGER_SCHEMA:
            return {}
        return {name: LedgerEntry(**entry) for name, entry in data["files"].items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}


def update_ledger(directory: Path, wheels: Sequence[LocalWheel]) -> None:
    """Record the published wheels' facts (after they are in place) so the index need not re-read them."""
    entries = {name: e for name, e in load_ledger(directory).items() if (directory / name).is_file()}
    for wheel in wheels:
        stat = (directory / wheel.wheel.filename).stat()
        entries[wheel.wheel.filename] = LedgerEntry(
            size=stat.st_size,
            mtime_ns=stat.st_mtime_ns,
            sha256=wheel.sha256,
            metadata_sha256=wheel.metadata_sha256,
            requires_python=wheel.requires_python,
        )
    data = {"schema": _LEDGER_SCHEMA, "files": {name: asdict(entries[name]) for name in sorted(entries)}}
    write_text_atomic(directory / LEDGER, json.dumps(data, indent=0, sort_keys=True) + "\n")


def _from_ledger(path: Path, size: int, mtime_ns: int, entry: LedgerEntry | None) -> LocalWheel | None:
    """The wheel as the ledger knows it, if the file and its .metadata are untouched since."""
    if entry is None or (size, mtime_ns) != (entry.size, entry.mtime_ns):
        return None
    sidecar = path.with_name(metadata_name(path.name))
    try:
        metadata = sidecar.read_bytes()
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
    taken from it; any other wheel is read and hashed.
    """
    if not directory.is_dir():
        raise ConfigError(
            f"no directory {directory}",
            hint="give the directory `dswheels publish` copied the wheels to (default: published/)",
        )
    ledger = load_ledger(directory)
    with os.scandir(directory) as listing:
        entries = sorted((e for e in listing if e.name.endswith(".whl") and e.is_file()), key=lambda e: e.name)
    wheels = []
    for entry in entries:
        path = directory / entry.name
        stat = entry.stat()
        known = _from_ledger(path, stat.st_size, stat.st_mtime_ns, ledger.get(entry.name))
        wheels.append(known or read_wheel(path, published_metadata=True))
    return wheels


def local_index_files(wheels: Sequence[LocalWheel]) -> list[IndexFile]:
    """Index entries for a self-contained site: the files go to ``files/`` inside it."""
    return [
        IndexFile(
            wheel=w.wheel,
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


def check_target(out: Path, *, sources: Iterable[Path] = ()) -> None:
    """Refuse to replace a directory that is not a dswheels index, or one holding the sources."""
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


def _place(source: Path | bytes, target: Path, present: Mapping[str, tuple[int, int]]) -> None:
    """Put a published file into the site's files/: a hard link (a copy across file systems).

    ``present`` maps the names already in files/ to their (device, inode): a file that is
    already the same file (published files never change) is left alone; another is
    replaced in one rename.
    """
    if target.name in present:
        if isinstance(source, Path):
            stat = source.stat()
            if (stat.st_dev, stat.st_ino) == present[target.name]:
                return
        elif target.read_bytes() == source:
            return
    temporary = target.with_name(f".{target.name}.new")
    temporary.unlink(missing_ok=True)
    if isinstance(source, bytes):
        temporary.write_bytes(source)
    else:
        try:
            os.link(source, temporary)
        except OSError:
            shutil.copyfile(source, temporary)
    temporary.replace(target)


def _inodes(directory: Path) -> dict[str, tuple[int, int]]:
    if not directory.is_dir():
        return {}
    with os.scandir(directory) as listing:
        return {e.name: (e.stat().st_dev, e.stat().st_ino) for e in listing}


def write_site(out: Path, pages: Mapping[str, str], *, wheels: Sequence[LocalWheel] = ()) -> None:
    """Write ``pages`` (and, for a self-contained site, the wheels, their .metadata and manifests) atomically.

    The pages go into a staging directory that replaces ``out`` once complete. Wheels live
    in ``files/``, hard-linked from the published directory; that directory is carried
    over from the previous site (only new files are linked, and files no longer published
    are removed after the swap), so a re-run costs the pages, not one link per wheel.
    Until the swap, the old site stays whole: new files are only added to it.
    """
    check_target(out, sources=(w.path.parent for w in wheels))
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.staging-", dir=out.parent))
    files = out / FILES_DIR
    moved = False
    try:
        made: set[Path] = set()
        for rel, text in pages.items():
            target = staging / rel
            if target.parent not in made:
                target.parent.mkdir(parents=True, exist_ok=True)
                made.add(target.parent)
            target.write_text(text, encoding="utf-8")
        keep: set[str] = set()
        if wheels:
            present = _inodes(files)
            files.mkdir(parents=True, exist_ok=True)
            for w in wheels:
                _place(w.path, files / w.wheel.filename, present)
                _place(w.metadata_path or w.metadata, files / metadata_name(w.wheel.filename), present)
                keep |= {w.wheel.filename, metadata_name(w.wheel.filename)}
                manifest = w.path.with_name(manifest_name(w.wheel.filename))
                if manifest.is_file():  # beside the wheel, where `dswheels install` looks for it
                    _place(manifest, files / manifest.name, present)
                    keep.add(manifest.name)
        if files.is_dir():
            files.rename(staging / FILES_DIR)
            moved = True
        replace_dir(out, staging)
        moved = False
        for stale in (out / FILES_DIR).iterdir() if (out / FILES_DIR).is_dir() else ():
            if stale.name not in keep:
                stale.unlink()
    except BaseException:
        if moved and out.is_dir() and not files.exists():
            (staging / FILES_DIR).rename(files)  # the old site gets its files back
        shutil.rmtree(staging, ignore_errors=True)
        raise


# --- what is published where ----------------------------------------------------------------------


def _iter_local(location: Path) -> Iterator[str]:
    project_page = location / "simple" / PROJECT / "index.html"
    if project_page.is_file():
        base = project_page.resolve().as_uri()
        yield from (f.filename for f in parse_project_page(project_page.read_text(encoding="utf-8"), base))
        return
    yield from (p.name for p in location.iterdir() if p.name.endswith(".whl"))


def list_published(location: str, *, session: requests.Session | None = None, timeout: float = 60) -> list[str]:
    """The wheel filenames published at a directory or an index URL.

    A directory is a generated site (its ``simple/deepspeed/index.html`` is read) or a
    directory of wheels. A URL is a site root, a PEP 503 index (``.../simple/``) or a
    project page; a 404 there means nothing is published yet.
    """
    scheme = urlsplit(location).scheme
    if scheme in ("http", "https"):
        url = project_page_url(location)
        http = session or requests.Session()
        try:
            response = http.get(url, timeout=timeout, headers={"Accept": "text/html"})
        except requests.RequestException as exc:
            raise SourceError(f"cannot read the published index at {url}: {exc}") from None
        if response.status_code == 404:
            return []
        if response.status_code != 200:
            raise SourceError(f"cannot read the published index at {url}: HTTP {response.status_code}")
        return [f.filename for f in parse_project_page(response.text, response.url)]
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
