"""Read DeepSpeed wheels for ``dswheels inspect``: members, builder sources and every extension's binary.

What the bytes mean is decided in :mod:`dswheels.verify.inspection`; this module opens the
files, runs objdump (through :mod:`dswheels.host.extensions`) and turns every way a path can
fail to be a DeepSpeed wheel into one :class:`~dswheels.kernel.errors.ConfigError` (exit 2).
"""

from __future__ import annotations

from pathlib import Path

from dswheels.host.extensions import read_extensions
from dswheels.host.wheel_file import read_wheel
from dswheels.kernel.binaries.dlls import load_dll_facts
from dswheels.kernel.compat import Compat
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.naming import WheelNameError, parse_wheel_name
from dswheels.kernel.versions import format_version
from dswheels.kernel.wheel_contents import WheelContentError
from dswheels.verify.inspection import Inspection, NotDeepSpeedError, inspect_wheel

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


def inspect_path(path: Path, compat: Compat) -> Inspection:
    """Everything ``dswheels inspect`` says about one wheel file."""
    _check_name(path)
    contents = read_wheel(path, error=ConfigError, builders=True, extensions=True)
    try:
        installed = contents.installed
    except WheelContentError as exc:
        raise ConfigError(f"{path.name}: {exc}", hint=_HINT) from None
    baseline = compat.cpu_baselines["x86-64-v2"]
    binaries = read_extensions(contents.extensions, forbidden_registers=baseline.forbidden_registers, error=ConfigError)
    try:
        return inspect_wheel(
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
        )
    except NotDeepSpeedError as exc:
        raise ConfigError(str(exc), hint=_HINT) from None
