"""One file of a package index: as ``dswheels index`` lists it, and as any PEP 503 page links it.

:class:`IndexFile` is what the site renderer (:mod:`dswheels.core.index.site`) writes and what the
readers of published pages (``install``, ``doctor``, ``plan --skip-published``, ``publish``)
get back from :func:`parse_project_page`: the same type either way, so what is written and
what is read can be compared field by field. Pure: the caller fetches the page.
"""

from __future__ import annotations

from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from dswheels.core.digests import is_sha256
from dswheels.core.model import Cell
from dswheels.core.naming import PROJECT, PublishedWheel, try_parse_wheel

__all__ = ["MAX_FILENAME", "MAX_LINKS", "IndexFile", "link_problem", "parse_project_page", "project_page_url"]


@dataclass(frozen=True, kw_only=True, slots=True)
class IndexFile:
    """One file link of a project page.

    ``url`` is absolute (read from a page, or a GitHub release asset) or relative to the site
    root (``files/<name>`` in a self-contained site). Its core metadata is at ``url + ".metadata"``
    (PEP 658) when ``metadata_sha256`` is known.
    """

    filename: str
    url: str  # without the fragment
    sha256: str = ""  # "" when unknown (a link without ``#sha256=<64 hex>``)
    requires_python: str | None = None  # None when absent (or, read from a page, not a valid specifier set)
    yanked: str | None = None  # the reason ("" = yanked without one); None: not yanked
    size: int | None = None  # what dswheels knows of files it lists; a page does not say
    metadata_sha256: str | None = None
    wheel: PublishedWheel | None = None  # None: not a wheel named the dswheels way
    problem: str = ""  # read from a page: why this link must not be followed ("" when it may)

    @classmethod
    def of_wheel(
        cls,
        wheel: PublishedWheel,
        *,
        url: str,
        sha256: str,
        size: int,
        requires_python: str | None = None,
        metadata_sha256: str | None = None,
    ) -> IndexFile:
        """A dswheels wheel as the index lists it."""
        return cls(
            filename=wheel.filename,
            url=url,
            sha256=sha256,
            size=size,
            requires_python=requires_python,
            metadata_sha256=metadata_sha256,
            wheel=wheel,
        )

    @property
    def cell(self) -> Cell | None:
        return self.wheel.cell if self.wheel is not None else None

    @property
    def published(self) -> PublishedWheel:
        """The dswheels wheel this file is (the site lists no other); ValueError for any other file."""
        if self.wheel is None:
            msg = f"{self.filename} is not a wheel named the dswheels way"
            raise ValueError(msg)
        return self.wheel

    @property
    def is_yanked(self) -> bool:
        return self.yanked is not None

    @property
    def url_with_hash(self) -> str:
        return f"{self.url}#sha256={self.sha256}" if self.sha256 else self.url


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


def _requires_python(value: str) -> str | None:
    if not value:
        return None
    try:
        SpecifierSet(value)
    except InvalidSpecifier:
        return None
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
        sha256 = digest.lower() if algorithm.lower() == "sha256" and is_sha256(digest.lower()) else ""
        files.append(
            IndexFile(
                filename=name,
                url=url,
                sha256=sha256,
                requires_python=_requires_python(attrs.get("data-requires-python", "")),
                yanked=attrs.get("data-yanked"),
                wheel=try_parse_wheel(name) if name else None,
                problem=problem,
            ),
        )
    return tuple(files)
