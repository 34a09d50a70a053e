"""``dswheels publish``: put wheels where the index is generated from."""

from __future__ import annotations

import argparse
import shlex

from dswheels.cli.command import Command
from dswheels.cli.commands import listed_help
from dswheels.cli.flags import Flag, Flags, OneOf, PathUse, fill
from dswheels.cli.shared import GITHUB, REPORT
from dswheels.host.log import get_reporter
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.locations import PUBLISHED, SITE, WHEELHOUSE
from dswheels.kernel.result import Done
from dswheels.publish.step import (
    PublishOptions,
    PublishTarget,
    ToDirectory,
    ToGitHubRelease,
    ToUploadServer,
    publish_wheels,
)
from dswheels.stores.outgoing import PublishResult

__all__ = ["COMMAND"]

HELP = listed_help("publish")

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


FLAGS: Flags = (
    Flag(
        "paths",
        nargs="*",
        metavar="WHEEL|DIR",
        to="paths",
        parse=tuple,
        path=PathUse.READS_WHEELS,
        help=f"wheels, or directories of wheels (default: {WHEELHOUSE}/, what `dswheels build` wrote)",
    ),
    OneOf(
        Flag(
            "--dir",
            default=PUBLISHED,
            metavar="DIR",
            path=PathUse.PUBLISHES_INTO,
            help=f"publish into this directory (the default: {PUBLISHED}/)",
        ),
        GITHUB.but(help="publish to a GitHub Release of this repository"),
        Flag("--repository-url", metavar="URL", help="upload to this PEP 503 server's upload URL"),
    ),
    Flag("--tag", help="with --github: the release tag (e.g. the tag this workflow runs for)"),
    Flag("--title", help="with --github: the release title for a new release (default: the tag)"),
    Flag("--target", metavar="COMMITISH", help="with --github: commit a new tag points at (default branch)"),
    Flag("--simple-url", metavar="URL", help="with --repository-url: the server's simple index"),
    REPORT,
)


def _target(args: argparse.Namespace) -> PublishTarget:
    if args.tag and not args.github:
        raise ConfigError("--tag goes with --github")
    if args.github and not args.tag:
        raise ConfigError("--github needs --tag: the release to publish to", hint='e.g. --tag "$GITHUB_REF_NAME"')
    if args.simple_url and not args.repository_url:
        raise ConfigError("--simple-url goes with --repository-url")
    if args.github:
        return ToGitHubRelease(repository=args.github, tag=args.tag, title=args.title, target=args.target)
    if args.repository_url:
        return ToUploadServer(url=args.repository_url, simple_url=args.simple_url)
    return ToDirectory(path=args.dir)


def _options(args: argparse.Namespace) -> PublishOptions:
    return PublishOptions(**fill(args, FLAGS), target=_target(args))


def _report(result: PublishResult) -> str:
    lines = [f"  uploaded           {name}" for name in result.uploaded]
    lines += [f"  already published  {name}" for name in result.present]
    summary = f"published to {result.where}: {len(result.uploaded)} files new, {len(result.present)} already there"
    return "\n".join([*lines, summary]) + "\n"


def _next(target: PublishTarget) -> str:
    """What reads this publish: `dswheels index` (a server with an upload API serves its own index)."""
    if isinstance(target, ToUploadServer):
        return ""
    if isinstance(target, ToGitHubRelease):
        return f"next: dswheels index --github {target.repository}   (writes {SITE}/ for GitHub Pages)\n"
    if target.path == PUBLISHED:
        return f"next: dswheels index   (reads {PUBLISHED}/, writes {SITE}/)\n"
    return f"next: dswheels index --from {shlex.quote(str(target.path))}   (writes {SITE}/)\n"


def _run(options: PublishOptions, _args: argparse.Namespace) -> Done:
    result = publish_wheels(options)
    text = _report(result)
    get_reporter().emit(text + _next(options.target))
    get_reporter().summary("### dswheels publish\n\n```\n" + text + "```")
    return Done(data={"where": result.where, "uploaded": list(result.uploaded), "present": list(result.present)})


COMMAND = Command("publish", HELP, DESCRIPTION, FLAGS, _options, _run)
