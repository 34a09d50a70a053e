"""What the build machine has to spend: cores and available memory."""

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


def host_machine() -> str:
    """This machine's CPU architecture as ``platform.machine()`` names it (``x86_64``, ``AMD64``, ``aarch64``)."""
    return platform.machine()


def host_platform() -> Platform | None:
    """The wheel platform this machine builds natively; None where dswheels builds none (macOS, Windows on Arm)."""
    return machine_platform(host_os(), host_machine())
