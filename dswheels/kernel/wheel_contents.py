"""Pure reading and rewriting of what is inside a DeepSpeed wheel.

The effectful side (:mod:`dswheels.host.wheel_file` reads, :mod:`dswheels.building.effects.postprocess`
rewrites) opens the zip; everything that decides *what* the bytes mean or become lives here:
``METADATA`` (:func:`parse_metadata`, the one reader; :func:`pin_requirement`, the torch pin),
the ``RECORD`` lines, the op list DeepSpeed stamped into ``git_version_info_installed.py``,
which file of the wheel is an op's extension, and whether the ops a wheel should have are in
it (:func:`check_ops`).
"""

from __future__ import annotations

import ast
import base64
import csv
import hashlib
import io
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from packaging.metadata import parse_email
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from dswheels.kernel.platform_traits import ALL_TRAITS
from dswheels.kernel.pysource import PythonSourceError, parse_source
from dswheels.kernel.versions import VersionTuple, format_version

__all__ = [
    "EXTENSION_SUFFIXES",
    "INSTALLED_INFO",
    "OP_BUILDER_DIR",
    "PATCH_MARK",
    "PORTABLE_MARK",
    "InstalledInfo",
    "Metadata",
    "OpsInWheel",
    "WheelContentError",
    "builder_modules",
    "check_ops",
    "dist_info_dir",
    "extension_for_module",
    "parse_installed_info",
    "parse_metadata",
    "pin_requirement",
    "record_hash",
    "render_record",
    "torch_pin",
]

INSTALLED_INFO = "deepspeed/git_version_info_installed.py"
OP_BUILDER_DIR = "deepspeed/ops/op_builder/"
EXTENSION_SUFFIXES = tuple(row.extension_suffix for row in ALL_TRAITS.values())  # (".so", ".pyd")


class WheelContentError(ValueError):
    """The wheel does not contain what a DeepSpeed build writes."""


def torch_pin(torch: VersionTuple) -> str:
    """The requirement a wheel built against torch M.m needs: exactly that minor.

    >>> torch_pin((2, 14))
    'torch==2.14.*'
    """
    return f"torch=={format_version(torch[:2])}.*"


_REQ_NAME_RE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


@dataclass(frozen=True, kw_only=True, slots=True)
class Metadata:
    """The fields of a wheel's core metadata (``METADATA``) that dswheels reads."""

    name: str
    version: str
    requires_python: str | None
    requires_dist: tuple[str, ...]
    summary: str
    metadata_version: str

    @property
    def requirements(self) -> tuple[Requirement, ...]:
        """``Requires-Dist``, parsed (a line ``packaging`` cannot read is left out)."""
        found = []
        for text in self.requires_dist:
            try:
                found.append(Requirement(text))
            except InvalidRequirement:  # noqa: PERF203 - a few lines; each bad one is skipped
                continue
        return tuple(found)


def parse_metadata(data: bytes | str) -> Metadata:
    """A wheel's ``METADATA`` (its headers, read by ``packaging``); ValueError without Name or Version.

    >>> md = parse_metadata("Metadata-Version: 2.1\\nName: deepspeed\\nVersion: 0.19.8+cputorch2.13\\n"
    ...                     "Requires-Dist: torch==2.13.*\\nRequires-Dist: tqdm\\n\\nThe description")
    >>> md.version, [str(r) for r in md.requirements if r.name == "torch"]
    ('0.19.8+cputorch2.13', ['torch==2.13.*'])
    """
    raw, _unparsed = parse_email(data)
    name = raw.get("name")
    version = raw.get("version")
    if not name or not version:
        msg = "METADATA has no Name or no Version"
        raise ValueError(msg)
    return Metadata(
        name=name,
        version=version,
        requires_python=raw.get("requires_python") or None,
        requires_dist=tuple(raw.get("requires_dist") or ()),
        summary=raw.get("summary") or "",
        metadata_version=raw.get("metadata_version") or "2.1",
    )


def pin_requirement(metadata: str, *, project: str, requirement: str) -> str:
    """Replace every ``Requires-Dist: <project>...`` header with ``requirement`` (markers kept).

    Only the header block is touched (the description after the first blank line may quote
    requirements). If the project is not required at all, the pin is added after the last
    ``Requires-Dist``.

    >>> md = "Metadata-Version: 2.1\\nName: deepspeed\\nRequires-Dist: torch>=2.0.0\\nRequires-Dist: tqdm\\n\\nbody"
    >>> print(pin_requirement(md, project="torch", requirement="torch==2.14.*"))
    Metadata-Version: 2.1
    Name: deepspeed
    Requires-Dist: torch==2.14.*
    Requires-Dist: tqdm
    <BLANKLINE>
    body
    """
    head, sep, body = metadata.partition("\n\n")
    lines = head.split("\n")
    want = canonicalize_name(project)
    out: list[str] = []
    replaced = False
    last_requires = -1
    for line in lines:
        key, colon, value = line.partition(":")
        if colon and key.strip().lower() == "requires-dist":
            match = _REQ_NAME_RE.match(value)
            if match and canonicalize_name(match.group(1)) == want:
                _req, semi, marker = value.partition(";")
                if not replaced:
                    out.append(f"Requires-Dist: {requirement}" + (f"; {marker.strip()}" if semi else ""))
                    replaced = True
                last_requires = len(out) - 1
                continue
            last_requires = len(out)
        out.append(line)
    if not replaced:
        out.insert(last_requires + 1 if last_requires >= 0 else len(out), f"Requires-Dist: {requirement}")
    return "\n".join(out) + sep + body


def record_hash(data: bytes) -> str:
    """The RECORD hash field: ``sha256=`` + urlsafe base64 without padding (PEP 376/427)."""
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def render_record(files: Iterable[tuple[str, bytes]], *, record_path: str) -> str:
    """``RECORD`` for ``files`` (every file of the wheel but RECORD itself), in the given order."""
    buf = io.StringIO()
    writer = csv.writer(buf, delimiter=",", quotechar='"', lineterminator="\n")
    for name, data in files:
        if name == record_path:
            continue
        writer.writerow((name, record_hash(data), str(len(data))))
    writer.writerow((record_path, "", ""))
    return buf.getvalue()


def dist_info_dir(names: Iterable[str]) -> str:
    """The ``*.dist-info`` directory of a wheel's member names."""
    dirs = {name.split("/", 1)[0] for name in names if name.split("/", 1)[0].endswith(".dist-info")}
    if len(dirs) != 1:
        raise WheelContentError(f"expected one .dist-info directory, found {sorted(dirs) or 'none'}")
    return dirs.pop()


@dataclass(frozen=True, slots=True)
class InstalledInfo:
    """``deepspeed/git_version_info_installed.py`` as DeepSpeed's setup.py wrote it."""

    version: str
    installed_ops: Mapping[str, bool]
    accelerator_name: str
    torch_info: Mapping[str, object] = field(default_factory=dict)

    @property
    def built_ops(self) -> tuple[str, ...]:
        return tuple(name for name, on in self.installed_ops.items() if on)


def parse_installed_info(text: str) -> InstalledInfo:
    """Read the literal assignments of ``git_version_info_installed.py`` (never execute it).

    >>> info = parse_installed_info("version='0.19.8+cputorch2.13'\\ninstalled_ops={'cpu_adam': 1, 'x': False}\\n"
    ...     "accelerator_name='cpu'\\ntorch_info={'version': '2.13', 'cuda_version': '0.0'}\\n")
    >>> info.built_ops, info.accelerator_name
    (('cpu_adam',), 'cpu')
    """
    try:
        tree = parse_source(text, what=INSTALLED_INFO)
    except PythonSourceError as exc:
        raise WheelContentError(str(exc)) from None
    values: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except (ValueError, TypeError, RecursionError, MemoryError):  # not a literal, or one too deep to build
                continue
    ops = values.get("installed_ops")
    if not isinstance(ops, dict):
        raise WheelContentError(f"{INSTALLED_INFO} has no installed_ops dict")
    accelerator = values.get("accelerator_name")
    torch_info = values.get("torch_info")
    return InstalledInfo(
        version=str(values.get("version", "")).strip(),
        installed_ops={str(k): bool(v) for k, v in ops.items()},
        accelerator_name=str(accelerator) if accelerator is not None else "",
        torch_info={str(k): v for k, v in torch_info.items()} if isinstance(torch_info, dict) else {},
    )


def extension_for_module(module: str, names: Sequence[str]) -> str | None:
    """The extension file (``.so``/``.pyd``) of the wheel that imports as ``module``.

    >>> extension_for_module("deepspeed.ops.adam.cpu_adam_op",
    ...     ["deepspeed/ops/adam/__init__.py", "deepspeed/ops/adam/cpu_adam_op.cpython-311-x86_64-linux-gnu.so"])
    'deepspeed/ops/adam/cpu_adam_op.cpython-311-x86_64-linux-gnu.so'
    """
    package, _, leaf = module.rpartition(".")
    folder = package.replace(".", "/")
    for name in names:
        directory, _, filename = name.rpartition("/")
        if directory == folder and filename.endswith(EXTENSION_SUFFIXES) and filename.split(".", 1)[0] == leaf:
            return name
    return None


@dataclass(frozen=True, kw_only=True, slots=True)
class OpsInWheel:
    """The ops a wheel should hold against what it holds: ``installed_ops`` and an extension file per op."""

    installed: tuple[str, ...]  # the ops installed_ops marks built, in its order
    missing: tuple[str, ...]  # expected, not marked built (DeepSpeed skipped them)
    extra: tuple[str, ...]  # marked built, not expected
    no_file: tuple[str, ...]  # marked built, their module known, and no extension file for it
    unknown: tuple[str, ...]  # marked built, no module known to look for
    extensions: tuple[str, ...]  # the extension files under deepspeed/

    def describe_no_file(self, modules: Mapping[str, Sequence[str]]) -> list[str]:
        """``cpu_adam: no deepspeed.ops.adam.cpu_adam_op extension``, per op without its file."""
        return [f"{op}: no {' or '.join(modules[op])} extension" for op in self.no_file]


def check_ops(
    expected: Iterable[str], *, installed: InstalledInfo, modules: Mapping[str, Sequence[str]], names: Sequence[str]
) -> OpsInWheel:
    """Whether the ``expected`` ops are in the wheel: marked built by DeepSpeed, each with its extension file.

    ``modules``: op -> the module(s) its extension imports as (``absolute_name()``: from the build,
    the manifest, or the builders' sources); an op without one is ``unknown``, not judged.

    >>> info = parse_installed_info("installed_ops={'cpu_adam': 1, 'fused_adam': 1, 'x': 0}")
    >>> modules = {"cpu_adam": ["deepspeed.ops.adam.cpu_adam_op"], "fused_adam": ["deepspeed.ops.adam.fused_adam_op"]}
    >>> found = check_ops(["cpu_adam", "cpu_lion"], installed=info, modules=modules,
    ...                   names=["deepspeed/ops/adam/cpu_adam_op.so"])
    >>> found.missing, found.extra, found.no_file
    (('cpu_lion',), ('fused_adam',), ('fused_adam',))
    """
    built = installed.built_ops
    wanted = list(dict.fromkeys(expected))
    no_file, unknown = [], []
    for op in built:
        candidates = modules.get(op) or ()
        if not candidates:
            unknown.append(op)
        elif all(extension_for_module(m, names) is None for m in candidates):
            no_file.append(op)
    return OpsInWheel(
        installed=built,
        missing=tuple(op for op in wanted if op not in built),
        extra=tuple(sorted(set(built) - set(wanted))),
        no_file=tuple(no_file),
        unknown=tuple(unknown),
        extensions=tuple(n for n in names if n.endswith(EXTENSION_SUFFIXES) and n.startswith("deepspeed/")),
    )


def _absolute_name(func: ast.FunctionDef, name: str) -> str | None:
    """What ``def absolute_name(self): return f'deepspeed.ops.adam.{self.NAME}_op'`` returns, or None."""
    returns = [node.value for node in ast.walk(func) if isinstance(node, ast.Return) and node.value is not None]
    if len(returns) != 1:
        return None
    value = returns[0]
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return value.value
    if not isinstance(value, ast.JoinedStr):
        return None
    parts: list[str] = []
    for part in value.values:
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            parts.append(part.value)
        elif (
            isinstance(part, ast.FormattedValue)
            and isinstance(part.value, ast.Attribute)
            and part.value.attr == "NAME"
            and isinstance(part.value.value, ast.Name)
            and part.value.value.id == "self"
        ):
            parts.append(name)
        else:
            return None
    return "".join(parts)


def builder_modules(sources: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    """Op name -> the modules its builders' ``absolute_name()`` gives, read from builder sources (never run).

    ``sources`` maps paths under ``deepspeed/ops/op_builder/`` to their text. An op can have a
    builder per accelerator (``op_builder/fused_adam.py`` and ``op_builder/cpu/fused_adam.py``):
    every distinct module is listed, the top-level builders' first.

    >>> src = (
    ...     "class FusedAdamBuilder(CUDAOpBuilder):\\n    NAME = 'fused_adam'\\n"
    ...     "    def absolute_name(self):\\n        return f'deepspeed.ops.adam.{self.NAME}_op'\\n"
    ... )
    >>> builder_modules({"deepspeed/ops/op_builder/fused_adam.py": src})
    {'fused_adam': ('deepspeed.ops.adam.fused_adam_op',)}
    """
    found: dict[str, list[str]] = {}
    for path in sorted(sources, key=lambda p: (p.count("/"), p)):
        try:
            tree = parse_source(sources[path], what=path)
        except PythonSourceError:  # a builder dswheels cannot read names no module
            continue
        for cls in (node for node in tree.body if isinstance(node, ast.ClassDef)):
            name = next(
                (
                    stmt.value.value
                    for stmt in cls.body
                    if isinstance(stmt, ast.Assign)
                    and [t.id for t in stmt.targets if isinstance(t, ast.Name)] == ["NAME"]
                    and isinstance(stmt.value, ast.Constant)
                    and isinstance(stmt.value.value, str)
                ),
                None,
            )
            func = next(
                (f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "absolute_name"),
                None,
            )
            if name is None or func is None:
                continue
            module = _absolute_name(func, name)
            if module and module not in found.setdefault(name, []):
                found[name].append(module)
    return {name: tuple(modules) for name, modules in found.items()}


PATCH_MARK = "# dswheels:"


PORTABLE_MARK = f"{PATCH_MARK} portable CPU baseline"
