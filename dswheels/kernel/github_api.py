"""GitHub's API answers dswheels reads, typed: releases, assets, issues and workflow runs.

``GITHUB_API_URL`` is honoured (GitHub Enterprise), so whatever answers there is input. Every
answer passes through one reader here before anything uses it (:class:`GitHubPlace` knows the API
and the repository it was asked about); a value of the wrong type, absent, or with text GitHub
never sends is a :class:`~dswheels.kernel.remote_json.RemoteDocumentError` naming its path
(``assets[3].digest``), which the client raises as ``GitHubError`` (publishing: exit 7; the follow
commands: 10). Every field's rule, and why a bad one stops the command rather than skipping the
asset, is docs/hostile-input.md's "GitHub's API answers".

URLs GitHub makes are checked against the shape GitHub makes them in, relative to the API:

- an asset's ``browser_download_url`` (linked from every page of the site) is
  ``<web root>/<owner>/<repo>/releases/download/<tag>/<asset name>`` on the web root of the API
  (``api.github.com`` -> ``github.com``, ``api.<x>.ghe.com`` -> ``<x>.ghe.com``,
  ``<host>/api/v3`` -> ``<host>``, any other API: itself), in URL characters only;
- a release's ``upload_url`` (the token goes there) is ``.../repos/<owner>/<repo>/releases/<id>/assets``
  on the API's origin or its ``uploads.`` twin, over the API's scheme.

Nothing else a URL GitHub sends could say is read: the API URL of a release or asset is made
from its id (:meth:`GitHubPlace.release_path`, :meth:`GitHubPlace.asset_path`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit

from dswheels.kernel.remote_json import RemoteJson
from dswheels.kernel.urls import origin

__all__ = [
    "MAX_ASSET_BYTES",
    "MAX_ID",
    "Artifact",
    "Asset",
    "Comment",
    "GitHubPlace",
    "Issue",
    "PullRequest",
    "Release",
    "WorkflowRun",
    "error_summary",
    "read_artifacts",
    "read_asset",
    "read_blob_sha",
    "read_comment",
    "read_issue",
    "read_issues",
    "read_pull",
    "read_release",
    "read_runs",
]

MAX_ID = 2**53  # ids and numbers GitHub sends fit a JSON (double) integer
MAX_ASSET_BYTES = 2 * 1024**3  # "each file included in a release must be under 2 GiB"
MAX_BODY = 1024 * 1024  # an issue body: GitHub allows 65,536 characters
MAX_TITLE = 1024  # an issue title: GitHub allows 256 characters
MAX_PAGE = 100  # the most items GitHub puts in one page of a list (per_page)
_MAX_NAME = 255
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
# a URL GitHub makes: RFC 3986 unreserved characters, "/", ":", "+" and valid percent-escapes only
_URL = re.compile(r"(?:[A-Za-z0-9._~/:+-]|%[0-9A-Fa-f]{2})+")
_UPLOAD_TEMPLATE = re.compile(r"\{\?[a-z_,]+\}$")  # RFC 6570: upload_url ends "{?name,label}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Release:
    id: int
    tag: str
    draft: bool
    upload_url: str  # the asset upload endpoint, template removed, of the shape GitHubPlace allows


@dataclass(frozen=True, kw_only=True, slots=True)
class Asset:
    id: int
    name: str
    state: str  # "uploaded"; "open" or "starter" while (or after a failed) upload
    size: int
    sha256: str | None  # GitHub's digest (computed at upload); None for assets from before June 2025
    download_url: str  # browser_download_url, of the shape GitHubPlace allows

    @property
    def uploaded(self) -> bool:
        return self.state == "uploaded"


@dataclass(frozen=True, kw_only=True, slots=True)
class Issue:
    number: int
    title: str  # "" for none: searched (a runner image's retirement announcement), never shown
    body: str  # "" for an issue without one
    is_pull_request: bool  # the issues endpoint lists pull requests too


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkflowRun:
    id: int
    status: str
    conclusion: str  # "" while it runs
    title: str  # display_title ("" when GitHub gives none): searched for versions, never shown
    created: str  # created_at, ISO 8601: the newest run is the greatest


@dataclass(frozen=True, kw_only=True, slots=True)
class Comment:
    id: int
    body: str  # "" for none: compared with the answer dswheels writes, never shown
    by_bot: bool  # its author's user.type is "Bot" (GitHub sets it; a person's account never is one)


@dataclass(frozen=True, kw_only=True, slots=True)
class Artifact:
    name: str
    expired: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class PullRequest:
    number: int
    url: str  # html_url: http(s), ending /<owner>/<repo>/pull/<number>


def _web_root(api_url: str) -> str:
    """Where GitHub serves pages and downloads for the API at ``api_url``.

    >>> _web_root("https://api.github.com"), _web_root("https://ghe.example.com/api/v3")
    ('https://github.com', 'https://ghe.example.com')
    >>> _web_root("https://api.octo.ghe.com"), _web_root("http://127.0.0.1:8080")
    ('https://octo.ghe.com', 'http://127.0.0.1:8080')
    """
    parts = urlsplit(api_url.rstrip("/"))
    host = (parts.hostname or "").lower()
    netloc = parts.netloc
    if host == "api.github.com" or (host.startswith("api.") and host.endswith(".ghe.com")):
        netloc = host.removeprefix("api.") + (f":{parts.port}" if parts.port else "")
    path = parts.path.removesuffix("/api/v3")
    return f"{parts.scheme}://{netloc}{path}"


@dataclass(frozen=True, slots=True)
class GitHubPlace:
    """The API asked (``api_url``) and the repository asked about (``OWNER/NAME``): what GitHub's URLs may be."""

    api_url: str
    repo: str

    @property
    def web_root(self) -> str:
        return _web_root(self.api_url)

    def release_path(self, release_id: int) -> str:
        return f"repos/{self.repo}/releases/{release_id}"

    def asset_path(self, asset_id: int) -> str:
        return f"repos/{self.repo}/releases/assets/{asset_id}"

    def release_page(self, tag: str) -> str:
        """The release's page (``https://github.com/o/r/releases/tag/v1``), made here, not read."""
        return f"{self.web_root}/{self.repo}/releases/tag/{quote(tag, safe='')}"

    def upload_origins(self) -> frozenset[tuple[str, str, int | None]]:
        """The API's origin and, on github.com and GHE.com, its ``uploads.`` twin."""
        api = origin(self.api_url)
        scheme, host, port = api
        if host == "api.github.com" or (host.startswith("api.") and host.endswith(".ghe.com")):
            return frozenset({api, (scheme, "uploads." + host.removeprefix("api."), port)})
        return frozenset({api})

    def _segments(self, url: str, root: str) -> list[str] | str:
        """The unquoted path segments of ``url`` below ``root``, or why ``url`` is not a URL GitHub makes there."""
        if not _URL.fullmatch(url):
            return "it holds characters outside those of a URL GitHub makes"
        parts = urlsplit(url)
        if parts.query or parts.fragment or "@" in parts.netloc:
            return "it has a query, fragment or user"
        base = urlsplit(root).path.rstrip("/")
        if origin(url) != origin(root) or not parts.path.startswith(base + "/"):
            return f"it is not below {root}"
        segments = [unquote(s) for s in parts.path[len(base) + 1 :].split("/")]
        if any(s in ("", ".", "..") or "/" in s or "\\" in s or not s.isprintable() for s in segments):
            return "its path has an empty, '.', '..' or encoded separator segment"
        return segments

    def download_url_problem(self, url: str, name: str) -> str:
        """Why ``url`` is not the download URL of the asset ``name`` of this repository ("" when it is)."""
        segments = self._segments(url, self.web_root)
        if isinstance(segments, str):
            return segments
        owner, repo = self.repo.lower().split("/")
        if (
            len(segments) != 6  # owner/repo/releases/download/tag/name
            or [segments[0].lower(), segments[1].lower(), *segments[2:4]] != [owner, repo, "releases", "download"]
            or segments[5] != name
        ):
            return f"it is not {self.web_root}/{self.repo}/releases/download/<tag>/<the asset's name>"
        return ""

    def pull_url_problem(self, url: str, number: int) -> str:
        """Why ``url`` is not a pull request's page ("" when it is): any http(s) host (GitHub names its web
        host, which a test double may not share with the API), the path ``/<owner>/<repo>/pull/<number>``."""
        parts = urlsplit(url)
        if not _URL.fullmatch(url) or parts.scheme not in ("http", "https") or not parts.hostname:
            return "it is not an http(s) URL of URL characters"
        if parts.query or parts.fragment or "@" in parts.netloc:
            return "it has a query, fragment or user"
        if not parts.path.lower().endswith(f"/{self.repo}/pull/{number}".lower()):
            return f"it does not end /{self.repo}/pull/{number}"
        return ""

    def upload_url_problem(self, url: str, release_id: int) -> str:
        """Why ``url`` is not the asset upload endpoint of release ``release_id`` ("" when it is)."""
        if not _URL.fullmatch(url):
            return "it holds characters outside those of a URL GitHub makes"
        parts = urlsplit(url)
        if parts.query or parts.fragment or "@" in parts.netloc or origin(url) not in self.upload_origins():
            return "it is not on the API's host (or its uploads. host), or it has a query, fragment or user"
        wanted = f"/repos/{self.repo}/releases/{release_id}/assets".lower()
        if not parts.path.lower().endswith(wanted):
            return f"it does not end {wanted}"
        return ""


# --- the readers -------------------------------------------------------------------------------------------


def _id(node: RemoteJson, key: str) -> int:
    return node.need(key).count(low=1, high=MAX_ID)


def read_release(node: RemoteJson, place: GitHubPlace) -> Release:
    """A release object (list, create, update answers)."""
    release_id = _id(node, "id")
    upload = node.need("upload_url")
    template = upload.ascii_text(what="an upload URL")
    url = _UPLOAD_TEMPLATE.sub("", template, count=1)
    if problem := place.upload_url_problem(url, release_id):
        raise upload.fail(f"the release's asset upload URL ({problem})")
    return Release(
        id=release_id,
        tag=_tag(node.need("tag_name")),
        draft=node.need("draft").flag(),
        upload_url=url,
    )


_REF_FORBIDDEN = re.compile(r"[\s~^:?*\[\\]|\.\.|@\{|^[./]|[./]$|\.lock$")


def _tag(node: RemoteJson) -> str:
    """A tag as git allows one (``git check-ref-format``): no space, ``~^:?*[\\``, ``..`` or ``@{``."""
    tag = node.printable(limit=_MAX_NAME, what="a tag")
    if _REF_FORBIDDEN.search(tag):
        raise node.fail("a tag git allows (no space, ~^:?*[\\, '..' or '@{')")
    return tag


def _asset_name(node: RemoteJson) -> str:
    name = node.printable(limit=_MAX_NAME, what="a file name")
    if "/" in name or "\\" in name or name in (".", ".."):
        raise node.fail("a file name (no '/' or '\\', not '.' or '..')")
    return name


def read_asset(node: RemoteJson, place: GitHubPlace) -> Asset:
    """A release asset object (list and upload answers)."""
    name = _asset_name(node.need("name"))
    digest = None
    if (digest_node := node.maybe("digest")) is not None:  # null or absent: from before digests, or an older GHES
        if not isinstance(digest_node.data, str) or not _DIGEST.fullmatch(digest_node.data):
            raise digest_node.fail('null or "sha256:" and 64 lowercase hex digits')
        digest = digest_node.data.removeprefix("sha256:")
    url_node = node.need("browser_download_url")
    url = url_node.ascii_text(what="a download URL")
    if problem := place.download_url_problem(url, name):
        raise url_node.fail(f"the asset's download URL ({problem})")
    return Asset(
        id=_id(node, "id"),
        name=name,
        state=node.need("state").word(what="a state"),
        size=node.need("size").count(high=MAX_ASSET_BYTES),
        sha256=digest,
        download_url=url,
    )


def read_issue(node: RemoteJson) -> Issue:
    """An issue object (list and create answers); its body is compared, never shown."""
    title = node.maybe("title")
    body = node.maybe("body")
    return Issue(
        number=_id(node, "number"),
        title=title.any_text(limit=MAX_TITLE) if title is not None else "",
        body=body.any_text(limit=MAX_BODY) if body is not None else "",
        is_pull_request=node.maybe("pull_request") is not None,
    )


def read_issues(node: RemoteJson) -> tuple[Issue, ...]:
    """``GET .../issues`` read as one page (``per_page=100``): a list of issues, pull requests among them."""
    return tuple(read_issue(item) for item in node.seq_limited(MAX_PAGE))


def read_runs(node: RemoteJson) -> tuple[WorkflowRun, ...]:
    """``GET .../actions/workflows/<name>/runs``: ``{"total_count": n, "workflow_runs": [...]}``."""
    runs = []
    for run in node.need("workflow_runs").seq():
        title = run.maybe("display_title")
        conclusion = run.maybe("conclusion")
        runs.append(
            WorkflowRun(
                id=_id(run, "id"),
                status=run.need("status").word(what="a status"),
                conclusion=conclusion.word(what="a conclusion") if conclusion is not None else "",
                title=title.any_text(limit=MAX_BODY) if title is not None else "",  # matched, never shown
                created=run.need("created_at").timestamp(),
            )
        )
    return tuple(runs)


def read_comment(node: RemoteJson) -> Comment:
    """An issue comment (``GET .../issues/<n>/comments``)."""
    body = node.maybe("body")
    kind = node.need("user").need("type").ascii_text(limit=32, what="an account type")
    return Comment(
        id=_id(node, "id"),
        body=body.any_text(limit=MAX_BODY) if body is not None else "",
        by_bot=kind == "Bot",
    )


def read_artifacts(node: RemoteJson) -> tuple[Artifact, ...]:
    """``GET .../actions/runs/<id>/artifacts``: ``{"total_count": n, "artifacts": [...]}``."""
    return tuple(
        Artifact(name=_asset_name(item.need("name")), expired=item.need("expired").flag())
        for item in node.need("artifacts").seq()
    )


_GIT_SHA = re.compile(r"[0-9a-f]{40}")


def read_blob_sha(node: RemoteJson) -> str:
    """A file's blob ``sha`` (``GET .../contents/<path>``): 40 lowercase hex digits."""
    sha = node.need("sha")
    if not isinstance(sha.data, str) or not _GIT_SHA.fullmatch(sha.data):
        raise sha.fail("a git object id (40 lowercase hex digits)")
    return sha.data


def read_pull(node: RemoteJson, place: GitHubPlace) -> PullRequest:
    """A pull request (list and create answers): its number and its page, shown and put in the job's output."""
    number = _id(node, "number")
    url_node = node.need("html_url")
    url = url_node.ascii_text(what="a URL")
    if problem := place.pull_url_problem(url, number):
        raise url_node.fail(f"the pull request's page ({problem})")
    return PullRequest(number=number, url=url)


def error_summary(body: object) -> str:
    """What an error answer says (``message`` and each of ``errors``), printable and short; "" for nothing.

    An error answer is already a failure: a body of another shape says less, it is not a second error.

    >>> error_summary({"message": "Validation Failed\\x1b[2J", "errors": [{"code": "already_exists"}, "x"]})
    'Validation Failed?[2J (already_exists) (x)'
    """
    if not isinstance(body, dict):
        return ""
    parts = []
    message = body.get("message")
    if isinstance(message, str):
        parts.append(message)
    errors = body.get("errors")
    for error in errors[:10] if isinstance(errors, list) else []:
        if isinstance(error, dict):
            text = error.get("message")
            if not isinstance(text, str):
                text = " ".join(v for k in ("resource", "field", "code") if isinstance(v := error.get(k), str) and v)
            parts.append(f"({text})")
        elif isinstance(error, str):
            parts.append(f"({error})")
    text = " ".join(parts)
    return "".join(c if c.isprintable() else "?" for c in text[:300])
