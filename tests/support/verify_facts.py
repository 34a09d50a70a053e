"""Facts for the verify registry's checks, made in tests without a wheel, and one check run by name."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dswheels.kernel.binaries.dlls import load_dll_facts
from dswheels.kernel.binaries.extension import ExtensionBinary
from dswheels.kernel.binaries.fatbin import GpuCode
from dswheels.kernel.compat import load_compat
from dswheels.kernel.naming import wheel_filename
from dswheels.kernel.wheel_contents import InstalledInfo, parse_installed_info, parse_metadata
from dswheels.verify.checks import CHECKS
from dswheels.verify.registry import Check
from dswheels.verify.static_checks import Expected, WheelFacts

INFO = "installed_ops={'cpu_adam': 1}\naccelerator_name='cpu'\n"


def wheel_facts(expected: Expected, **kwargs: object) -> WheelFacts:
    """The facts of a wheel of ``expected``'s cell; ``kwargs`` replace any field."""
    cell = expected.cell
    fields: dict[str, object] = {
        "filename": wheel_filename(cell),
        "names": (),
        "metadata": parse_metadata("Metadata-Version: 2.4\nName: deepspeed\nVersion: 0\n\n"),
        "installed": parse_installed_info(INFO),
        "expected": expected,
        "libstdcxx": load_compat().libstdcxx,
        "dlls": load_dll_facts(),
        **kwargs,
    }
    return WheelFacts(**fields)  # type: ignore[arg-type]


def elf(member: str, needs: Mapping[str, tuple[str, ...]]) -> ExtensionBinary:
    return ExtensionBinary(member=member, format="elf", size=0, version_needs=needs)


def with_gpu(member: str, code: GpuCode) -> ExtensionBinary:
    return ExtensionBinary(member=member, format="elf", size=0, gpu=code)


def run_check(name: str, facts: WheelFacts) -> list[Check]:
    """The results of the static check ``name`` alone."""
    (check,) = (c for c in CHECKS if c.name == name)
    return check.results(facts)  # type: ignore[arg-type]


def run_checks(names: Sequence[str], facts: WheelFacts) -> list[Check]:
    return [result for name in names for result in run_check(name, facts)]


__all__ = ["InstalledInfo", "elf", "run_check", "run_checks", "wheel_facts", "with_gpu"]
