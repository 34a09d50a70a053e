"""A small client for the GitHub REST API calls that publishing needs: releases and their assets.

What it handles: pagination (``Link: <...>; rel="next"``), retries with exponential backoff
and jitter for 5xx, 429 and rate-limit 403s (honouring ``Retry-After`` and
``X-RateLimit-Reset``), and errors that quote GitHub's own message. Uploads are not retried
blindly: a failed upload may leave a half-made asset (state ``starter``), so the caller
re-lists the assets before trying again (:func:`dswheels.stores.github_release.publish_github`).

The token comes from the environment (``GITHUB_TOKEN`` or ``GH_TOKEN``) and goes only into
the ``Authorization`` header of requests to the API's origin (scheme, host and port) and the
upload origin the API names (over the API's scheme); it is never printed, not even in
``repr()`` or error messages, and it is dropped when GitHub redirects a download to any other
origin (:func:`dswheels.host.http.session`). Every request has the deadline of that session.
"""

from __future__ import annotations

import hashlib
import random
import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests

from dswheels.host.clock import utc_now
from dswheels.host.environ import read_variable
from dswheels.host.http import TIMEOUTS, Timeouts, TooSlow, iter_body, read_limited
from dswheels.host.http import session as http_session
from dswheels.host.log import format_duration, get_reporter
from dswheels.kernel.envvars import api_url, header_token
from dswheels.kernel.errors import DswheelsError, GitHubAPIError, GitHubError
from dswheels.kernel.github_api import Asset, GitHubPlace, Release, error_summary, read_asset, read_release
from dswheels.kernel.jsondoc import parse_json
from dswheels.kernel.numbers import ascii_int, is_ascii_digits
from dswheels.kernel.remote_json import RemoteDocumentError, RemoteJson
from dswheels.kernel.urls import origin

__all__ = [
    "API_URL",
    "GitHub",
    "GitHubAPIError",
    "Retry",
    "api_url_from_env",
    "failing_as",
    "token_from_env",
]

API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
USER_AGENT = "dswheels"
_RETRY_STATUS = frozenset({500, 502, 503, 504})
_MAX_WAIT = 15 * 60.0  # a rate-limit reset further away than this fails instead of waiting

JSON = dict[str, Any]


def token_from_env(env: Mapping[str, str] | None = None) -> str | None:
    """``GITHUB_TOKEN``, else ``GH_TOKEN``; ConfigError (exit 2) for one that cannot go into a header."""
    return read_variable("GITHUB_TOKEN", header_token, env=env) or read_variable("GH_TOKEN", header_token, env=env)


def api_url_from_env(env: Mapping[str, str] | None = None) -> str:
    """``GITHUB_API_URL`` (set by Actions, and on GitHub Enterprise) or the public API; an http(s) URL."""
    return read_variable("GITHUB_API_URL", api_url, env=env) or API_URL.rstrip("/")


@contextmanager
def failing_as(error: type[DswheelsError]) -> Iterator[None]:
    """GitHub's failures inside as ``error``, the failing command's own (publishing: PublishError, exit 7)."""
    try:
        yield
    except GitHubError as exc:
        raise error(exc.message, hint=exc.hint, details=exc.details) from exc


@dataclass
class Retry:
    """How often and how patiently to retry; ``sleep`` is injectable so tests need not wait."""

    attempts: int = 5
    base: float = 1.0
    cap: float = 60.0
    sleep: Callable[[float], None] = time.sleep
    jitter: Callable[[], float] = random.random  # backoff jitter, not cryptography
    waits: list[float] = field(default_factory=list)

    def backoff(self, attempt: int) -> float:
        """``base * 2**attempt``, capped, with up to 50% added at random (spreads retrying clients)."""
        delay = min(self.cap, self.base * 2.0**attempt)
        return float(delay * (1 + 0.5 * self.jitter()))

    def wait(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.sleep(seconds)


_REPO_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")
MAX_PAGES = 1000  # 100,000 items: far more releases or assets than a repository holds


def _api_json(response: requests.Response) -> object:
    """The JSON body of an API answer; ``GitHubError`` (not a traceback) when it is not JSON."""
    try:
        return parse_json(response.content, what=f"GitHub's answer to {response.request.method} {response.url}")
    except ValueError as exc:
        raise GitHubError(str(exc), hint="GitHub (or GITHUB_API_URL) did not answer with JSON; run again") from None


def _not_github_hint(api: str) -> str:
    return (
        f"that is not an answer GitHub's API gives, and nothing of it was used: check that {api} "
        "(GITHUB_API_URL) is GitHub's API, then run again"
    )


def _printable(text: object) -> str:
    """Text a server sent (a reason phrase), as it may be printed: printable, at most 100 characters."""
    return "".join(c if c.isprintable() else "?" for c in str(text)[:100])


def _json(response: requests.Response) -> JSON:
    try:
        data = parse_json(response.content, what="GitHub's answer")
    except ValueError:
        return {"message": response.text[:300]} if response.text else {}
    return data if isinstance(data, dict) else {"items": data}


class GitHub:
    """Releases of one repository (``owner/name``)."""

    def __init__(
        self,
        repo: str,
        *,
        token: str | None,
        api_url: str = API_URL,
        session: requests.Session | None = None,
        retry: Retry | None = None,
        timeouts: Timeouts = TIMEOUTS,
    ) -> None:
        # it goes into API paths and the site's URL: only the characters GitHub allows in these names
        if not _REPO_RE.match(repo) or repo.split("/")[1] in (".", ".."):
            raise GitHubError(f"not a GitHub repository: {repo!r}", hint="give it as OWNER/NAME, e.g. octo/dswheels")
        self.repo = repo
        self.api_url = api_url.rstrip("/")
        self.place = GitHubPlace(self.api_url, repo)
        self.retry = retry or Retry()
        self.timeouts = timeouts
        self._token = token
        self._auth_origins = {origin(self.api_url)}
        self._session = session or http_session()
        self._session.headers.update(
            {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": API_VERSION, "User-Agent": USER_AGENT}
        )

    def __repr__(self) -> str:
        return f"GitHub({self.repo!r}, api_url={self.api_url!r}, token={'set' if self._token else 'none'})"

    # --- plumbing ----------------------------------------------------------------------------------

    def _headers(self, url: str, extra: Mapping[str, str] | None) -> dict[str, str]:
        headers = dict(extra or {})
        # the token goes to the API's origin and the upload origin GitHub named, never elsewhere
        if self._token and origin(url) in self._auth_origins:
            headers["Authorization"] = f"Bearer {self._token}"
        return headers

    @staticmethod
    def _rate_limit_wait(response: requests.Response) -> float | None:
        """Seconds to wait when GitHub says we are rate limited; None for any other error.

        GitHub's rules: honour ``Retry-After``; with ``X-RateLimit-Remaining: 0`` wait for
        ``X-RateLimit-Reset``; for a secondary rate limit without either, wait a minute.
        A plain 403 is a permission problem and is not retried.
        """
        if response.status_code not in (403, 429):
            return None
        headers = response.headers
        retry_after = headers.get("Retry-After", "")
        if is_ascii_digits(retry_after):  # ASCII only: float("٣") is 3.0; any wait past _MAX_WAIT fails
            return float(ascii_int(retry_after)) if len(retry_after) <= 12 else 2 * _MAX_WAIT
        reset = headers.get("X-RateLimit-Reset", "")
        if headers.get("X-RateLimit-Remaining") == "0" and is_ascii_digits(reset) and len(reset) <= 12:
            return max(1.0, ascii_int(reset) - utc_now().timestamp())
        if response.status_code == 429 or "rate limit" in str(_json(response).get("message", "")).lower():
            return 60.0
        return None

    def request(
        self,
        method: str,
        url: str,
        *,
        expected: tuple[int, ...] = (200,),
        retry: bool = True,
        headers: Mapping[str, str] | None = None,
        **kwargs: Any,  # noqa: ANN401 - passed through to requests
    ) -> requests.Response:
        """One API call; retried (when ``retry``) on connection errors, 5xx and rate limits."""
        if not url.startswith(("http://", "https://")):
            url = f"{self.api_url}/{url.lstrip('/')}"
        attempts = self.retry.attempts if retry else 1
        timeout = self.timeouts.for_upload if "data" in kwargs else self.timeouts.for_request  # a body: an upload
        reporter = get_reporter()
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                response = self._session.request(
                    method,
                    url,
                    headers=self._headers(url, headers),
                    timeout=timeout,
                    **kwargs,
                )
            except TooSlow as exc:  # not retried: each try would take as long again
                raise GitHubError(f"GitHub ({method} {url}): {exc}", hint="run again later") from None
            except (requests.ConnectionError, requests.Timeout) as exc:
                if last:
                    raise GitHubError(
                        f"cannot reach GitHub ({method} {url}): {type(exc).__name__}",
                        hint="check the network and GitHub's status (githubstatus.com), then run again: "
                        "publishing resumes where it stopped",
                    ) from None
                delay = self.retry.backoff(attempt)
                reporter.warning(f"{method} {url}: {type(exc).__name__}; retrying in {format_duration(delay)}")
                self.retry.wait(delay)
                continue
            except requests.RequestException as exc:  # a bad URL, too many redirects, a broken body
                raise GitHubError(f"GitHub ({method} {url}): {type(exc).__name__}: {exc}") from None
            if response.status_code in expected:
                return response
            wait = self._rate_limit_wait(response)
            transient = response.status_code in _RETRY_STATUS or wait is not None
            if transient and not last and (wait is None or wait <= _MAX_WAIT):
                delay = wait if wait is not None else self.retry.backoff(attempt)
                reporter.warning(
                    f"GitHub answered {response.status_code} to {method} {url}; "
                    f"retrying in {format_duration(delay)} (attempt {attempt + 2}/{attempts})"
                )
                self.retry.wait(delay)
                continue
            raise self._error(method, url, response)
        msg = "unreachable: the loop returns or raises"
        raise AssertionError(msg)

    def _error(self, method: str, url: str, response: requests.Response) -> GitHubAPIError:
        body = _json(response)
        status = response.status_code
        hint = None
        if status == 401:
            hint = "the token is missing or invalid: set GITHUB_TOKEN (or GH_TOKEN) to a token with contents: write"
        elif status in (403, 404) and not self._token:
            hint = "no token: set GITHUB_TOKEN (or GH_TOKEN); drafts and uploads need contents: write"
        elif status == 403:
            hint = "the token lacks permission: the workflow job needs `permissions: contents: write`"
        said = error_summary(body) or "no message"
        return GitHubAPIError(
            f"GitHub answered {status} {_printable(response.reason)} to {method} {url}: {said}",
            status=status,
            body=body,
            hint=hint,
        )

    def paginate(self, url: str, *, what: str, params: Mapping[str, str | int] | None = None) -> Iterator[RemoteJson]:
        """Every item of a list endpoint, following ``Link: rel="next"`` (100 per page); each item is
        named by its place in the whole list (``assets[103]``) for the reader that judges it."""
        query: dict[str, str | int] = {"per_page": 100, **(params or {})}
        next_url: str | None = url
        first = True
        count = 0
        for _page in range(MAX_PAGES):
            if not next_url:
                return
            response = self.request("GET", next_url, params=query if first else None)
            first = False
            page = RemoteJson(_api_json(response), what, document=f"GitHub's answer to GET {response.url}")
            with self.reading():
                items = page.seq()
            for item in items:
                yield RemoteJson(item.data, f"{what}[{count}]", document=page.document)
                count += 1
            next_url = response.links.get("next", {}).get("url")
            if next_url and origin(next_url) != origin(self.api_url):  # the Link header is the answer's too
                raise GitHubError(
                    f"GitHub's list at {url} continues on another origin ({origin(next_url)[1][:80]!r})",
                    hint=_not_github_hint(self.api_url),
                )
        if next_url:
            raise GitHubError(f"GitHub's list at {url} goes on past {MAX_PAGES} pages: refusing to read further")

    def answer(self, response: requests.Response, what: str) -> RemoteJson:
        """The JSON of one answer, named ``what`` in errors about its values (``release.upload_url``)."""
        document = f"GitHub's answer to {response.request.method} {response.url}"
        return RemoteJson(_api_json(response), what, document=document)

    @contextmanager
    def reading(self) -> Iterator[None]:
        """A value GitHub's API would not send, read inside, as ``GitHubError`` saying where it is."""
        try:
            yield
        except RemoteDocumentError as exc:
            raise GitHubError(str(exc), hint=_not_github_hint(self.api_url)) from None

    # --- releases ----------------------------------------------------------------------------------

    def releases(self) -> list[Release]:
        """All releases, drafts included when the token may see them (newest first)."""
        found = []
        for item in self.paginate(f"repos/{self.repo}/releases", what="releases"):
            with self.reading():
                found.append(read_release(item, self.place))
        return found

    def release_by_tag(self, tag: str) -> Release | None:
        """The release for ``tag``, draft or published.

        ``GET /releases/tags/{tag}`` finds published releases only, so a draft left by an
        interrupted run is found by listing.
        """
        matches = [r for r in self.releases() if r.tag == tag]
        return min(matches, key=lambda r: r.id) if matches else None

    def _release(self, response: requests.Response) -> Release:
        node = self.answer(response, "release")
        with self.reading():
            return read_release(node, self.place)

    def create_release(self, tag: str, *, name: str, body: str, target: str | None = None) -> Release:
        payload: JSON = {"tag_name": tag, "name": name, "body": body, "draft": True, "prerelease": False}
        if target:
            payload["target_commitish"] = target
        for attempt in range(self.retry.attempts):
            try:
                response = self.request(
                    "POST", f"repos/{self.repo}/releases", json=payload, expected=(201,), retry=False
                )
            except GitHubError as exc:
                transient = not isinstance(exc, GitHubAPIError) or exc.status >= 500
                # it may have been created before the error reached us: never make a second draft
                existing = self.release_by_tag(tag)
                if existing is not None:
                    return existing
                if not transient or attempt == self.retry.attempts - 1:
                    raise
                delay = self.retry.backoff(attempt)
                get_reporter().warning(f"creating release {tag} failed; retrying in {format_duration(delay)}")
                self.retry.wait(delay)
                continue
            return self._release(response)
        msg = "unreachable: the loop returns or raises"
        raise AssertionError(msg)

    def publish_release(self, release: Release) -> Release:
        response = self.request("PATCH", self.place.release_path(release.id), json={"draft": False})
        return self._release(response)

    # --- assets ------------------------------------------------------------------------------------

    def assets(self, release: Release) -> list[Asset]:
        found = []
        for item in self.paginate(self.place.release_path(release.id) + "/assets", what="assets"):
            with self.reading():
                found.append(read_asset(item, self.place))
        return found

    def delete_asset(self, asset: Asset) -> None:
        self.request("DELETE", self.place.asset_path(asset.id), expected=(204, 404))

    def upload_asset(self, release: Release, name: str, source: Path | bytes, *, size: int) -> Asset:
        """One attempt: POST the bytes to the release's upload URL (not retried here).

        The reader allowed only the API's origin or its ``uploads.`` twin, over the API's scheme: the
        token goes there and nowhere else the answer might have named."""
        self._auth_origins.add(origin(release.upload_url))
        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(size)}
        url = f"{release.upload_url}?name={quote(name, safe='')}"
        if isinstance(source, bytes):
            response = self.request("POST", url, data=source, headers=headers, expected=(201,), retry=False)
        else:
            with source.open("rb") as fh:
                response = self.request("POST", url, data=fh, headers=headers, expected=(201,), retry=False)
        node = self.answer(response, "asset")
        with self.reading():
            return read_asset(node, self.place)

    def _download(self, asset: Asset) -> requests.Response:
        """Stream an asset: from its public download URL (no API rate limit), else through the API.

        The API route (``Accept: application/octet-stream``, redirected to storage) also works
        for drafts and private repositories, where the public URL answers 404.
        """
        response = self.request("GET", asset.download_url, expected=(200, 404), stream=True)
        if response.status_code == 200:
            return response
        response.close()
        return self.request(
            "GET", self.place.asset_path(asset.id), headers={"Accept": "application/octet-stream"}, stream=True
        )

    def download_asset(self, asset: Asset, *, limit: int) -> bytes:
        """A small asset's bytes (a .metadata file); more than ``limit`` bytes is an error."""
        with self._download(asset) as response:
            return read_limited(response, limit=limit, what=f"the asset {asset.name}", error=GitHubError)

    def asset_sha256(self, asset: Asset) -> str:
        """GitHub's own digest of the asset (computed at upload); downloaded and hashed for old assets."""
        if asset.sha256 is not None:
            return asset.sha256
        hasher = hashlib.sha256()
        try:
            with self._download(asset) as response:
                for chunk in iter_body(response):
                    hasher.update(chunk)
        except requests.RequestException as exc:
            raise GitHubError(f"downloading the asset {asset.name} to hash it failed: {exc}") from None
        return hasher.hexdigest()
