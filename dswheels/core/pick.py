"""Pick the published wheel for an environment, or say which published cells are nearest.

Pure: the caller fetches the index page (:mod:`dswheels.effects.index_read`); this module
parses it (PEP 503 HTML, with :mod:`html.parser` and ``packaging``), maps every file name back
to its cell (the inverse of :func:`dswheels.core.naming.wheel_filename`) and decides.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from dswheels.core.index import parse_wheel
from dswheels.core.model import Cell, Platform, Python, Variant
from dswheels.core.naming import PROJECT
from dswheels.core.versions import VersionTuple, format_version

__all__ = [
    "IndexFile",
    "Wanted",
    "cell_from_filename",
    "link_problem",
    "nearest",
    "parse_project_page",
    "pick_wheel",
    "project_page_url",
]


@dataclass(frozen=True, slots=True)
class IndexFile:
    """One file link of a PEP 503 project page."""

    filename: str
    url: str  # absolute, without the fragment
    sha256: str  # from the ``#sha256=`` fragment, "" when the link has none
    requires_python: str  # "" when absent or not a valid specifier set
    yanked: bool
    cell: Cell | None  # None: not a wheel named the dswheels way
    problem: str = ""  # why this link must not be followed ("" when it may)

    @property
    def url_with_hash(self) -> str:
        return f"{self.url}#sha256={self.sha256}" if self.sha256 else self.url


@dataclass(frozen=True, slots=True)
class Wanted:
    """What the environment needs: every axis of a cell, the DeepSpeed version optional."""

    torch: VersionTuple
    variant: Variant
    python: Python
    platform: Platform
    deepspeed: VersionTuple | None = None

    def matches(self, cell: Cell, *, any_deepspeed: bool = False) -> bool:
        return (
            cell.torch == self.torch
            and cell.variant == self.variant
            and cell.python == self.python
            and cell.platform == self.platform
            and (any_deepspeed or self.deepspeed is None or cell.deepspeed == self.deepspeed)
        )

    def describe(self) -> str:
        ds = f"DeepSpeed {format_version(self.deepspeed)}, " if self.deepspeed else ""
        return (
            f"{ds}torch {format_version(self.torch)} {self.variant.name}, Python {self.python}, {self.platform.value}"
        )


def project_page_url(index: str, project: str = PROJECT) -> str:
    """The project page of an index given as the site base, its ``simple/`` root or the page itself.

    >>> project_page_url("https://example.org/dswheels")
    'https://example.org/dswheels/simple/deepspeed/'
    >>> project_page_url("https://example.org/dswheels/simple/")
    'https://example.org/dswheels/simple/deepspeed/'
    >>> project_page_url("https://example.org/dswheels/simple/deepspeed")
    'https://example.org/dswheels/simple/deepspeed/'
    """
    base = index.rstrip("/")
    if base.endswith(f"/simple/{project}"):
        return base + "/"
    if base.endswith("/simple"):
        return f"{base}/{project}/"
    return f"{base}/simple/{project}/"


class _LinkParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.base: str | None = None
        self.links: list[tuple[dict[str, str], str]] = []
        self._open: dict[str, str] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {key: value or "" for key, value in attrs}
        if tag == "base" and self.base is None and values.get("href"):
            self.base = values["href"]
        elif tag == "a" and "href" in values:
            self._open, self._text = values, []

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._open is not None:
            self.links.append((self._open, "".join(self._text).strip()))
            self._open = None


_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
MAX_FILENAME = 255  # bytes: what file systems allow for one name
MAX_LINKS = 200_000


def link_problem(url: str, page_url: str) -> str:
    """Why a link of the page at ``page_url`` must not be followed; "" when it may.

    A page served over http(s) may only link http(s) files (a ``file:`` link there would
    read this machine's disk), an https page only https ones (no downgrade), and every
    http(s) link names a host. A local page (``file:`` or a path) may also link local files.

    >>> link_problem("file:///etc/passwd", "https://example.org/simple/deepspeed/")
    'a page served over https may not link a file: URL (file:///etc/passwd)'
    >>> link_problem("https://github.com/o/r/releases/download/v1/x.whl", "https://o.github.io/r/simple/deepspeed/")
    ''
    """
    try:
        page = urlsplit(page_url).scheme.lower()
        parts = urlsplit(url)
        hostname = parts.hostname
    except ValueError as exc:  # e.g. an unclosed IPv6 bracket
        return f"not a URL ({exc}): {url[:200]}"
    scheme = parts.scheme.lower()
    local_page = page in ("", "file") or len(page) == 1  # one letter: a Windows drive
    allowed = {"https"} if page == "https" else {"http", "https"}
    if local_page:
        allowed |= {"file"}
    if scheme not in allowed:
        over = "a local page" if local_page else f"a page served over {page}"
        return f"{over} may not link a {scheme or 'scheme-less'}: URL ({url[:200]})"
    if scheme in ("http", "https") and not hostname:
        return f"the link names no host ({url[:200]})"
    return ""


def _filename(url: str) -> str | None:
    """The file name a link's URL ends in (PEP 503: the URL names the file, not the link text)."""
    try:
        name = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    except ValueError:
        return None
    bad = not name or name in (".", "..") or any(c in name for c in "/\\\x00") or ":" in name
    return None if bad or len(name.encode("utf-8", "surrogatepass")) > MAX_FILENAME else name


def _requires_python(value: str) -> str:
    try:
        SpecifierSet(value)
    except InvalidSpecifier:
        return ""
    return value


def parse_project_page(html: str, page_url: str) -> tuple[IndexFile, ...]:
    """Every file link of a PEP 503 project page, with absolute URLs and parsed cells.

    The file name comes from the URL (the link text is only text); the sha256 only from a
    ``#sha256=<64 hex>`` fragment (another algorithm counts as none); a link that must not
    be followed (:func:`link_problem`) or whose URL names no usable file keeps a ``problem``.
    ``ValueError`` when the text cannot be parsed as HTML at all.
    """
    parser = _LinkParser()
    try:
        parser.feed(html)
        parser.close()
    except (AssertionError, ValueError) as exc:  # html.parser asserts on some declarations (<![bogus>)
        msg = f"{page_url} is not an HTML page that can be read ({exc})"
        raise ValueError(msg) from None
    try:
        base = urljoin(page_url, parser.base) if parser.base else page_url
    except ValueError:
        base = page_url
    if link_problem(base, page_url):  # a <base> may not move the page somewhere it could not link
        base = page_url
    files: list[IndexFile] = []
    for attrs, _text in parser.links[:MAX_LINKS]:
        try:
            url, fragment = urldefrag(urljoin(base, attrs["href"]))
        except ValueError:  # e.g. an invalid IPv6 host
            continue
        name = _filename(url)
        problem = link_problem(url, page_url)
        if name is None:
            name, problem = "", problem or f"the URL names no usable file ({url[:200]})"
        algorithm, _sep, digest = fragment.partition("=")
        sha256 = digest.lower() if algorithm.lower() == "sha256" and _SHA256_RE.match(digest.lower()) else ""
        files.append(
            IndexFile(
                filename=name,
                url=url,
                sha256=sha256,
                requires_python=_requires_python(attrs.get("data-requires-python", "")),
                yanked="data-yanked" in attrs,
                cell=cell_from_filename(name) if name else None,
                problem=problem,
            ),
        )
    return tuple(files)


def cell_from_filename(filename: str) -> Cell | None:
    """The cell of a wheel named by :func:`~dswheels.core.naming.wheel_filename`, else None.

    >>> from dswheels.core.naming import cell_id
    >>> cell_id(cell_from_filename("deepspeed-0.19.8+cu128torch2.9-cp312-cp312-win_amd64.whl"))
    'ds0.19.8-torch2.9-cu128-cp312-win_amd64'
    >>> cell_from_filename("deepspeed-0.19.8-py3-none-any.whl") is None
    True
    """
    try:
        return parse_wheel(filename).cell
    except ValueError:  # not a wheel named the dswheels way (core.index.parse_wheel says why)
        return None


def pick_wheel(wanted: Wanted, files: Iterable[IndexFile]) -> IndexFile | None:
    """The wheel for exactly this environment: the newest DeepSpeed unless one is wanted."""
    fits = [f for f in files if f.cell is not None and not f.yanked and wanted.matches(f.cell)]
    if not fits:
        return None
    return max(fits, key=lambda f: f.cell.deepspeed if f.cell else ())


def _join(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _versions(values: Iterable[VersionTuple]) -> str:
    return _join([format_version(v) for v in sorted(set(values))])


def nearest(wanted: Wanted, files: Iterable[IndexFile]) -> tuple[str, ...]:
    """Sentences naming the published cells closest to ``wanted`` (one axis differs).

    Each says what is installed and what exists, e.g. ``torch 2.6 is installed; wheels exist
    for torch 2.5 and 2.7 with cu124 (Python 3.12, win_amd64)``.
    """
    cells = [f.cell for f in files if f.cell is not None and not f.yanked]
    torch, variant, python, platform = wanted.torch, wanted.variant, wanted.python, wanted.platform
    same_platform = [c for c in cells if c.platform == platform]
    if not same_platform:
        return (f"the index has no {platform.value} wheels at all",)
    lines: list[str] = []
    env = [c for c in same_platform if wanted.matches(c, any_deepspeed=True)]
    if env and wanted.deepspeed is not None:
        # the environment is published, only not this DeepSpeed version: nothing else is nearer
        only = (
            f"DeepSpeed {format_version(wanted.deepspeed)} has no wheel for this environment; "
            f"wheels exist for DeepSpeed {_versions(c.deepspeed for c in env)}"
        )
        return (only,)
    other_torch = [c for c in same_platform if c.variant == variant and c.python == python and c.torch != torch]
    if other_torch:
        lines.append(
            f"torch {format_version(torch)} is installed; wheels exist for torch "
            f"{_versions(c.torch for c in other_torch)} with {variant.name} (Python {python}, {platform.value})",
        )
    other_variant = [c for c in same_platform if c.torch == torch and c.python == python and c.variant != variant]
    if other_variant:
        names = _join(sorted({c.variant.name for c in other_variant}))
        lines.append(
            f"torch {format_version(torch)} {variant.name} is installed; for torch {format_version(torch)} "
            f"wheels exist with {names} (Python {python}, {platform.value})",
        )
    other_python = [c for c in same_platform if c.torch == torch and c.variant == variant and c.python != python]
    if other_python:
        pythons = _join([str(p) for p in sorted({c.python for c in other_python})])
        lines.append(
            f"Python {python} is in use; torch {format_version(torch)} {variant.name} wheels exist for "
            f"Python {pythons} ({platform.value})",
        )
    if not lines:
        combos = sorted({(c.torch, c.variant.name) for c in same_platform if c.python == python})
        if combos:
            shown = ", ".join(f"torch {format_version(t)} {v}" for t, v in combos[-6:])
            lines.append(f"for Python {python} on {platform.value} the index has {shown}")
        else:
            pythons = _join([str(p) for p in sorted({c.python for c in same_platform})])
            lines.append(f"the index has no Python {python} wheels for {platform.value} (it has Python {pythons})")
    return tuple(lines)
