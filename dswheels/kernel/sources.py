"""Where DeepSpeed sources and torch come from: pure decisions over fetched data.

* The PyPI JSON API names the sdist of a version and its sha256
  (:meth:`dswheels.kernel.pypi_project.PypiProject.sdist`); every platform builds from it.
  Another archive (a matrix ``source`` override) must carry a sha256 pin in the matrix:
  nothing unpinned is ever built.
* torch is installed from an index URL (PyTorch's per-variant index by default), a local
  wheel directory, or whatever pip is configured with (:func:`uv_index_args`).
"""

from __future__ import annotations

import re
import shlex
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from dswheels.kernel.urls import shell_url_problem

__all__ = [
    "TorchSource",
    "TorchSourceKind",
    "parse_pip_config",
    "torch_index_problem",
    "torch_index_url",
    "uv_index_args",
]


# --- where torch comes from -----------------------------------------------------------------


class TorchSourceKind(str, Enum):
    """Where torch comes from (``--torch-index``)."""

    PLAN = "plan"  # each cell's index as the plan says (download.pytorch.org/whl/<variant>)
    INDEX = "index"  # a PEP 503 index URL
    LINKS = "links"  # a local wheel directory or find-links page
    PIP = "pip"  # the indexes pip itself is configured with

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class TorchSource:
    """Where torch comes from, and the URL or directory for ``index`` and ``links``."""

    kind: TorchSourceKind
    location: str = ""

    def describe(self) -> str:
        return {
            TorchSourceKind.PLAN: "the plan's index",
            TorchSourceKind.INDEX: f"index {self.location}",
            TorchSourceKind.LINKS: f"wheels in {self.location}",
            TorchSourceKind.PIP: "pip's configured indexes",
        }[self.kind]


_PIP_LINE_RE = re.compile(r"^(?P<scope>[^.\s]*)\.(?P<key>[a-z-]+)=(?P<value>.*)$")
_PIP_KEYS = {"index-url", "extra-index-url", "find-links", "no-index"}
_PIP_SCOPES = {"global", "install", ":env:", "download"}


def parse_pip_config(text: str) -> dict[str, list[str]]:
    """``pip config list`` output -> {key: values} for the keys that choose where packages come from.

    >>> parse_pip_config("global.extra-index-url='file:///a file:///b'\\n:env:.find-links='/opt/wheels'\\n")
    {'extra-index-url': ['file:///a', 'file:///b'], 'find-links': ['/opt/wheels']}
    """
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        match = _PIP_LINE_RE.match(line.strip())
        if not match or match["key"] not in _PIP_KEYS or match["scope"] not in _PIP_SCOPES:
            continue
        raw = match["value"]
        try:
            parts = shlex.split(raw)
        except ValueError:
            parts = [raw.strip("'\"")]
        values = [v for part in parts for v in part.split()]
        bucket = found.setdefault(match["key"], [])
        bucket.extend(v for v in values if v not in bucket)
    return found


def uv_index_args(source: TorchSource, *, plan_index: str, pip_config: Mapping[str, Sequence[str]]) -> list[str]:
    """The ``uv pip install`` arguments that make torch come from ``source``.

    An index is added *before* PyPI (uv's first-index strategy takes torch from it, anything
    it lacks from PyPI), so both a full mirror and a torch-only one work.

    >>> plan = TorchSource(TorchSourceKind.PLAN)
    >>> uv_index_args(plan, plan_index="https://download.pytorch.org/whl/cu130", pip_config={})
    ['--index', 'https://download.pytorch.org/whl/cu130']
    >>> uv_index_args(TorchSource(TorchSourceKind.PIP), plan_index="", pip_config={"find-links": ["/opt/wheels"]})
    ['--find-links', '/opt/wheels']
    """
    if source.kind is TorchSourceKind.PLAN:
        return ["--index", plan_index]
    if source.kind is TorchSourceKind.INDEX:
        return ["--index", source.location]
    if source.kind is TorchSourceKind.LINKS:
        return ["--find-links", source.location]
    args: list[str] = []
    if pip_config.get("no-index"):
        args.append("--no-index")
    for url in pip_config.get("index-url", [])[:1]:
        args += ["--default-index", url]
    for url in pip_config.get("extra-index-url", []):
        args += ["--index", url]
    for link in pip_config.get("find-links", []):
        args += ["--find-links", link]
    return args


def torch_index_problem(template: str) -> str:
    """What is wrong with a ``torch_index`` template ("" when nothing): it must name
    ``{variant}``, and only that, with no conversion, format spec or attribute.

    >>> torch_index_problem("https://download.pytorch.org/whl/{variant}")
    ''
    >>> torch_index_problem("https://h/{variant}/{cuda}")
    'unknown placeholder {cuda}: the only one is {variant}'
    """
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError as exc:  # a lone "{" or "}"
        return f"not a template ({exc}); write a literal brace as {{{{ or }}}}"
    names = [name for _text, name, _spec, _conv in fields if name is not None]
    for _text, name, spec, conversion in fields:
        if name is not None and (name != "variant" or spec or conversion):
            shown = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
            return f"unknown placeholder {shown}: the only one is {{variant}}"
    if "variant" not in names:
        return "it must contain {variant} (e.g. https://download.pytorch.org/whl/{variant})"
    # the URL goes into the install lines the index page shows, which users paste into a shell
    return shell_url_problem(template.replace("{variant}", "cpu"))


def torch_index_url(template: str, variant: str) -> str:
    """The index of one variant (``cu128``, ``cpu``); ``ValueError`` for a bad template."""
    if problem := torch_index_problem(template):
        raise ValueError(f"torch_index {template!r}: {problem}")
    return template.format(variant=variant)
