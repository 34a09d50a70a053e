"""A wheel's ``entry_points.txt`` read as the installers will read it, or refused.

pip decides which scripts it writes into ``bin/`` from this file with its metadata backend:
``importlib.metadata`` on Python 3.11+ (sections are any line that starts with ``[`` and ends
with ``]``, stripped of every bracket: ``[[console_scripts]]`` is ``console_scripts``; ``;``
starts no comment), ``pkg_resources`` on 3.10 (one bracket pair, its name stripped of spaces);
then it hands ``name = value`` to distlib, whose pattern *searches* the line (``ds = -x
pip=m:f`` makes ``bin/pip``). uv reads it as an INI file (``;`` starts a comment there). A
judgement made by any one reading of its own can be walked around by a file another reads
differently, so the file is judged once, here, by a strict grammar on which all of them agree:

- ASCII; lines end with ``\\n`` (or ``\\r\\n``); no line starts or ends with a space;
- a line is blank, a comment (``#`` first), a section ``[group]`` or an entry
  ``name = module.path:attr.path``; groups and names ``[A-Za-z0-9_][A-Za-z0-9_.-]*``,
  the value dotted Python identifiers (no extras);
- every entry in a section, no section twice, no name twice in one section; at most 64 KiB.

Then the file is read by ``importlib.metadata`` itself (the reader pip uses) and every script's
specification by distlib's pattern; anything read differently from the strict reading is
refused too (:class:`EntryPointsError`), so a difference the grammar missed cannot pass.
"""

from __future__ import annotations

import importlib.metadata
import re
from dataclasses import dataclass
from typing import NoReturn

__all__ = ["MAX_TEXT", "SCRIPT_GROUPS", "EntryPoint", "EntryPointsError", "read_entry_points", "script_names"]

SCRIPT_GROUPS = ("console_scripts", "gui_scripts")  # the groups pip and uv write into bin/ (Scripts\)
MAX_TEXT = 64 * 1024  # DeepSpeed's is two lines; the readers' time and memory stay small

_WORD = r"[A-Za-z0-9_][A-Za-z0-9_.-]*"
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_DOTTED = rf"{_IDENT}(?:\.{_IDENT})*"
_SECTION = re.compile(rf"\[({_WORD})\]")
_ENTRY = re.compile(rf"({_WORD}) *= *({_DOTTED}(?::{_DOTTED})?)")
_PRINTABLE = re.compile(r"[\x20-\x7e]*")
# pip/_vendor/distlib/util.py ENTRY_RE: how pip's script maker reads back "name = value"
_DISTLIB_ENTRY = re.compile(
    r"""(?P<name>([^\[]\S*))
                      \s*=\s*(?P<callable>(\w+)([:\.]\w+)*)
                      \s*(\[\s*(?P<flags>[\w-]+(=\w+)?(,\s*\w+(=\w+)?)*)\s*\])?
                      """,
    re.VERBOSE,
)
_SHOWN = 60  # characters of a refused line shown
_LISTED = 8  # entry points named in a disagreement


class EntryPointsError(ValueError):
    """An ``entry_points.txt`` that is not in the strict grammar, or that pip reads otherwise."""


@dataclass(frozen=True, slots=True)
class EntryPoint:
    group: str
    name: str
    value: str


def _refuse(number: int, line: str, why: str) -> NoReturn:
    shown = line if len(line) <= _SHOWN else line[: _SHOWN - 3] + "..."
    msg = f"entry_points.txt line {number} ({shown!r}): {why}"
    raise EntryPointsError(msg)


def _judge_line(number: int, line: str) -> None:
    """A line every reader splits and strips alike."""
    if not _PRINTABLE.fullmatch(line):
        _refuse(number, line, "a character other than printable ASCII (readers split and strip lines differently)")
    if line != line.strip():
        _refuse(number, line, "a line that starts or ends with a space (an INI reader continues the line above)")


def _strict(text: str) -> tuple[EntryPoint, ...]:
    points: list[EntryPoint] = []
    groups: set[str] = set()
    seen: set[tuple[str, str]] = set()
    group: str | None = None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the final newline ends the last line; it does not start another
    for number, raw in enumerate(lines, 1):
        line = raw.removesuffix("\r")
        _judge_line(number, line)
        if not line or line.startswith("#"):
            continue
        if section := _SECTION.fullmatch(line):
            group = section[1]
            if group in groups:
                _refuse(number, line, "a section given twice (pip on Python 3.10 refuses it, 3.11+ merges it)")
            groups.add(group)
        elif entry := _ENTRY.fullmatch(line):
            point = EntryPoint(group or "", entry[1], entry[2])
            if group is None:
                _refuse(number, line, "an entry before any section")
            if (group, point.name) in seen:
                _refuse(number, line, f"{point.name!r} given twice in [{group}]")
            seen.add((group, point.name))
            points.append(point)
        else:
            _refuse(number, line, "neither '[group]' nor 'name = module:attr' (names: letters, digits, '_', '.', '-')")
    return tuple(points)


class _TextDistribution(importlib.metadata.Distribution):
    """A distribution whose only file is the ``entry_points.txt`` given: ``entry_points`` is then
    exactly what ``importlib.metadata`` (pip's reader on Python 3.11+) makes of that text."""

    def __init__(self, text: str) -> None:
        self._text = text

    def read_text(self, filename: str) -> str | None:
        return self._text if filename == "entry_points.txt" else None

    def locate_file(self, path: object) -> NoReturn:
        msg = f"{path}: a distribution made of one text has no files"
        raise NotImplementedError(msg)


def _as_pip_reads(text: str) -> tuple[EntryPoint, ...]:
    try:
        found = _TextDistribution(text).entry_points
    except ValueError as exc:  # Python 3.15+ checks entries as it reads them
        msg = f"entry_points.txt: importlib.metadata refuses it ({exc})"
        raise EntryPointsError(msg) from None
    return tuple(EntryPoint(p.group, p.name, p.value) for p in found)


def read_entry_points(text: str) -> tuple[EntryPoint, ...]:
    """The entry points of ``text``, read strictly and found the same by pip's readers.

    >>> read_entry_points("[pytest_randomly.random_seeder]\\ndeepspeed = deepspeed.runtime:seed\\n")
    (EntryPoint(group='pytest_randomly.random_seeder', name='deepspeed', value='deepspeed.runtime:seed'),)
    >>> read_entry_points("[x]\\n[[console_scripts]]\\npip = evil:main\\n")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dswheels.kernel.entry_points.EntryPointsError: entry_points.txt line 2 ('[[console_scripts]]'): neither ...
    """
    if len(text) > MAX_TEXT:
        msg = f"entry_points.txt: {len(text):,} characters, larger than the {MAX_TEXT:,} dswheels reads"
        raise EntryPointsError(msg)
    strict = _strict(text)
    lenient = _as_pip_reads(text)
    if strict != lenient:
        msg = (
            f"entry_points.txt: importlib.metadata (pip's reader) finds {_listed(lenient)}, "
            f"a strict reading {_listed(strict)}"
        )
        raise EntryPointsError(msg)
    for point in strict:
        if point.group in SCRIPT_GROUPS:
            made = _DISTLIB_ENTRY.search(f"{point.name} = {point.value}")
            if made is None or made["name"] != point.name:
                msg = f"entry_points.txt: pip's script maker reads [{point.group}] {point.name} as another script"
                raise EntryPointsError(msg)
    return strict


def _listed(points: tuple[EntryPoint, ...]) -> str:
    shown = ", ".join(f"[{p.group}] {p.name}" for p in points[:_LISTED])
    more = f" and {len(points) - _LISTED} more" if len(points) > _LISTED else ""
    return f"{shown}{more}" if points else "no entry point"


def script_names(points: tuple[EntryPoint, ...]) -> list[str]:
    """The names of the scripts an installer writes for ``points`` (console and GUI)."""
    return [p.name for p in points if p.group in SCRIPT_GROUPS]
