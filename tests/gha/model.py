"""Reading a workflow file: YAML as GitHub reads it, typed access to its parts, GitHub's tag filters and
dispatch form, and the runner's file commands (``GITHUB_OUTPUT``)."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from pathlib import Path

import yaml

from tests.gha.expressions import Value

__all__ = [
    "WorkflowError",
    "as_map",
    "as_str_map",
    "load_workflow",
    "read_file_commands",
    "tag_matches",
    "validate_inputs",
]


class WorkflowError(ValueError):
    """The workflow (or what a test asked of it) is wrong; the message says where."""


class _Loader(yaml.SafeLoader):
    """YAML 1.2 booleans, as GitHub reads workflows: ``on:`` is the key "on", not True."""


_Loader.yaml_implicit_resolvers = {
    key: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def load_workflow(path: Path) -> dict[str, Value]:
    data = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), dict):
        raise WorkflowError(f"{path}: not a workflow (no jobs mapping)")
    return data


def as_map(value: Value, where: str) -> dict[str, Value]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise WorkflowError(f"{where}: expected a mapping, got {type(value).__name__}")
    return value


def as_str_map(value: Value, where: str) -> dict[str, str]:
    """A mapping of scalars (env:, with:) as strings, the way the runner passes them on."""
    out: dict[str, str] = {}
    for key, item in as_map(value, where).items():
        if isinstance(item, dict | list):
            raise WorkflowError(f"{where}.{key}: expected a scalar")
        out[key] = "" if item is None else ("true" if item is True else "false" if item is False else str(item))
    return out


def _glob_to_regex(pattern: str) -> str:
    # GitHub filter patterns: * matches anything but '/', ** matches anything, ? ! + [] as in globs
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "[":
            end = pattern.index("]", i)
            out.append(pattern[i : end + 1])
            i = end + 1
        elif pattern[i] in "?+":
            out.append(pattern[i])
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return "".join(out)


def tag_matches(tag: str, patterns: list[str]) -> bool:
    """GitHub's tag filter: a tag triggers when it matches a pattern and no later ``!pattern``."""
    matched = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        body = pattern[1:] if negate else pattern
        if re.fullmatch(_glob_to_regex(body), tag):
            matched = not negate
    return matched


def validate_inputs(declared: dict[str, Value], given: Mapping[str, str]) -> dict[str, Value]:
    """The ``inputs`` context of a dispatch, checked like GitHub's form: required, choices, booleans."""
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise WorkflowError(
            f"unknown workflow_dispatch input(s): {', '.join(unknown)} (declared: {', '.join(declared)})"
        )
    inputs: dict[str, Value] = {}
    for name, spec_value in declared.items():
        spec = as_map(spec_value, f"on.workflow_dispatch.inputs.{name}")
        inputs[name] = _typed_input(name, spec, _input_text(name, spec, given))
    return inputs


def _input_text(name: str, spec: Mapping[str, Value], given: Mapping[str, str]) -> str:
    """What the form holds for an input: the value given, else its default ("" when optional)."""
    if name in given:
        return given[name]
    if spec.get("default") is not None:
        default = spec["default"]
        return ("true" if default else "false") if isinstance(default, bool) else str(default)
    if spec.get("required") is True:
        raise WorkflowError(f"workflow_dispatch input {name!r} is required")
    return ""


def _typed_input(name: str, spec: Mapping[str, Value], text: str) -> Value:
    """The value of an input as its ``type`` makes it (boolean, choice, number or string)."""
    kind = str(spec.get("type", "string"))
    if kind == "boolean":
        if text not in ("true", "false", ""):
            raise WorkflowError(f"workflow_dispatch input {name!r} is a boolean, got {text!r}")
        return text == "true"
    if kind == "choice":
        options = [str(o) for o in spec.get("options") or []]  # type: ignore[union-attr]
        if text not in options:
            close = fnmatch.filter(options, f"{text}*")[:5]
            raise WorkflowError(
                f"workflow_dispatch input {name!r}: {text!r} is not one of its options"
                + (f" (did you mean {', '.join(close)}?)" if close else "")
            )
        return text
    if kind == "number":
        try:
            return float(text) if "." in text else int(text)
        except ValueError:
            raise WorkflowError(f"workflow_dispatch input {name!r} is a number, got {text!r}") from None
    return text


def read_file_commands(path: Path) -> dict[str, str]:
    """``name=value`` and ``name<<DELIM ... DELIM`` lines (GITHUB_OUTPUT, GITHUB_ENV)."""
    values: dict[str, str] = {}
    if not path.exists():
        return values
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip():
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            body: list[str] = []
            while i < len(lines) and lines[i] != delimiter:
                body.append(lines[i])
                i += 1
            if i >= len(lines):
                raise WorkflowError(f"{path.name}: {name}<<{delimiter} is never closed")
            i += 1
            values[name] = "\n".join(body)
        elif "=" in line:
            name, value = line.split("=", 1)
            values[name] = value
        else:
            raise WorkflowError(f"{path.name}: cannot read line {line!r}")
    return values
