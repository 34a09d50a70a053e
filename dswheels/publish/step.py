"""The publish step (``dswheels publish``): the wheels named on the command line (or ``dswheels build``'s),
each with its METADATA and build manifest, to a directory, a GitHub Release or a server with the PyPI
upload API: the target's store (:mod:`dswheels.stores`), each keeping one rule
(:mod:`~dswheels.stores.outgoing`): a published file is immutable."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dswheels.host.log import get_reporter
from dswheels.host.wheelhouse import find_wheels, is_wheel_file
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.naming import parse_wheel
from dswheels.stores import store_for
from dswheels.stores.outgoing import PublishResult
from dswheels.stores.protocol import ToDirectory, ToGitHubRelease, ToUploadServer
from dswheels.stores.wheel_ref import LocalWheel, local_wheel

__all__ = [
    "PublishOptions",
    "PublishTarget",
    "ToDirectory",
    "ToGitHubRelease",
    "ToUploadServer",
    "collect_wheels",
    "publish_wheels",
]

# where `dswheels publish` can put wheels (a served index is written by `dswheels index`, not published to)
PublishTarget = ToDirectory | ToGitHubRelease | ToUploadServer


@dataclass(frozen=True, kw_only=True, slots=True)
class PublishOptions:
    paths: tuple[Path, ...] = ()  # wheels or directories of wheels (none: what `dswheels build` wrote)
    target: PublishTarget = field(default_factory=ToDirectory)


def publish_wheels(options: PublishOptions) -> PublishResult:
    wheels = collect_wheels(options.paths)
    with get_reporter().group(f"publish {len(wheels)} wheel(s)"):
        return store_for(options.target).put(wheels)


def collect_wheels(paths: Sequence[Path]) -> list[LocalWheel]:
    """Wheels named directly, or every ``*.whl`` in the directories given (and one level down, as
    `dswheels build` writes them); no paths: what `dswheels build` wrote (``wheelhouse/``)."""
    found = find_wheels(paths)
    for path in found:
        if not is_wheel_file(path):
            raise ConfigError(f"{path}: no such wheel or directory")
    names: dict[str, Path] = {}
    for path in found:
        try:
            parse_wheel(path.name)
        except ValueError as exc:
            raise ConfigError(
                f"not a dswheels wheel: {exc}",
                hint="only wheels built by `dswheels build` can be published (their names carry the torch build)",
            ) from None
        if path.name in names and names[path.name].resolve() != path.resolve():
            raise ConfigError(f"{path.name} is given twice: {names[path.name]} and {path}")
        names[path.name] = path
    return [local_wheel(p) for p in names.values()]
