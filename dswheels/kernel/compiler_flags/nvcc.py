"""What ``nvcc`` does with the flags DeepSpeed (and dswheels' workarounds) give it.

nvcc knows exactly the options ``nvcc --help`` lists (:func:`parse_nvcc_help` reads them,
recorded from the real nvcc by ``nox -s update_flags``) and stops at anything else: *nvcc
fatal : Unknown option '-Wno-reorder'*. The grammar, each rule checked against nvcc 13.0's
``--dryrun`` (``tests/integration/test_op_flags.py``):

* ``--long-name`` and ``-short`` are the only spellings (``--lineinfo`` is unknown);
* a value follows ``=`` or comes as the next word (``-std=c++17``, ``-std c++17``); only a
  one-letter option takes it attached (``-O3``, ``-DX``, ``-t4``), which is why
  ``-threads=4`` reads as ``-t`` with the value ``hreads=4``;
* a value is checked: numbers for ``<number>``/``<level>``/..., the listed choices
  (``-std=c++23``: *Value 'c++23' is not defined for option 'std'*), ``true``/``false``;
  an option without a value given one stops nvcc (*no argument expected after '-lineinfo'*);
* the same single-valued option twice with different values is a warning: *incompatible
  redefinition for option 'std', the last value of this option was used*;
* ``-Xcompiler`` values (split at commas) go to the host compiler, which judges them.

Source: nvcc --help of CUDA 13.0 (V13.0.88) and NVIDIA's "NVIDIA CUDA Compiler Driver" manual,
section "Command Option Types and Notation".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from dswheels.kernel.compiler_flags.issue import FlagIssue
from dswheels.kernel.numbers import is_ascii_digits

__all__ = ["NvccOption", "NvccOptions", "judge_nvcc", "parse_nvcc_help"]

SOURCE = "nvcc --help (recorded in dswheels/op_flags.json); NVIDIA CUDA Compiler Driver manual, option notation"
_NUMERIC = frozenset({"number", "level", "limit", "amount"})
_HEADER = re.compile(
    r"^(--\S+)(?:\s+(<[^>]+>(?:,\.\.\.)?|\{[^}]*\}|\[[^\]]*\]|entry,\.\.\.))?\s+(?:\((-\S+)\)|(--\S+))\s*$"
)
_ALLOWED = re.compile(r"Allowed values for this option:\s+((?:'[^']*',?\s*)+|[^'.\s][^.]*)")


@dataclass(frozen=True, slots=True)
class NvccOption:
    long: str  # "--std"
    short: str  # "-std" ("" when there is none)
    value: str  # "" (a switch), "number", "file", ... or "choice"
    listed: bool = False  # "<x>,...": a comma-separated list (repeatable, never a redefinition)
    choices: tuple[str, ...] = ()  # allowed values (any when empty)

    def as_json(self) -> list[object]:
        return [self.long, self.short, self.value, self.listed, list(self.choices)]


@dataclass(frozen=True)
class NvccOptions:
    version: str  # "13.0.88"
    options: tuple[NvccOption, ...]

    @cached_property
    def by_long(self) -> Mapping[str, NvccOption]:
        return {o.long: o for o in self.options}

    @cached_property
    def by_short(self) -> Mapping[str, NvccOption]:
        return {o.short: o for o in self.options if o.short}


def parse_nvcc_help(text: str, version: str) -> NvccOptions:
    """The option table of ``nvcc --help``: one option per header line, its allowed values below.

    >>> table = parse_nvcc_help('''--std {c++17|c++20}        (-std)
    ...         Select a particular C++ dialect.
    ...         Allowed values for this option:  'c++17','c++20'.
    ...
    ... --threads <number>       (-t)
    ... ''', "13.0.88")
    >>> [(o.long, o.short, o.value, o.choices) for o in table.options]
    [('--std', '-std', 'choice', ('c++17', 'c++20')), ('--threads', '-t', 'number', ())]
    """
    options: list[NvccOption] = []
    blocks: list[tuple[re.Match[str], list[str]]] = []
    for line in text.splitlines():
        match = _HEADER.match(line.rstrip())
        if match:
            blocks.append((match, []))
        elif blocks:
            blocks[-1][1].append(line)
    for match, body in blocks:
        long, arg, short = match[1], match[2] or "", match[3] or ""
        allowed = _ALLOWED.search("\n".join(body))
        choices: tuple[str, ...] = ()
        if arg.startswith("{"):
            choices = tuple(arg[1:-1].split("|"))
        elif allowed:
            choices = tuple(re.findall(r"'([^']*)'", allowed[1])) or tuple(v.strip() for v in allowed[1].split(","))
        if any(c.startswith("compute_") for c in choices):
            choices = ()  # GPU archs differ per nvcc release: the plan's arch list decides them (compat.yml cuda)
        if arg.startswith("<"):
            value = arg[1 : arg.index(">")]
        elif arg:
            value = "choice"
        else:
            value = ""
        options.append(NvccOption(long=long, short=short, value=value, listed=arg.endswith(",..."), choices=choices))
    return NvccOptions(version=version, options=tuple(options))


def _fatal(flag: str, why: str) -> FlagIssue:
    return FlagIssue(flag=flag, fatal=True, code="nvcc fatal", why=why, source=SOURCE)


_GENCODE_PAIR = re.compile(r"(\w+)=(\[[^\]]*\]|[^,]*),?")
_VIRTUAL = re.compile(r"compute_[0-9]{2,3}[af]?")
_REAL = re.compile(r"(?:sm|compute|lto)_[0-9]{2,3}[af]?")


def _check_gencode(flag: str, value: str) -> FlagIssue | None:
    """``arch=compute_XY,code=sm_XY`` (or ``code=[sm_XY,compute_XY]``): the spelling every nvcc accepts.

    Which archs a given nvcc supports is the plan's business (its arch list); a spelling such as
    ``compute_1.`` (DeepSpeed <= 0.16.3 reading ``10.0`` as ``cc[0] + cc[2]``) no nvcc accepts.
    """
    pairs = _GENCODE_PAIR.findall(value)
    if "".join(f"{k}={v}," for k, v in pairs).rstrip(",") != value.rstrip(","):
        return _fatal(flag, f"'{value}' is not in 'keyword=value' format")
    found = dict(pairs)
    for keyword in found:
        if keyword not in ("arch", "code"):
            return _fatal(flag, f"Keyword '{keyword}' is not defined for option 'generate-code'")
    if "code" not in found or "arch" not in found:
        return _fatal(flag, f"Option '--generate-code {value}', missing {'code' if 'arch' in found else 'arch'}")
    if not _VIRTUAL.fullmatch(found["arch"]):
        return _fatal(flag, f"Unsupported gpu architecture '{found['arch']}' (a virtual arch is spelled compute_XY)")
    for code in found["code"].strip("[]").split(","):
        if not _REAL.fullmatch(code):
            return _fatal(flag, f"Unsupported gpu architecture '{code}' (sm_XY, compute_XY or lto_XY)")
    return None


def _check_value(flag: str, option: NvccOption, value: str) -> FlagIssue | None:
    name = option.short or option.long
    if not value:
        return _fatal(flag, f"argument expected after '{name}'")
    if option.long == "--generate-code":
        return _check_gencode(flag, value)
    for item in value.split(",") if option.listed else [value]:
        if option.choices and item not in option.choices:
            return _fatal(flag, f"Value '{item}' is not defined for option '{option.long.lstrip('-')}'")
        if not option.choices and option.value in _NUMERIC and not is_ascii_digits(item):
            return _fatal(flag, f"'{item}': expected a number")
    return None


def _resolve(
    flag: str, longs: Mapping[str, NvccOption], shorts: Mapping[str, NvccOption]
) -> tuple[NvccOption | None, str | None, bool]:
    """(option, value given in this word or None, value comes in the next word)."""
    table = longs if flag.startswith("--") else shorts
    if flag in table:
        return table[flag], None, bool(table[flag].value)
    name, eq, value = flag.partition("=")
    if eq and name in table:
        return table[name], value, False
    letter = shorts.get(flag[:2]) if not flag.startswith("--") and len(flag) > 2 else None
    if letter is not None and letter.value:
        return letter, flag[2:], False
    return None, None, False


def judge_nvcc(
    flags: Sequence[str], table: NvccOptions, *, host: Callable[[Sequence[str]], tuple[FlagIssue, ...]]
) -> tuple[FlagIssue, ...]:
    """Issues of one nvcc command line's flags; ``host`` judges the ``-Xcompiler`` values.

    >>> table = NvccOptions("13.0", (NvccOption("--optimize", "-O", "level"), NvccOption("--use_fast_math",
    ...     "-use_fast_math", ""), NvccOption("--compiler-options", "-Xcompiler", "options", listed=True)))
    >>> [(i.flag, i.fatal) for i in judge_nvcc(["-O3", "--use_fast_math", "-Wno-reorder", "-Xcompiler",
    ...     "-fPIC"], table, host=lambda flags: ())]
    [('-Wno-reorder', True)]
    """
    longs, shorts = table.by_long, table.by_short
    issues: list[FlagIssue] = []
    seen: dict[str, str] = {}
    words = [f for f in flags if f]
    i = 0
    while i < len(words):
        flag = words[i]
        i += 1
        if not flag.startswith("-"):
            issues.append(_fatal(flag, "not an option: nvcc takes it for an input file"))
            continue
        option, value, next_word = _resolve(flag, longs, shorts)
        if option is None:
            issues.append(_fatal(flag, f"Unknown option '{flag.partition('=')[0]}'"))
            continue
        if next_word:
            value = words[i] if i < len(words) else ""
            i += 1
        if not option.value:
            if value is not None:
                issues.append(_fatal(flag, f"no argument expected after '{flag.partition('=')[0]}'"))
            continue
        issue = _check_value(flag, option, value or "")
        if issue is not None:
            issues.append(issue)
            continue
        if option.long == "--compiler-options":
            issues.extend(host((value or "").split(",")))
        elif not option.listed and seen.setdefault(option.long, value or "") != (value or ""):
            issues.append(
                FlagIssue(
                    flag=flag,
                    fatal=False,
                    code="nvcc warning",
                    why=f"incompatible redefinition for option '{option.long.lstrip('-')}', the last value of this "
                    "option was used",
                    source=SOURCE,
                )
            )
    return tuple(issues)
