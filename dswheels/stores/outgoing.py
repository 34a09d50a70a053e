"""What goes out per wheel, and the rule every destination keeps: a published file never changes.

Per wheel: the wheel, its METADATA as ``<wheel>.metadata`` (PEP 658: the index links it so
installers resolve without downloading wheels), when ``dswheels build`` left one beside the
wheel, its build manifest (``<wheel>.manifest.json``), checked to describe the wheel's bytes, and
when the release workflow left its attestation beside it (GitHub's Sigstore bundle,
``<wheel>.sigstore.json``, or an already made ``<wheel>.provenance``), its PEP 740 provenance
object as ``<wheel>.provenance``, checked to attest exactly this wheel.
:func:`sort_out` is the rule: a name that is already published with the same bytes is skipped,
with other bytes it is an error, reported for every such file before anything is written.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TypeVar

from dswheels.host.files import read_bounded
from dswheels.kernel.errors import PublishError
from dswheels.kernel.index_links import metadata_name
from dswheels.kernel.manifest import ManifestError, manifest_name, parse_manifest
from dswheels.kernel.provenance import MAX_PROVENANCE_BYTES, bundle_name, provenance_name, require_libraries
from dswheels.stores.wheel_ref import MAX_MANIFEST_BYTES, LocalWheel

__all__ = [
    "Outgoing",
    "PublishResult",
    "conflict_error",
    "conflict_line",
    "outgoing_files",
    "sort_out",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One file to publish: a wheel on disk, or bytes (its .metadata, its build manifest)."""

    name: str
    size: int
    sha256: str
    path: Path | None = None
    data: bytes | None = None

    def source(self) -> Path | bytes:
        if self.path is not None:
            return self.path
        assert self.data is not None  # noqa: S101 - one of the two is always set
        return self.data

    def open(self) -> IO[bytes]:
        return self.path.open("rb") if self.path is not None else io.BytesIO(self.data or b"")


@dataclass
class PublishResult:
    where: str
    uploaded: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)  # already published with the same bytes


def _provenance(wheel: LocalWheel) -> Outgoing | None:
    """The PEP 740 provenance object to publish beside the wheel, from what the workflow placed beside it:
    GitHub's bundle (``<wheel>.sigstore.json``, made into one) or a provenance object; None when neither."""
    name = wheel.wheel.filename
    for path in (wheel.path.with_name(bundle_name(name)), wheel.path.with_name(provenance_name(name))):
        try:  # a regular file only, bounded
            data = read_bounded(path, limit=MAX_PROVENANCE_BYTES)
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as exc:
            raise PublishError(f"{path}: {exc}", hint="remove the stray file, or attest the wheel again") from None
        require_libraries(f"publishing {path.name}")
        from dswheels.kernel.attestations import (  # noqa: PLC0415 - the provenance extra, only when there is one
            provenance_from_bundle,
            provenance_problem,
        )

        if path.name.endswith(bundle_name("")):
            try:
                data = provenance_from_bundle(data, filename=name, sha256=wheel.sha256)
            except ValueError as exc:
                raise _not_attesting(path, name, str(exc)) from None
        elif problem := provenance_problem(data, filename=name, sha256=wheel.sha256):
            raise _not_attesting(path, name, problem)
        return Outgoing(name=provenance_name(name), size=len(data), sha256=hashlib.sha256(data).hexdigest(), data=data)
    return None


def _not_attesting(path: Path, name: str, why: str) -> PublishError:
    return PublishError(
        f"{path.name} is no attestation of {name}: {why}",
        hint="the workflow attests each wheel on its own (one subject per attestation, PEP 740) "
        "and places GitHub's bundle beside it: attest the wheel again, or remove the stray file",
    )


def outgoing_files(wheel: LocalWheel) -> list[Outgoing]:
    """The wheel, its .metadata, its build manifest when there is one (checked against the wheel), and its
    provenance when the workflow attested it (:func:`_provenance`)."""
    files = [
        Outgoing(name=wheel.wheel.filename, size=wheel.size, sha256=wheel.sha256, path=wheel.path),
        Outgoing(
            name=metadata_name(wheel.wheel.filename),
            size=len(wheel.metadata),
            sha256=wheel.metadata_sha256,
            data=wheel.metadata,
        ),
    ]
    return files + [item for item in (_manifest(wheel), _provenance(wheel)) if item is not None]


def _manifest(wheel: LocalWheel) -> Outgoing | None:
    """The build manifest beside the wheel, checked to describe its bytes; None when there is none."""
    manifest = wheel.path.with_name(manifest_name(wheel.wheel.filename))
    try:  # a regular file only (a FIFO or a device is refused without blocking), bounded
        data = read_bounded(manifest, limit=MAX_MANIFEST_BYTES)
        recorded = parse_manifest(data.decode("utf-8")).wheel
    except FileNotFoundError:
        return None
    except (ManifestError, OSError, ValueError) as exc:
        raise PublishError(f"{manifest}: {exc}", hint="rebuild the wheel, or remove the stray manifest") from None
    if (recorded.filename, recorded.sha256) != (wheel.wheel.filename, wheel.sha256):
        raise PublishError(
            f"{manifest.name} describes other bytes than {wheel.wheel.filename} "
            f"(manifest sha256 {recorded.sha256[:12]}..., wheel {wheel.sha256[:12]}...)",
            hint="the wheel changed after it was built: rebuild it, never edit a built wheel",
        )
    # the bytes just checked are the ones published
    return Outgoing(name=manifest.name, size=len(data), sha256=hashlib.sha256(data).hexdigest(), data=data)


def conflict_line(name: str, published: str, new: str) -> str:
    """How a published file differs from the one about to be published (their sha256s)."""
    return f"{name}: published {published[:16]}..., new {new[:16]}..."


def conflict_error(conflicts: Sequence[str], where: str) -> PublishError:
    return PublishError(
        f"{len(conflicts)} file(s) are already published at {where} with other bytes; nothing was changed",
        details="\n".join(conflicts),
        hint="published files are immutable: give the re-spun wheel a build tag "
        "(deepspeed-X+label-1-cpXY-...) or a new version instead of replacing it",
    )


def sort_out(
    items: Sequence[T],
    *,
    key: Callable[[T], tuple[str, str]],
    published: Callable[[str], str | None],
    result: PublishResult,
    where: str,
) -> list[T]:
    """The items still to publish; those already at ``where`` with the same bytes go to ``result.present``.

    ``key`` gives an item's (name, sha256), ``published`` the sha256 of what ``where`` holds under a
    name (None: nothing). Any name published with other bytes raises, listing every such name.
    """
    todo: list[T] = []
    conflicts: list[str] = []
    for item in items:
        name, sha256 = key(item)
        have = published(name)
        if have is None:
            todo.append(item)
        elif have == sha256:
            result.present.append(name)
        else:
            conflicts.append(conflict_line(name, have, sha256))
    if conflicts:
        raise conflict_error(conflicts, where)
    return todo
