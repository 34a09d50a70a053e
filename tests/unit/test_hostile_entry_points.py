"""``entry_points.txt`` that the installers read otherwise than dswheels (issue 30, point 1).

pip decides which scripts it writes into ``bin/`` with ``importlib.metadata`` (Python 3.11+),
``pkg_resources`` (3.10) and distlib's search of ``name = value``; uv with an INI reader. A file
is admitted only when a strict reading and every one of those finds the same entry points:
the property below draws files from a grammar of what the readers treat differently (brackets,
spaces, ``;``, Unicode line breaks and spaces, duplicates, distlib's search) and checks that
whatever is admitted is read alike by all the readers this machine has.
"""

from __future__ import annotations

import configparser
import contextlib
import importlib
import re
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dswheels.kernel.entry_points import MAX_TEXT, EntryPoint, EntryPointsError, read_entry_points
from dswheels.kernel.wheel_admission import SCRIPTS_POSIX, entry_point_scripts
from tests.support.fuzz import examples

# what main's reading let through while pip writes bin/pip (or another script DeepSpeed does not install)
READ_OTHERWISE = {
    "double-brackets": "[x]\n[[console_scripts]]\npip = deepspeed:main\n",
    "bracket-after": "[console_scripts]]\npip = deepspeed:main\n",
    "bracket-before": "[x]\n[[console_scripts]\npip = deepspeed:main\n",
    "distlib-search": "[console_scripts]\nds = -x pip=deepspeed:main\n",
    "semicolon-name": "[console_scripts]\n;pip = deepspeed:main\n",
    "vertical-tab": "[x]\x0b[console_scripts]\npip = deepspeed:main\n",
    "line-separator": "[x]\u2028[console_scripts]\npip = deepspeed:main\n",
    "unicode-space": "[x]\n\u3000[console_scripts]\u3000\npip = deepspeed:main\n",
    "indented-continuation": "[console_scripts]\nds = deepspeed:main\n  pip = deepspeed:main\n",
    "gui-double-brackets": "[x]\n[[gui_scripts]]\npython3 = deepspeed:main\n",
}


def _pkg_resources() -> ModuleType | None:
    """pip's own pkg_resources (its reader on Python 3.10), where this environment has pip."""
    try:
        return importlib.import_module("pip._vendor.pkg_resources")
    except ImportError:
        return None


def _distlib_names(points: tuple[EntryPoint, ...]) -> list[str] | None:
    try:
        util = importlib.import_module("pip._vendor.distlib.util")
    except ImportError:
        return None
    names = []
    for point in points:
        if point.group in ("console_scripts", "gui_scripts"):
            entry = util.get_export_entry(f"{point.name} = {point.value}")
            names.append(entry.name if entry is not None else "")
    return names


def _ini(text: str) -> set[tuple[str, str, str]]:
    """An INI reading (uv's kind of reader): ``=`` only, case-sensitive, ``#``/``;`` comments."""
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None, strict=False)
    parser.optionxform = str  # type: ignore[assignment, method-assign]
    parser.read_string(text)
    return {(g, n, v) for g in parser.sections() for n, v in parser[g].items()}


def _readers() -> list[tuple[str, Callable[[str], set[tuple[str, str, str]]]]]:
    readers: list[tuple[str, Callable[[str], set[tuple[str, str, str]]]]] = [("ini", _ini)]
    pkg = _pkg_resources()
    if pkg is not None:

        def pkg_read(text: str) -> set[tuple[str, str, str]]:
            found = pkg.EntryPoint.parse_map(text)
            return {(g, n, str(ep).partition("=")[2].strip()) for g, eps in found.items() for n, ep in eps.items()}

        readers.append(("pkg_resources", pkg_read))
    return readers


@pytest.mark.parametrize("text", READ_OTHERWISE.values(), ids=READ_OTHERWISE)
def test_a_file_pip_reads_otherwise_is_refused(text: str) -> None:
    with pytest.raises(EntryPointsError, match=r"entry_points\.txt"):
        read_entry_points(text)
    with pytest.raises(EntryPointsError):
        entry_point_scripts(text)


def test_deepspeeds_own_file_and_ordinary_ones_are_read() -> None:
    real = "[pytest_randomly.random_seeder]\ndeepspeed = deepspeed.runtime.utils:set_random_seed\n"
    assert read_entry_points(real) == (
        EntryPoint("pytest_randomly.random_seeder", "deepspeed", "deepspeed.runtime.utils:set_random_seed"),
    )
    text = "# made by setuptools\r\n[console_scripts]\r\nds=deepspeed.launcher.runner:main\r\n\r\n[gui_scripts]\r\n"
    assert entry_point_scripts(text) == ["ds"]
    assert entry_point_scripts("") == []


def test_a_huge_file_is_refused_before_it_is_read() -> None:
    with pytest.raises(EntryPointsError, match="larger than"):
        read_entry_points("[g]\n" + "n = m:f\n" * (MAX_TEXT // 8 + 1))


def test_the_control_pip_reads_these_as_scripts_deepspeed_does_not_install() -> None:
    """Each refused file really is read as a foreign script by one of the installers' readers."""
    md = importlib.import_module("importlib.metadata")

    class Text(md.Distribution):  # type: ignore[misc, name-defined]
        def __init__(self, text: str) -> None:
            self.text = text

        def read_text(self, filename: str) -> str | None:
            return self.text if filename == "entry_points.txt" else None

        def locate_file(self, path: object) -> Path:
            raise NotImplementedError(path)

    for case, text in READ_OTHERWISE.items():
        points = tuple(
            EntryPoint(p.group, p.name, p.value)
            for p in Text(text).entry_points
            if p.group in ("console_scripts", "gui_scripts")
        )
        names = {p.name for p in points} | set(_distlib_names(points) or ())
        with contextlib.suppress(configparser.Error):  # an INI reader refuses some outright
            names |= {n for g, n, _v in _ini(text) if g in ("console_scripts", "gui_scripts")}
        assert names - SCRIPTS_POSIX, case


# --- the property: what is admitted, every reader reads alike ------------------------------------------------------

_GROUPS = ["console_scripts", "gui_scripts", "pytest_randomly.random_seeder", "Console_Scripts", "x"]
_NAMES = ["ds", "pip", "ds_report", "deepspeed", "python3", "p-i.p", ";pip", "ds x", "[pip", "#pip"]
_VALUES = ["deepspeed:main", "a.b:c.d", "m", "-x pip=m:f", "m:f [extra]", "m : f", "\xe4:f", "m:f pip=x", "m:f;x"]
_ODD_SPACES = [" ", "  ", "\t", "\u3000", "\xa0", "\x0c"]
_ODD_BREAKS = ["\r", "\x0b", "\x1c", "\x85", "\u2028"]


def _ONCE_IN(n: int) -> st.SearchStrategy[bool]:  # noqa: N802 - reads as a rate
    """True about once in ``n`` draws (``integers`` favours its bounds; a sample is uniform)."""
    return st.sampled_from([False] * (n - 1) + [True])


def _mostly(usual: str, odd: list[str]) -> st.SearchStrategy[str]:
    """``usual`` 19 times in 20 (so that files get admitted), one of ``odd`` otherwise."""
    return _ONCE_IN(20).flatmap(lambda odd_one: st.sampled_from(odd) if odd_one else st.just(usual))


def _section(draw: st.DrawFn) -> str:
    edge = _mostly("", _ODD_SPACES)
    group = draw(st.sampled_from(_GROUPS))
    brackets = [("[[", "]]"), ("[", "]]"), ("[[", "]"), ("[ ", " ]")]
    opened, closed = draw(_ONCE_IN(10).flatmap(lambda odd: st.sampled_from(brackets) if odd else st.just("[]")))
    return f"{draw(edge)}{opened}{group}{closed}{draw(edge)}"


def _entry(draw: st.DrawFn) -> str:
    edge = _mostly("", _ODD_SPACES)
    name = draw(_ONCE_IN(10).flatmap(lambda odd: st.sampled_from(_NAMES if odd else _NAMES[:6])))
    value = draw(_ONCE_IN(10).flatmap(lambda odd: st.sampled_from(_VALUES if odd else _VALUES[:3])))
    around = _mostly(" ", ["", *_ODD_SPACES])
    return f"{draw(edge)}{name}{draw(around)}={draw(around)}{value}{draw(edge)}"


def _other(draw: st.DrawFn) -> str:
    """A comment, a blank line, or anything."""
    return draw(st.sampled_from(["", "#", "# [console_scripts]", ";", "; pip = m:f", " ", "\t"]) | st.text(max_size=12))


@st.composite
def _files(draw: st.DrawFn) -> str:
    """Sections of entries, mostly in the grammar; now and then a line of anything between them."""
    lines: list[str] = []
    for _block in range(draw(st.integers(0, 3))):
        lines.append(_section(draw))
        lines.extend(_entry(draw) for _entry_line in range(draw(st.integers(0, 3))))
        if draw(_ONCE_IN(5)):
            lines.insert(draw(st.integers(0, len(lines))), _other(draw))
    return "".join(line + draw(_mostly("\n", ["\r\n", *_ODD_BREAKS])) for line in lines)


@settings(max_examples=examples(400), deadline=None)
@given(_files())
def test_what_is_admitted_is_read_alike_by_every_reader(text: str) -> None:
    try:
        points = read_entry_points(text)
    except EntryPointsError:
        return
    strict = {(p.group, p.name, p.value) for p in points}
    for name, reader in _readers():
        assert reader(text) == strict, name
    scripts = tuple(p for p in points if p.group in ("console_scripts", "gui_scripts"))
    distlib = _distlib_names(scripts)
    if distlib is not None:
        assert distlib == [p.name for p in scripts]
    assert all(re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", p.name) for p in points)


@settings(max_examples=examples(200), deadline=None)
@given(st.text())
def test_any_text_is_read_or_refused(text: str) -> None:
    message = "entry_points.txt"
    try:
        read_entry_points(text)
    except EntryPointsError as exc:
        message = str(exc)
    assert message.startswith("entry_points.txt")
