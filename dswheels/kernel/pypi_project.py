"""PyPI's JSON API (``/pypi/<project>/json``), typed: the one reader of the document for every caller.

The build fetches DeepSpeed's sdist by it (:meth:`PypiProject.sdist`), the op-flag recorder too, and
``dswheels facts check`` reads DeepSpeed's, torch's and cuda-toolkit's releases from it
(:mod:`dswheels.facts.pypi_json`). ``--pypi`` and ``DSWHEELS_FACTS_PYPI`` may name any server (a
mirror serves relative file URLs), so every value is judged here, once, by the rules its users
apply; a value of the wrong type, absent, or holding text PyPI never sends is a
:class:`~dswheels.kernel.remote_json.RemoteDocumentError` naming its path
(``releases.0.19.8[0].digests.sha256``), which the callers raise as ``SourceError`` (exit 4).

What is read of each file: ``filename`` (one plain name, the last segment of its URL), ``url``
(resolved against the JSON's own URL: http(s) when the JSON was, printable ASCII), ``digests.sha256``,
``size`` (bytes, at most :data:`MAX_FILE_BYTES`), ``packagetype``, ``yanked`` (absent: false),
``requires_python`` (a specifier set; anything else reads as none, the index pages' rule) and
the day of ``upload_time_iso_8601`` (else ``upload_time``; neither: none). Of ``info`` (absent:
none): ``version`` and ``requires_dist``. Release keys are printable ASCII; which of them are
versions is each user's call. PyPI sends every one of these; the ones a mirror might leave out
and no user needs are optional, the rest required.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urljoin, urlsplit

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from dswheels.kernel.remote_json import RemoteJson, shown

__all__ = ["MAX_FILE_BYTES", "PypiFile", "PypiProject", "read_pypi_project"]

MAX_FILE_BYTES = 8 * 1024**3  # a download may be 8 GiB (torch's CUDA wheels are 1-3 GB)
MAX_RELEASES = 100_000  # torch has ~100 releases, deepspeed ~200
MAX_FILES = 10_000  # files of one release (torch's: ~60)
MAX_REQUIREMENTS = 10_000
_MAX_NAME = 255
_MAX_URL = 2048


@dataclass(frozen=True, kw_only=True, slots=True)
class PypiFile:
    filename: str
    url: str  # absolute
    sha256: str
    size: int
    packagetype: str  # "sdist", "bdist_wheel", ...
    yanked: bool
    requires_python: str  # "" when none (or not a specifier set)
    uploaded: str  # YYYY-MM-DD; "" when the JSON gives no upload time


@dataclass(frozen=True, kw_only=True, slots=True)
class PypiProject:
    url: str  # where the JSON was read
    releases: Mapping[str, tuple[PypiFile, ...]]  # release key -> its files, yanked ones included
    version: str  # info.version: the newest release ("" when the JSON has no info)
    requires_dist: tuple[str, ...]  # info.requires_dist: the newest release's requirements

    def sdist(self, version: str) -> PypiFile:
        """The unyanked sdist of ``version``; ``LookupError`` when PyPI lists none."""
        files = self.releases.get(version)
        if files is None:
            known = sorted(self.releases)[-5:]
            msg = f"PyPI has no release {version} (newest: {', '.join(known)})"
            raise LookupError(msg)
        for file in files:
            if file.packagetype == "sdist" and not file.yanked:
                return file
        msg = f"PyPI has no (unyanked) sdist for {version}"
        raise LookupError(msg)


def _url(node: RemoteJson, filename: str, json_url: str) -> str:
    """The file's URL resolved against the JSON's; it must name the file, over http(s) when the JSON was."""
    url = urljoin(json_url, node.ascii_text(limit=_MAX_URL, what="a URL"))
    parts = urlsplit(url)
    if urlsplit(json_url).scheme in ("http", "https") and parts.scheme not in ("http", "https"):
        raise node.fail("an http(s) URL (the JSON was read over http(s))")
    if " " in url or parts.query or parts.fragment or unquote(parts.path.rsplit("/", 1)[-1]) != filename:
        raise node.fail(f"a URL whose last segment is the file's name ({shown(filename)}), without query or fragment")
    return url


def _filename(node: RemoteJson) -> str:
    name = node.ascii_text(limit=_MAX_NAME, what="a file name")
    if "/" in name or "\\" in name or name in (".", "..") or " " in name:
        raise node.fail("a file name (no '/', '\\' or space, not '.' or '..')")
    return name


_VERSION = re.compile(r"[A-Za-z0-9.+!_-]{1,64}")  # the characters of a PEP 440 version, as PyPI writes them


def _version(node: RemoteJson) -> str:
    if not isinstance(node.data, str) or not _VERSION.fullmatch(node.data):
        raise node.fail("a version (PEP 440 characters: A-Z, a-z, 0-9, . + ! _ -)")
    return node.data


def _requires_python(node: RemoteJson | None) -> str:
    if node is None:
        return ""
    text = node.any_text(limit=_MAX_URL)
    try:
        SpecifierSet(text)
    except InvalidSpecifier:
        return ""  # the index pages' rule: a data-requires-python that is not a specifier set is ignored
    return text if text.isprintable() else ""


def _file(node: RemoteJson, json_url: str) -> PypiFile:
    filename = _filename(node.need("filename"))
    time = node.maybe("upload_time_iso_8601") or node.maybe("upload_time")
    yanked = node.maybe("yanked")
    return PypiFile(
        filename=filename,
        url=_url(node.need("url"), filename, json_url),
        sha256=node.need("digests").need("sha256").sha256_hex(),
        size=node.need("size").count(high=MAX_FILE_BYTES),
        packagetype=node.need("packagetype").word(what="a package type"),
        yanked=yanked.flag() if yanked is not None else False,
        requires_python=_requires_python(node.maybe("requires_python")),
        uploaded=time.day() if time is not None else "",
    )


def read_pypi_project(data: object, *, json_url: str) -> PypiProject:
    """The project ``data`` (parsed JSON read at ``json_url``) describes.

    ``RemoteDocumentError`` (a ``ValueError``) for any value that is not what PyPI sends.
    """
    root = RemoteJson(data, document=f"PyPI JSON ({json_url})")
    releases: dict[str, tuple[PypiFile, ...]] = {}
    for key, files in root.need("releases").items_limited(MAX_RELEASES):
        _version(RemoteJson(key, f"{files.path} (a key)", document=root.document))
        releases[key] = tuple(_file(f, json_url) for f in files.seq_limited(MAX_FILES))
    info = root.maybe("info") or RemoteJson({}, "info", document=root.document)
    requires = info.maybe("requires_dist")
    version = info.maybe("version")
    return PypiProject(
        url=json_url,
        releases=releases,
        version=_version(version) if version is not None else "",
        requires_dist=tuple(r.printable(what="a requirement") for r in requires.seq_limited(MAX_REQUIREMENTS))
        if requires is not None
        else (),
    )
