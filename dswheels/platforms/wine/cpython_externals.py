"""The third-party sources a Windows CPython needs beyond its own tree, pinned, and libffi's generated headers.

CPython's Windows build takes them from ``PCbuild/get_externals.bat`` (python.org's
cpython-source-deps); the Wine host takes the same libraries from Debian's archive, each archive
pinned by its sha256 (Debian bookworm's ``.dsc`` ``Checksums-Sha256``):

* **zlib**, compiled into ``pythonXY.dll`` as ``pythoncore.vcxproj`` does when ``$(zlibDir)`` exists:
  pip unpacks wheels (zip, deflate) through it;
* **libffi**, linked statically into ``_ctypes.pyd`` (CPython links ``libffi-8.dll``): torch loads its
  DLLs through ctypes on Windows. Its ``configure`` is not run: ``ffi.h`` and ``fficonfig.h`` are
  written here from their templates with what MSVC on x64 has (what libffi's own ``msvcc.sh`` build
  finds), and ``win64_intel.S`` goes through cl's preprocessor and ml64.

No OpenSSL, bzip2, xz or SQLite: the Windows Python here serves ``dswheels verify`` and a Windows
user's pip path, and its pip reads local folders and loopback HTTP (docs/build.md#windows-under-wine).
Pure: the pins and text transforms.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["EXTERNALS", "LIBFFI", "LIBFFI_ASM", "LIBFFI_SOURCES", "ZLIB", "External", "ffi_header", "fficonfig_header"]


@dataclass(frozen=True, slots=True)
class External:
    name: str
    version: str
    sha256: str
    urls: tuple[str, ...]
    source: str  # where the pin was read


ZLIB = External(
    name="zlib",
    version="1.2.13",
    sha256="71feb7947e3c00ef125f83b79a4e529bde31171e5babe48b391f06758d1ab0a1",
    urls=("http://deb.debian.org/debian/pool/main/z/zlib/zlib_1.2.13.dfsg.orig.tar.bz2",),
    source="Debian bookworm zlib_1.2.13.dfsg-1.dsc (CPython 3.11-3.12 build with zlib 1.2.13)",
)
LIBFFI = External(
    name="libffi",
    version="3.4.4",
    sha256="d66c56ad259a82cf2a9dfc408b32bf5da52371500b84745f7fb8b645712df676",
    urls=(
        "http://deb.debian.org/debian/pool/main/libf/libffi/libffi_3.4.4.orig.tar.gz",
        "https://github.com/libffi/libffi/releases/download/v3.4.4/libffi-3.4.4.tar.gz",
    ),
    source="Debian bookworm libffi_3.4.4-1.dsc (CPython 3.12-3.13 build with libffi 3.4.4)",
)
EXTERNALS = (ZLIB, LIBFFI)

# libffi's configure.host for X86_WIN64 with MSVC, and its target-independent sources (src/Makefile.am)
LIBFFI_SOURCES = (
    "src/prep_cif.c",
    "src/types.c",
    "src/raw_api.c",
    "src/java_raw_api.c",
    "src/closures.c",
    "src/tramp.c",
    "src/x86/ffiw64.c",
)
LIBFFI_ASM = "src/x86/win64_intel.S"

_FFI_SUBSTITUTIONS = {
    "TARGET": "X86_WIN64",
    "HAVE_LONG_DOUBLE": "0",  # MSVC's long double is double
    "HAVE_LONG_DOUBLE_VARIANT": "0",
    "FFI_EXEC_TRAMPOLINE_TABLE": "0",
}
# fficonfig.h.in's #undef lines that configure defines for MSVC on x64; every other one stays undefined
_FFICONFIG = {
    "HAVE_ALLOCA": "1",
    "HAVE_INTTYPES_H": "1",
    "HAVE_MEMCPY": "1",
    "HAVE_STDINT_H": "1",
    "HAVE_STDIO_H": "1",
    "HAVE_STDLIB_H": "1",
    "HAVE_STRING_H": "1",
    "HAVE_SYS_STAT_H": "1",
    "HAVE_SYS_TYPES_H": "1",
    "STDC_HEADERS": "1",
    "SIZEOF_DOUBLE": "8",
    "SIZEOF_LONG_DOUBLE": "8",
    "SIZEOF_SIZE_T": "8",
    "EH_FRAME_FLAGS": '"a"',
}


def ffi_header(template: str, version: str) -> str:
    """``include/ffi.h`` from ``ffi.h.in``, as configure writes it for x86_64 Windows with MSVC.

    >>> ffi_header("libffi @VERSION@\\n#ifndef @TARGET@\\n#if @HAVE_LONG_DOUBLE@", "3.4.4")
    'libffi 3.4.4\\n#ifndef X86_WIN64\\n#if 0'
    """
    values = {"VERSION": version, **_FFI_SUBSTITUTIONS}

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            msg = f"ffi.h.in asks for @{name}@, which the Wine host does not know for MSVC"
            raise ValueError(msg)
        return values[name]

    return re.sub(r"@([A-Z_]+)@", replace, template)


def fficonfig_header(template: str, version: str) -> str:
    """``fficonfig.h`` from ``fficonfig.h.in``: autoheader's ``#undef NAME`` lines, defined where MSVC has it.

    >>> fficonfig_header("#undef HAVE_MEMCPY\\n#undef HAVE_MMAP\\n#undef PACKAGE_VERSION", "3.4.4")
    '#define HAVE_MEMCPY 1\\n/* #undef HAVE_MMAP */\\n#define PACKAGE_VERSION "3.4.4"'
    """
    values = {**_FFICONFIG, "PACKAGE_VERSION": f'"{version}"', "VERSION": f'"{version}"'}

    def replace(match: re.Match[str]) -> str:
        name = match.group(2)
        if name in values:
            return f"{match.group(1)}#define {name} {values[name]}"
        return f"{match.group(1)}/* #undef {name} */"

    return re.sub(r"^(\s*)#undef ([A-Za-z_]\w*)\s*$", replace, template, flags=re.MULTILINE)
