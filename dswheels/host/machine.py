"""What the build machine has to spend (cores and available memory), and what its CPU can run (feature flags)."""

from __future__ import annotations

import ctypes
import os
import platform
import sys
from pathlib import Path

from dswheels.kernel.model import OS, Platform
from dswheels.kernel.platform_traits import machine_platform

__all__ = [
    "available_memory",
    "cpu_count",
    "cpu_flags",
    "host_machine",
    "host_os",
    "host_platform",
]


def cpu_count() -> int:
    """Cores this process may use (the affinity mask on Linux, as a container or taskset limits it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


class _MemoryStatusEx(ctypes.Structure):
    # MEMORYSTATUSEX (sysinfoapi.h)
    _fields_ = [
        ("dwLength", ctypes.c_ulong),
        ("dwMemoryLoad", ctypes.c_ulong),
        ("ullTotalPhys", ctypes.c_ulonglong),
        ("ullAvailPhys", ctypes.c_ulonglong),
        ("ullTotalPageFile", ctypes.c_ulonglong),
        ("ullAvailPageFile", ctypes.c_ulonglong),
        ("ullTotalVirtual", ctypes.c_ulonglong),
        ("ullAvailVirtual", ctypes.c_ulonglong),
        ("ullAvailExtendedVirtual", ctypes.c_ulonglong),
    ]


def available_memory() -> int | None:
    """Bytes of memory available to new processes now (Linux MemAvailable, Windows ullAvailPhys); None: unknown."""
    # each platform's branch in one if/else: mypy then checks the other platform's code as not run there
    if sys.platform == "win32":
        status = _MemoryStatusEx()
        status.dwLength = ctypes.sizeof(_MemoryStatusEx)
        ok = ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(status))
        available = int(status.ullAvailPhys) if ok else None
    else:
        available = _mem_available(Path("/proc/meminfo"))
    return available


def _mem_available(meminfo: Path) -> int | None:
    try:
        text = meminfo.read_text(encoding="ascii")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return None


def host_os() -> OS:
    """The OS this machine runs (and builds natively for)."""
    # sys.platform, not os.name: mypy narrows on it (`--platform win32`)
    return OS.WINDOWS if sys.platform == "win32" else OS.LINUX


# IsProcessorFeaturePresent (winnt.h): the finest Windows says of AVX2 and AVX-512
_PF_AVX2, _PF_AVX512F = 40, 41


def cpu_flags() -> frozenset[str] | None:
    """The CPU's feature flags by their ``/proc/cpuinfo`` names (``avx2``, ``fma``, ``avx512bw``, ...); None: unknown.

    Windows answers only AVX2 and AVX512F: they stand for the rest of their level (every CPU with AVX2 has FMA;
    every AVX512F CPU Windows runs on, Xeon Phi aside, has AVX512 BW/VL/DQ).
    """
    if sys.platform == "win32":
        present = ctypes.windll.kernel32.IsProcessorFeaturePresent
        flags = (["avx2", "fma"] if present(_PF_AVX2) else []) + (
            ["avx512f", "avx512bw", "avx512vl", "avx512dq"] if present(_PF_AVX512F) else []
        )
        found: frozenset[str] | None = frozenset(flags)
    else:
        found = _cpuinfo_flags(Path("/proc/cpuinfo"))
    return found


def _cpuinfo_flags(cpuinfo: Path) -> frozenset[str] | None:
    try:
        text = cpuinfo.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return None


def host_machine() -> str:
    """This machine's CPU architecture as ``platform.machine()`` names it (``x86_64``, ``AMD64``, ``aarch64``)."""
    return platform.machine()


def host_platform() -> Platform | None:
    """The wheel platform this machine builds natively; None where dswheels builds none (macOS, Windows on Arm)."""
    return machine_platform(host_os(), host_machine())
