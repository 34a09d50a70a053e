"""``matrix/matrix.yml``: what the user wants built, validated against the known facts.

Every problem in the file is collected (with ``file:line``, the bad value and a close-match
suggestion) before one :class:`~dswheels.errors.ConfigError` reports them all.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from dswheels.core.binaries.linux_runtime import RuntimeFloor
from dswheels.core.compat import Compat
from dswheels.core.matrix.selectors import ALL, all_variants, deepspeed_newest, torch_newest
from dswheels.core.matrix.yamldoc import Node, Problems, iter_scalars, parse_yaml, suggest
from dswheels.core.model import Cell, Platform, Python, Variant
from dswheels.core.sources import torch_index_problem
from dswheels.core.versions import VersionTuple, format_version, parse_version
from dswheels.errors import ConfigError

__all__ = [
    "BuildRunner",
    "CellPattern",
    "MatrixSpec",
    "PlatformRunners",
    "SourceOverride",
    "parse_matrix",
    "parse_platform",
]

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
CELL_KEYS = ("deepspeed", "torch", "variant", "python", "platform")


@dataclass(frozen=True, slots=True)
class SourceOverride:
    """A pinned source for one DeepSpeed version on one OS: URL (or the default) and sha256."""

    url: str  # "" = the default for that OS (PyPI sdist / GitHub tag archive)
    sha256: str


@dataclass(frozen=True, slots=True)
class CellPattern:
    """An ``exclude`` entry: every given key must match (fnmatch globs, or lists of them)."""

    fields: tuple[tuple[str, tuple[str, ...]], ...]
    line: int

    def matches(self, cell: Cell) -> bool:
        values = cell_values(cell)
        return all(any(fnmatch.fnmatchcase(values[key], pat) for pat in pats) for key, pats in self.fields)

    def describe(self) -> str:
        return ", ".join(f"{key}={'|'.join(pats)}" for key, pats in self.fields)


@dataclass(frozen=True, slots=True)
class BuildRunner:
    """Where a build job runs: ``labels`` for ``runs-on`` and the image whose toolchain it has."""

    labels: tuple[str, ...]
    image: str


@dataclass(frozen=True, slots=True)
class PlatformRunners:
    build: tuple[BuildRunner, ...]  # candidates, first that can build a cell wins
    smoke: tuple[str, ...]  # labels of the (self-hosted) GPU runner


@dataclass(frozen=True, slots=True)
class MatrixSpec:
    filename: str
    deepspeed: tuple[VersionTuple, ...]
    torch: tuple[tuple[VersionTuple, tuple[Variant, ...]], ...]
    python: tuple[Python, ...]
    platforms: tuple[Platform, ...]
    include: tuple[Cell, ...]
    exclude: tuple[CellPattern, ...]
    ops: tuple[str, ...] | None  # None = all shippable ops
    cpu_baseline: str
    cuda_check: str
    toolkits: Mapping[str, VersionTuple]  # variant name -> nvcc MAJOR.MINOR override
    arch_lists: Mapping[str, tuple[str, ...]]  # variant name -> TORCH_CUDA_ARCH_LIST override
    torch_index: str
    runners: Mapping[Platform, PlatformRunners]
    sources: Mapping[tuple[VersionTuple, str], SourceOverride]  # (deepspeed, os) -> override
    linux_runtime: RuntimeFloor | None = None  # None: compat.yml's linux_runtime_floor
    resolved: tuple[str, ...] = ()  # what each `newest:`/`variants: all` selector resolved to, and why

    def product_cells(self) -> list[Cell]:
        """The product of the axes, nothing added or taken away."""
        return [
            Cell(deepspeed=ds, torch=torch, variant=variant, python=py, platform=platform)
            for ds in self.deepspeed
            for torch, variants in self.torch
            for variant in variants
            for py in self.python
            for platform in self.platforms
        ]

    def axis_cells(self) -> list[Cell]:
        """THE expansion (every plan goes through it, the whole matrix or a few axes of it): the
        product of the axes minus ``exclude``, then ``include`` (GitHub's order: an included
        cell is built even where an exclude pattern matches it). Rules not yet applied."""
        cells = self.product_cells()
        if self.exclude:
            cells = [c for c in cells if not any(p.matches(c) for p in self.exclude)]
        seen = set(cells)
        cells.extend(c for c in self.include if c not in seen)
        return cells


def cell_values(cell: Cell) -> dict[str, str]:
    """The text of each axis of a cell, as users write it in patterns and flags."""
    return {
        "deepspeed": format_version(cell.deepspeed),
        "torch": format_version(cell.torch),
        "variant": cell.variant.name,
        "python": str(cell.python),
        "platform": cell.platform.value,
    }


def parse_platform(text: str) -> Platform:
    """A wheel platform as users write it (``linux_x86_64``); ValueError with a suggestion otherwise."""
    try:
        return Platform(text)
    except ValueError:
        names = [p.value for p in Platform]
        msg = f"unknown platform {text!r}{suggest(text, names)}; known: {', '.join(names)}"
        raise ValueError(msg) from None


T = TypeVar("T")


class _Checker:
    """Walks the document with typed getters; every problem goes to ``problems``."""

    def __init__(self, compat: Compat, problems: Problems) -> None:
        self.compat = compat
        self.problems = problems
        self.resolved: list[str] = []

    def keys(self, node: Node, allowed: tuple[str, ...], *, what: str) -> None:
        for name, key_node, _value in node.keys:
            if name not in allowed:
                self.problems.add(
                    key_node,
                    f"unknown key {name!r} in {what}{suggest(name, allowed)}; allowed: {', '.join(allowed)}",
                )

    def is_map(self, node: Node, what: str) -> bool:
        if node.kind != "map":
            self.problems.add(node, f"{what} must be a mapping, got {node.describe()}")
            return False
        return True

    def seq(self, node: Node, what: str, *, allow_empty: bool = False) -> tuple[Node, ...]:
        if node.kind != "seq":
            self.problems.add(node, f"{what} must be a list, got {node.describe()}")
            return ()
        if not node.items and not allow_empty:
            self.problems.add(node, f"{what} is empty")
        return node.items

    def scalar(self, node: Node, what: str) -> str | None:
        if node.kind != "scalar" or node.is_null or node.is_bool:
            self.problems.add(node, f"{what} must be a string, got {node.describe()}")
            return None
        return node.text

    def parsed(self, node: Node, what: str, parse: Callable[[str], T]) -> T | None:
        text = self.scalar(node, what)
        if text is None:
            return None
        try:
            return parse(text)
        except ValueError as exc:
            self.problems.add(node, str(exc))
            return None

    # --- axis values ---------------------------------------------------------------------

    def deepspeed_version(self, node: Node) -> VersionTuple | None:
        version = self.parsed(node, "a DeepSpeed version", parse_version)
        if version is None:
            return None
        if len(version) != 3:
            self.problems.add(node, f"DeepSpeed versions have three parts (e.g. '0.19.8'), got {node.text!r}")
            return None
        known = self.compat.deepspeed_releases
        if version not in known:
            names = [format_version(v) for v in known]
            self.problems.add(
                node,
                f"unknown DeepSpeed version {node.text!r}{suggest(node.text, names)}; compat.yml knows "
                f"{names[0]} to {names[-1]} (collected {self.compat.collected}); add newer releases there",
            )
            return None
        return version

    def torch_version(self, node: Node) -> VersionTuple | None:
        version = self.parsed(node, "a torch version", parse_version)
        if version is None:
            return None
        if len(version) != 2:
            minor = version[:2]
            self.problems.add(
                node,
                f"torch is given as MAJOR.MINOR ({format_version(minor)!r}), not {node.text!r}: a DeepSpeed "
                "wheel is tied to the torch minor and the builder installs that minor's newest patch",
            )
            return None
        if version not in self.compat.torch:
            names = [format_version(v) for v in self.compat.torch_minors]
            self.problems.add(
                node,
                f"unknown torch version {node.text!r}{suggest(node.text, names)}; known: {', '.join(names)}",
            )
            return None
        return version

    def variant(self, node: Node, torch: VersionTuple | None) -> Variant | None:
        variant = self.parsed(node, "a torch variant", Variant.parse)
        if variant is None or torch is None or torch not in self.compat.torch:
            return variant
        release = self.compat.torch[torch]
        everywhere = {v.name for os in release.variants for v in release.variants_for(os)}
        if variant.name not in everywhere:
            self.problems.add(
                node,
                f"torch {format_version(torch)} has no {variant.name} build on any platform"
                f"{suggest(variant.name, sorted(everywhere))}; it has {', '.join(sorted(everywhere))}",
            )
            return None
        return variant

    def python(self, node: Node) -> Python | None:
        py = self.parsed(node, "a Python version", Python.parse)
        if py is None:
            return None
        known = {p for release in self.compat.torch.values() for pys in release.python.values() for p in pys}
        if py not in known:
            names = sorted(str(p) for p in known)
            self.problems.add(node, f"no torch release has wheels for Python {node.text!r}; known: {', '.join(names)}")
            return None
        return py

    def platform(self, node: Node) -> Platform | None:
        return self.parsed(node, "a platform", parse_platform)


def _parse_deepspeed(
    check: _Checker, node: Node
) -> tuple[list[VersionTuple], dict[tuple[VersionTuple, str], SourceOverride]]:
    versions: list[VersionTuple] = []
    sources: dict[tuple[VersionTuple, str], SourceOverride] = {}
    for item in (node,) if node.kind == "map" else check.seq(node, "deepspeed"):
        if item.kind == "map" and item.get("newest") is not None:  # {newest: N}: docs/matrix.md
            check.keys(item, ("newest",), what="a deepspeed selector")
            versions.extend(deepspeed_newest(check.compat, item, check.problems, check.resolved))
            continue
        if item.kind != "map":
            version = check.deepspeed_version(item)
            if version:
                versions.append(version)
            continue
        check.keys(item, ("version", "source"), what="a deepspeed entry")
        version_node = item.get("version")
        if version_node is None:
            check.problems.add(item, "a deepspeed entry needs 'version'")
            continue
        version = check.deepspeed_version(version_node)
        if version is None:
            continue
        versions.append(version)
        source = item.get("source")
        if source is not None and check.is_map(source, "source"):
            per_os = {os: source.get(os) for os in ("linux", "windows")}
            if any(per_os.values()):
                check.keys(source, ("linux", "windows"), what="a per-OS source")
                for os, sub in per_os.items():
                    if sub is not None and check.is_map(sub, f"source.{os}"):
                        override = _parse_source(check, sub)
                        if override:
                            sources[(version, os)] = override
            else:
                override = _parse_source(check, source)
                if override:
                    sources[(version, "linux")] = sources[(version, "windows")] = override
    return versions, sources


def _parse_source(check: _Checker, node: Node) -> SourceOverride | None:
    check.keys(node, ("url", "sha256"), what="a source")
    sha_node, url_node = node.get("sha256"), node.get("url")
    if sha_node is None:
        check.problems.add(node, "a source override needs 'sha256' (the archive's SHA-256, 64 hex digits)")
        return None
    sha = check.scalar(sha_node, "sha256") or ""
    if sha and (len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha.lower())):
        check.problems.add(sha_node, f"sha256 must be 64 hex digits, got {sha!r}")
        return None
    url = (check.scalar(url_node, "url") or "") if url_node else ""
    if url and not url.startswith(("https://", "http://", "file://")):
        check.problems.add(url_node, f"url must be http(s):// or file://, got {url!r}")
        return None
    return SourceOverride(url=url, sha256=sha.lower())


def _parse_torch(check: _Checker, node: Node) -> list[tuple[VersionTuple, tuple[Variant, ...]]]:
    result: list[tuple[VersionTuple, tuple[Variant, ...]]] = []
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


def _parse_include(check: _Checker, node: Node) -> list[Cell]:
    cells: list[Cell] = []
    for item in check.seq(node, "include", allow_empty=True):
        if not check.is_map(item, "an include entry"):
            continue
        check.keys(item, CELL_KEYS, what="an include entry")
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


def _parse_exclude(check: _Checker, node: Node) -> list[CellPattern]:
    patterns: list[CellPattern] = []
    for item in check.seq(node, "exclude", allow_empty=True):
        if not check.is_map(item, "an exclude entry"):
            continue
        check.keys(item, CELL_KEYS, what="an exclude entry")
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


def _parse_ops(check: _Checker, node: Node) -> tuple[str, ...] | None:
    if node.kind == "scalar" and node.text == "all":
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


def _parse_variant_map(
    check: _Checker,
    node: Node,
    what: str,
    parse: Callable[[Node, Variant], T | None],
) -> dict[str, T]:
    result: dict[str, T] = {}
    if not check.is_map(node, what):
        return result
    for name, key, value in node.keys:
        try:
            variant = Variant.parse(name)
        except ValueError as exc:
            check.problems.add(key, str(exc))
            continue
        if not variant.is_cuda:
            check.problems.add(key, f"{what} apply to CUDA variants, not {name!r}")
            continue
        parsed = parse(value, variant)
        if parsed is not None:
            result[variant.name] = parsed
    return result


def _parse_toolkit(check: _Checker, node: Node, variant: Variant) -> VersionTuple | None:
    version = check.parsed(node, "a CUDA toolkit version", parse_version)
    if version is None:
        return None
    version = version[:2]
    if version not in check.compat.cuda:
        names = [format_version(v) for v in sorted(check.compat.cuda)]
        check.problems.add(node, f"unknown CUDA toolkit {node.text!r}; known: {', '.join(names)}")
        return None
    if variant.cuda is not None and version[0] != variant.cuda[0]:
        check.problems.add(
            node,
            f"nvcc {format_version(version)} cannot build for {variant.name}: torch refuses a CUDA major "
            f"mismatch; use a {variant.cuda[0]}.x toolkit",
        )
        return None
    return version


def _parse_arch_list(check: _Checker, node: Node, _variant: Variant) -> tuple[str, ...] | None:
    text = check.scalar(node, "an arch list")
    if text is None:
        return None
    tokens = tuple(t for t in text.replace(" ", ";").split(";") if t)
    bad = [t for t in tokens if not _valid_arch_token(t)]
    if bad or not tokens:
        check.problems.add(node, f"not a TORCH_CUDA_ARCH_LIST: {text!r} (expected e.g. '8.0;8.6;9.0+PTX')")
        return None
    return tokens


def _valid_arch_token(token: str) -> bool:
    base = token.removesuffix("+PTX")
    head, _, tail = base.partition(".")
    return head.isdigit() and len(tail) >= 1 and tail[0].isdigit() and tail[1:] in ("", "a", "f")


def _parse_runners(check: _Checker, node: Node, platforms: list[Platform]) -> dict[Platform, PlatformRunners]:
    runners: dict[Platform, PlatformRunners] = {}
    if not check.is_map(node, "runners"):
        return runners
    for name, key, value in node.keys:
        platform = check.platform(key)
        if platform is None or not check.is_map(value, f"runners.{name}"):
            continue
        check.keys(value, ("build", "smoke"), what=f"runners.{name}")
        build_node, smoke_node = value.get("build"), value.get("smoke")
        if build_node is None or smoke_node is None:
            check.problems.add(value, f"runners.{name} needs 'build' (images) and 'smoke' (runner labels)")
            continue
        build: list[BuildRunner] = []
        for item in check.seq(build_node, "build"):
            runner = _parse_build_runner(check, item, platform)
            if runner:
                build.append(runner)
        smoke = tuple(text for n in check.seq(smoke_node, "smoke") if (text := check.scalar(n, "a runner label")))
        runners[platform] = PlatformRunners(build=tuple(build), smoke=smoke)
    for platform in platforms:
        if platform not in runners:
            check.problems.add(node, f"no runners for platform {platform.value!r} (add runners.{platform.value})")
    return runners


def _parse_build_runner(check: _Checker, item: Node, platform: Platform) -> BuildRunner | None:
    images = check.compat.runner_images
    if item.kind == "map":
        check.keys(item, ("labels", "like"), what="a self-hosted build runner")
        labels_node, like_node = item.get("labels"), item.get("like")
        if labels_node is None or like_node is None:
            check.problems.add(item, "a self-hosted build runner needs 'labels' and 'like' (the image it resembles)")
            return None
        labels = tuple(t for n in check.seq(labels_node, "labels") if (t := check.scalar(n, "a label")))
        image = check.scalar(like_node, "an image name")
        node_for_image = like_node
    else:
        image = check.scalar(item, "an image name")
        labels = (image,) if image else ()
        node_for_image = item
    if image is None:
        return None
    if image not in images:
        names = sorted(images)
        check.problems.add(
            node_for_image,
            f"unknown runner image {image!r}{suggest(image, names)}; known: {', '.join(names)} "
            "(a self-hosted runner: {labels: [...], like: <image>})",
        )
        return None
    if images[image].os != platform.os:
        check.problems.add(node_for_image, f"image {image!r} is {images[image].os}, not {platform.os}")
        return None
    return BuildRunner(labels=labels, image=image)


def _parse_linux_runtime(check: _Checker, node: Node) -> RuntimeFloor | None:
    """``{glibc: "2.35", glibcxx: "3.4.30"}``: the most a Linux wheel may need (missing keys: compat.yml's)."""
    if not check.is_map(node, "linux_runtime"):
        return None
    check.keys(node, ("glibc", "glibcxx"), what="linux_runtime")
    default = check.compat.linux_runtime_floor
    glibc, glibcxx = default.glibc or (), default.glibcxx or ()
    ok = True
    glibc_node, glibcxx_node = node.get("glibc"), node.get("glibcxx")
    if glibc_node is not None:
        version = check.parsed(glibc_node, "linux_runtime.glibc", parse_version)
        if version is not None and (len(version) != 2 or version[0] != 2):  # glibc is 2.N
            check.problems.add(glibc_node, f"not a glibc release (2.N, like '2.35'): {glibc_node.text!r}")
            version = None
        ok = ok and version is not None
        glibc = version or glibc
    if glibcxx_node is not None:
        version = check.parsed(glibcxx_node, "linux_runtime.glibcxx", parse_version)
        known = [format_version(r.glibcxx) for r in check.compat.libstdcxx]
        if version is not None and format_version(version) not in known:
            pairs = ", ".join(
                f"{format_version(r.glibcxx)} (GCC {format_version(r.gcc)})" for r in check.compat.libstdcxx
            )
            check.problems.add(
                glibcxx_node,
                f"GLIBCXX {glibcxx_node.text} is not the newest version of any GCC release's libstdc++"
                f"{suggest(glibcxx_node.text, known)}; known: {pairs}",
            )
            version = None
        ok = ok and version is not None
        glibcxx = version or glibcxx
    return check.compat.runtime_floor(glibc=glibc, glibcxx=glibcxx) if ok else None


def _axis(check: _Checker, node: Node | None, what: str, parse: Callable[[Node], T | None]) -> list[T]:
    if node is None:
        return []
    return [value for item in check.seq(node, what) if (value := parse(item)) is not None]


def _check_excludes_match(check: _Checker, spec: MatrixSpec, root: Node) -> None:
    """An exclude that matches nothing is almost always a typo: say so (cibuildwheel does too)."""
    product = spec.product_cells()
    exclude_node = root.get("exclude")
    for pattern, item in zip(spec.exclude, exclude_node.items if exclude_node else (), strict=False):
        if not any(pattern.matches(c) for c in product):
            check.problems.add(item, f"exclude entry ({pattern.describe()}) matches no cell of the matrix")


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
    check = _Checker(compat, problems)
    if not check.is_map(root, "the matrix file"):
        return None
    check.keys(root, TOP_KEYS, what="the matrix file")
    schema = root.get("schema")
    if schema is not None and schema.text != "1":
        problems.add(schema, f"unsupported schema {schema.text!r}: this dswheels reads schema 1")
    for required in ("deepspeed", "torch", "python", "platforms", "runners"):
        if root.get(required) is None:
            problems.add(root, f"missing required key {required!r}", line=1)

    ds_node = root.get("deepspeed")
    deepspeed, sources = _parse_deepspeed(check, ds_node) if ds_node else ([], {})
    torch_node = root.get("torch")
    torch = _parse_torch(check, torch_node) if torch_node else []
    python = _axis(check, root.get("python"), "python", check.python)
    platforms = _axis(check, root.get("platforms"), "platforms", check.platform)
    include_node, exclude_node = root.get("include"), root.get("exclude")
    include = _parse_include(check, include_node) if include_node else []
    exclude = _parse_exclude(check, exclude_node) if exclude_node else []
    ops_node = root.get("ops")
    ops = _parse_ops(check, ops_node) if ops_node else None

    baseline_node = root.get("cpu_baseline")
    cpu_baseline = "x86-64-v2"
    if baseline_node is not None:
        text = check.scalar(baseline_node, "cpu_baseline")
        names = sorted(compat.cpu_baselines)
        if text is not None and text not in compat.cpu_baselines:
            problems.add(
                baseline_node, f"unknown cpu_baseline {text!r}{suggest(text, names)}; known: {', '.join(names)}"
            )
        elif text is not None:
            cpu_baseline = text

    cuda_check = "skip-when-needed"
    check_node = root.get("cuda_check")
    if check_node is not None:
        text = check.scalar(check_node, "cuda_check")
        if text is not None and text not in CUDA_CHECK_MODES:
            problems.add(check_node, f"cuda_check must be one of {', '.join(CUDA_CHECK_MODES)}, got {text!r}")
        elif text is not None:
            cuda_check = text

    toolkits_node, arch_node = root.get("toolkits"), root.get("arch_lists")
    toolkits = (
        _parse_variant_map(check, toolkits_node, "toolkits", lambda n, v: _parse_toolkit(check, n, v))
        if toolkits_node
        else {}
    )
    arch_lists = (
        _parse_variant_map(check, arch_node, "arch_lists", lambda n, v: _parse_arch_list(check, n, v))
        if arch_node
        else {}
    )

    torch_index = compat.torch_index
    index_node = root.get("torch_index")
    if index_node is not None:
        text = check.scalar(index_node, "torch_index")
        problem = torch_index_problem(text) if text is not None else ""
        if problem:
            problems.add(index_node, f"torch_index {text!r}: {problem} (e.g. {compat.torch_index!r})")
        elif text is not None:
            torch_index = text

    runners_node = root.get("runners")
    runners = _parse_runners(check, runners_node, platforms) if runners_node else {}
    runtime_node = root.get("linux_runtime")
    linux_runtime = _parse_linux_runtime(check, runtime_node) if runtime_node else None

    spec = MatrixSpec(
        filename=filename,
        deepspeed=tuple(dict.fromkeys(deepspeed)),
        torch=tuple(torch),
        python=tuple(dict.fromkeys(python)),
        platforms=tuple(dict.fromkeys(platforms)),
        include=tuple(include),
        exclude=tuple(exclude),
        ops=ops,
        cpu_baseline=cpu_baseline,
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
