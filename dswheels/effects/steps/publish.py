"""The publish step (``dswheels publish``): wheels, each with its METADATA and build manifest, to a
directory, a GitHub Release or a server with the PyPI upload API (:mod:`dswheels.effects.publish`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dswheels.core.locations import PUBLISHED
from dswheels.effects.github import GitHub, api_url_from_env, failing_as, token_from_env
from dswheels.effects.index import LocalWheel
from dswheels.effects.publish import (
    PublishResult,
    collect_wheels,
    publish_dir,
    publish_github,
    publish_upload,
    upload_credentials,
)
from dswheels.errors import PublishError
from dswheels.log import get_reporter

__all__ = ["PublishOptions", "PublishTarget", "ToDirectory", "ToGitHubRelease", "ToUploadServer", "publish_wheels"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ToDirectory:
    path: Path = PUBLISHED


@dataclass(frozen=True, kw_only=True, slots=True)
class ToGitHubRelease:
    repository: str  # OWNER/REPO
    tag: str
    title: str | None = None  # of a new release (default: the tag)
    target: str | None = None  # the commit a new tag points at (default branch)


@dataclass(frozen=True, kw_only=True, slots=True)
class ToUploadServer:
    url: str  # the upload URL
    simple_url: str | None = None  # its simple index (default: <URL>/simple/)


PublishTarget = ToDirectory | ToGitHubRelease | ToUploadServer


@dataclass(frozen=True, kw_only=True, slots=True)
class PublishOptions:
    paths: tuple[Path, ...] = ()  # wheels or directories of wheels (none: what `dswheels build` wrote)
    target: PublishTarget = field(default_factory=ToDirectory)


def _to_github(wheels: Sequence[LocalWheel], target: ToGitHubRelease) -> PublishResult:
    token = token_from_env()
    if token is None:
        raise PublishError(
            "publishing to GitHub needs a token",
            hint="set GITHUB_TOKEN (in a workflow: env: GITHUB_TOKEN: ${{ github.token }}, "
            "with permissions: contents: write)",
        )
    with failing_as(PublishError):
        gh = GitHub(target.repository, token=token, api_url=api_url_from_env())
        return publish_github(wheels, gh, target.tag, title=target.title, target=target.target)


def publish_wheels(options: PublishOptions) -> PublishResult:
    wheels = collect_wheels(options.paths)
    target = options.target
    with get_reporter().group(f"publish {len(wheels)} wheel(s)"):
        if isinstance(target, ToGitHubRelease):
            return _to_github(wheels, target)
        if isinstance(target, ToUploadServer):
            username, password = upload_credentials()
            return publish_upload(
                wheels, target.url, simple_url=target.simple_url, username=username, password=password
            )
        return publish_dir(wheels, target.path)
