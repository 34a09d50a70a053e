"""``dswheels index``: the static release index, regenerated from what is really published."""

from __future__ import annotations

import argparse
from pathlib import Path
from urllib.parse import urljoin

from dswheels.cli.command import Command
from dswheels.cli.commands import listed_help
from dswheels.cli.flags import Flag, Flags, OneOf, PathUse, fill
from dswheels.cli.shared import GITHUB, REPORT
from dswheels.host.log import format_duration, get_reporter
from dswheels.host.machine import host_os
from dswheels.index.step import IndexOptions, SiteWritten, write_index
from dswheels.kernel.index_links import install_lines
from dswheels.kernel.locations import LOCAL_SITE_URL, PUBLISHED, SITE, serve_command
from dswheels.kernel.platform_traits import traits
from dswheels.kernel.result import Done

__all__ = ["COMMAND"]

HELP = listed_help("index")

DESCRIPTION = f"""\
Write the static index of every published wheel: PEP 503 pages with sha256 hashes,
Requires-Python and PEP 658 metadata, one partition per torch build (e.g. cu128-torch2.9)
usable as a --find-links page (whl/<partition>/) and as an index (whl/<partition>/simple/),
an index of all wheels (simple/), and index.html for people: what exists and the install
line of each partition. The layout is docs/index-layout.md.

The published set is either a directory (what `dswheels publish --dir` fills; the site
then carries the wheels in files/ and is self-contained) or every published release of a
GitHub repository (the site links the release assets; deploy it to GitHub Pages).
The install lines name the site where it will be served: --site-url; by default, for a
directory, this machine's {LOCAL_SITE_URL}, as the command printed at the end serves
it ({serve_command(SITE, LOCAL_SITE_URL)}). People paste those lines into a shell, and the
page is public: a --site-url or --torch-index with a character a shell reads, no host, or
credentials (user:password@) is refused (exit 2).
The new pages replace the old ones only once they are all written: a failed run leaves
the previous site whole.

examples:
  dswheels index                                      # {PUBLISHED}/ -> {SITE}/, for {LOCAL_SITE_URL}
  {serve_command(SITE, LOCAL_SITE_URL)}     # then the install line it printed
  dswheels index --from published --out site --site-url https://wheels.example.org/
  GITHUB_TOKEN=... dswheels index --github OWNER/dswheels --out site --yanked yanked.txt

yanked file: one '<filename or glob> <reason>' per line ('#' comments); installers skip a
yanked wheel unless it is pinned exactly."""


FLAGS: Flags = (
    OneOf(
        Flag(
            "--from",
            dest="source",
            to="source",
            type=Path,
            default=PUBLISHED,
            metavar="DIR",
            path=PathUse.READS_PUBLISHED,
            help="directory of published wheels (default: %(default)s, where `dswheels publish` copies them)",
        ),
        GITHUB.but(to="github", help="index the published releases of this repository"),
    ),
    Flag(
        "--out",
        to="out",
        default=SITE,
        metavar="DIR",
        path=PathUse.REPLACES,
        help="site directory (default: %(default)s)",
    ),
    Flag(
        "--site-url",
        to="site_url",
        metavar="URL",
        help="where the site will be served, for the install lines (default: https://OWNER.github.io/REPO/ "
        f"with --github, else {LOCAL_SITE_URL}, where the serve command printed at the end serves --out)",
    ),
    Flag(
        "--torch-index",
        to="torch_index",
        metavar="TEMPLATE",
        help="PyTorch's index per variant, with {variant} (default: compat.yml's, download.pytorch.org/whl/{variant})",
    ),
    Flag("--yanked", to="yanked", metavar="FILE", path=PathUse.READS, help="wheels to mark yanked (see below)"),
    Flag("--title", to="title", default="DeepSpeed wheels", help="title of the human page (default: %(default)s)"),
    REPORT,
)


def _options(args: argparse.Namespace) -> IndexOptions:
    return IndexOptions(**fill(args, FLAGS))


def _run(options: IndexOptions, _args: argparse.Namespace) -> Done:
    site = write_index(options)
    partitions = site.partitions
    shown = ", ".join(partitions[:6]) + (f", ... ({len(partitions) - 6} more)" if len(partitions) > 6 else "")
    summary = (
        f"wrote {site.out}: {len(site.files)} wheels in {len(partitions)} partitions ({shown or 'none'})"
        f" in {format_duration(site.seconds)}"
    )
    get_reporter().emit(summary + "\n" + _where_to_install(site))
    get_reporter().summary(f"### dswheels index\n\n{summary}\n")
    return Done(
        data={
            "out": str(site.out),
            "site_url": site.site_url,
            "wheels": len(site.files),
            "partitions": list(partitions),
        }
    )


MAX_LINES_SHOWN = 3  # partitions whose install line is printed; the page has them all


def _where_to_install(site: SiteWritten) -> str:
    """How the site is used: the command that serves it here and its install lines, or where it is deployed."""
    page = urljoin(site.site_url, "index.html#install")
    serve = serve_command(site.out, site.site_url, python=traits(host_os()).python_command)
    if serve is None:
        return f"deploy {site.out} to {site.site_url}: the install lines are on {page}\n"
    pairs = install_lines(site.files, site_url=site.site_url, torch_index=site.torch_index)
    lines = [pair[0] for _part, pair in pairs if pair]
    text = f"serve it: {serve}\nthen install, in the environment that will use DeepSpeed, with its partition's line "
    if not 0 < len(lines) <= MAX_LINES_SHOWN:
        return text + f"on {page}\n"
    text += f"(all on {page}):\n"
    text += "".join(f"  {line}\n" for line in lines)
    return text


COMMAND = Command("index", HELP, DESCRIPTION, FLAGS, _options, _run)
