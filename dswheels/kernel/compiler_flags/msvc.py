"""What MSVC's ``cl`` and ``link`` do with the flags DeepSpeed gives them.

``cl`` (https://learn.microsoft.com/en-us/cpp/build/reference/compiler-options): an option
starts with ``/`` or ``-`` and is case-sensitive. The rules that decide whether a build
survives:

* ``/W`` takes a warning level; ``/W0``-``/W4``, ``/Wall``, ``/WX[-]``, ``/Wv[:ver]`` and
  ``/WL`` are its only spellings (compiler-option-warning-level). Anything else after ``-W``
  is read as a number and stops cl: *D8021 invalid numeric argument '/Wno-reorder'*
  (command-line-error-d8021; reported for ``/Wno-reorder``, ``/Wextra``, ``/Wno-cpp``,
  ``/Wd4820``: Tyrox92/Gw2SPECS#31, ericniebler/range-v3#720, MicrosoftDocs/cpp-docs#679,
  civetweb/civetweb#1052). GCC's ``-Wno-*`` is the usual culprit.
* An option that needs an argument and has none (``/D``, ``/I``, ...) stops cl: *D8004
  '/D' requires an argument* (reported in microsoft/vcpkg#47367 for ``-V``).
* Any other option cl does not know is *D9002 ignoring unknown option* and the compile goes
  on: ``-O3`` and ``-std=c++11`` (shibing624/pycorrector#71), ``-fopenmp`` (cython/cython#4170).
  DeepSpeed's own win_amd64 wheels on PyPI (0.14.5-0.16.5) were compiled with cpu_adam's
  ``-O2 -L<cuda>/lib64 -lcudart -lcublas -g -march=native -fopenmp``: all of them pass.
  Microsoft documents no page for D9002; the text is the compiler's.
* A word that is not an option is an input file: *D9024 unrecognized source file type*.

``link`` options are case-insensitive; one it does not know is *LNK4044 unrecognized option;
ignored* (ignore-ignore-specific-warnings lists it among the warnings /IGNORE cannot hide).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from dswheels.kernel.compiler_flags.issue import FlagIssue

__all__ = ["judge_cl", "judge_link"]

_DOCS = "https://learn.microsoft.com/en-us/cpp/build/reference/"
CL_OPTIONS_SOURCE = _DOCS + "compiler-options-listed-alphabetically"
_W_SOURCE = (
    _DOCS + "compiler-option-warning-level; https://learn.microsoft.com/en-us/cpp/error-messages/tool-errors/"
    "command-line-error-d8021; MicrosoftDocs/cpp-docs#679, Tyrox92/Gw2SPECS#31"
)
_D9002_SOURCE = (
    "cl's own message (no Microsoft page); cython/cython#4170, shibing624/pycorrector#71; DeepSpeed's win_amd64 "
    "wheels on PyPI were built with such flags"
)
_D8004_SOURCE = CL_OPTIONS_SOURCE + "; microsoft/vcpkg#47367"
_LINK_SOURCE = _DOCS + "ignore-ignore-specific-warnings (LNK4044); " + _DOCS + "linker-options"

# cl options as Microsoft lists them, without the prefix. Exact spellings:
_CL_EXACT = frozenset(
    """? analyze await await:strict bigobj C c clr E EP FC Fx GA Gd Ge GF GH Gh GL GL- Gm Gm- GR GR- Gr GS GS- GT Gv Gw
    Gw- GX GX- Gy Gy- Gz GZ HELP help homeparams hotpatch J jumptablerdata kernel kernel- LD LDd LN MD MDd MT MTd
    nologo openmp openmp:experimental openmp:llvm P permissive permissive- Qfast_transcendentals QIntel-jcc-erratum
    Qpar Qsafe_fp_loads Qspectre Qspectre- Qspectre-load Qspectre-load-cf sdl sdl- showIncludes TC TP u utf-8
    validate-charset validate-charset- X Y- Z7 Za Ze Zf Zg ZI Zi Zl Zo Zo- Zs ZW link""".split(),  # noqa: SIM905 - a word list reads best as words
)
# Prefixes followed by a value (``/Zc:preprocessor``, ``/Fofile``); ``True``: the value is required.
_CL_PREFIXES: dict[str, bool] = {
    "AI": True,
    "D": True,
    "FI": True,
    "FU": True,
    "I": True,
    "Tc": True,
    "Tp": True,
    "U": True,
    "analyze:": False,
    "arch:": False,
    "cgthreads": False,
    "clr:": False,
    "constexpr:": False,
    "diagnostics:": False,
    "doc": False,
    "EH": False,
    "errorReport:": False,
    "execution-charset:": False,
    "experimental:": False,
    "external:": False,
    "F": False,
    "FA": False,
    "Fa": False,
    "favor:": False,
    "Fd": False,
    "Fe": False,
    "Fi": False,
    "Fm": False,
    "Fo": False,
    "Fp": False,
    "fp:": False,
    "fpcvt:": False,
    "FR": False,
    "Fr": False,
    "fsanitize=": False,
    "fsanitize-coverage=": False,
    "guard:": False,
    "H": False,
    "MP": False,
    "Qpar-report:": False,
    "Qvec-report:": False,
    "RTC": False,
    "source-charset:": False,
    "sourceDependencies": False,
    "std:": False,
    "vd": False,
    "vm": False,
    "volatile:": False,
    "Yc": False,
    "Yd": False,
    "Yl": False,
    "Yu": False,
    "Zc:": False,
    "ZH:": False,
    "Zm": False,
    "Zp": False,
}
_CL_PREFIX_ORDER = sorted(_CL_PREFIXES, key=len, reverse=True)
_STD = frozenset({"c++14", "c++17", "c++20", "c++23preview", "c++latest", "c11", "c17", "clatest"})
_ARCH_X64 = frozenset({"AVX", "AVX2", "AVX512", "AVX10.1", "AVX10.2"})
_O_FLAGS = re.compile(r"(?:1|2|b[0-3]|d|g|i-?|s|t|x|y-?)+")
_W_OK = re.compile(r"W[0-4]|Wall|WX-?|WL|Wv(?::[0-9]+(?:\.[0-9]+){0,2})?")
_W_LOWER_OK = re.compile(r"w|w[1-4][0-9]{4}|w[deol][0-9]+")
# GCC spellings people pass to cl, and what cl would want instead (for the message only)
_GCC_HINTS = {
    "-O": "cl's optimization flags are /O1, /O2, /Od",
    "-g": "cl's debug info is /Z7 or /Zi",
    "-march=": "cl's instruction set is /arch:AVX2 etc.",
    "-fopenmp": "cl's OpenMP is /openmp",
    "-std=": "cl's language standard is /std:c++17 etc.",
    "-L": "a library path is a linker option (/LIBPATH:)",
    "-l": "a library is a linker input (name.lib)",
}


def _unknown(flag: str, why: str = "cl ignores an option it does not know") -> FlagIssue:
    hint = next((h for prefix, h in _GCC_HINTS.items() if flag.startswith(prefix)), "")
    return FlagIssue(
        flag=flag,
        fatal=False,
        code="D9002",
        why=f"{why}{'; ' + hint if hint else ''}",
        source=_D9002_SOURCE,
    )


def _stop(flag: str, code: str, why: str, source: str) -> FlagIssue:
    """An error cl stops at (the compile fails)."""
    return FlagIssue(flag=flag, fatal=True, code=code, why=why, source=source)


def _judge_cl_option(flag: str) -> FlagIssue | None:
    name = flag[1:]
    if name.startswith("W"):
        if _W_OK.fullmatch(name):
            return None
        why = f"invalid numeric argument '/{name}': /W takes a warning level (0-4, all, X, v, L), and cl stops"
        return _stop(flag, "D8021", why, _W_SOURCE)
    if name.startswith("w"):
        return None if _W_LOWER_OK.fullmatch(name) else _unknown(flag)
    if name in _CL_EXACT:
        return None
    if name.startswith("O"):
        return None if _O_FLAGS.fullmatch(name[1:]) else _unknown(flag)
    prefix = next((p for p in _CL_PREFIX_ORDER if name.startswith(p)), None)
    return _unknown(flag) if prefix is None else _judge_cl_value(flag, prefix, name[len(prefix) :])


def _judge_cl_value(flag: str, prefix: str, value: str) -> FlagIssue | None:
    """An option that takes a value (``/Zc:...``, ``/DX``): a required one missing stops cl."""
    if _CL_PREFIXES[prefix] and not value:
        return _stop(flag, "D8004", f"'/{prefix}' requires an argument, and cl stops", _D8004_SOURCE)
    if prefix == "std:" and value not in _STD:
        return _unknown(flag, f"/std:{value} is not a language standard cl knows")
    if prefix == "arch:" and value not in _ARCH_X64:
        return _unknown(flag, f"/arch:{value} is not an x64 instruction set cl knows")
    return None


def judge_cl(flags: Sequence[str]) -> tuple[FlagIssue, ...]:
    """Issues of one ``cl`` command line's flags (those after ``/link`` go to :func:`judge_link`).

    >>> [(i.flag, i.fatal, i.code) for i in judge_cl(["-O2", "-Wno-reorder", "-fopenmp", "/arch:AVX2", "-DX"])]
    [('-Wno-reorder', True, 'D8021'), ('-fopenmp', False, 'D9002')]
    """
    issues: list[FlagIssue] = []
    for i, flag in enumerate(flags):
        if not flag:
            continue
        if flag[0] not in "/-":
            issues.append(
                FlagIssue(
                    flag=flag,
                    fatal=False,
                    code="D9024",
                    why="not an option: cl takes it for an input file (unrecognized source file type)",
                    source=CL_OPTIONS_SOURCE,
                )
            )
            continue
        if flag[1:] == "link":
            issues.extend(judge_link(flags[i + 1 :]))
            break
        issue = _judge_cl_option(flag)
        if issue is not None:
            issues.append(issue)
    return tuple(issues)


# link.exe options (case-insensitive), Microsoft's linker-options page; ``NAME:`` takes a value.
_LINK_OPTIONS = frozenset(
    """ALIGN: ALLOWBIND ALLOWISOLATION APPCONTAINER ARM64XFUNCTIONPADMIN: ASSEMBLYDEBUG ASSEMBLYLINKRESOURCE:
    ASSEMBLYMODULE: ASSEMBLYRESOURCE: BASE: CETCOMPAT CGTHREADS: CLRIMAGETYPE: CLRLOADEROPTIMIZATION:
    CLRSUPPORTLASTERROR CLRTHREADATTRIBUTE: CLRUNMANAGEDCODECHECK DEBUG DEBUG: DEBUGTYPE: DEF: DEFAULTLIB: DELAY:
    DELAYLOAD: DELAYSIGN DEPENDENTLOADFLAG: DLL DRIVER DRIVER: DYNAMICBASE DYNAMICBASE: EMITTOOLVERSIONINFO
    EMITPOGOPHASEINFO ENTRY: ERRORREPORT: EXPORT: FILEALIGN: FIXED FIXED: FORCE FORCE: FUNCTIONPADMIN
    FUNCTIONPADMIN: GENPROFILE GENPROFILE: GUARD: GUARDSYM: HEAP: HIGHENTROPYVA HIGHENTROPYVA: IDLOUT: IGNORE:
    IGNOREIDL ILK: IMPLIB: INCLUDE: INCREMENTAL INCREMENTAL: INFERASANLIBS INFERASANLIBS: INTEGRITYCHECK KERNEL
    KEYCONTAINER: KEYFILE: LARGEADDRESSAWARE LARGEADDRESSAWARE: LIBPATH: LINKREPRO: LINKREPROTARGET: LTCG LTCG:
    MACHINE: MANIFEST MANIFEST: MANIFESTDEPENDENCY: MANIFESTFILE: MANIFESTINPUT: MANIFESTUAC MANIFESTUAC: MAP MAP:
    MAPINFO: MERGE: MIDL: NATVIS: NOASSEMBLY NODEFAULTLIB NODEFAULTLIB: NOENTRY NOLOGO NXCOMPAT NXCOMPAT: OPT:
    ORDER: OUT: PDB: PDBALTPATH: PDBSTRIPPED: PROFILE RELEASE SAFESEH SAFESEH: SECTION: SOURCELINK: STACK: STUB:
    SUBSYSTEM: SWAPRUN: TIME TLBID: TLBOUT: TSAWARE TSAWARE: USEPROFILE USEPROFILE: VERBOSE VERBOSE: VERSION:
    WHOLEARCHIVE WHOLEARCHIVE: WINMD WINMD: WINMDFILE: WINMDKEYFILE: WINMDKEYCONTAINER: WINMDDELAYSIGN WX
    WX:""".split(),  # noqa: SIM905 - a word list reads best as words
)


def judge_link(flags: Sequence[str]) -> tuple[FlagIssue, ...]:
    """Issues of ``link`` flags: unknown options are LNK4044 warnings; words are input files.

    >>> [(i.flag, i.code) for i in judge_link(["-lcurand", "/LIBPATH:C:/cuda/lib", "cublas.lib"])]
    [('-lcurand', 'LNK4044')]
    """
    issues: list[FlagIssue] = []
    for flag in flags:
        if not flag or flag[0] not in "/-":
            continue  # an input file: an object or a library
        name = flag[1:].upper()
        head, colon, _value = name.partition(":")
        if (head + colon) in _LINK_OPTIONS or head in _LINK_OPTIONS:
            continue
        issues.append(
            FlagIssue(
                flag=flag,
                fatal=False,
                code="LNK4044",
                why="link ignores an option it does not know (GCC's -l/-L are not link options)",
                source=_LINK_SOURCE,
            )
        )
    return tuple(issues)
