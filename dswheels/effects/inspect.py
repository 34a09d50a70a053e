"""Read DeepSpeed wheels for ``dswheels inspect``: members, builder sources and every extension's binary.

What the bytes mean is decided in :mod:`dswheels.core.inspect`; this module opens the
files, runs objdump (through :mod:`dswheels.effects.binaries`) and turns every way a path can
fail to be a DeepSpeed wheel into one :class:`~dswheels.errors.ConfigError` (exit 2).
"""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from dswheels.core.compat import Compat
from dswheels.core.dlls import load_dll_facts
from dswheels.core.inspect import Inspection, NotDeepSpeedError, inspect_wheel
from dswheels.core.naming import PROJECT
from dswheels.core.versions import format_version
from dswheels.core.wheelfile import (
    EXTENSION_SUFFIXES,
    INSTALLED_INFO,
    OP_BUILDER_DIR,
    WheelContentError,
    dist_info_dir,
    parse_installed_info,
)
from dswheels.effects.binaries import read_extensions
from dswheels.effects.wheelzip import open_wheel
from dswheels.errors import ConfigError

__all__ = ["inspect_path"]

_HINT = "give the path of a DeepSpeed wheel (deepspeed-<version>[+label]-<python>-<abi>-<platform>.whl)"


def _check_name(path: Path) -> None:
    if not path.exists():
        raise ConfigError(f"no such file: {path}", hint=_HINT)
    if not path.is_file() or path.suffix != ".whl":
        raise ConfigError(f"{path} is not a wheel (a .whl file)", hint=_HINT)
    try:
        name = parse_wheel_filename(path.name)[0]
    except InvalidWheelFilename as exc:
        raise ConfigError(f"{path.name} is not a valid wheel name: {exc}", hint=_HINT) from None
    if name != PROJECT:
        raise ConfigError(f"{path.name} is a wheel of {name}, not of {PROJECT}", hint=_HINT)


def inspect_path(path: Path, compat: Compat) -> Inspection:
    """Everything ``dswheels inspect`` says about one wheel file."""
    _check_name(path)
    try:
        with open_wheel(path, ConfigError) as zf:
            names = tuple(zf.namelist())
            if INSTALLED_INFO not in names:
                raise ConfigError(
                    f"{path.name} has no {INSTALLED_INFO}: not a wheel built by DeepSpeed's setup.py",
                    hint=_HINT,
                )
            metadata = zf.read(f"{dist_info_dir(names)}/METADATA").decode("utf-8", "replace")
            installed = parse_installed_info(zf.read(INSTALLED_INFO).decode("utf-8", "replace"))
            builders = {
                n: zf.read(n).decode("utf-8", "replace")
                for n in names
                if n.startswith(OP_BUILDER_DIR) and n.endswith(".py")
            }
            extensions = {n: zf.read(n) for n in names if n.endswith(EXTENSION_SUFFIXES)}
    except (zlib.error, zipfile.LargeZipFile, EOFError, OSError) as exc:
        raise ConfigError(f"{path.name} is damaged: {exc}", hint="download the wheel again") from None
    except WheelContentError as exc:
        raise ConfigError(f"{path.name}: {exc}", hint=_HINT) from None
    baseline = compat.cpu_baselines["x86-64-v2"]
    binaries = read_extensions(extensions, forbidden_registers=baseline.forbidden_registers, error=ConfigError)
    try:
        return inspect_wheel(
            filename=path.name,
            metadata=metadata,
            installed=installed,
            names=names,
            builder_sources=builders,
            binaries=binaries,
            dll_facts=load_dll_facts(),
            libstdcxx=compat.libstdcxx,
            toolkit_sm={
                format_version(minor): frozenset(int(a.rstrip("af")) for a in toolkit.sm)
                for minor, toolkit in compat.cuda.items()
            },
        )
    except NotDeepSpeedError as exc:
        raise ConfigError(str(exc), hint=_HINT) from None
