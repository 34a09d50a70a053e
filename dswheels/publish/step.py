"""The publish step (``dswheels publish``): wheels, each with its METADATA and build manifest, to a
directory, a GitHub Release or a server with the PyPI upload API: the target's store (:mod:`dswheels.stores`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dswheels.host.log import get_reporter
from dswheels.publish.effects.collect import collect_wheels
from dswheels.stores import store_for
from dswheels.stores.outgoing import PublishResult
from dswheels.stores.protocol import ToDirectory, ToGitHubRelease, ToUploadServer

__all__ = ["PublishOptions", "PublishTarget", "ToDirectory", "ToGitHubRelease", "ToUploadServer", "publish_wheels"]

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
