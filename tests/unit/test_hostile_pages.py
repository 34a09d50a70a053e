"""Index pages that are large or broken on purpose: read in time and memory proportional to the page.

html.parser (which read them before) is quadratic on malformed markup (each "<" it cannot finish
makes it search the rest of the page again: 2 MB of "<!" took 110 s on Python 3.11.7) and
builds every attribute of a tag (one tag of 6 million attributes held 3.2 GB). The reader in
dswheels.kernel.index_files reads a page in one pass with html.parser's grammar; on pages
html.parser reads without trouble it finds the same links (compared here with html.parser itself).
"""

from __future__ import annotations

import time
import tracemalloc
from html.parser import HTMLParser

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dswheels.kernel.index_files import MAX_ATTRIBUTES, MAX_LINKS, MAX_TAG, parse_project_page
from tests.support.fuzz import examples

PAGE = "https://idx.example/simple/deepspeed/"
WHEEL = "deepspeed-0.19.8+cu128torch2.9-cp311-cp311-linux_x86_64.whl"
LINK = f'<a href="../../files/{WHEEL}#sha256={"ab" * 32}" data-requires-python="&gt;=3.9">{WHEEL}</a>\n'
MB = 1024**2

# each about 1 MB after one good link, to the end of the page (html.parser is quadratic where no ">"
# follows: it searches for one from every "<" it cannot finish)
HOSTILE = {
    "declarations": "<!" * (MB // 2),
    "end tags without names": "</" * (MB // 2),
    "start tags never finished": "<a" * (MB // 2),
    "lone less-thans": "<" * MB,
    "less-thans and spaces": "< " * (MB // 2),
    "processing instructions": "<?" * (MB // 2),
    "values never closed": "<a x='" * (MB // 6),
    "quoted greater-thans": "<a x='>'" * (MB // 8),
    "attribute names, then an open value": "<a b" + " c" * 20_000 + "='" + "<a b c" * (MB // 6),
    "a comment never closed": "<!--" + "x" * MB,
    "script": "<script>" + "<a href=x></a>" * (MB // 14),
}


def _timed(html: str) -> tuple[float, int, str]:
    """Seconds, peak Python memory and outcome ("N links" or the ValueError) of reading ``html``."""
    tracemalloc.start()
    start = time.monotonic()
    try:
        outcome = f"{len(parse_project_page(html, PAGE))} links"
    except ValueError as exc:
        outcome = str(exc)
    seconds = time.monotonic() - start
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return seconds, peak, outcome


@pytest.mark.parametrize("name", list(HOSTILE))
def test_broken_markup_is_read_in_one_pass(name: str) -> None:
    seconds, peak, outcome = _timed(LINK + HOSTILE[name])
    assert seconds < 5, (name, seconds, outcome)
    assert peak < 16 * MB, (name, peak)
    assert outcome in ("0 links", "1 links") or f"has a tag of more than {MAX_TAG:,} characters" in outcome


def test_one_tag_of_millions_of_attributes_is_refused_without_building_them() -> None:
    """The issue's page in small: one tag of 2 million attributes (html.parser: a list of 2 million
    pairs, ~1 GB; at 58 MB and 6 million, 3.2 GB). A file link's tag is a few hundred characters."""
    seconds, peak, outcome = _timed("<html><body><a href='x.whl' " + "a " * 2_000_000 + ">x</a>")
    assert outcome == f"{PAGE} has a tag of more than {MAX_TAG:,} characters (an index page's are a few hundred)"
    assert seconds < 5
    assert peak < 16 * MB  # the matcher's state over one tag of MAX_TAG characters, whatever the page's size


def test_a_link_of_many_attributes_is_refused() -> None:
    short = "<a href='x.whl' " + " ".join(f"a{i}" for i in range(MAX_ATTRIBUTES - 1)) + ">x</a>"
    assert len(parse_project_page(short, PAGE)) == 1
    many = "<a href='x.whl' " + " ".join(f"a{i}" for i in range(MAX_ATTRIBUTES)) + ">x</a>"
    with pytest.raises(ValueError, match=f"has a tag with more than {MAX_ATTRIBUTES} attributes"):
        parse_project_page(many, PAGE)


def test_links_past_the_bound_are_left_out() -> None:
    page = "<a href='x.whl'></a>" * (MAX_LINKS + 1000)
    start = time.monotonic()
    assert len(parse_project_page(page, PAGE)) == MAX_LINKS
    assert time.monotonic() - start < 60


# --- the same links as html.parser, where html.parser reads a page without trouble -----------------


class _HtmlParserLinks(HTMLParser):
    """What dswheels read with html.parser before (the first <base href>, every <a href> that </a> closes)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.base: str | None = None
        self.links: list[dict[str, str]] = []
        self._open: dict[str, str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {key: value or "" for key, value in attrs}
        if tag == "base" and self.base is None and values.get("href"):
            self.base = values["href"]
        elif tag == "a" and "href" in values:
            self._open = values

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._open is not None:
            self.links.append(self._open)
            self._open = None


_KEPT = ("href", "data-requires-python", "data-yanked")
_NAMES = st.sampled_from(["href", "HREF", "data-requires-python", "data-yanked", "x", "data-core-metadata", "title"])
_VALUE = st.lists(st.sampled_from([*"ab<>=/&;#x\"' \n.", "&amp;", "&gt;", "&#39;", "&lt;"]), max_size=8).map("".join)


@st.composite
def _attribute(draw: st.DrawFn) -> str:
    name, value, quote = draw(_NAMES), draw(_VALUE), draw(st.sampled_from(['"', "'", "", None]))
    if quote is None:
        return name
    value = value.replace(quote, "") if quote else "".join(c for c in value if c not in " \n>'\"") or "v"
    return f"{name}{draw(st.sampled_from(['=', ' = ']))}{quote}{value}{quote}"


@st.composite
def _tag(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(["a", "A", "base", "div", "br", "script", "style"]))
    attributes = draw(st.lists(_attribute(), max_size=4))
    separator = draw(st.sampled_from([" ", "\n", " / ", "/"]))
    ending = draw(st.sampled_from([">", "/>", " >"]))
    tag = f"<{name}{separator if attributes else ''}{separator.join(attributes)}{ending}"
    if name.lower() in ("script", "style"):
        tag += draw(st.sampled_from(["<a href=x>", "x", "</a>"])) + f"</{name}>"
    return tag


_PIECES = st.one_of(
    _tag(),
    st.sampled_from(["</a>", "</A>", "</a >", "text", "&amp;", "\n", "<br>", "<!-- <a href=c> -->", "<!DOCTYPE html>"]),
    # not "</ a>": an end tag to html.parser before 3.13.4, a bogus comment to HTML and to dswheels
    st.sampled_from(["< a", "<?pi?>", "</>", "<a\x00>", "<a =x>", "<a x='a'b>", "<a href=x'y>", "<a <b>"]),
)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_PIECES, max_size=12))
def test_the_links_html_parser_finds(pieces: list[str]) -> None:
    html = "".join(pieces)
    reference = _HtmlParserLinks()
    reference.feed(html)
    reference.close()
    kept = [
        {k: v for k, v in link.items() if k in ("href", "data-requires-python", "data-yanked")}
        for link in reference.links
    ]
    ours = parse_project_page(html, PAGE)
    assert [f.url for f in ours] == [_absolute(link["href"], reference.base) for link in kept]
    assert [f.requires_python for f in ours] == [_requires(link.get("data-requires-python")) for link in kept]
    assert [f.yanked for f in ours] == [link.get("data-yanked") for link in kept]


def _absolute(href: str, base: str | None) -> str:
    from urllib.parse import urldefrag, urljoin

    from dswheels.kernel.index_files import link_problem

    start = PAGE
    if base:
        try:
            joined = urljoin(PAGE, base)
        except ValueError:
            joined = PAGE
        start = PAGE if link_problem(joined, PAGE) else joined
    try:
        return urldefrag(urljoin(start, href))[0]
    except ValueError:
        return "?"


def _requires(value: str | None) -> str | None:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if not value:
        return None
    try:
        SpecifierSet(value)
    except InvalidSpecifier:
        return None
    return value
