"""The release index as pure functions: which wheel goes where, and every page's text.

The layout (docs/index-layout.md) is one static site::

    index.html                              the page a person reads: coverage and install lines
    simple/index.html                       PEP 503 root of every published wheel
    simple/deepspeed/index.html
    whl/<partition>/index.html              one partition as a --find-links page
    whl/<partition>/simple/index.html       ... and as a PEP 503 index
    whl/<partition>/simple/deepspeed/index.html

A partition (``cu128-torch2.9``, :func:`dswheels.kernel.naming.partition`) holds the wheels
of one torch variant and MAJOR.MINOR: installers pick the highest local version label
among the candidates they see, so a user must only ever see wheels for their own torch.

Every link carries ``#sha256=``, ``data-requires-python`` (when declared),
``data-core-metadata`` (PEP 658/714: the wheel's METADATA at ``<href>.metadata``) and
``data-yanked`` where yanked, ``data-provenance`` (PEP 740: the URL of its provenance object) where
the wheel was attested; hrefs percent-encode ``+`` (uv sends an href verbatim and
S3-style hosts read a raw ``+`` as a space). Output depends only on the input files.

URLs and install lines are :mod:`dswheels.kernel.index_links`, yanking
:mod:`dswheels.index.yank`.
"""

from __future__ import annotations

import html
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from dswheels.index.picker import SCRIPT, Judge, lines_table, picker, script
from dswheels.kernel.index_files import IndexFile
from dswheels.kernel.index_links import (
    file_href,
    install_lines,
    is_absolute,
    newest_live,
    partition_order,
    partition_url,
    release_order,
    site_file_url,
    url_encoded,
    uv_project,
)
from dswheels.kernel.model import Python
from dswheels.kernel.naming import PROJECT, wheel_version
from dswheels.kernel.platform_traits import traits
from dswheels.kernel.sources import torch_index_url
from dswheels.kernel.versions import format_version, parse_version

__all__ = [
    "CSS",
    "FILES_DIR",
    "MARKER",
    "render_site",
    "site_paths",
]

MARKER = ".dswheels-index"  # written at the site root; `dswheels index` only ever replaces a tree that has it
REPOSITORY_VERSION = "1.0"  # PEP 629
FILES_DIR = "files"  # where a self-contained site keeps its wheels
CSS = "site.css"  # the human page's style, beside it: no inline style or script (a strict CSP allows the page)


# --- pages ----------------------------------------------------------------------------------------

_CSS = """\
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2rem auto;max-width:72rem;
padding:0 1rem;color:#1f2328;line-height:1.45}
h1{font-size:1.6rem}h2{font-size:1.25rem;margin-top:2rem;border-bottom:1px solid #d0d7de}
h3{font-size:1.05rem;margin-bottom:.3rem}
table{border-collapse:collapse;margin:.5rem 0 1rem}th,td{border:1px solid #d0d7de;padding:.25rem .55rem;
text-align:center}th{background:#f6f8fa}td.row{text-align:left;font-family:ui-monospace,monospace}
td.have{background:#dafbe1}td.none{color:#8c959f}a{color:#0969da}
pre{background:#f6f8fa;border:1px solid #d0d7de;padding:.6rem;overflow-x:auto;white-space:pre-wrap;
word-break:break-all}code{font-family:ui-monospace,monospace}
.yanked{text-decoration:line-through;color:#cf222e}.note{color:#59636e;font-size:.9rem}
form.pick fieldset{border:0;margin:0;padding:.2rem 0;display:flex;flex-wrap:wrap;gap:.3rem;align-items:center}
form.pick legend{float:left;width:8rem;font-weight:600;padding:0}
form.pick label{border:1px solid #d0d7de;border-radius:4px;padding:.15rem .5rem;cursor:pointer;background:#fff}
form.pick label:has(input:checked){background:#0969da;color:#fff;border-color:#0969da}
form.pick label.none{color:#8c959f;background:#f6f8fa;border-style:dashed}
form.pick label.none:has(input:checked){background:#8c959f;color:#fff}
form.pick input{margin:0 .25rem 0 0}
.picked{display:flex;gap:.5rem;align-items:flex-start}.picked pre{flex:1;margin:.5rem 0;min-height:1.4rem}
#pick-copy{margin-top:.5rem;padding:.35rem .8rem}#pick.impossible #pick-why{color:#cf222e}
table.lines td{text-align:left;font-size:.8rem;word-break:break-all}
"""


def _page(title: str, body: Sequence[str], *, head: str = "") -> str:
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            f'<meta name="pypi:repository-version" content="{REPOSITORY_VERSION}">',
            *([head] if head else []),
            f"<title>{html.escape(title)}</title>",
            "</head>",
            "<body>",
            *body,
            "</body>",
            "</html>",
            "",
        ]
    )


@dataclass(frozen=True, slots=True)
class _Anchor:
    """A file's link, prepared once and placed on several pages (only the ``../`` prefix differs)."""

    absolute: bool  # the same href on every page
    target: str  # encoded URL + #sha256=, HTML-escaped
    tail: str  # the attributes after href, and the text

    @classmethod
    def of(cls, item: IndexFile, *, site_url: str) -> _Anchor:
        attrs = []
        if item.requires_python:
            attrs.append(f' data-requires-python="{html.escape(item.requires_python)}"')
        if item.metadata_sha256:
            value = f"sha256={item.metadata_sha256}"
            # PEP 714: data-core-metadata; the old name too, for pip < 23.2 which reads only that
            attrs.append(f' data-core-metadata="{value}" data-dist-info-metadata="{value}"')
        if item.yanked is not None:
            attrs.append(f' data-yanked="{html.escape(item.yanked)}"')
        if item.provenance_url:  # PEP 740: a fully qualified URL, whatever page the link is on
            attrs.append(f' data-provenance="{html.escape(site_file_url(site_url, item.provenance_url))}"')
        return cls(
            absolute=is_absolute(item.url),
            target=html.escape(f"{url_encoded(item.url)}#sha256={item.sha256}"),
            tail=f"{''.join(attrs)}>{html.escape(item.filename)}</a><br>",
        )

    def html(self, depth: int) -> str:
        prefix = "" if self.absolute else "../" * depth
        return f'<a href="{prefix}{self.target}"{self.tail}'


def _project_page(anchors: Sequence[_Anchor], *, page: str, title: str) -> str:
    depth = page.count("/")
    return _page(title, [f"<h1>{html.escape(title)}</h1>", *(a.html(depth) for a in anchors)])


def _root_page(title: str) -> str:
    return _page(title, [f'<a href="{PROJECT}/">{PROJECT}</a><br>'])


def site_paths(part: str) -> tuple[str, str, str]:
    """The three pages of a partition: find-links page, index root, project page."""
    return (f"whl/{part}/index.html", f"whl/{part}/simple/index.html", f"whl/{part}/simple/{PROJECT}/index.html")


def _coverage(files: Sequence[IndexFile]) -> list[str]:
    """One table per DeepSpeed version: partitions x Pythons, each cell linking the wheel per platform."""
    page = "index.html"
    by_ds: dict[str, dict[str, dict[str, dict[str, IndexFile]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(dict))
    )
    pythons: set[Python] = set()
    platforms: set[str] = set()
    for item in files:
        cell = item.published.cell
        slot = by_ds[format_version(cell.deepspeed)][item.published.partition][cell.python.tag]
        current = slot.get(cell.platform.value)
        if current is None or _prefer(item, current):
            slot[cell.platform.value] = item
        pythons.add(cell.python)
        platforms.add(cell.platform.value)
    py_cols = sorted(pythons)
    body: list[str] = []
    for ds in sorted(by_ds, key=parse_version, reverse=True):
        body.append(f'<h3 id="deepspeed-{html.escape(ds)}">DeepSpeed {html.escape(ds)}</h3>')
        body.append("<table>")
        head = "".join(f"<th>{html.escape(str(py))}</th>" for py in py_cols)
        body.append(f"<tr><th>partition</th>{head}</tr>")
        for part in sorted(by_ds[ds], key=partition_order):
            row = [f'<td class="row"><a href="#{html.escape(part)}">{html.escape(part)}</a></td>']
            for py in py_cols:
                slot = by_ds[ds][part].get(py.tag, {})
                marks = [_mark(slot[plat], page=page) for plat in sorted(platforms) if plat in slot]
                row.append(f'<td class="have">{" ".join(marks)}</td>' if marks else '<td class="none">&ndash;</td>')
            body.append(f"<tr>{''.join(row)}</tr>")
        body.append("</table>")
    return body


def _mark(item: IndexFile, *, page: str) -> str:
    label = traits(item.published.cell.platform).label
    tip = f"{item.filename} ({(item.size or 0) / 1e6:.1f} MB)"
    cls = ""
    if item.yanked is not None:
        cls = ' class="yanked"'
        tip += f", yanked: {item.yanked}" if item.yanked else ", yanked"
    href = file_href(item.url, page=page)
    return f'<a{cls} href="{html.escape(href)}" title="{html.escape(tip)}">{label}</a>'


def _install(files: Sequence[IndexFile], *, site_url: str, torch_index: str) -> list[str]:
    """The install section of the human page: each partition's lines, and its uv project's."""
    body: list[str] = []
    for part, lines in install_lines(files, site_url=site_url, torch_index=torch_index):
        body.append(f'<h3 id="{html.escape(part)}">{html.escape(part)}</h3>')
        if lines is None:
            body.append("<p>Every wheel of this partition is yanked.</p>")
            continue
        body.append(f"<pre><code>{html.escape(lines[0])}\n{html.escape(lines[1])}</code></pre>")
        newest = newest_live(f for f in files if f.published.partition == part)
        assert newest is not None  # noqa: S101 - install_lines gave lines: a wheel of it is live
        project = uv_project(
            version=wheel_version(newest.published.cell),
            site_url=site_url,
            part=part,
            torch_index=torch_index_url(torch_index, part.partition("-torch")[0]),
        )
        body.append(
            "<details><summary>uv project: these lines in <code>pyproject.toml</code>, then <code>uv sync</code>"
            f'</summary><pre class="uv-project"><code>{html.escape(project)}</code></pre></details>'
        )
        body.append(
            f'<p class="note">Index: <code>{html.escape(partition_url(site_url, part))}</code> &middot; '
            f'find-links page: <a href="whl/{html.escape(part)}/">whl/{html.escape(part)}/</a>.</p>'
        )
    return body


def _home_page(
    files: Sequence[IndexFile],
    *,
    title: str,
    site_url: str,
    torch_index: str,
    partitions: Sequence[str],
    judge: Judge | None,
) -> str:
    intro = (
        "<p>DeepSpeed wheels with every C++/CUDA op precompiled. A wheel works only with the torch "
        "MAJOR.MINOR and the CUDA (or CPU) build it was made for, so the wheels are published in one "
        "partition per torch build. Find your partition: "
        '<code>python -c "import torch; print(torch.__version__)"</code> prints e.g. '
        "<code>2.9.1+cu128</code>, which is partition <code>cu128-torch2.9</code>. Then copy its install "
        'line from <a href="#install">Install</a>.</p>'
    )
    machine = (
        f'<p class="note">{len(files)} wheels in {len(partitions)} partitions. For installers: '
        '<a href="simple/">simple/</a> (PEP 503, all wheels), <code>whl/&lt;partition&gt;/simple/</code> '
        "(an index per partition) and <code>whl/&lt;partition&gt;/</code> (its --find-links page).</p>"
    )
    coverage_note = (
        '<p>What exists. A mark links to the wheel (hover for its name and size); <span class="yanked">struck</span> '
        "means yanked: installers skip it unless it is pinned.</p>"
    )
    install_note = (
        "<p>Each line pins the exact version, <code>+label</code> included: only this partition's wheel has it, so "
        "neither pip nor uv can pick a wheel for another torch or compile a newer DeepSpeed from PyPI, and a "
        "Python or platform without a wheel fails at once instead of building. Lines show the newest DeepSpeed of "
        "the partition; for another, change the version before the <code>+</code>.</p>"
    )
    uv_note = (
        "<p>A uv project keeps its dependencies in <code>pyproject.toml</code>: each partition's lines below take "
        "DeepSpeed from the partition and torch from its own index, both <code>explicit</code> (uv asks them for "
        "those two packages only); <code>uv lock</code> and <code>uv sync</code> then install the partition's "
        "wheel.</p>"
    )
    links = lines_table(files, site_url=site_url, torch_index=torch_index)
    body = [
        f"<h1>{html.escape(title)}</h1>",
        intro,
        machine,
        *(['<h2 id="pick-your-line">Pick your line</h2>'] if files else []),
        *picker(files, site_url=site_url, torch_index=torch_index, judge=judge),
        "<h2>Coverage</h2>",
        coverage_note,
        *_coverage(files),
        '<h2 id="install">Install</h2>',
        install_note,
        uv_note,
        *_install(files, site_url=site_url, torch_index=torch_index),
        '<h2 id="lines">Every install line</h2>',
        (
            '<p class="note">One row per DeepSpeed release and partition; on Windows, the last column '
            "(the Python launcher, as cmd and PowerShell take it).</p>"
        ),
        *links,
    ]
    head = f'<meta name="viewport" content="width=device-width, initial-scale=1">\n<link rel="stylesheet" href="{CSS}">'
    return _page(title, body, head=head)


def _prefer(new: IndexFile, old: IndexFile) -> bool:
    """Which of two files of one cell the coverage table shows: not yanked, then the newest re-spin."""
    return (new.yanked is None, new.published.build.zfill(8)) > (old.yanked is None, old.published.build.zfill(8))


def render_site(
    files: Sequence[IndexFile],
    *,
    site_url: str,
    torch_index: str,
    title: str = "DeepSpeed wheels",
    judge: Judge | None = None,
) -> dict[str, str]:
    """Every page of the site: path relative to the site root -> HTML (and the human page's style and script).

    ``torch_index`` is a template with ``{variant}`` (PyTorch's index for the variant). ``judge`` says
    which rules forbid a cell (:class:`dswheels.plan.rules.Judge`): the picker's reason for a combination
    nothing is published for (without it: "not published").
    Raises ``ValueError`` for two files with one name.
    """
    seen: dict[str, IndexFile] = {}
    for item in files:
        if item.filename in seen:
            msg = f"{item.filename} is published twice ({seen[item.filename].url} and {item.url})"
            raise ValueError(msg)
        seen[item.filename] = item
    ordered = sorted(files, key=release_order)
    anchors = [_Anchor.of(item, site_url=site_url) for item in ordered]
    by_partition: dict[str, list[_Anchor]] = defaultdict(list)
    for item, anchor in zip(ordered, anchors, strict=True):
        by_partition[item.published.partition].append(anchor)
    partitions = sorted(by_partition, key=partition_order)
    pages: dict[str, str] = {
        MARKER: "Generated by `dswheels index`, which rewrites this directory on every run.\n",
        ".nojekyll": "",
        "simple/index.html": _root_page("Simple index"),
    }
    project_page = f"simple/{PROJECT}/index.html"
    pages[project_page] = _project_page(anchors, page=project_page, title=f"Links for {PROJECT}")
    for part in partitions:
        find_links, root, project = site_paths(part)
        pages[find_links] = _project_page(by_partition[part], page=find_links, title=f"{PROJECT} wheels for {part}")
        pages[root] = _root_page(f"Simple index: {part}")
        pages[project] = _project_page(by_partition[part], page=project, title=f"Links for {PROJECT} ({part})")
    pages["index.html"] = _home_page(
        ordered, title=title, site_url=site_url, torch_index=torch_index, partitions=partitions, judge=judge
    )
    pages[CSS] = _CSS
    pages[SCRIPT] = script()
    return pages
