"""Where things are on a dswheels site, and the install line that reaches them.

A file's href from any page (``+`` percent-encoded once), a partition's index URL, the
PEP 658 metadata name, and per partition the pip and uv lines that can only install that
partition's wheel (:func:`install_command`), the same pip line as Windows' shells take it
(:func:`windows_command`), and the ``pyproject.toml`` lines a uv project takes it with
(:func:`uv_project`).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from urllib.parse import quote, unquote, urljoin, urlsplit, urlunsplit

from packaging.version import Version

from dswheels.kernel.index_files import IndexFile
from dswheels.kernel.model import Variant
from dswheels.kernel.naming import PROJECT, cell_id, try_parse_wheel
from dswheels.kernel.sources import torch_index_url
from dswheels.kernel.urls import shell_word
from dswheels.kernel.versions import parse_version

__all__ = [
    "GITHUB_ASSET_LIMIT",
    "GITHUB_ASSET_MAX_BYTES",
    "file_href",
    "install_command",
    "install_lines",
    "is_absolute",
    "metadata_name",
    "newest_live",
    "partition_order",
    "partition_url",
    "published_cell_ids",
    "release_order",
    "site_file_url",
    "url_encoded",
    "uv_project",
    "windows_command",
]


def metadata_name(filename: str) -> str:
    """PEP 658: the core metadata of ``X.whl`` is served at ``X.whl.metadata``."""
    return f"{filename}.metadata"


def _encode_path(path: str) -> str:
    """Percent-encode a URL path once (``+`` -> ``%2B``), leaving ``/`` alone.

    >>> _encode_path("files/deepspeed-0.19.8+cu128torch2.9-cp312-cp312-win_amd64.whl")
    'files/deepspeed-0.19.8%2Bcu128torch2.9-cp312-cp312-win_amd64.whl'
    """
    return quote(unquote(path), safe="/")


def is_absolute(url: str) -> bool:
    """Whether ``url`` names its scheme (else it is relative to the site root)."""
    return bool(urlsplit(url).scheme)


def file_href(url: str, *, page: str) -> str:
    """The href from ``page`` (a site-relative file path) to a file at ``url``.

    ``url`` is absolute, or relative to the site root (``files/<name>``, never with ``..``).

    >>> file_href("files/a+b.whl", page="whl/cpu-torch2.9/simple/deepspeed/index.html")
    '../../../../files/a%2Bb.whl'
    >>> file_href("https://github.com/o/r/releases/download/v1/a+b.whl", page="simple/deepspeed/index.html")
    'https://github.com/o/r/releases/download/v1/a%2Bb.whl'
    """
    return ("" if is_absolute(url) else "../" * page.count("/")) + url_encoded(url)


def url_encoded(url: str) -> str:
    """``url`` with its path percent-encoded once (an absolute URL loses its fragment)."""
    if is_absolute(url):
        parts = urlsplit(url)
        return urlunsplit((parts.scheme, parts.netloc, _encode_path(parts.path), parts.query, ""))
    return _encode_path(url)


def _site_base(site_url: str) -> str:
    return site_url if site_url.endswith("/") else site_url + "/"


def site_file_url(site_url: str, url: str) -> str:
    """A file's fully qualified URL: ``url`` itself when absolute, else under the site (path encoded once).

    >>> site_file_url("https://h/ds/", "files/a+b.whl.provenance")
    'https://h/ds/files/a%2Bb.whl.provenance'
    """
    return url_encoded(url) if is_absolute(url) else urljoin(_site_base(site_url), url_encoded(url))


def partition_url(site_url: str, part: str) -> str:
    """The ``--extra-index-url`` of a partition: ``<site>/whl/<partition>/simple/``."""
    return urljoin(_site_base(site_url), f"whl/{part}/simple/")


def install_command(*, tool: str, version: str, site_url: str, part: str, torch_index: str) -> str:
    """The install line that cannot go wrong (README, "Install"; docs/index-layout.md).

    The exact local version (``==0.19.8+cu128torch2.9``) matches our wheel only: PyPI
    cannot hold local versions, so pip (which merges every index and would take PyPI's
    newer sdist and compile it) and uv alike can only pick this partition's wheel, for
    this torch minor; with no wheel for the user's Python or platform they stop with
    "no matching distribution" instead of compiling. The partition's index comes first
    (uv takes a package from the first index that has it), then PyTorch's index for the
    variant, so a torch the wheel pins (``torch==M.m.*``) comes in the matching CUDA build.

    >>> line = install_command(tool="pip", version="0.19.8+cu128torch2.9", site_url="https://h/ds/",
    ...                        part="cu128-torch2.9", torch_index="https://t/whl/cu128")
    >>> print(line.replace(" --", "\\n  --"))
    pip install "deepspeed==0.19.8+cu128torch2.9"
      --extra-index-url https://h/ds/whl/cu128-torch2.9/simple/
      --extra-index-url https://t/whl/cu128
    """
    program = {"pip": "pip install", "uv": "uv pip install"}[tool]
    return (
        f'{program} "{PROJECT}=={version}" --extra-index-url {shell_word(partition_url(site_url, part))}'
        f" --extra-index-url {shell_word(torch_index)}"
    )


_WINDOWS_UNSAFE = re.compile(r"[^A-Za-z0-9._~:/@%+=,-]")


def _windows_word(url: str) -> str:
    """``url`` as one word for cmd and PowerShell alike: every character either reads (quotes, ``&``,
    ``^``, ``$``, spaces, ...) percent-encoded; the sites' URLs hold none (``index`` refuses them)."""
    return _WINDOWS_UNSAFE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode("utf-8")), url)


def windows_command(*, version: str, site_url: str, part: str, torch_index: str) -> str:
    """:func:`install_command`'s pip line as Windows' shells take it, cmd and PowerShell alike.

    ``py -m pip`` (the Python launcher: ``pip.exe`` is often not on ``PATH``), the requirement in
    double quotes (cmd has no single quotes), each URL one word.

    >>> print(windows_command(version="0.19.8+cu128torch2.9", site_url="https://h/ds/", part="cu128-torch2.9",
    ...                       torch_index="https://t/whl/cu128").replace(" --", "\\n  --"))
    py -m pip install "deepspeed==0.19.8+cu128torch2.9"
      --extra-index-url https://h/ds/whl/cu128-torch2.9/simple/
      --extra-index-url https://t/whl/cu128
    """
    return (
        f'py -m pip install "{PROJECT}=={version}" --extra-index-url {_windows_word(partition_url(site_url, part))}'
        f" --extra-index-url {_windows_word(torch_index)}"
    )


def uv_project(*, version: str, site_url: str, part: str, torch_index: str) -> str:
    """The ``pyproject.toml`` lines of a uv project that takes DeepSpeed from the partition and torch from
    its own index: both indexes ``explicit`` (uv asks them only for the packages ``[tool.uv.sources]``
    names, so nothing else comes from them, and neither package from anywhere else). torch is a
    dependency of the project itself, pinned as the wheel pins it: uv applies ``[tool.uv.sources]`` to
    a project's own dependencies only, so as DeepSpeed's dependency alone it would come from PyPI.

    >>> print(uv_project(version="0.19.8+cu128torch2.9", site_url="https://h/ds/", part="cu128-torch2.9",
    ...                  torch_index="https://t/whl/cu128"))
    [project]
    dependencies = ["deepspeed==0.19.8+cu128torch2.9", "torch==2.9.*"]
    <BLANKLINE>
    [tool.uv.sources]
    deepspeed = { index = "dswheels-cu128-torch2.9" }
    torch = { index = "pytorch-cu128" }
    <BLANKLINE>
    [[tool.uv.index]]
    name = "dswheels-cu128-torch2.9"
    url = "https://h/ds/whl/cu128-torch2.9/simple/"
    explicit = true
    <BLANKLINE>
    [[tool.uv.index]]
    name = "pytorch-cu128"
    url = "https://t/whl/cu128"
    explicit = true
    """
    variant, _sep, torch_minor = part.partition("-torch")
    ours, theirs = f"dswheels-{part}", f"pytorch-{variant}"

    def toml(text: str) -> str:  # a TOML basic string: JSON's escapes are TOML's
        return json.dumps(text)

    return "\n".join(
        [
            "[project]",
            f"dependencies = [{toml(f'{PROJECT}=={version}')}, {toml(f'torch=={torch_minor}.*')}]",
            "",
            "[tool.uv.sources]",
            f"{PROJECT} = {{ index = {toml(ours)} }}",
            f"torch = {{ index = {toml(theirs)} }}",
            "",
            "[[tool.uv.index]]",
            f"name = {toml(ours)}",
            f"url = {toml(partition_url(site_url, part))}",
            "explicit = true",
            "",
            "[[tool.uv.index]]",
            f"name = {toml(theirs)}",
            f"url = {toml(torch_index)}",
            "explicit = true",
        ]
    )


def install_lines(
    files: Sequence[IndexFile], *, site_url: str, torch_index: str
) -> list[tuple[str, tuple[str, str] | None]]:
    """Per partition, newest torch first: the pip and uv lines for its newest DeepSpeed (see
    :func:`install_command`), or None when every wheel of the partition is yanked."""
    by_partition: dict[str, list[IndexFile]] = defaultdict(list)
    for item in files:
        by_partition[item.published.partition].append(item)
    lines: list[tuple[str, tuple[str, str] | None]] = []
    for part in sorted(by_partition, key=partition_order):
        newest = newest_live(by_partition[part])
        if newest is None:
            lines.append((part, None))
            continue
        index = torch_index_url(torch_index, part.partition("-torch")[0])
        pip, uv = (
            install_command(
                tool=tool, version=str(newest.published.version), site_url=site_url, part=part, torch_index=index
            )
            for tool in ("pip", "uv")
        )
        lines.append((part, (pip, uv)))
    return lines


def partition_order(part: str) -> tuple[tuple[int, ...], bool, tuple[int, ...]]:
    """Newest torch first, then CUDA variants newest first, cpu last."""
    variant, _sep, torch = part.partition("-torch")
    cuda = Variant.parse(variant).cuda
    return (tuple(-x for x in parse_version(torch)), cuda is None, tuple(-x for x in cuda or ()))


def newest_live(files: Iterable[IndexFile]) -> IndexFile | None:
    live = [f for f in files if f.yanked is None]
    return max(live, key=release_order, default=None)


def release_order(item: IndexFile) -> tuple[Version, str]:
    """Files in version order (then by name): how every page lists them."""
    return (item.published.version, item.filename)


def published_cell_ids(filenames: Iterable[str]) -> frozenset[str]:
    """The cells whose dswheels wheel is among ``filenames`` (a Linux wheel's name carries its floor, which the
    plan cannot know: a cell is published whatever its wheel's manylinux tag)."""
    return frozenset(cell_id(wheel.cell) for f in filenames if (wheel := try_parse_wheel(f)) is not None)


GITHUB_ASSET_LIMIT = 1000  # assets per release


GITHUB_ASSET_MAX_BYTES = 2 * 1024**3 - 1  # "each file ... must be under 2 GiB"
