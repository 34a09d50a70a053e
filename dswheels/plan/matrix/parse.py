"""``matrix/matrix.yml``: what the user wants built, validated against the known facts.

Every problem in the file is collected (with ``file:line``, the bad value and a close-match
suggestion) before one :class:`~dswheels.kernel.errors.ConfigError` reports them all. The axes and
``include``/``exclude`` are read here; the keys that shape how cells are built in
:mod:`dswheels.plan.matrix.build_keys`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

from dswheels.kernel.compat import Compat
from dswheels.kernel.digests import is_sha256
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.model import Cell, Variant, suggest
from dswheels.kernel.sources import torch_index_problem
from dswheels.kernel.versions import TorchMinor, VersionTuple
from dswheels.plan.matrix.build_keys import parse_arch_lists, parse_linux_runtime, parse_runners, parse_toolkits
from dswheels.plan.matrix.checker import Checker
from dswheels.plan.matrix.selectors import ALL, all_variants, deepspeed_newest, torch_newest
from dswheels.plan.matrix.spec import CellPattern, MatrixSpec, SourceOverride
from dswheels.plan.matrix.yamldoc import Node, Problems, iter_scalars, parse_yaml

__all__ = ["parse_matrix"]

CUDA_CHECK_MODES = ("skip-when-needed", "strict")

TOP_KEYS = (
    "schema",
    "deepspeed",
    "torch",
    "python",
    "platforms",
    "include",
    "exclude",
    "ops",
    "cpu_baseline",
    "cuda_check",
    "toolkits",
    "arch_lists",
    "torch_index",
    "runners",
    "linux_runtime",
)
REQUIRED_KEYS = ("deepspeed", "torch", "python", "platforms", "runners")
CELL_KEYS = ("deepspeed", "torch", "variant", "python", "platform")

T = TypeVar("T")


def parse_matrix(text: str, filename: str, compat: Compat) -> MatrixSpec:
    """Parse and validate a matrix file; raise one ConfigError listing every problem."""
    problems = Problems(filename=filename)
    doc = parse_yaml(text, filename, problems)
    spec = _parse_root(doc.root, filename, compat, problems) if doc else None
    if problems or spec is None:
        count = len(problems)
        raise ConfigError(
            f"{filename} has {count} problem{'s' if count != 1 else ''}",
            details=problems.render(),
            hint="fix the lines above; docs/matrix.md describes every key",
        )
    return spec


def _parse_root(root: Node, filename: str, compat: Compat, problems: Problems) -> MatrixSpec | None:
    check = Checker(compat, problems)
    if not check.is_map(root, "the matrix file"):
        return None
    _check_top_level(check, root)
    deepspeed, sources = _parse_deepspeed(check, root.get("deepspeed"))
    torch = _parse_torch(check, root.get("torch"))
    python = _axis(check, root.get("python"), "python", check.python)
    platforms = _axis(check, root.get("platforms"), "platforms", check.platform)
    include = _parse_include(check, root.get("include"))
    exclude = _parse_exclude(check, root.get("exclude"))
    ops = _parse_ops(check, root.get("ops"))
    cpu_baseline = _parse_cpu_baseline(check, root.get("cpu_baseline"))
    cuda_check = _parse_cuda_check(check, root.get("cuda_check"))
    toolkits = parse_toolkits(check, root.get("toolkits"))
    arch_lists = parse_arch_lists(check, root.get("arch_lists"))
    torch_index = _parse_torch_index(check, root.get("torch_index"))
    runners = parse_runners(check, root.get("runners"), platforms)
    linux_runtime = parse_linux_runtime(check, root.get("linux_runtime"))
    spec = MatrixSpec(
        filename=filename,
        deepspeed=tuple(dict.fromkeys(deepspeed)),
        torch=tuple(torch),
        python=tuple(dict.fromkeys(python)),
        platforms=tuple(dict.fromkeys(platforms)),
        include=tuple(include),
        exclude=tuple(exclude),
        ops=ops,
        cpu_baselines=cpu_baseline,
        cuda_check=cuda_check,
        toolkits=toolkits,
        arch_lists=arch_lists,
        torch_index=torch_index,
        runners=runners,
        sources=sources,
        linux_runtime=linux_runtime,
        resolved=tuple(check.resolved),
    )
    if not problems and exclude:
        _check_excludes_match(check, spec, root)
    return spec


def _check_top_level(check: Checker, root: Node) -> None:
    """Unknown top-level keys, the schema version and the keys every matrix needs."""
    check.keys(root, TOP_KEYS, what="the matrix file")
    schema = root.get("schema")
    if schema is not None and schema.text != "1":
        check.problems.add(schema, f"unsupported schema {schema.text!r}: this dswheels reads schema 1")
    for required in REQUIRED_KEYS:
        if root.get(required) is None:
            check.problems.add(root, f"missing required key {required!r}", line=1)


def _parse_deepspeed(
    check: Checker, node: Node | None
) -> tuple[list[VersionTuple], dict[tuple[VersionTuple, str], SourceOverride]]:
    if node is None:
        return [], {}
    versions: list[VersionTuple] = []
    sources: dict[tuple[VersionTuple, str], SourceOverride] = {}
    for item in (node,) if node.kind == "map" else check.seq(node, "deepspeed"):
        if item.kind == "map" and item.get("newest") is not None:  # {newest: N}: docs/matrix.md
            check.keys(item, ("newest",), what="a deepspeed selector")
            versions.extend(deepspeed_newest(check.compat, item, check.problems, check.resolved))
        elif item.kind != "map":
            version = check.deepspeed_version(item)
            if version:
                versions.append(version)
        else:
            version = _parse_deepspeed_entry(check, item, sources)
            if version is not None:
                versions.append(version)
    return versions, sources


def _parse_deepspeed_entry(
    check: Checker, item: Node, sources: dict[tuple[VersionTuple, str], SourceOverride]
) -> VersionTuple | None:
    """``{version: X, source: ...}``: the version, its source overrides added to ``sources``."""
    check.keys(item, ("version", "source"), what="a deepspeed entry")
    version_node = item.get("version")
    if version_node is None:
        check.problems.add(item, "a deepspeed entry needs 'version'")
        return None
    version = check.deepspeed_version(version_node)
    if version is None:
        return None
    source = item.get("source")
    if source is not None and check.is_map(source, "source"):
        for os, override in _parse_sources(check, source).items():
            sources[(version, os)] = override
    return version


def _parse_sources(check: Checker, node: Node) -> dict[str, SourceOverride]:
    """One source for both OSes, or ``{linux: ..., windows: ...}``: the override per OS."""
    per_os = {os: node.get(os) for os in ("linux", "windows")}
    if not any(per_os.values()):
        override = _parse_source(check, node)
        return {"linux": override, "windows": override} if override else {}
    check.keys(node, ("linux", "windows"), what="a per-OS source")
    overrides: dict[str, SourceOverride] = {}
    for os, sub in per_os.items():
        if sub is not None and check.is_map(sub, f"source.{os}"):
            override = _parse_source(check, sub)
            if override:
                overrides[os] = override
    return overrides


def _parse_source(check: Checker, node: Node) -> SourceOverride | None:
    check.keys(node, ("url", "sha256"), what="a source")
    sha_node, url_node = node.get("sha256"), node.get("url")
    if sha_node is None:
        check.problems.add(node, "a source override needs 'sha256' (the archive's SHA-256, 64 hex digits)")
        return None
    sha = check.scalar(sha_node, "sha256") or ""
    if sha and not is_sha256(sha.lower()):
        check.problems.add(sha_node, f"sha256 must be 64 hex digits, got {sha!r}")
        return None
    url = (check.scalar(url_node, "url") or "") if url_node else ""
    if url and not url.startswith(("https://", "http://", "file://")):
        check.problems.add(url_node, f"url must be http(s):// or file://, got {url!r}")
        return None
    return SourceOverride(url=url, sha256=sha.lower())


def _parse_torch(check: Checker, node: Node | None) -> list[tuple[TorchMinor, tuple[Variant, ...]]]:
    if node is None:
        return []
    result: list[tuple[TorchMinor, tuple[Variant, ...]]] = []
    for item in (node,) if node.kind == "map" else check.seq(node, "torch"):
        if not check.is_map(item, "a torch entry"):
            continue
        check.keys(item, ("version", "newest", "variants"), what="a torch entry")
        version_node, newest_node, variants_node = item.get("version"), item.get("newest"), item.get("variants")
        if (version_node is None) == (newest_node is None) or variants_node is None:
            check.problems.add(
                item,
                "a torch entry needs 'variants' (a list like [cu126, cu130, cpu], or all) and either 'version' "
                "or 'newest' (how many of the newest torch minors)",
            )
            continue
        if version_node is None:
            result += torch_newest(check.compat, item, variants_node, check.problems, check.resolved)
            continue
        torch = check.torch_version(version_node)
        if variants_node.kind == "scalar" and variants_node.text == ALL:
            if torch is not None:
                result.append((torch, all_variants(check.compat, torch)))
            continue
        variants = [v for n in check.seq(variants_node, "variants") if (v := check.variant(n, torch))]
        if torch is not None:
            result.append((torch, tuple(dict.fromkeys(variants))))
    return result


def _cell_entries(check: Checker, node: Node, what: str, *, entry: str) -> Iterator[Node]:
    """The entries of ``include``/``exclude``: mappings over the five axes (unknown keys reported)."""
    for item in check.seq(node, what, allow_empty=True):
        if check.is_map(item, entry):
            check.keys(item, CELL_KEYS, what=entry)
            yield item


def _parse_include(check: Checker, node: Node | None) -> list[Cell]:
    if node is None:
        return []
    cells: list[Cell] = []
    for item in _cell_entries(check, node, "include", entry="an include entry"):
        missing = [key for key in CELL_KEYS if item.get(key) is None]
        if missing:
            check.problems.add(item, f"an include entry names one cell: missing {', '.join(missing)}")
            continue
        ds = check.deepspeed_version(item.get("deepspeed") or item)
        torch = check.torch_version(item.get("torch") or item)
        variant = check.variant(item.get("variant") or item, torch)
        py = check.python(item.get("python") or item)
        platform = check.platform(item.get("platform") or item)
        if ds and torch and variant and py and platform:
            cells.append(Cell(deepspeed=ds, torch=torch, variant=variant, python=py, platform=platform))
    return cells


def _parse_exclude(check: Checker, node: Node | None) -> list[CellPattern]:
    if node is None:
        return []
    patterns: list[CellPattern] = []
    for item in _cell_entries(check, node, "exclude", entry="an exclude entry"):
        fields: list[tuple[str, tuple[str, ...]]] = []
        for name, _key, value in item.keys:
            if name in CELL_KEYS:
                pats = tuple(text for n in iter_scalars(value) if (text := check.scalar(n, name)) is not None)
                fields.append((name, pats))
        if not fields:
            check.problems.add(item, "an exclude entry needs at least one of: " + ", ".join(CELL_KEYS))
            continue
        patterns.append(CellPattern(fields=tuple(fields), line=item.line))
    return patterns


def _parse_ops(check: Checker, node: Node | None) -> tuple[str, ...] | None:
    if node is None or (node.kind == "scalar" and node.text == "all"):
        return None
    if node.kind != "seq":
        check.problems.add(node, f"ops must be 'all' or a list of op names, got {node.describe()}")
        return None
    names: list[str] = []
    known = sorted(check.compat.op_names)
    for item in check.seq(node, "ops"):
        name = check.scalar(item, "an op name")
        if name is None:
            continue
        if name not in check.compat.op_names:
            check.problems.add(item, f"unknown op {name!r}{suggest(name, known)}; known: {', '.join(known)}")
            continue
        names.append(name)
    return tuple(dict.fromkeys(names))


def _parse_cpu_baseline(check: Checker, node: Node | None) -> tuple[str, ...]:
    """A baseline name, or a list of them, at most one per CPU architecture (an architecture the matrix names
    none for gets compat.yml's cpu_baseline_default)."""
    if node is None:
        return ()
    items = check.seq(node, "cpu_baseline") if node.kind == "seq" else (node,)
    known = check.compat.cpu_baselines
    names = sorted(known)
    chosen: dict[str, str] = {}
    for item in items:
        text = check.scalar(item, "cpu_baseline")
        if text is None:
            continue
        if text not in known:
            check.problems.add(item, f"unknown cpu_baseline {text!r}{suggest(text, names)}; known: {', '.join(names)}")
        elif (other := chosen.setdefault(known[text].arch, text)) != text:
            check.problems.add(item, f"cpu_baseline names two baselines of {known[text].arch}: {other!r} and {text!r}")
    return tuple(chosen.values())


def _parse_cuda_check(check: Checker, node: Node | None) -> str:
    if node is None:
        return "skip-when-needed"
    text = check.scalar(node, "cuda_check")
    if text is not None and text not in CUDA_CHECK_MODES:
        check.problems.add(node, f"cuda_check must be one of {', '.join(CUDA_CHECK_MODES)}, got {text!r}")
    elif text is not None:
        return text
    return "skip-when-needed"


def _parse_torch_index(check: Checker, node: Node | None) -> str:
    if node is None:
        return check.compat.torch_index
    text = check.scalar(node, "torch_index")
    problem = torch_index_problem(text) if text is not None else ""
    if problem:
        check.problems.add(node, f"torch_index {text!r}: {problem} (e.g. {check.compat.torch_index!r})")
    elif text is not None:
        return text
    return check.compat.torch_index


def _axis(check: Checker, node: Node | None, what: str, parse: Callable[[Node], T | None]) -> list[T]:
    if node is None:
        return []
    return [value for item in check.seq(node, what) if (value := parse(item)) is not None]


def _check_excludes_match(check: Checker, spec: MatrixSpec, root: Node) -> None:
    """An exclude that matches nothing is almost always a typo: say so (cibuildwheel does too)."""
    product = spec.product_cells()
    exclude_node = root.get("exclude")
    for pattern, item in zip(spec.exclude, exclude_node.items if exclude_node else (), strict=False):
        if not any(pattern.matches(c) for c in product):
            check.problems.add(item, f"exclude entry ({pattern.describe()}) matches no cell of the matrix")
