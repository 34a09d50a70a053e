"""``dswheels index``: the static release index, regenerated from what is really published."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from urllib.parse import urljoin

from dswheels.commands.common import Subparsers, formatter
from dswheels.core.compat import load_compat
from dswheels.core.index.files import IndexFile
from dswheels.core.index.links import install_lines
from dswheels.core.index.site import render_site
from dswheels.core.index.yank import apply_yanked, parse_yanked
from dswheels.core.locations import LOCAL_SITE_URL, PUBLISHED, SITE, serve_command
from dswheels.core.sources import torch_index_problem
from dswheels.effects.clock import monotonic
from dswheels.effects.files import read_bounded
from dswheels.effects.gha import write_summary
from dswheels.effects.github import GitHub, api_url_from_env, token_from_env
from dswheels.effects.index import LocalWheel, check_target, local_index_files, scan_directory, write_site
from dswheels.effects.publish import github_index_files
from dswheels.errors import ConfigError, PublishError
from dswheels.log import format_duration, get_reporter

__all__ = ["register", "run"]

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
it ({serve_command(SITE, LOCAL_SITE_URL)}).
The new pages replace the old ones only once they are all written: a failed run leaves
the previous site whole.

examples:
  dswheels index                                      # {PUBLISHED}/ -> {SITE}/, for {LOCAL_SITE_URL}
  {serve_command(SITE, LOCAL_SITE_URL)}     # then the install line it printed
  dswheels index --from published --out site --site-url https://wheels.example.org/
  GITHUB_TOKEN=... dswheels index --github OWNER/dswheels --out site --yanked yanked.txt

yanked file: one '<filename or glob> <reason>' per line ('#' comments); installers skip a
yanked wheel unless it is pinned exactly."""


def register(sub: Subparsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "index",
        help="write the static index (PEP 503 + per-torch partitions + a page for people)",
        description=DESCRIPTION,
        formatter_class=formatter,
    )
    source = p.add_mutually_exclusive_group()
    source.add_argument(
        "--from",
        dest="source",
        type=Path,
        default=PUBLISHED,
        metavar="DIR",
        help="directory of published wheels (default: %(default)s, where `dswheels publish` copies them)",
    )
    source.add_argument("--github", metavar="OWNER/REPO", help="index the published releases of this repository")
    p.add_argument("--out", type=Path, default=SITE, metavar="DIR", help="site directory (default: %(default)s)")
    p.add_argument(
        "--site-url",
        metavar="URL",
        help="where the site will be served, for the install lines (default: https://OWNER.github.io/REPO/ "
        f"with --github, else {LOCAL_SITE_URL}, where the serve command printed at the end serves --out)",
    )
    p.add_argument(
        "--torch-index",
        metavar="TEMPLATE",
        help="PyTorch's index per variant, with {variant} (default: compat.yml's, download.pytorch.org/whl/{variant})",
    )
    p.add_argument("--yanked", type=Path, metavar="FILE", help="wheels to mark yanked (see below)")
    p.add_argument("--title", default="DeepSpeed wheels", help="title of the human page (default: %(default)s)")
    p.set_defaults(func=run)


def _site_url(args: argparse.Namespace) -> str:
    if args.site_url:
        return str(args.site_url)
    if args.github:
        owner, _sep, name = str(args.github).partition("/")
        return f"https://{owner.lower()}.github.io/{name}/"
    return LOCAL_SITE_URL


def _yank(files: list[IndexFile], path: Path | None) -> list[IndexFile]:
    if path is None:
        return files
    try:
        rules = parse_yanked(read_bounded(path).decode("utf-8"), str(path))
    except OSError as exc:
        raise ConfigError(f"cannot read the yanked file {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    marked, unused = apply_yanked(files, rules)
    for rule in unused:
        get_reporter().warning(f"{path}:{rule.line}: {rule.pattern!r} matches no published wheel")
    return marked


def run(args: argparse.Namespace) -> int:
    reporter = get_reporter()
    start = monotonic()
    check_target(args.out)  # before any network or hashing: fail fast on a wrong --out
    torch_index = args.torch_index or load_compat().torch_index
    if problem := torch_index_problem(torch_index):
        raise ConfigError(f"--torch-index {torch_index!r}: {problem}")
    wheels: list[LocalWheel] = []
    with reporter.group("read the published wheels"):
        if args.github:
            gh = GitHub(args.github, token=token_from_env(), api_url=api_url_from_env())
            files, warnings = github_index_files(gh)
            for warning in warnings:
                reporter.warning(warning)
            where = f"the releases of {args.github}"
        else:
            wheels = scan_directory(args.source)
            files = local_index_files(wheels)
            where = str(args.source)
        reporter.info(f"{len(files)} wheels in {where}")
    files = _yank(files, args.yanked)
    site_url = _site_url(args)
    try:
        pages = render_site(files, site_url=site_url, torch_index=torch_index, title=args.title)
    except ValueError as exc:
        raise PublishError(str(exc)) from None
    with reporter.group(f"write {args.out}"):
        write_site(args.out, pages, wheels=wheels)
    partitions = sorted({f.published.partition for f in files})
    shown = ", ".join(partitions[:6]) + (f", ... ({len(partitions) - 6} more)" if len(partitions) > 6 else "")
    summary = (
        f"wrote {args.out}: {len(files)} wheels in {len(partitions)} partitions ({shown or 'none'})"
        f" in {format_duration(monotonic() - start)}"
    )
    sys.stdout.write(summary + "\n" + _where_to_install(args.out, site_url, files, torch_index))
    write_summary(f"### dswheels index\n\n{summary}\n")
    return 0


MAX_LINES_SHOWN = 3  # partitions whose install line is printed; the page has them all


def _where_to_install(out: Path, site_url: str, files: list[IndexFile], torch_index: str) -> str:
    """How the site is used: the command that serves it here and its install lines, or where it is deployed."""
    page = urljoin(site_url, "index.html#install")
    serve = serve_command(out, site_url, python="python" if sys.platform == "win32" else "python3")
    if serve is None:
        return f"deploy {out} to {site_url}: the install lines are on {page}\n"
    lines = [pair[0] for _part, pair in install_lines(files, site_url=site_url, torch_index=torch_index) if pair]
    text = f"serve it: {serve}\nthen install, in the environment that will use DeepSpeed, with its partition's line "
    if not 0 < len(lines) <= MAX_LINES_SHOWN:
        return text + f"on {page}\n"
    text += f"(all on {page}):\n"
    text += "".join(f"  {line}\n" for line in lines)
    return text
