"""The matrix keys that shape how cells are built: ``toolkits``, ``arch_lists``, ``runners``, ``linux_runtime``.

Each reader takes the :class:`~dswheels.plan.matrix.checker.Checker` (problems go there) and
the key's node, and returns the typed value (or ``None``/empty where the value is unusable).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from dswheels.kernel.binaries.linux_runtime import RuntimeFloor
from dswheels.kernel.model import Platform, Variant, suggest
from dswheels.kernel.numbers import is_ascii_digits
from dswheels.kernel.platform_traits import traits
from dswheels.kernel.versions import VersionTuple, format_version, parse_version
from dswheels.plan.matrix.checker import Checker
from dswheels.plan.matrix.spec import BuildRunner, PlatformRunners
from dswheels.plan.matrix.yamldoc import Node

__all__ = ["parse_arch_lists", "parse_linux_runtime", "parse_runners", "parse_toolkits"]

T = TypeVar("T")


def parse_toolkits(check: Checker, node: Node | None) -> dict[str, VersionTuple]:
    """``toolkits: {cu128: "12.9"}``: the nvcc MAJOR.MINOR to build a CUDA variant with."""
    if node is None:
        return {}
    return _parse_variant_map(check, node, "toolkits", lambda n, v: _parse_toolkit(check, n, v))


def parse_arch_lists(check: Checker, node: Node | None) -> dict[str, tuple[str, ...]]:
    """``arch_lists: {cu128: "8.0;9.0+PTX"}``: a TORCH_CUDA_ARCH_LIST instead of torch's own."""
    if node is None:
        return {}
    return _parse_variant_map(check, node, "arch_lists", lambda n, v: _parse_arch_list(check, n, v))


def _parse_variant_map(
    check: Checker,
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


def _parse_toolkit(check: Checker, node: Node, variant: Variant) -> VersionTuple | None:
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


def _parse_arch_list(check: Checker, node: Node, _variant: Variant) -> tuple[str, ...] | None:
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
    return is_ascii_digits(head) and len(tail) >= 1 and is_ascii_digits(tail[0]) and tail[1:] in ("", "a", "f")


def parse_runners(check: Checker, node: Node | None, platforms: list[Platform]) -> dict[Platform, PlatformRunners]:
    if node is None:
        return {}
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


def _parse_build_runner(check: Checker, item: Node, platform: Platform) -> BuildRunner | None:
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
        # a container image runs on its host's label (manylinux_2_28: ubuntu-24.04)
        labels = ((images[image].label if image in images else image),) if image else ()
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
    if images[image].arch != traits(platform).machine:
        check.problems.add(
            node_for_image, f"image {image!r} runs on {images[image].arch}, not {traits(platform).machine}"
        )
        return None
    return BuildRunner(labels=labels, image=image)


def parse_linux_runtime(check: Checker, node: Node | None) -> RuntimeFloor | None:
    """``{glibc: "2.35", glibcxx: "3.4.30"}``: the most a Linux wheel may need (missing keys: compat.yml's)."""
    if node is None:
        return None
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
