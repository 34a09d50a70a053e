"""What CPython's ``PCbuild/*.vcxproj`` files say a target is made of, read without MSBuild.

There is no MSBuild under Wine, and CPython's project files are the one list of what goes into
``pythonXY.dll``, ``python.exe`` and each extension module, per release: which sources, with which
defines, include folders and libraries. This module evaluates the small part of MSBuild those files
use: properties (``$(Name)``, in order, with conditions), ``ItemDefinitionGroup`` defaults for
``ClCompile`` and ``Link`` (``%(Name)`` is the value before), items with their metadata, and the
``pyproject.props`` they import. Global properties (the caller's) win over the files' own, as
``msbuild /p:`` does; a property the files compute with MSBuild's functions (``$([System.IO...])``)
is left to the caller to give. A condition this reader does not understand is an error, naming it:
a CPython release that needs more fails loudly, not silently with a wrong list.

Pure: it reads XML text the caller hands it and returns values.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "ConditionError",
    "Item",
    "Project",
    "cl_flags",
    "evaluate_condition",
    "expand",
    "link_flags",
    "read_project",
    "split_list",
]

_NS = "{http://schemas.microsoft.com/developer/msbuild/2003}"
_PROPERTY = re.compile(r"\$\(([A-Za-z_][\w.]*)\)")
_METADATA = re.compile(r"%\(([A-Za-z_]\w*)\)")
# the property sheets a project imports that this reader follows (the others are Visual Studio's own, or
# name externals the caller builds itself: libffi.props, openssl.props, tcltk.props)
FOLLOWED_IMPORTS = ("pyproject.props",)


class ConditionError(ValueError):
    """A condition (or a property function) this reader does not evaluate."""


@dataclass(frozen=True, slots=True)
class Item:
    """One item (``<ClCompile Include=...>``, ``<None Include=...>``), its metadata evaluated."""

    kind: str  # ClCompile, None, ResourceCompile, ...
    include: str  # as written (after properties): ``..\\Modules\\x.c``
    metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Project:
    """A project file evaluated for one configuration."""

    name: str  # the file's stem: pythoncore, _socket, ...
    properties: Mapping[str, str]
    definitions: Mapping[str, Mapping[str, str]]  # ClCompile/Link/Lib -> metadata defaults
    items: tuple[Item, ...]
    targets: Mapping[str, tuple[str, ...]]  # target name -> its Exec commands (as written, properties expanded)

    def of_kind(self, kind: str) -> tuple[Item, ...]:
        return tuple(i for i in self.items if i.kind == kind)

    @property
    def compiles(self) -> tuple[Item, ...]:
        return self.of_kind("ClCompile")

    @property
    def configuration_type(self) -> str:
        return self.properties.get("ConfigurationType", "Application")

    @property
    def target_ext(self) -> str:
        """``.pyd``, ``.dll`` or ``.exe``: the project's own TargetExt, else what its type makes."""
        ext = self.properties.get("TargetExt")
        if ext:
            return ext
        return {"DynamicLibrary": ".dll", "StaticLibrary": ".lib"}.get(self.configuration_type, ".exe")


def expand(text: str, properties: Mapping[str, str], metadata: Mapping[str, str] | None = None) -> str:
    """``$(Name)`` from ``properties`` (unknown: empty, as MSBuild), then ``%(Name)`` from ``metadata``.

    >>> expand("$(A)x;%(B)", {"A": "1"}, {"B": "2"})
    '1x;2'
    """
    if "$([" in text or re.search(r"\$\([\w]+\.", text):
        raise ConditionError(f"a property function: {text.strip()!r}")
    out = _PROPERTY.sub(lambda m: properties.get(m.group(1), ""), text)
    if metadata is not None:
        out = _METADATA.sub(lambda m: metadata.get(m.group(1), ""), out)
    return out


def split_list(value: str) -> list[str]:
    """An MSBuild list (``a;b;;c``, with whitespace and line breaks) as its non-empty parts."""
    return [part.strip() for part in value.split(";") if part.strip()]


# --- conditions ----------------------------------------------------------------------------------
_TOKEN = re.compile(
    r"\s*(?:(?P<op>==|!=|\(|\)|!)|(?P<word>and|or)\b|'(?P<quoted>[^']*)'|(?P<func>Exists|HasTrailingSlash)\s*\("
    r"|(?P<bare>(?:\$\([^)]*\)|[^\s()'=!])+))",
    re.IGNORECASE,
)


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise ConditionError(f"cannot read the condition {text!r} at {text[pos:]!r}")
        pos = match.end()
        kind = match.lastgroup or ""
        value = match.group(kind)
        tokens.append((kind, value.lower() if kind in ("word", "func") else value))
    return tokens


def evaluate_condition(text: str, properties: Mapping[str, str], exists: Callable[[str], bool]) -> bool:
    """An MSBuild condition: comparisons (``==``, ``!=``, case-insensitive), ``!``, ``and``, ``or``,
    parentheses, ``Exists('path')``, ``HasTrailingSlash('path')`` and bare ``true``/``false``.

    >>> evaluate_condition("'$(A)' == 'x' and !Exists('$(B)')", {"A": "X"}, lambda p: False)
    True
    """
    tokens = [(k, expand(v, properties) if k in ("quoted", "bare") else v) for k, v in _tokens(text)]
    if not tokens:
        return True
    parser = _Parser(tokens, exists, text)
    value = parser.disjunction()
    if parser.pos != len(tokens):
        raise ConditionError(f"cannot read the condition {text!r}")
    return value


class _Parser:
    def __init__(self, tokens: Sequence[tuple[str, str]], exists: Callable[[str], bool], text: str) -> None:
        self.tokens = tokens
        self.pos = 0
        self.exists = exists
        self.text = text

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def _take(self) -> tuple[str, str]:
        token = self._peek()
        if token is None:
            raise ConditionError(f"the condition {self.text!r} ends too early")
        self.pos += 1
        return token

    def disjunction(self) -> bool:
        value = self.conjunction()
        while self._peek() == ("word", "or"):
            self._take()
            value = self.conjunction() or value
        return value

    def conjunction(self) -> bool:
        value = self.negation()
        while self._peek() == ("word", "and"):
            self._take()
            value = self.negation() and value
        return value

    def negation(self) -> bool:
        if self._peek() == ("op", "!"):
            self._take()
            return not self.negation()
        return self.comparison()

    def comparison(self) -> bool:
        if self._peek() == ("op", "("):
            self._take()
            value = self.disjunction()
            if self._take() != ("op", ")"):
                raise ConditionError(f"unbalanced parentheses in {self.text!r}")
            return value
        left = self.operand()
        token = self._peek()
        if token is not None and token[0] == "op" and token[1] in ("==", "!="):
            self._take()
            right = self.operand()
            same = left.lower() == right.lower()
            return same if token[1] == "==" else not same
        return _truth(left, self.text)

    def operand(self) -> str:
        kind, value = self._take()
        if kind == "func":
            argument = self.operand()
            if self._take() != ("op", ")"):
                raise ConditionError(f"unbalanced parentheses in {self.text!r}")
            if value == "exists":
                return "true" if argument.strip() and self.exists(argument.strip()) else "false"
            return "true" if argument.endswith(("\\", "/")) else "false"
        if kind in ("quoted", "bare"):
            return value
        raise ConditionError(f"unexpected {value!r} in the condition {self.text!r}")


def _truth(value: str, text: str) -> bool:
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConditionError(f"{value!r} is not a boolean in the condition {text!r}")


# --- the project ---------------------------------------------------------------------------------
def _local(tag: str) -> str:
    return tag.removeprefix(_NS)


@dataclass
class _State:
    properties: dict[str, str]
    globals: Mapping[str, str]
    definitions: dict[str, dict[str, str]]
    items: list[Item]
    targets: dict[str, tuple[str, ...]]
    exists: Callable[[str], bool]


def read_project(
    name: str,
    text: str,
    *,
    globals_: Mapping[str, str],
    read_import: Callable[[str], str | None],
    exists: Callable[[str], bool],
) -> Project:
    """Evaluate the project ``text`` (its file's stem is ``name``) for the global properties ``globals_``.

    ``read_import(name)`` returns the text of an imported sheet this reader follows (None: not there);
    ``exists(path)`` answers ``Exists()`` (paths as written, properties expanded).
    """
    state = _State(
        properties=dict(globals_),
        globals=globals_,
        definitions={},
        items=[],
        targets={},
        exists=exists,
    )
    _walk(_parse(text), state, read_import)
    return Project(
        name=name,
        properties=dict(state.properties),
        definitions={k: dict(v) for k, v in state.definitions.items()},
        items=tuple(state.items),
        targets=dict(state.targets),
    )


def _applies(element: ET.Element, state: _State) -> bool:
    condition = element.get("Condition")
    return condition is None or evaluate_condition(condition, state.properties, state.exists)


def _parse(text: str) -> ET.Element:
    # CPython's own project files, from a source release whose sha256 was checked: not untrusted input
    return ET.fromstring(text.lstrip("\ufeff"))  # noqa: S314


def _walk(root: ET.Element, state: _State, read_import: Callable[[str], str | None]) -> None:
    for element in root:
        tag = _local(element.tag)
        if tag == "Import":
            _import(element, state, read_import)
        elif tag == "Target":
            execs = [e for e in element.iter() if _local(e.tag) == "Exec"]
            state.targets[element.get("Name", "")] = tuple(
                _expand_lenient(e.get("Command", ""), state.properties) for e in execs
            )
        elif tag in _GROUPS and _applies(element, state):
            _GROUPS[tag](element, state, read_import)


def _expand_lenient(text: str, properties: Mapping[str, str]) -> str:
    """A target's command: its properties expanded where they are plain (functions are left as written)."""
    return _PROPERTY.sub(lambda m: properties.get(m.group(1), m.group(0)), text)


def _import(element: ET.Element, state: _State, read_import: Callable[[str], str | None]) -> None:
    project = element.get("Project", "")
    if project not in FOLLOWED_IMPORTS:
        return
    text = read_import(project)
    if text is not None and _applies(element, state):
        _walk(_parse(text), state, read_import)


def _properties(group: ET.Element, state: _State, _read: object = None) -> None:
    for element in group:
        name = _local(element.tag)
        if name in state.globals:
            continue  # a global property is never redefined by the files (msbuild /p:)
        try:
            if not _applies(element, state):
                continue
            state.properties[name] = expand(element.text or "", state.properties).strip()
        except ConditionError:
            continue  # computed with MSBuild's functions: the caller gives what it needs as a global


def _metadata(element: ET.Element, state: _State, before: Mapping[str, str]) -> dict[str, str]:
    values = dict(before)
    for child in element:
        if _applies(child, state):
            values[_local(child.tag)] = expand(child.text or "", state.properties, values).strip()
    return values


def _definitions(group: ET.Element, state: _State, _read: object = None) -> None:
    for element in group:
        if _applies(element, state):
            kind = _local(element.tag)
            state.definitions[kind] = _metadata(element, state, state.definitions.get(kind, {}))


def _items(group: ET.Element, state: _State, _read: object = None) -> None:
    for element in group:
        if not _applies(element, state):
            continue
        kind = _local(element.tag)
        include = expand(element.get("Include", ""), state.properties)
        if not include:
            # an update of existing items: <ClCompile Condition="%(Filename) == 'x'"> in a target (not evaluated here)
            continue
        metadata = _metadata(element, state, state.definitions.get(kind, {}))
        state.items.extend(Item(kind=kind, include=part, metadata=metadata) for part in split_list(include))


_GROUPS: Mapping[str, Callable[[ET.Element, _State, Callable[[str], str | None]], None]] = {
    "ImportGroup": _walk,
    "PropertyGroup": _properties,
    "ItemDefinitionGroup": _definitions,
    "ItemGroup": _items,
}


# --- what cl and link are told ------------------------------------------------------------------
_CL_SWITCHES: Mapping[str, Mapping[str, str]] = {
    "Optimization": {"MaxSpeed": "/O2", "Disabled": "/Od", "MinSpace": "/O1", "Full": "/Ox"},
    "RuntimeLibrary": {
        "MultiThreadedDLL": "/MD",
        "MultiThreaded": "/MT",
        "MultiThreadedDebugDLL": "/MDd",
        "MultiThreadedDebug": "/MTd",
    },
    "WarningLevel": {"Level1": "/W1", "Level2": "/W2", "Level3": "/W3", "Level4": "/W4", "TurnOffAllWarnings": "/W0"},
    "CompileAs": {"CompileAsC": "/TC", "CompileAsCpp": "/TP"},
    "ExceptionHandling": {"Sync": "/EHsc", "Async": "/EHa", "SyncCThrow": "/EHs"},
    "InlineFunctionExpansion": {"OnlyExplicitInline": "/Ob1", "AnySuitable": "/Ob2", "Disabled": "/Ob0"},
    "FloatingPointModel": {"Strict": "/fp:strict", "Fast": "/fp:fast", "Precise": "/fp:precise"},
    "BufferSecurityCheck": {"false": "/GS-"},
    "IntrinsicFunctions": {"true": "/Oi"},
    "StringPooling": {"true": "/GF"},
    "FunctionLevelLinking": {"true": "/Gy"},
    "WholeProgramOptimization": {"true": "/GL"},
    "TreatWChar_tAsBuiltInType": {"false": "/Zc:wchar_t-"},
    "LanguageStandard_C": {"stdc11": "/std:c11", "stdc17": "/std:c17"},
}


def cl_flags(metadata: Mapping[str, str]) -> list[str]:
    """The options MSBuild's CL task gives ``cl`` for one ``ClCompile`` item (no debug information, no PCH).

    >>> cl_flags({"Optimization": "MaxSpeed", "PreprocessorDefinitions": "A;B=1;", "DisableSpecificWarnings": "4005"})
    ['/O2', '/wd4005', '/DA', '/DB=1']
    """
    flags = [table[value] for key, table in _CL_SWITCHES.items() if (value := metadata.get(key, "")) in table]
    flags += [f"/wd{n}" for n in split_list(metadata.get("DisableSpecificWarnings", ""))]
    flags += [f"/D{d}" for d in split_list(metadata.get("PreprocessorDefinitions", ""))]
    flags += metadata.get("AdditionalOptions", "").split()
    return flags


def link_flags(metadata: Mapping[str, str]) -> list[str]:
    """The options MSBuild's Link task gives ``link`` (libraries and folders excepted: the caller places them).

    >>> link_flags({"SubSystem": "Console", "StackReserveSize": "2000000", "AdditionalOptions": "/OPT:REF,NOICF"})
    ['/SUBSYSTEM:CONSOLE', '/STACK:2000000', '/OPT:REF,NOICF']
    """
    flags: list[str] = []
    if subsystem := metadata.get("SubSystem"):
        flags.append(f"/SUBSYSTEM:{subsystem.upper()}")
    if stack := metadata.get("StackReserveSize"):
        flags.append(f"/STACK:{stack}")
    if metadata.get("LinkTimeCodeGeneration") == "UseLinkTimeCodeGeneration":
        flags.append("/LTCG")
    if base := metadata.get("BaseAddress"):
        flags.append(f"/BASE:{base}")
    if metadata.get("RandomizedBaseAddress") == "true":
        flags.append("/DYNAMICBASE")
    if metadata.get("DataExecutionPrevention") == "true":
        flags.append("/NXCOMPAT")
    if metadata.get("NoEntryPoint") == "true":
        flags.append("/NOENTRY")
    flags += [f"/NODEFAULTLIB:{lib}" for lib in split_list(metadata.get("IgnoreSpecificDefaultLibraries", ""))]
    flags += [f"/DELAYLOAD:{dll}" for dll in split_list(metadata.get("DelayLoadDLLs", ""))]
    flags += metadata.get("AdditionalOptions", "").split()
    return flags
