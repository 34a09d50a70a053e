"""PyTorch's per-variant indexes: ``download.pytorch.org/whl/<variant>/torch/`` (PEP 503 pages), read.

Each page lists every torch wheel built for that variant (``torch-2.14.1+cu130-cp312-cp312-
win_amd64.whl``). What exists for a (torch minor, variant, OS) is what dswheels can build
against; compat.yml's ``torch.<M.m>.variants`` and ``python`` are that, written down.
"""

from __future__ import annotations

from collections.abc import Mapping

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from dswheels.facts.pypi_json import wheel_platform
from dswheels.facts.seen import TorchIndexSeen
from dswheels.kernel.index_files import parse_project_page
from dswheels.kernel.model import Python
from dswheels.kernel.versions import VersionTuple, format_version, parse_version

__all__ = ["read_variant_page", "torch_index_seen"]

Table = dict[tuple[VersionTuple, str], tuple[Python, ...]]


def read_variant_page(html: str, page_url: str) -> tuple[Table, dict[VersionTuple, str]]:
    """The Pythons per (minor, os) of each minor's newest final patch on one variant's page."""
    seen: dict[VersionTuple, dict[VersionTuple, set[tuple[Python, str]]]] = {}
    for file in parse_project_page(html, page_url):
        if not file.filename.endswith(".whl") or file.is_yanked:
            continue
        try:
            _name, version, _build, _tags = parse_wheel_filename(file.filename)
        except InvalidWheelFilename:
            continue
        if version.is_prerelease or version.is_postrelease:
            continue
        try:
            release = parse_version(version.base_version)
        except ValueError:
            continue
        where = wheel_platform(file.filename)
        if where is None or len(release) != 3:
            continue
        seen.setdefault(release[:2], {}).setdefault(release, set()).add(where)
    table: Table = {}
    patches: dict[VersionTuple, str] = {}
    for minor, releases in seen.items():
        newest = max(releases)
        patches[minor] = format_version(newest)
        for os in ("linux", "windows"):
            pythons = sorted(py for py, where in releases[newest] if where == os)
            if pythons:
                table[(minor, os)] = tuple(pythons)
    return table, patches


def torch_index_seen(base: str, pages: Mapping[str, tuple[str, str] | None]) -> TorchIndexSeen:
    """``pages``: variant -> (html, url), or None where the index answered 404 (no such variant)."""
    wheels: dict[str, Table] = {}
    patches: dict[str, dict[VersionTuple, str]] = {}
    absent: list[str] = []
    for variant, page in sorted(pages.items()):
        if page is None:
            absent.append(variant)
            continue
        wheels[variant], patches[variant] = read_variant_page(*page)
    return TorchIndexSeen(base=base, wheels=wheels, patches=patches, absent=tuple(absent))
