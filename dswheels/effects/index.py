"""Reading the published set (a directory of wheels, or GitHub release assets) and writing the site.

The pages come from :func:`dswheels.core.index.render_site`; this module supplies the facts
they show (sha256, size, METADATA of every wheel) and writes the site so that a failed run
leaves the previous one whole: everything goes into a staging directory beside the target,
which replaces the target only once it is complete.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import requests

from dswheels.core.index import (
    FILES_DIR,
    MARKER,
    IndexFile,
    PublishedWheel,
    metadata_name,
    parse_links,
    parse_metadata,
    parse_wheel,
)
from dswheels.core.naming import PROJECT
from dswheels.effects.files import replace_dir
from dswheels.errors import ConfigError, PublishError, SourceError

__all__ = [
    "LocalWheel",
    "list_published",
    "read_wheel",
    "scan_directory",
    "sha256_file",
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

    @property
    def metadata_sha256(self) -> str:
        return hashlib.sha256(self.metadata).hexdigest()

    @property
    def requires_python(self) -> str | None:
        return parse_metadata(self.metadata).requires_python


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


def read_wheel(path: Path) -> LocalWheel:
    """Hash a wheel and read its METADATA; ``PublishError`` if it is not a dswheels wheel."""
    try:
        wheel = parse_wheel(path.name)
    except ValueError as exc:
        raise PublishError(
            f"not a dswheels wheel: {exc}",
            hint="only wheels built by `dswheels build` can be published (their names carry the torch build)",
        ) from None
    try:
        size = path.stat().st_size
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
    return LocalWheel(path=path, wheel=wheel, sha256=sha256_file(path), size=size, metadata=metadata)


def _map(fn: Callable[[Path], LocalWheel], items: Sequence[Path]) -> list[LocalWheel]:
    """Read wheels on a few threads: hashing and unzipping release the GIL for the big parts."""
    if len(items) < 64:
        return [fn(p) for p in items]
    with ThreadPoolExecutor(max_workers=min(8, (os.cpu_count() or 2) * 2)) as pool:
        return list(pool.map(fn, items))


def scan_directory(directory: Path) -> list[LocalWheel]:
    """Every ``*.whl`` directly in ``directory`` (other files are ignored)."""
    if not directory.is_dir():
        raise ConfigError(
            f"no directory {directory}",
            hint="give the directory `dswheels publish` copied the wheels to (default: published/)",
        )
    paths = sorted(p for p in directory.iterdir() if p.name.endswith(".whl") and p.is_file())
    return _map(read_wheel, paths)


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


def check_target(out: Path, *, sources: Sequence[Path] = ()) -> None:
    """Refuse to replace a directory that is not a dswheels index, or one holding the sources."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise ConfigError(
            f"refusing to replace {out}: it is not empty and was not written by `dswheels index` (no {MARKER})",
            hint="give an empty or new directory for --out",
        )
    for source in sources:
        if _is_inside(source, out):
            raise ConfigError(
                f"the published wheels ({source}) are inside the output directory {out}, which is replaced whole",
                hint="keep the published directory outside the site (e.g. published/ and site/)",
            )


def write_site(out: Path, pages: Mapping[str, str], *, wheels: Sequence[LocalWheel] = ()) -> None:
    """Write ``pages`` (and, for a self-contained site, the wheels and their .metadata) atomically.

    Wheels are hard-linked into ``files/`` (copied across file systems): cheap, and the
    published directory stays the one place a wheel is written.
    """
    check_target(out, sources=[w.path.parent for w in wheels])
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.staging-", dir=out.parent))
    try:
        made: set[Path] = set()
        for rel, text in pages.items():
            target = staging / rel
            if target.parent not in made:
                target.parent.mkdir(parents=True, exist_ok=True)
                made.add(target.parent)
            target.write_text(text, encoding="utf-8")
        if wheels:
            files = staging / FILES_DIR
            files.mkdir(exist_ok=True)
            for w in wheels:
                target = files / w.wheel.filename
                try:
                    os.link(w.path, target)
                except OSError:
                    shutil.copyfile(w.path, target)
                (files / metadata_name(w.wheel.filename)).write_bytes(w.metadata)
        replace_dir(out, staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


# --- what is published where ----------------------------------------------------------------------


def _iter_local(location: Path) -> Iterator[str]:
    project_page = location / "simple" / PROJECT / "index.html"
    if project_page.is_file():
        base = project_page.resolve().as_uri()
        yield from (link.filename for link in parse_links(project_page.read_text(encoding="utf-8"), base))
        return
    yield from (p.name for p in location.iterdir() if p.name.endswith(".whl"))


def _project_page_url(url: str) -> str:
    """The deepspeed page under a site URL, a simple-index URL, or itself."""
    base = url if url.endswith("/") else url + "/"
    path = urlsplit(base).path.rstrip("/")
    if path.endswith(f"/{PROJECT}"):
        return base
    if path.endswith("/simple"):
        return urljoin(base, f"{PROJECT}/")
    return urljoin(base, f"simple/{PROJECT}/")


def list_published(location: str, *, session: requests.Session | None = None, timeout: float = 60) -> list[str]:
    """The wheel filenames published at a directory or an index URL.

    A directory is a generated site (its ``simple/deepspeed/index.html`` is read) or a
    directory of wheels. A URL is a site root, a PEP 503 index (``.../simple/``) or a
    project page; a 404 there means nothing is published yet.
    """
    scheme = urlsplit(location).scheme
    if scheme in ("http", "https"):
        url = _project_page_url(location)
        http = session or requests.Session()
        try:
            response = http.get(url, timeout=timeout, headers={"Accept": "text/html"})
        except requests.RequestException as exc:
            raise SourceError(f"cannot read the published index at {url}: {exc}") from None
        if response.status_code == 404:
            return []
        if response.status_code != 200:
            raise SourceError(f"cannot read the published index at {url}: HTTP {response.status_code}")
        return [link.filename for link in parse_links(response.text, response.url)]
    path = Path(location.removeprefix("file://")) if scheme in ("", "file") else None
    if path is None or not path.is_dir():
        raise ConfigError(
            f"--skip-published {location!r} is neither a directory nor an http(s) URL",
            hint="give the site URL (https://OWNER.github.io/REPO/), its simple/ index, or a local directory",
        )
    return sorted(_iter_local(path))
