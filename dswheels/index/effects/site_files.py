"""Writing the site of the published set (read through :mod:`dswheels.stores`).

The pages come from :func:`dswheels.index.pages.render_site`; this module writes the site so
that a failed run leaves the previous one whole: the pages go into a staging directory beside the
target, which replaces it only once complete (see :func:`write_site`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from dswheels.host.files import (
    TEMP_PREFIX,
    exclusive,
    failing_as,
    link_opened,
    open_regular,
    read_bounded,
    replace_dir,
    staging_dir,
    sweep,
)
from dswheels.host.log import get_reporter
from dswheels.index.pages import FILES_DIR, MARKER
from dswheels.kernel.errors import ConfigError, PublishError
from dswheels.kernel.index_files import IndexFile
from dswheels.kernel.index_links import metadata_name
from dswheels.kernel.manifest import ManifestError, manifest_name, parse_manifest
from dswheels.kernel.provenance import MAX_PROVENANCE_BYTES, provenance_name, require_libraries
from dswheels.stores.wheel_ref import MAX_MANIFEST_BYTES, LocalWheel

__all__ = ["Provenances", "check_target", "local_index_files", "site_provenance", "write_site"]

Provenances = Mapping[str, tuple[Path, bytes]]  # wheel filename -> its published provenance file and checked bytes


def local_index_files(wheels: Sequence[LocalWheel], provenance: Provenances | None = None) -> list[IndexFile]:
    """Index entries for a self-contained site: the files go to ``files/`` inside it (with the provenance
    :func:`site_provenance` found for a wheel)."""
    provenance = provenance or {}
    return [
        IndexFile.of_wheel(
            w.wheel,
            url=f"{FILES_DIR}/{w.wheel.filename}",
            sha256=w.sha256,
            size=w.size,
            requires_python=w.requires_python,
            metadata_sha256=w.metadata_sha256,
            provenance_url=f"{FILES_DIR}/{provenance_name(w.wheel.filename)}"
            if w.wheel.filename in provenance
            else None,
        )
        for w in wheels
    ]


def site_provenance(wheels: Sequence[LocalWheel]) -> dict[str, tuple[Path, bytes]]:
    """The PEP 740 provenance published beside each wheel (``<wheel>.provenance``) that attests it.

    Read once, as the wheel's other sidecars are (a regular file, never through a link, bounded): the
    pages announce exactly what is staged. One that does not attest its wheel (another file, other
    bytes, not a provenance object) is left out with a warning, and the wheel is served without
    ``data-provenance``; its signatures are for ``dswheels install --require-provenance`` to verify.
    """
    found: dict[str, tuple[Path, bytes]] = {}
    for w in wheels:
        path = w.path.with_name(provenance_name(w.wheel.filename))
        try:
            data = read_bounded(path, limit=MAX_PROVENANCE_BYTES, follow_symlinks=False)
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as exc:
            get_reporter().warning(f"{path.name} cannot be read ({exc}): left out of the site")
            continue
        require_libraries(f"serving {path.name}")
        from dswheels.kernel.attestations import provenance_problem  # noqa: PLC0415 - the provenance extra

        if problem := provenance_problem(data, filename=w.wheel.filename, sha256=w.sha256):
            get_reporter().warning(f"{path.name} does not attest the wheel beside it ({problem}): left out of the site")
            continue
        found[w.wheel.filename] = (path, data)
    return found


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
    read bits (:func:`~dswheels.host.files.link_opened`: the published file is never changed).

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


def _stage_files(staging: Path, wheels: Sequence[LocalWheel], provenance: Provenances) -> None:
    files = staging / FILES_DIR
    files.mkdir()
    for w in wheels:
        if (attested := provenance.get(w.wheel.filename)) is not None:  # beside the wheel: data-provenance names it
            path, data = attested
            _link_or_write(path, files / path.name, data)
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


def write_site(
    out: Path, pages: Mapping[str, str], *, wheels: Sequence[LocalWheel] = (), provenance: Provenances | None = None
) -> None:
    """Write ``pages`` (and, for a self-contained site, the wheels, their .metadata, manifests and the
    provenance :func:`site_provenance` read) atomically.

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
        _write_site(out, pages, wheels, provenance or {})


def _write_site(out: Path, pages: Mapping[str, str], wheels: Sequence[LocalWheel], provenance: Provenances) -> None:
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
                _stage_files(staging, wheels, provenance)
            replace_dir(out, staging)


# --- what is published where ----------------------------------------------------------------------
