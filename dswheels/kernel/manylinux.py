"""A Linux wheel's floor as its platform tag (PEP 600 ``manylinux_2_N_<arch>``), judged by auditwheel.

PyPA's auditwheel is the judge of which manylinux tag a wheel's binaries allow: the symbol versions
they ask of glibc, libstdc++ and libgcc (its policy table), the system libraries they may link (the
policy's whitelist) and the symbols no policy allows. pip and uv enforce the tag: on a system whose
glibc is older than the tag says, they answer "no matching distribution" instead of installing a
wheel whose op would fail to load.

A DeepSpeed op also links torch's own libraries (``libtorch*.so``, ``libc10*.so``, ...) and the
NVIDIA libraries torch's wheels bring: the installed torch (pinned in METADATA) loads them before
any op, so they are left out of the judgement, as torch's own wheels leave them out
(compat.yml ``torch_provided_libraries``), and never grafted into the wheel: ``auditwheel repair``
would copy them in, so dswheels runs ``auditwheel show --json`` and retags the wheel itself.

This module reads auditwheel's JSON (``show-schema.json``: ``sym_tag``, ``policy_upgrades``,
...) into a :class:`FloorVerdict` and compares tags; running auditwheel is the host's
(:mod:`dswheels.host.auditwheel`).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dswheels.kernel.jsondoc import parse_json
from dswheels.kernel.versions import VersionTuple, format_version

__all__ = [
    "AuditwheelOutputError",
    "FloorVerdict",
    "is_linux_tag",
    "linux_arch",
    "linux_tag",
    "manylinux_glibc",
    "manylinux_tag",
    "read_auditwheel_show",
    "retag_wheel_file",
    "tag_problem",
]

_ARCHES = ("x86_64", "aarch64")  # the CPUs dswheels builds Linux wheels for
# a version's parts are at most 9 ASCII digits, as every version dswheels reads (kernel/versions.py): a tag
# of a wheel's name from outside (a served index, a store) with more is no manylinux tag, never an int() error
_MANYLINUX_RE = re.compile(r"^manylinux_([0-9]{1,9})_([0-9]{1,9})_(x86_64|aarch64)$")
# the tags of before PEP 600, as packaging reads them (PEP 513, 571, 599)
_LEGACY = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


class AuditwheelOutputError(ValueError):
    """auditwheel's JSON is not what its schema (``show --json``, version 1) says."""


def manylinux_glibc(tag: str) -> VersionTuple | None:
    """The glibc a manylinux platform tag promises to need at most; None for any other tag.

    >>> manylinux_glibc("manylinux_2_28_x86_64"), manylinux_glibc("manylinux2014_x86_64")
    ((2, 28), (2, 17))
    >>> manylinux_glibc("linux_x86_64") is None
    True
    """
    if match := _MANYLINUX_RE.match(tag):
        return int(match[1]), int(match[2])
    legacy, _, arch = tag.partition("_")
    return _LEGACY.get(legacy) if arch in {"x86_64", "aarch64", "i686"} else None


def manylinux_tag(glibc: VersionTuple, arch: str = "x86_64") -> str:
    """``manylinux_2_28_x86_64`` for glibc 2.28.

    >>> manylinux_tag((2, 28)), manylinux_tag((2, 28), "aarch64")
    ('manylinux_2_28_x86_64', 'manylinux_2_28_aarch64')
    """
    return f"manylinux_{glibc[0]}_{glibc[1]}_{arch}"


def linux_tag(arch: str) -> str:
    """The tag of a Linux wheel of ``arch`` that claims no floor (what setuptools names a Linux build)."""
    return f"linux_{arch}"


def linux_arch(tag: str) -> str | None:
    """The CPU of a Linux platform tag dswheels builds for (with or without a floor); None for any other tag.

    >>> linux_arch("manylinux_2_35_x86_64"), linux_arch("linux_aarch64"), linux_arch("manylinux2014_aarch64")
    ('x86_64', 'aarch64', 'aarch64')
    >>> linux_arch("win_amd64") is None, linux_arch("manylinux_2_28_i686") is None
    (True, True)
    """
    for arch in _ARCHES:
        if tag == linux_tag(arch) or (tag.endswith(f"_{arch}") and manylinux_glibc(tag) is not None):
            return arch
    return None


def is_linux_tag(tag: str) -> bool:
    """A platform tag of Linux x86_64 or aarch64 (with or without a floor).

    >>> is_linux_tag("manylinux_2_35_x86_64"), is_linux_tag("linux_aarch64"), is_linux_tag("win_amd64")
    (True, True, False)
    """
    return linux_arch(tag) is not None


@dataclass(frozen=True, kw_only=True, slots=True)
class FloorVerdict:
    """What auditwheel says a Linux wheel's binaries need, torch's libraries left out."""

    tag: str  # the most widely installable platform tag the wheel may carry ("linux_x86_64", "linux_aarch64": none)
    symbols_tag: str  # the tag the symbol versions alone allow (auditwheel's ``sym_tag``)
    versioned_symbols: Mapping[str, tuple[str, ...]]  # library -> the symbol versions the wheel asks of it
    torch_libraries: tuple[str, ...]  # external libraries left out as torch's (the excluded patterns matched)
    why_none: tuple[str, ...] = ()  # why no manylinux tag fits (tag: linux_<arch>)

    @property
    def glibc(self) -> VersionTuple | None:
        return manylinux_glibc(self.tag)

    def describe(self) -> str:
        if self.why_none:
            return f"no manylinux tag: {'; '.join(self.why_none)}"
        text = f"{self.tag} (auditwheel)"
        if self.torch_libraries:
            text += f"; torch's libraries left out: {', '.join(self.torch_libraries)}"
        return text


def _glibc_key(tag: str) -> VersionTuple:
    return manylinux_glibc(tag) or (99, 99)


def _strs(value: object, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise AuditwheelOutputError(f"{what} is not a list of strings")
    return tuple(value)


def _mapping(value: object, what: str) -> Mapping[str, object]:
    if not isinstance(value, dict):
        raise AuditwheelOutputError(f"{what} is not an object")
    return value


def _excluded(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def read_auditwheel_show(text: str | bytes, excluded: Sequence[str]) -> FloorVerdict:
    """The floor of a wheel from ``auditwheel show --json``'s output, the libraries matching ``excluded`` left out.

    auditwheel's ``overall_tag`` counts torch's libraries as external ones nothing provides (``linux``);
    ``policy_upgrades`` names, for each tag above it, the libraries it would have to graft and the
    symbols no system provides. The verdict is the oldest-glibc tag that the symbol versions allow
    (``sym_tag`` or newer) and that asks nothing but torch's libraries to be eliminated.

    >>> out = {"version": 1, "wheel": "w.whl", "pure": False, "overall_tag": "linux_x86_64",
    ...   "sym_tag": "manylinux_2_35_x86_64", "pyfpe": False, "ucs2": False, "unsupported_isa": False,
    ...   "versioned_symbols": {"libc.so.6": ["GLIBC_2.34"]}, "external_libs": {"libc10.so": None},
    ...   "policy_upgrades": {"manylinux_2_35_x86_64": {"libs_to_eliminate": ["libc10.so"]},
    ...                       "manylinux_2_28_x86_64": {"libs_to_eliminate": ["libc10.so"]}}}
    >>> import json
    >>> read_auditwheel_show(json.dumps(out), ["libc10*.so"]).tag
    'manylinux_2_35_x86_64'
    """
    try:  # parse_json: deep nesting or a 4,301-digit number is a ValueError, not a traceback
        parsed = parse_json(text, what="the output")
    except ValueError as exc:
        raise AuditwheelOutputError(str(exc)) from None
    data = _mapping(parsed, "the output")
    if data.get("version") != 1:
        raise AuditwheelOutputError(f"version {data.get('version')!r} (dswheels reads version 1)")
    if "error" in data:
        raise AuditwheelOutputError(f"auditwheel: {data['error']}")
    sym_tag, overall = data.get("sym_tag"), data.get("overall_tag")
    if not isinstance(sym_tag, str) or not isinstance(overall, str):
        raise AuditwheelOutputError("sym_tag or overall_tag missing")
    versioned = {
        lib: _strs(names, f"versioned_symbols[{lib}]")
        for lib, names in _mapping(data.get("versioned_symbols", {}), "versioned_symbols").items()
    }
    external = sorted(_mapping(data.get("external_libs", {}), "external_libs"))
    upgrades = _mapping(data.get("policy_upgrades", {}), "policy_upgrades")
    why_none = [
        what
        for key, what in (("pyfpe", "PyFPE_jbuf"), ("ucs2", "a UCS-2 Python"), ("unsupported_isa", "an ISA"))
        if data.get(key)
    ]
    verdict_tag, blocked = _oldest_allowed(sym_tag, overall, upgrades, excluded)
    if why_none or verdict_tag is None:
        # auditwheel names the wheel's CPU in its tags (``linux_aarch64``, ``manylinux_2_17_aarch64``)
        return FloorVerdict(
            tag=linux_tag(linux_arch(overall) or linux_arch(sym_tag) or "x86_64"),
            symbols_tag=sym_tag,
            versioned_symbols=versioned,
            torch_libraries=tuple(lib for lib in external if _excluded(lib, excluded)),
            why_none=tuple([f"uses {w}, which no manylinux tag allows" for w in why_none] + blocked),
        )
    return FloorVerdict(
        tag=verdict_tag,
        symbols_tag=sym_tag,
        versioned_symbols=versioned,
        torch_libraries=tuple(lib for lib in external if _excluded(lib, excluded)),
    )


def _oldest_allowed(
    sym_tag: str, overall: str, upgrades: Mapping[str, object], excluded: Sequence[str]
) -> tuple[str | None, list[str]]:
    """The oldest-glibc tag at or above ``sym_tag`` that nothing but torch's libraries blocks."""
    floor = manylinux_glibc(sym_tag)
    if floor is None:  # the symbols allow no manylinux tag at all
        return None, [f"its symbol versions allow only {sym_tag}"]
    candidates = {t for t in (*upgrades, overall, sym_tag) if (g := manylinux_glibc(t)) is not None and g >= floor}
    blocked: list[str] = []
    for tag in sorted(candidates, key=_glibc_key):
        entry = _mapping(upgrades.get(tag, {}), f"policy_upgrades[{tag}]")
        libs = [
            lib
            for lib in _strs(entry.get("libs_to_eliminate", []), "libs_to_eliminate")
            if not _excluded(lib, excluded)
        ]
        symbols = _mapping(entry.get("blacklisted_symbols", {}), "blacklisted_symbols")
        if not libs and not symbols:
            return tag, []
        reason = f"for {tag}: links {', '.join(libs)}, neither a system library it allows nor torch's" if libs else ""
        reason = reason or f"for {tag}: uses symbols it forbids in {', '.join(sorted(symbols))}"
        blocked.append(reason)
    return None, blocked[:1] or [f"no manylinux tag at or above {sym_tag}"]


def tag_problem(claimed: str, verdict: FloorVerdict) -> str | None:
    """Why a wheel tagged ``claimed`` must not carry that tag (None: it may).

    A tag with an older glibc than the binaries need would let pip install the wheel where an op fails to
    load; a manylinux tag on a wheel that allows none is a false claim. ``linux_<arch>`` claims nothing.

    >>> v = FloorVerdict(tag="manylinux_2_35_x86_64", symbols_tag="manylinux_2_35_x86_64", versioned_symbols={},
    ...                  torch_libraries=())
    >>> tag_problem("manylinux_2_28_x86_64", v)
    'tagged manylinux_2_28_x86_64 (glibc 2.28), but its binaries need manylinux_2_35_x86_64 (auditwheel)'
    >>> tag_problem("manylinux_2_36_x86_64", v) is None
    True
    """
    claimed_glibc = manylinux_glibc(claimed)
    if claimed_glibc is None:
        return None
    if verdict.glibc is None:
        return f"tagged {claimed}, but {verdict.describe()}"
    if claimed_glibc < verdict.glibc:
        glibc = format_version(claimed_glibc)
        return f"tagged {claimed} (glibc {glibc}), but its binaries need {verdict.tag} (auditwheel)"
    return None


def retag_wheel_file(text: str, old_platform: str, new_platform: str) -> str:
    """The ``.dist-info/WHEEL`` file with each ``Tag:`` line's platform replaced.

    >>> text = "Wheel-Version: 1.0\\nTag: cp311-cp311-linux_x86_64\\n"
    >>> retag_wheel_file(text, "linux_x86_64", "manylinux_2_28_x86_64")
    'Wheel-Version: 1.0\\nTag: cp311-cp311-manylinux_2_28_x86_64\\n'
    """
    lines = []
    for line in text.splitlines(keepends=True):
        key, sep, value = line.partition(":")
        if sep and key.strip() == "Tag" and value.strip().endswith(f"-{old_platform}"):
            line = f"Tag: {value.strip().removesuffix(old_platform)}{new_platform}\n"  # noqa: PLW2901
        lines.append(line)
    return "".join(lines)
