"""``dswheels publish``: put wheels where the index is generated from."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from dswheels.commands.common import Subparsers, formatter
from dswheels.core.locations import PUBLISHED, SITE, WHEELHOUSE
from dswheels.effects.gha import write_summary
from dswheels.effects.github import GitHub, api_url_from_env, token_from_env
from dswheels.effects.publish import (
    PublishResult,
    collect_wheels,
    publish_dir,
    publish_github,
    publish_upload,
    upload_credentials,
)
from dswheels.errors import ConfigError, PublishError
from dswheels.log import get_reporter

__all__ = ["register", "run"]

DESCRIPTION = f"""\
Publish wheels (and, beside each, its METADATA as <wheel>.metadata and its build manifest)
to one of three places. With no WHEEL|DIR: the wheels `dswheels build` wrote
({WHEELHOUSE}/<variant>/*.whl); a directory stands for the wheels in it and one level down.
Published files are immutable: a file already there with the same bytes is skipped, so
re-running a tag publishes nothing new; the same name with other bytes is an error and
nothing is changed.

  --dir DIR        a local directory (default: {PUBLISHED}/, where `dswheels index` reads)
  --github REPO    a GitHub Release for --tag: created as a draft, uploaded to, checked,
                   then published. A draft left by an interrupted run is resumed. Needs
                   GITHUB_TOKEN (or GH_TOKEN) with contents: write; GITHUB_API_URL is
                   honoured (GitHub Enterprise). Assets must be under 2 GiB, 1000 per release.
  --repository-url URL
                   any server with the PyPI upload API (pypiserver, devpi, Artifactory,
                   ...); credentials from DSWHEELS_UPLOAD_USERNAME/_PASSWORD (or
                   TWINE_USERNAME/_PASSWORD). --simple-url is where it serves its index
                   (default: <URL>/simple/, pypiserver's layout).

examples:
  dswheels publish                                         # {WHEELHOUSE}/ -> {PUBLISHED}/
  dswheels publish wheelhouse/ --github OWNER/dswheels --tag v0.19.8
  dswheels publish dist/*.whl --repository-url http://localhost:8080/
  dswheels publish dist/ --repository-url https://devpi.example/alice/wheels/ \\
                   --simple-url https://devpi.example/alice/wheels/+simple/"""


def register(sub: Subparsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "publish",
        help="publish wheels to a directory, a GitHub Release or an upload server",
        description=DESCRIPTION,
        formatter_class=formatter,
    )
    p.add_argument(
        "paths",
        nargs="*",
        type=Path,
        metavar="WHEEL|DIR",
        help=f"wheels, or directories of wheels (default: {WHEELHOUSE}/, what `dswheels build` wrote)",
    )
    target = p.add_mutually_exclusive_group()
    target.add_argument(
        "--dir", type=Path, metavar="DIR", help=f"publish into this directory (the default: {PUBLISHED}/)"
    )
    target.add_argument("--github", metavar="OWNER/REPO", help="publish to a GitHub Release of this repository")
    target.add_argument("--repository-url", metavar="URL", help="upload to this PEP 503 server's upload URL")
    p.add_argument("--tag", help="with --github: the release tag (e.g. the tag this workflow runs for)")
    p.add_argument("--title", help="with --github: the release title for a new release (default: the tag)")
    p.add_argument("--target", metavar="COMMITISH", help="with --github: commit a new tag points at (default branch)")
    p.add_argument("--simple-url", metavar="URL", help="with --repository-url: the server's simple index")
    p.set_defaults(func=run)


def _report(result: PublishResult) -> str:
    lines = [f"  uploaded           {name}" for name in result.uploaded]
    lines += [f"  already published  {name}" for name in result.present]
    summary = f"published to {result.where}: {len(result.uploaded)} files new, {len(result.present)} already there"
    return "\n".join([*lines, summary]) + "\n"


def _next(args: argparse.Namespace) -> str:
    """What reads this publish: `dswheels index` (a server with an upload API serves its own index)."""
    if args.repository_url:
        return ""
    if args.github:
        return f"next: dswheels index --github {args.github}   (writes {SITE}/ for GitHub Pages)\n"
    if args.dir in (None, PUBLISHED):
        return f"next: dswheels index   (reads {PUBLISHED}/, writes {SITE}/)\n"
    return f"next: dswheels index --from {shlex.quote(str(args.dir))}   (writes {SITE}/)\n"


def run(args: argparse.Namespace) -> int:
    if args.tag and not args.github:
        raise ConfigError("--tag goes with --github")
    if args.github and not args.tag:
        raise ConfigError("--github needs --tag: the release to publish to", hint='e.g. --tag "$GITHUB_REF_NAME"')
    if args.simple_url and not args.repository_url:
        raise ConfigError("--simple-url goes with --repository-url")
    wheels = collect_wheels(args.paths)
    reporter = get_reporter()
    with reporter.group(f"publish {len(wheels)} wheel(s)"):
        if args.github:
            token = token_from_env()
            if token is None:
                raise PublishError(
                    "publishing to GitHub needs a token",
                    hint="set GITHUB_TOKEN (in a workflow: env: GITHUB_TOKEN: ${{ github.token }}, "
                    "with permissions: contents: write)",
                )
            gh = GitHub(args.github, token=token, api_url=api_url_from_env())
            result = publish_github(wheels, gh, args.tag, title=args.title, target=args.target)
        elif args.repository_url:
            username, password = upload_credentials()
            result = publish_upload(
                wheels, args.repository_url, simple_url=args.simple_url, username=username, password=password
            )
        else:
            result = publish_dir(wheels, args.dir or PUBLISHED)
    text = _report(result)
    sys.stdout.write(text + _next(args))
    write_summary("### dswheels publish\n\n```\n" + text + "```")
    return 0
