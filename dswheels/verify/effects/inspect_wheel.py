"""Read DeepSpeed wheels for ``dswheels inspect``: members, builder sources and every extension's binary.

What the bytes mean is decided in :mod:`dswheels.verify.inspection`; this module opens the
files, reads this machine's CPU flags (which ISA variant of an op loads here), runs objdump
(through :mod:`dswheels.host.extensions`) and turns every way a path can
fail to be a DeepSpeed wheel into one :class:`~dswheels.kernel.errors.ConfigError` (exit 2).
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import replace
from pathlib import Path

from dswheels.host.extensions import read_extensions
from dswheels.host.files import read_bounded
from dswheels.host.machine import cpu_flags
from dswheels.host.wheel_file import read_wheel
from dswheels.kernel.binaries.dlls import load_dll_facts
from dswheels.kernel.compat import Compat
from dswheels.kernel.errors import ConfigError, ProvenanceError
from dswheels.kernel.isa_variants import capability_from_flags
from dswheels.kernel.naming import WheelNameError, parse_wheel_name
from dswheels.kernel.provenance import MAX_PROVENANCE_BYTES, bundle_name, provenance_name, require_libraries
from dswheels.kernel.versions import format_version
from dswheels.kernel.wheel_contents import WheelContentError
from dswheels.verify.inspection import A64_BASELINE, Inspection, NotDeepSpeedError, ProvenanceReport, inspect_wheel

__all__ = ["inspect_path"]

_HINT = "give the path of a DeepSpeed wheel (deepspeed-<version>[+label]-<python>-<abi>-<platform>.whl)"


def _check_name(path: Path) -> None:
    if not path.exists():
        raise ConfigError(f"no such file: {path}", hint=_HINT)
    if not path.is_file() or path.suffix != ".whl":
        raise ConfigError(f"{path} is not a wheel (a .whl file)", hint=_HINT)
    try:
        parse_wheel_name(path.name)
    except WheelNameError as exc:
        raise ConfigError(str(exc), hint=_HINT) from None


def _provenance(path: Path, sha256: str, root: bytes | None) -> ProvenanceReport | None:
    """The provenance beside the wheel, verified offline against ``root`` (default: the pinned one) for
    whoever signed it; None when there is none. A bad ``root`` is the command's ConfigError."""
    for beside in (path.with_name(provenance_name(path.name)), path.with_name(bundle_name(path.name))):
        try:
            data = read_bounded(beside, limit=MAX_PROVENANCE_BYTES)
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as exc:
            return ProvenanceReport(file=beside.name, problem=str(exc))
        try:
            require_libraries(f"verifying {beside.name}")
        except ConfigError as exc:
            return ProvenanceReport(file=beside.name, problem=f"{exc.message}; {exc.hint}")
        from dswheels.kernel.attestations import (  # noqa: PLC0415 - the provenance extra
            provenance_from_bundle,
            verify_provenance,
        )

        try:
            if beside.name.endswith(bundle_name("")):  # GitHub's bundle, as the workflow leaves it
                data = provenance_from_bundle(data, filename=path.name, sha256=sha256)
            attested = verify_provenance(
                data, filename=path.name, sha256=sha256, repository=None, where=beside.name, root=root
            )
        except (ValueError, ProvenanceError) as exc:
            return ProvenanceReport(
                file=beside.name, problem=exc.message if isinstance(exc, ProvenanceError) else str(exc)
            )
        logged = (
            dt.datetime.fromtimestamp(attested.logged_at, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
            if attested.logged_at is not None
            else ""
        )
        return ProvenanceReport(
            file=beside.name,
            signer=attested.signer.describe(),
            predicate_type=attested.predicate_type,
            logged_at=logged,
        )
    return None


def inspect_path(path: Path, compat: Compat, *, trusted_root: bytes | None = None) -> Inspection:
    """Everything ``dswheels inspect`` says about one wheel file (and the provenance beside it, verified
    against ``trusted_root``, by default the pinned one)."""
    _check_name(path)
    contents = read_wheel(path, error=ConfigError, builders=True, extensions=True)
    try:
        installed = contents.installed
    except WheelContentError as exc:
        raise ConfigError(f"{path.name}: {exc}", hint=_HINT) from None
    baseline = compat.cpu_baselines["x86-64-v2"]
    binaries = read_extensions(
        contents.extensions,
        forbidden_registers=baseline.forbidden_registers,
        forbidden_features=compat.cpu_baselines[A64_BASELINE].forbidden_features,
        error=ConfigError,
    )
    try:
        variants = contents.variants
    except WheelContentError as exc:
        raise ConfigError(f"{path.name}: {exc}", hint=_HINT) from None
    flags = cpu_flags() if variants.ops else None
    here = capability_from_flags(flags, os.environ.get("ATEN_CPU_CAPABILITY")) if flags is not None else None
    try:
        inspection = inspect_wheel(
            filename=path.name,
            metadata=contents.metadata,
            installed=installed,
            names=contents.names,
            builder_sources=contents.builder_sources,
            binaries=binaries,
            dll_facts=load_dll_facts(),
            libstdcxx=compat.libstdcxx,
            toolkit_sm={
                format_version(minor): frozenset(int(a.rstrip("af")) for a in toolkit.sm)
                for minor, toolkit in compat.cuda.items()
            },
            variants=variants,
            here=here,
        )
    except NotDeepSpeedError as exc:
        raise ConfigError(str(exc), hint=_HINT) from None
    provenance = _provenance(path, contents.sha256, trusted_root)
    if provenance is not None and not provenance.verified:
        warning = f"its provenance does not vouch for it: {provenance.problem}"
        return replace(inspection, provenance=provenance, warnings=(*inspection.warnings, warning))
    return replace(inspection, provenance=provenance)
