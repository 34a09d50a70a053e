"""What the GCC driver (``g++``, ``gcc``) does with the flags DeepSpeed gives it on Linux.

GCC stops at an option it does not recognize (*unrecognized command-line option*), at a bad
value of one it does (``-O``, ``-march=``), and at a word it takes for a missing input file;
it accepts any ``-Wno-*``: "no diagnostic is produced for -Wno-unknown-warning unless other
diagnostics are being produced" (https://gcc.gnu.org/onlinedocs/gcc/Warning-Options.html).

The ``-m`` options are the target's: an x86-64 GCC and an AArch64 GCC (``machine``) know different ones,
and each stops at a value of ``-march=``/``-mcpu=`` it does not know (``unknown value 'x86-64-v2' for
'-march'`` on AArch64; each checked against Debian 12's gcc 12.2 for arm64). ``-march=native`` and
``-mcpu=native`` are fatal on both: they bake the build machine's CPU into a wheel for every machine.

GCC knows thousands of ``-f``/``-m``/``-W`` options, so this model is two-sided: what it knows
to be fine or fatal it says so (each rule checked against gcc 12 on an empty translation
unit, ``tests/integration/test_op_flags.py``); an option of a large family it does not list is
a warning ("not modelled"), so that it never stops a build gcc would accept. The integration
tests fail when DeepSpeed starts passing a flag the model does not know.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from dswheels.kernel.compiler_flags.issue import FlagIssue

__all__ = ["judge_gcc"]

_MANUAL = "https://gcc.gnu.org/onlinedocs/gcc/"
_SUMMARY = _MANUAL + "Option-Summary.html"
_MODEL_NOTE = "not in dswheels' model of GCC; gcc itself stops at an option it does not recognize"

# The driver's own options (Overall, Preprocessor, Linking, Directory options), without the '-'.
_EXACT = frozenset(
    """c S E v pipe shared static static-libgcc static-libstdc++ shared-libgcc pthread pie no-pie static-pie rdynamic s
    nostdlib nostdlib++ nostdinc nostdinc++ nodefaultlibs nostartfiles pedantic pedantic-errors w ansi H P C CC M MM
    MD MMD MP symbolic undef trigraphs traditional traditional-cpp save-temps time Q dumpversion dumpmachine
    dumpfullversion dumpspecs coverage -coverage -help -version -target-help -verbose""".split(),  # noqa: SIM905 - a word list reads best as words
)
# Options whose value is attached (-DX, -Ipath) or, with nothing attached, the next word.
_ATTACHED = ("D", "U", "I", "L", "l", "o", "x", "B", "T", "u", "z", "e")
_LONG_VALUE = (
    "include",
    "imacros",
    "isystem",
    "idirafter",
    "iquote",
    "iprefix",
    "iwithprefix",
    "isysroot",
    "MF",
    "MT",
    "MQ",
    "Xlinker",
    "Xassembler",
    "Xpreprocessor",
    "specs=",
    "wrapper",
    "-param",
    "-param=",
    "-sysroot=",
    "-std=",
    "std=",
)
# -std= values of the C and C++ dialect pages (gcc 12 knows all of them)
_STD = re.compile(r"(?:c|gnu)(?:89|90|99|9x|11|1x|17|18|2x)|iso9899:\S+|(?:c|gnu)\+\+(?:98|03|0x|11|1y|14|1z|17|2a|20)")
# x86 -march=/-mtune= values gcc 12 accepts (its "valid arguments to -march= switch")
_X86_CPUS = frozenset(
    """native x86-64 x86-64-v2 x86-64-v3 x86-64-v4 nocona core2 nehalem corei7 westmere sandybridge corei7-avx
    ivybridge core-avx-i haswell core-avx2 broadwell skylake skylake-avx512 cannonlake icelake-client rocketlake
    icelake-server cascadelake tigerlake cooperlake sapphirerapids alderlake bonnell atom silvermont slm goldmont
    goldmont-plus tremont knl knm k8 k8-sse3 opteron opteron-sse3 athlon64 athlon64-sse3 athlon-fx amdfam10
    barcelona bdver1 bdver2 bdver3 bdver4 znver1 znver2 znver3 btver1 btver2 generic intel""".split(),  # noqa: SIM905 - a word list reads best as words
)
_X86_ISA = frozenset(
    """64 32 sse sse2 sse3 ssse3 sse4 sse4.1 sse4.2 avx avx2 fma f16c bmi bmi2 lzcnt popcnt avx512f avx512bw avx512cd
    avx512dq avx512vl avx512vnni avx512bf16 avx512fp16 avxvnni amx-tile amx-int8 amx-bf16 no-red-zone""".split(),  # noqa: SIM905 - a word list reads best as words
)
_F_KNOWN = frozenset(
    """openmp PIC pic PIE pie strict-aliasing visibility=hidden visibility=default fast-math math-errno exceptions rtti
    omit-frame-pointer stack-protector stack-protector-strong unroll-loops tree-vectorize inline-functions
    diagnostics-color=always diagnostics-color=never permissive signed-char unsigned-char common lto
    function-sections data-sections ident semantic-interposition plt openmp-simd sized-deallocation schedule-insns
    schedule-insns2""".split(),  # noqa: SIM905 - a word list reads best as words
)
_W_KNOWN = frozenset(
    """all extra error pedantic reorder shadow conversion sign-compare sign-conversion unused unused-variable
    unused-function unused-parameter unused-but-set-variable format return-type uninitialized maybe-uninitialized
    deprecated-declarations narrowing cast-align strict-aliasing missing-field-initializers comment switch
    parentheses address array-bounds vla write-strings""".split(),  # noqa: SIM905 - a word list reads best as words
)
# AArch64 gcc 12: -march= bases and +modifiers, -mcpu=/-mtune= values, other -m options ("valid arguments")
_A64_ARCHS = frozenset(
    """armv8-a armv8.1-a armv8.2-a armv8.3-a armv8.4-a armv8.5-a armv8.6-a armv8.7-a armv8.8-a armv8-r armv9-a
    native""".split(),  # noqa: SIM905 - a word list reads best as words
)
_A64_MODIFIERS = frozenset(
    """fp simd crypto crc lse fp16 rcpc rdma dotprod aes sha2 sha3 sm4 fp16fml sve profile rng memtag sb ssbs predres
    sve2 sve2-sm4 sve2-aes sve2-sha3 sve2-bitperm tme i8mm f32mm f64mm bf16 flagm pauth ls64 mops""".split(),  # noqa: SIM905 - a word list reads best as words
)
_A64_CPUS = frozenset(
    """native generic cortex-a34 cortex-a35 cortex-a53 cortex-a57 cortex-a72 cortex-a73 thunderx ampere1 emag xgene1
    falkor qdf24xx exynos-m1 thunderx2t99 cortex-a55 cortex-a75 cortex-a76 cortex-a76ae cortex-a77 cortex-a78
    cortex-a78ae cortex-a78c cortex-a65 cortex-a65ae cortex-x1 ares neoverse-n1 neoverse-e1 octeontx2 a64fx tsv110
    thunderx3t110 zeus neoverse-v1 neoverse-512tvb saphira cortex-r82 cortex-a510 cortex-a710 cortex-x2 neoverse-n2
    demeter""".split(),  # noqa: SIM905 - a word list reads best as words
)
_A64_M = frozenset(
    """abi= big-endian bionic branch-protection= cmodel= fix-cortex-a53-835769 fix-cortex-a53-843419
    general-regs-only glibc harden-sls= little-endian low-precision-div low-precision-recip-sqrt low-precision-sqrt
    musl omit-leaf-frame-pointer outline-atomics override= pc-relative-literal-loads sign-return-address=
    stack-protector-guard-offset= stack-protector-guard-reg= stack-protector-guard= strict-align sve-vector-bits=
    tls-dialect= tls-size= track-speculation verbose-cost-dump""".split(),  # noqa: SIM905 - a word list reads best as words
)
_HOST_CPU = "bakes the build machine's CPU into the wheel: it faults (SIGILL) on any CPU that lacks what that one has"
_O_LEVEL = re.compile(r"[0-9]*|s|fast|g|z")
_G_LEVEL = re.compile(r"[0-3]?|gdb[0-3]?|dwarf(?:-[2-5])?|split-dwarf|z(?:=\S+)?|no-\S+|column-info|btf|ctf")


def _fatal(flag: str, why: str, source: str = _SUMMARY) -> FlagIssue:
    return FlagIssue(flag=flag, fatal=True, code="gcc-error", why=why, source=source)


def _unmodelled(flag: str) -> FlagIssue:
    return FlagIssue(flag=flag, fatal=False, code="not-modelled", why=_MODEL_NOTE, source=_SUMMARY)


def _judge_a64_m(flag: str, option: str) -> FlagIssue | None:
    """An AArch64 gcc's ``-m`` option (``option`` without the ``m``); None when fine."""
    key, eq, value = option.partition("=")
    if eq and key == "arch":
        base, *modifiers = value.split("+")
        if base not in _A64_ARCHS:
            return _fatal(flag, f"unknown value '{base}' for '-march' (AArch64 gcc)")
        if bad := [m for m in modifiers if m.removeprefix("no") not in _A64_MODIFIERS]:
            return _fatal(flag, f"invalid feature modifier '{bad[0]}' in '{flag}'")
        return None
    if eq and key in ("cpu", "tune"):
        return None if value.split("+")[0] in _A64_CPUS else _fatal(flag, f"unknown value '{value}' for '-m{key}'")
    if option.removeprefix("no-") in _X86_ISA or (eq and key in ("arch", "tune")) or key in ("fpu", "avx"):
        return _fatal(flag, "unrecognized command-line option: an x86 (or 32-bit Arm) option AArch64 gcc does not know")
    known = option.removeprefix("no-") in _A64_M or (eq and f"{key}=" in _A64_M)
    return None if known else _unmodelled(flag)


def _judge_m(flag: str, option: str, machine: str) -> FlagIssue | None:
    """A target option (``option`` without its ``-m``) for an x86-64 or an AArch64 gcc; None when fine."""
    if option in ("arch=native", "cpu=native"):
        return FlagIssue(
            flag=flag, fatal=True, code="host-cpu", why=_HOST_CPU, source=_MANUAL + "Submodel-Options.html"
        )
    if machine == "aarch64":
        return _judge_a64_m(flag, option)
    key, eq, value = option.partition("=")
    if eq and key in ("arch", "tune"):
        return None if value in _X86_CPUS else _unmodelled(flag)
    return None if option.removeprefix("no-") in _X86_ISA else _unmodelled(flag)


def _judge_family(flag: str, name: str, machine: str = "x86_64") -> FlagIssue | None:
    """``-O``/``-g``/``-W``/``-f``/``-m``/``-std=``; None when fine."""
    if name.startswith("O"):
        if _O_LEVEL.fullmatch(name[1:]):
            return None
        return _fatal(flag, "argument to '-O' should be a non-negative integer, 'g', 's', 'z' or 'fast'")
    if name.startswith("g"):
        return None if _G_LEVEL.fullmatch(name[1:]) else _unmodelled(flag)
    if name.startswith(("Wl,", "Wa,", "Wp,", "Wno-")):
        return None  # passed on to the linker/assembler/preprocessor; -Wno-* never stops gcc
    if name.startswith("W"):
        warning = name[1:].removeprefix("error=")
        return None if name == "Werror" or warning in _W_KNOWN else _unmodelled(flag)
    if name.startswith("f"):
        option = name[1:]
        return None if option in _F_KNOWN or option.removeprefix("no-") in _F_KNOWN else _unmodelled(flag)
    if name.startswith("m"):
        return _judge_m(flag, name[1:], machine)
    if name.startswith("std="):
        return None if _STD.fullmatch(name[4:]) else _unmodelled(flag)
    return _fatal(flag, "unrecognized command-line option: gcc stops at an option it does not know")


def judge_gcc(flags: Sequence[str], *, link: bool = False, machine: str = "x86_64") -> tuple[FlagIssue, ...]:
    """Issues of one GCC driver command line for a ``machine`` (``x86_64``, ``aarch64``) target; ``link``: a
    link step, where words are input files.

    >>> [(i.flag, i.fatal) for i in judge_gcc(["-O3", "-Wno-reorder", "-march=x86-64-v2", "--use_fast_math"])]
    [('--use_fast_math', True)]
    >>> flags = ["-march=x86-64-v2", "-march=armv8.2-a", "-mcpu=native"]
    >>> [(i.flag, i.code) for i in judge_gcc(flags, machine="aarch64")]
    [('-march=x86-64-v2', 'gcc-error'), ('-mcpu=native', 'host-cpu')]
    """
    issues: list[FlagIssue] = []
    expect_value = False
    for flag in flags:
        if expect_value:
            expect_value = False
            continue
        if not flag:
            continue
        issue, expect_value = _judge_word(flag, link=link, machine=machine)
        if issue is not None:
            issues.append(issue)
    return tuple(issues)


def _judge_word(flag: str, *, link: bool, machine: str) -> tuple[FlagIssue | None, bool]:
    """One word of the command line: its issue (None when fine), and whether the next word is its value."""
    if not flag.startswith("-"):
        if link:
            return None, False
        return _fatal(flag, "not an option: gcc takes it for an input file, and a compile stops"), False
    name = flag[1:]
    if name in _EXACT:
        return None, False
    if name.startswith(_ATTACHED) and len(name) >= 1 and name[0] in _ATTACHED:
        if len(name) > 1:
            return None, False
        if name in ("D", "U"):
            return _fatal(flag, f"macro name missing after '-{name}'"), False
        return None, True
    value_option = next((o for o in _LONG_VALUE if name == o or (o.endswith("=") and name.startswith(o))), None)
    if value_option is not None:
        issue = _judge_family(flag, name.lstrip("-")) if value_option in ("std=", "-std=") else None
        return issue, not value_option.endswith("=") and name == value_option
    if name.startswith(("isystem", "include")):
        return None, False  # the value attached: -isystem/path
    return _judge_family(flag, name, machine), False
