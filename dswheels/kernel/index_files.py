"""One file of a package index: as ``dswheels index`` lists it, and as any PEP 503 page links it.

:class:`IndexFile` is what the site renderer (:mod:`dswheels.index.pages`) writes and what the
readers of published pages (``install``, ``doctor``, ``plan --skip-published``, ``publish``)
get back from :func:`parse_project_page`: the same type either way, so what is written and
what is read can be compared field by field. Pure: the caller fetches the page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html import unescape
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from dswheels.kernel.digests import is_sha256
from dswheels.kernel.model import Cell
from dswheels.kernel.naming import PROJECT, PublishedWheel, try_parse_wheel

__all__ = [
    "MAX_ATTRIBUTES",
    "MAX_FILENAME",
    "MAX_LINKS",
    "MAX_TAG",
    "IndexFile",
    "link_problem",
    "parse_project_page",
    "project_page_url",
]


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
    provenance_url: str | None = None  # PEP 740: its provenance object (absolute, or site-relative as written)
    provenance_problem: str = ""  # read from a page: why its data-provenance must not be followed

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
        provenance_url: str | None = None,
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
            provenance_url=provenance_url,
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


# --- reading a page ----------------------------------------------------------------------------
#
# Not html.parser itself: on malformed input it is quadratic (a "<" it cannot finish makes it
# search the rest of the page again, for every such "<": 2 MB of "<!" took 110 s on Python
# 3.11.7, "</" and "<a" repeated did not end in minutes), and it builds every attribute of a tag
# (one tag of 6 million attributes held 3.2 GB). This reads a page in one pass with html.parser's
# own grammar (its regular expressions for tags and attributes, its reading of the results):
# each token is read from where the last one ended, to its end, a tag at most MAX_TAG long, and a
# comment or declaration left open runs to the end of the page. A start tag html.parser cannot
# finish is text, as there, but the text is all that was read of it (html.parser goes back to
# the next ">" and reads on from there, which is what makes it quadratic). Only <base> and <a>
# are read, and of an <a> only the attributes a file link has; script and style content is text.

MAX_TAG = 16 * 1024  # characters of one tag: a file link's is a few hundred (a signed URL ~2 KB)
MAX_ATTRIBUTES = 64  # of a tag that is read: a file link has at most seven (PEP 503, 592, 658, 714, 740)
MAX_LINKS = 200_000  # links read from one page; the rest are left out
_KEPT = ("href", "data-requires-python", "data-yanked", "data-provenance")

# a comment; a declaration, instruction or bogus comment ("</" and no name); an end or start tag
_TOKEN = re.compile(
    r"<(?:(?P<comment>!--)|(?P<markup>[!?]|/(?![a-zA-Z]))|(?P<slash>/?)(?P<name>[a-zA-Z][^\t\n\r\f />\x00]*))"
)
# html.parser's locatestarttagend_tolerant and attrfind_tolerant (Python 3.10-3.13)
_START_TAG = re.compile(
    r"""
    <[a-zA-Z][^\t\n\r\f />\x00]*
    (?:[\s/]*(?:(?<=['"\s/])[^\s/>][^\s/=>]*(?:\s*=+\s*(?:'[^']*'|"[^"]*"|(?!['"])[^>\s]*)\s*)?(?:\s|/(?!>))*)*)?
    \s*
    """,
    re.VERBOSE,
)
_ATTRIBUTE = re.compile(r"""((?<=['"\s/])[^\s/>][^\s/=>]*)(\s*=+\s*('[^']*'|"[^"]*"|(?!['"])[^>\s]*))?(?:\s|/(?!>))*""")
_SEPARATORS = re.compile(r"(?:\s|/(?!>))+")  # between a tag's name and its first attribute
_RAW_TEXT_END = {name: re.compile(rf"</{name}(?=[\t\n\r\f />])", re.IGNORECASE) for name in ("script", "style")}
_UNFINISHED = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ=/")


def _attributes(tag: str, at: int, page_url: str) -> tuple[dict[str, str], str] | None:
    """The attributes a file link has, of the start tag ``tag`` whose name ends at ``at``, read as
    html.parser reads them (names lower-cased, quotes stripped, character references replaced,
    the last of a name winning), and how the tag ends: ``>``, or ``/>`` (it closes itself too).
    None where html.parser reads the tag as text (what follows its attributes is neither)."""
    found: dict[str, str] = {}
    if separators := _SEPARATORS.match(tag, at):
        at = separators.end()
    count = 0
    while (match := _ATTRIBUTE.match(tag, at)) is not None:
        count += 1
        if count > MAX_ATTRIBUTES:
            msg = f"{page_url} has a tag with more than {MAX_ATTRIBUTES} attributes (a file link has a few)"
            raise ValueError(msg)
        name, rest, value = match.group(1, 2, 3)
        if name.lower() in _KEPT:
            if not rest:
                value = ""
            elif len(value) > 1 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            found[name.lower()] = unescape(value)
        at = match.end()
    ending = tag[at:].strip()
    return (found, ending) if ending in (">", "/>") else None


@dataclass
class _Page:
    """What a page says of its files: its first <base href>, and every <a href> that </a> closes."""

    url: str
    base: str | None = None
    links: list[dict[str, str]] = field(default_factory=list)
    _open: dict[str, str] | None = None

    def start_tag(self, name: str, tag: str, name_end: int) -> bool:
        """Read the start tag ``tag``; whether it opens an element (it is a tag, not closed by itself)."""
        read = _attributes(tag, name_end, self.url) if name in ("a", "base", *_RAW_TEXT_END) else ({}, ">")
        if read is None:
            return False
        values, ending = read
        if name == "base" and self.base is None and values.get("href"):
            self.base = values["href"]
        elif name == "a" and "href" in values:
            self._open = values
        if ending == "/>":
            self.end_tag(name)
        return ending == ">"

    def end_tag(self, name: str) -> None:
        if name == "a" and self._open is not None:
            if len(self.links) < MAX_LINKS:
                self.links.append(self._open)
            self._open = None


def _past(text: str, end: str, at: int) -> int:
    found = text.find(end, at)
    return found + len(end) if found >= 0 else len(text)


def _start_tag_end(text: str, start: int, page_url: str) -> tuple[int, bool]:
    """Where the start tag at ``start`` ends, and whether it is one (html.parser's check_for_whole_start_tag:
    else it is text, up to its next ">" or "<", and never less than what was read of it)."""
    read = _START_TAG.match(text, start, start + MAX_TAG + 2)
    end = read.end() if read is not None else start + 1  # the pattern matches whenever the token did
    if end > start + MAX_TAG:
        msg = f"{page_url} has a tag of more than {MAX_TAG:,} characters (an index page's are a few hundred)"
        raise ValueError(msg)
    if text.startswith(">", end):
        return end + 1, True
    if text.startswith("/>", end):
        return end + 2, True
    if end == len(text) or text[end] in _UNFINISHED:  # unfinished: text to the next ">" or "<"
        after = text.find(">", start + 1) + 1 or text.find("<", start + 1) + 1 or start + 2
        return max(end, after - 1 if text[after - 1 : after] == "<" else after), False
    return max(end, start + 1), False


def _read_page(text: str, page_url: str) -> _Page:
    """The page's base and links (:class:`_Page`), in one pass."""
    page = _Page(url=page_url)
    at = 0
    while (token := _TOKEN.search(text, at)) is not None:
        start, name = token.start(), (token.group("name") or "").lower()
        if token.group("comment"):
            at = _past(text, "-->", token.end())
        elif token.group("markup") or token.group("slash"):  # a declaration, instruction or end tag
            at = _past(text, ">", token.end())
            if text[at - 1 : at] == ">":  # an end tag the page does not finish is none
                page.end_tag(name)
        else:
            at, is_tag = _start_tag_end(text, start, page_url)
            opened = is_tag and page.start_tag(name, text[start:at], token.end() - start)
            if opened and name in _RAW_TEXT_END:
                end_of_text = _RAW_TEXT_END[name].search(text, at)
                at = end_of_text.start() if end_of_text is not None else len(text)
    return page


MAX_FILENAME = 255  # bytes: what file systems allow for one name


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


def _provenance(value: str | None, base: str, page_url: str) -> tuple[str | None, str]:
    """A link's ``data-provenance`` (PEP 740) as a URL that may be followed, or why it may not: the
    rules of a file link (:func:`link_problem`)."""
    if value is None:
        return None, ""
    try:
        url = urldefrag(urljoin(base, value))[0]
    except ValueError as exc:
        return None, f"not a URL ({exc}): {value[:200]}"
    problem = link_problem(url, page_url) if value else "it is empty"
    return (None, problem) if problem else (url, "")


def parse_project_page(html: str, page_url: str) -> tuple[IndexFile, ...]:
    """Every file link of a PEP 503 project page, with absolute URLs and parsed cells.

    The file name comes from the URL (the link text is only text); the sha256 only from a
    ``#sha256=<64 hex>`` fragment (another algorithm counts as none); a link that must not
    be followed (:func:`link_problem`) or whose URL names no usable file keeps a ``problem``.
    ``ValueError`` when the text cannot be parsed as HTML at all.
    """
    page = _read_page(html, page_url)
    try:
        base = urljoin(page_url, page.base) if page.base else page_url
    except ValueError:
        base = page_url
    if link_problem(base, page_url):  # a <base> may not move the page somewhere it could not link
        base = page_url
    files: list[IndexFile] = []
    for attrs in page.links:
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
        provenance, provenance_problem = _provenance(attrs.get("data-provenance"), base, page_url)
        files.append(
            IndexFile(
                filename=name,
                url=url,
                sha256=sha256,
                requires_python=_requires_python(attrs.get("data-requires-python", "")),
                yanked=attrs.get("data-yanked"),
                wheel=try_parse_wheel(name) if name else None,
                problem=problem,
                provenance_url=provenance,
                provenance_problem=provenance_problem,
            ),
        )
    return tuple(files)
