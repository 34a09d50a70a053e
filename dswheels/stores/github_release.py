"""Publishing to a GitHub Release, and reading back every wheel the repository's releases hold.

A release is drafted (or a draft left by an interrupted run is resumed), what is missing is
uploaded, the assets are checked, then the release is published. Uploads are not retried
blindly: a failed upload may leave a half-made asset (state ``starter``), so the assets are
listed again before another try. GitHub's limits (2 GiB per asset, 1000 assets per release)
are checked before any upload.
"""

from __future__ import annotations

import contextvars
import hashlib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from dswheels.host.github import GitHub, GitHubAPIError, api_url_from_env, failing_as, token_from_env
from dswheels.host.log import get_reporter
from dswheels.kernel.errors import ConfigError, GitHubError, PublishError
from dswheels.kernel.github_api import Asset, Release
from dswheels.kernel.index_files import IndexFile
from dswheels.kernel.index_links import GITHUB_ASSET_LIMIT, GITHUB_ASSET_MAX_BYTES, metadata_name
from dswheels.kernel.naming import parse_wheel
from dswheels.kernel.provenance import provenance_name
from dswheels.kernel.wheel_contents import parse_metadata
from dswheels.stores.outgoing import Outgoing, PublishResult, outgoing_files, sort_out
from dswheels.stores.protocol import ToGitHubRelease
from dswheels.stores.served_index import download_wheel
from dswheels.stores.wheel_ref import LocalWheel

__all__ = ["GitHubReleaseStore", "check_github_limits", "github_index_files", "publish_github"]


def check_github_limits(files: Sequence[Outgoing], *, existing: int, new: int, tag: str) -> None:
    """GitHub's limits: every asset under 2 GiB, at most 1000 assets per release."""
    too_big = [f"{f.name}: {f.size / 2**30:.2f} GiB" for f in files if f.size > GITHUB_ASSET_MAX_BYTES]
    if too_big:
        raise PublishError(
            "GitHub release assets must be under 2 GiB",
            details="\n".join(too_big),
            hint="build fewer CUDA architectures into the wheel (TORCH_CUDA_ARCH_LIST) or strip debug info",
        )
    if existing + new > GITHUB_ASSET_LIMIT:
        raise PublishError(
            f"release {tag} would hold {existing + new} assets; GitHub allows {GITHUB_ASSET_LIMIT} per release",
            details=f"{existing} already there, {new} to add (each wheel brings its .metadata, manifest, provenance)",
            hint="publish to more than one tag (e.g. one release per DeepSpeed version or per platform); "
            "`dswheels index --github` reads every release",
        )


def _by_name(assets: Sequence[Asset]) -> dict[str, Asset]:
    return {a.name: a for a in assets}


def _retryable(exc: GitHubAPIError, release: Release, item: Outgoing) -> bool:
    """Whether a failed upload may be tried again; PublishError when the release cannot take it at all."""
    if "immutable" in exc.github_message.lower():
        raise PublishError(
            f"release {release.tag} is published and immutable: {item.name} cannot be added",
            hint="publish the missing wheels under a new tag; `dswheels index --github` reads every release",
        ) from None
    return exc.status >= 500 or exc.has_error_code("already_exists")


def _arrived(gh: GitHub, release: Release, item: Outgoing) -> bool:
    """After a failed upload: True when the asset arrived whole anyway; a half-made one is deleted."""
    asset = _by_name(gh.assets(release)).get(item.name)
    if asset is not None and asset.uploaded:
        if gh.asset_sha256(asset) == item.sha256:
            return True  # it did arrive
        raise PublishError(f"{item.name}: GitHub holds other bytes under this name after a failed upload")
    if asset is not None:  # a "starter" left by the failed upload: GitHub says it can be deleted
        gh.delete_asset(asset)
    return False


def _upload_one(gh: GitHub, release: Release, item: Outgoing) -> None:
    """Upload, and after any failure look at what GitHub kept before trying again."""
    reporter = get_reporter()
    attempts = gh.retry.attempts
    for attempt in range(attempts):
        last = attempt == attempts - 1
        try:
            gh.upload_asset(release, item.name, item.source(), size=item.size)
        except GitHubAPIError as exc:
            if not _retryable(exc, release, item) or last:
                raise
            reporter.warning(f"upload of {item.name} failed ({exc.status}); checking what GitHub kept")
        except (GitHubError, PublishError):  # the connection broke: the asset may or may not be there
            if last:
                raise
            reporter.warning(f"upload of {item.name} was interrupted; checking what GitHub kept")
        else:
            return
        if _arrived(gh, release, item):
            return
        gh.retry.wait(gh.retry.backoff(attempt))


def _release_for(gh: GitHub, tag: str, *, title: str | None, target: str | None) -> Release:
    """The release of ``tag``: a draft is created when there is none."""
    release = gh.release_by_tag(tag)
    if release is None:
        get_reporter().info(f"creating draft release {tag} in {gh.repo}")
        release = gh.create_release(
            tag,
            name=title or tag,
            body="DeepSpeed wheels built by dswheels. Install lines: see the index page.",
            target=target,
        )
    return release


def publish_github(
    wheels: Sequence[LocalWheel], gh: GitHub, tag: str, *, title: str | None = None, target: str | None = None
) -> PublishResult:
    """Draft (or find) the release for ``tag``, upload what is missing, verify, publish.

    Safe to re-run: a draft left by an interrupted run is reused, assets already there
    with the same bytes are skipped, half-uploaded ones (state ``starter``) are replaced.
    """
    reporter = get_reporter()
    files = [item for wheel in wheels for item in outgoing_files(wheel)]
    check_github_limits(files, existing=0, new=0, tag=tag)  # sizes first: fail before any API call
    release = _release_for(gh, tag, title=title, target=target)
    assets = gh.assets(release)
    for stale in [a for a in assets if not a.uploaded]:
        reporter.warning(f"removing {stale.name}: left half-uploaded (state {stale.state}) by an earlier run")
        gh.delete_asset(stale)
    existing = _by_name([a for a in assets if a.uploaded])
    result = PublishResult(where=gh.place.release_page(tag))
    todo = sort_out(
        files,
        key=lambda item: (item.name, item.sha256),
        published=lambda name: gh.asset_sha256(existing[name]) if name in existing else None,
        result=result,
        where=f"{gh.repo} release {tag}",
    )
    check_github_limits(files, existing=len(existing), new=len(todo), tag=tag)
    for number, item in enumerate(todo, start=1):
        reporter.info(f"[{number}/{len(todo)}] uploading {item.name} ({item.size / 1e6:.1f} MB)")
        _upload_one(gh, release, item)
        result.uploaded.append(item.name)
    final = _by_name(gh.assets(release))
    missing = [
        item.name
        for item in files
        if item.name not in final or not final[item.name].uploaded or gh.asset_sha256(final[item.name]) != item.sha256
    ]
    if missing:
        raise PublishError(
            f"after uploading, release {tag} lacks or misreports {len(missing)} file(s); it was left unpublished",
            details="\n".join(missing),
            hint="run the same command again: it resumes",
        )
    if release.draft:
        reporter.info(f"publishing release {tag}")
        gh.publish_release(release)
    return result


# --- reading back: the index's view of the releases --------------------------------------------------

_Found = tuple[str, Asset, Asset | None, Asset | None]  # tag, wheel asset, its .metadata and .provenance assets


def _published_wheels(gh: GitHub) -> list[_Found]:
    """Every wheel asset of the published releases (drafts' assets are not public), oldest release first."""
    found: list[_Found] = []
    releases = sorted((r for r in gh.releases() if not r.draft), key=lambda r: r.id)
    for release in releases:
        tag = release.tag
        assets = _by_name([a for a in gh.assets(release) if a.uploaded])
        for name, asset in sorted(assets.items()):
            if name.endswith(".whl"):
                found.append((tag, asset, assets.get(metadata_name(name)), assets.get(provenance_name(name))))
    return found


def _index_file(gh: GitHub, item: _Found) -> IndexFile | str:
    """What the index lists for one wheel asset, or the warning that says why it is skipped."""
    tag, asset, meta_asset, provenance_asset = item
    try:
        wheel = parse_wheel(asset.name)
    except ValueError as exc:
        return f"release {tag}: skipped {exc}"
    requires_python = metadata_sha256 = None
    if meta_asset is not None:
        data = gh.download_asset(meta_asset, limit=1024 * 1024)
        metadata_sha256 = hashlib.sha256(data).hexdigest()
        requires_python = parse_metadata(data).requires_python
    return IndexFile.of_wheel(
        wheel,
        url=asset.download_url,
        sha256=gh.asset_sha256(asset),
        size=asset.size,
        requires_python=requires_python,
        metadata_sha256=metadata_sha256,
        # published beside it by `dswheels publish` (PEP 740); `install --require-provenance` verifies it
        provenance_url=provenance_asset.download_url if provenance_asset is not None else None,
    )


def github_index_files(gh: GitHub) -> tuple[list[IndexFile], list[str]]:
    """Every dswheels wheel in the repository's published releases, with hashes and metadata.

    The wheel's sha256 is GitHub's own digest of the asset; its ``.metadata`` asset is
    downloaded (a few KB, several at a time) for Requires-Python and its hash. Drafts are
    left out: their assets are not public. Returns the files and warnings.
    """
    warnings: list[str] = []
    found = _published_wheels(gh)
    parent = contextvars.copy_context()  # the workers report (retries) through the caller's reporter
    with ThreadPoolExecutor(max_workers=8) as pool:  # network-bound: a few requests in flight
        results = list(pool.map(lambda item: parent.copy().run(_index_file, gh, item), found))
    chosen: dict[str, tuple[IndexFile, str]] = {}
    for (tag, _asset, meta_asset, _provenance), result in zip(found, results, strict=True):
        if isinstance(result, str):
            warnings.append(result)
            continue
        if meta_asset is None:
            warnings.append(f"release {tag}: {result.filename} has no .metadata asset; installers will download it")
        if result.filename in chosen:
            first, first_tag = chosen[result.filename]
            if first.sha256 != result.sha256:
                raise PublishError(
                    f"{result.filename} is published with different bytes in releases {first_tag} and {tag}",
                    hint="installers would get either; delete the wrong asset, and re-spin with a build tag",
                )
            continue  # the same file twice: the oldest release's copy is the one linked
        chosen[result.filename] = (result, tag)
    return [item for item, _tag in chosen.values()], warnings


class GitHubReleaseStore:
    """The store of a :class:`~dswheels.stores.protocol.ToGitHubRelease`: reading lists every published
    release of the repository, publishing goes to the target's tag. The client is made from the
    environment (GITHUB_TOKEN, GITHUB_API_URL) unless one is given."""

    def __init__(self, target: ToGitHubRelease, *, gh: GitHub | None = None) -> None:
        self.target = target
        self._gh = gh

    @property
    def where(self) -> str:
        return f"the releases of {self.target.repository}"

    def _client(self, *, token_needed: bool = False) -> GitHub:
        if self._gh is not None:
            return self._gh
        token = token_from_env()
        if token is None and token_needed:
            raise PublishError(
                "publishing to GitHub needs a token",
                hint="set GITHUB_TOKEN (in a workflow: env: GITHUB_TOKEN: ${{ github.token }}, "
                "with permissions: contents: write)",
            )
        return GitHub(self.target.repository, token=token, api_url=api_url_from_env())

    # GitHub's failures (GitHubError, exit 10) are this store's: publishing and indexing fail with exit 7

    def names(self) -> list[str]:
        with failing_as(PublishError):
            return [asset.name for _tag, asset, _meta, _provenance in _published_wheels(self._client())]

    def list(self) -> list[IndexFile]:
        """:func:`github_index_files`; its warnings (a wheel skipped, one without .metadata) are reported."""
        with failing_as(PublishError):
            files, warnings = github_index_files(self._client())
        for warning in warnings:
            get_reporter().warning(warning)
        return files

    def fetch(self, file: IndexFile, dest: Path) -> Path:
        return download_wheel(file, dest)

    def put(self, wheels: Sequence[LocalWheel]) -> PublishResult:
        if not self.target.tag:
            raise ConfigError("publishing to a GitHub Release needs the release's tag", hint="pass --tag")
        gh = self._client(token_needed=True)
        with failing_as(PublishError):
            return publish_github(wheels, gh, self.target.tag, title=self.target.title, target=self.target.target)
