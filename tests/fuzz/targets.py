"""One target per parser of outside data: bytes in, the documented outcome out (or an AssertionError).

Each target states the contract the hypothesis tests check (tests/unit/test_hostile_*.py):
any input is parsed or refused with the parser's own error, quickly, and an archive never
writes outside its folder. The binary target starts from real ELF/PE files and from built ones
whose records overlap (tests/support/binaries.py): mutations of a crafted structure reach what
mutations of random bytes do not. atheris drives them by coverage (``python -m tests.fuzz``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from dswheels.cuda.effects.merged_root import check_links_on_disk, judge_merged
from dswheels.cuda.redist import parse_redist
from dswheels.host.tar_bounds import MAX_HEADER_BYTES
from dswheels.host.unpack import extract_archive
from dswheels.index.yank import parse_yanked
from dswheels.kernel.binaries.extension import BinaryError, read_extension
from dswheels.kernel.compat import load_compat
from dswheels.kernel.entry_points import EntryPointsError, read_entry_points
from dswheels.kernel.errors import ConfigError, SourceError
from dswheels.kernel.github_api import (
    GitHubPlace,
    error_summary,
    read_artifacts,
    read_asset,
    read_blob_sha,
    read_comment,
    read_issue,
    read_issues,
    read_pull,
    read_release,
    read_runs,
)
from dswheels.kernel.index_files import link_problem, parse_project_page
from dswheels.kernel.jsondoc import parse_json
from dswheels.kernel.manifest import ManifestError, parse_manifest
from dswheels.kernel.naming import parse_wheel
from dswheels.kernel.pypi_project import MAX_FILE_BYTES, read_pypi_project
from dswheels.kernel.remote_json import RemoteJson, shown
from dswheels.kernel.sources import torch_index_problem
from dswheels.plan.matrix.parse import parse_matrix

__all__ = ["SEEDS", "TARGETS"]

T = TypeVar("T")
COMPAT = load_compat()
PAGE = "https://idx.example/simple/deepspeed/"


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def matrix(data: bytes) -> None:
    with contextlib.suppress(ConfigError):
        parse_matrix(_text(data), "m.yml", COMPAT).axis_cells()


def index_page(data: bytes) -> None:
    try:
        files = parse_project_page(_text(data), PAGE)
    except ValueError:
        return
    for item in files:
        if not item.problem:
            assert link_problem(item.url, PAGE) == ""
            assert "/" not in item.filename
            assert "\\" not in item.filename


def manifest(data: bytes) -> None:
    with contextlib.suppress(ManifestError):
        parse_manifest(_text(data))


def names(data: bytes) -> None:
    text = _text(data)
    torch_index_problem(text)
    with contextlib.suppress(ValueError):
        parse_yanked(text)
    try:
        wheel = parse_wheel(text)
    except ValueError:
        return
    assert set(wheel.filename) <= set("abcdefghijklmnopqrstuvwxyz0123456789._-+")


def archive(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "src.tar").write_bytes(data)
        dest = root / "work" / "src"
        try:
            extract_archive(root / "src.tar", dest)
        except SourceError:
            assert not dest.exists()
        outside = {p.name for p in root.iterdir()}
        assert outside <= {"src.tar", "work"}, outside
        real = os.path.realpath(dest)
        for path in dest.rglob("*") if dest.exists() else ():
            assert os.path.realpath(path).startswith(real + os.sep)


def seed_archives(folder: Path) -> None:
    """A DeepSpeed-shaped tar and zip (folders, files, a directory link), for the fuzzer to mutate."""
    import io
    import tarfile
    import zipfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, kind, link in [
            ("top/op_builder", "dir", ""),
            ("top/deepspeed/ops/op_builder", "sym", "../../op_builder"),
        ]:
            info = tarfile.TarInfo(name)
            info.type, info.linkname = (tarfile.DIRTYPE if kind == "dir" else tarfile.SYMTYPE), link
            tar.addfile(info)
        data = b"print('builder')\n"
        info = tarfile.TarInfo("top/op_builder/builder.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    (folder / "seed.tar").write_bytes(buffer.getvalue())
    with zipfile.ZipFile(folder / "seed.zip", "w") as zf:
        zf.writestr("top/setup.py", b"setup()\n")
        zf.writestr("top/op_builder/", b"")


def binary(data: bytes) -> None:
    """An extension's bytes: read (ELF version needs, PE imports, fatbin) or refused with BinaryError."""
    with contextlib.suppress(BinaryError):
        read_extension("x.so", data)


def seed_binaries(folder: Path) -> None:
    """Real ELF and PE files (tests/data) and built ones whose links are hostile, to mutate."""
    from tests.conftest import DATA
    from tests.support import binaries

    for real in (DATA / "elf" / "libfixture.so", DATA / "elf" / "libverdef.so", DATA / "pe" / "fixture.pyd"):
        (folder / real.name).write_bytes(real.read_bytes())
    (folder / "overlapping-verneed.so").write_bytes(binaries.quadratic_verneed(2048))
    entries = [(2, 80, 0x50, 16), (1, 90, 0x50, 8), (2, 90, 1, 0)]
    fat = binaries.fatbin([(16, -1, entries)])
    (folder / "fatbin.so").write_bytes(binaries.elf([binaries.ElfSection(b".nv_fatbin", 1, fat)]))
    (folder / "fatbin.pyd").write_bytes(
        binaries.pe(sections=[(0x1000, 0x200, bytes(0x200)), (0x2000, len(fat), fat)], names=[".text", ".nv_fatb"])
    )


class _Recipe:
    """The fuzzer's bytes read as choices: structure-aware targets build their input from a grammar, so a
    mutation changes a header's kind or a link's target, not a byte the parser rejects at once."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def pick(self, choices: Sequence[T]) -> T:
        byte = self.data[self.at] if self.at < len(self.data) else 0
        self.at += 1
        return choices[byte % len(choices)]

    def more(self) -> bool:
        return self.at < len(self.data)


def entry_points(data: bytes) -> None:
    """An entry_points.txt: refused, or read the same by the strict grammar, importlib.metadata (pip's
    reader) and distlib's search (all inside read_entry_points), with names in the grammar."""
    try:
        points = read_entry_points(_text(data))
    except EntryPointsError:
        return
    assert all(p.name and p.name.isascii() and "=" not in p.name and " " not in p.name for p in points)


_TAR_TYPES = [b"L", b"K", b"x", b"g", b"X", b"S", b"0", b"5", b"2", b"Z"]
_TAR_SIZES = [0, 1, 100, MAX_HEADER_BYTES, MAX_HEADER_BYTES + 1, 1 << 30, 8**11 - 1]


def tar_headers(data: bytes) -> None:
    """A tar built header by header from the fuzzer's choices (kind, stated size, data whole, short or
    absent, PAX records), plain or compressed: unpacked inside its folder or refused, and tarfile never
    takes more memory than the bound allows, whatever a header states."""
    import gzip
    import io
    import tarfile
    import tracemalloc

    recipe = _Recipe(data)
    raw = io.BytesIO()
    while recipe.more() and raw.tell() < 1 << 20:
        info = tarfile.TarInfo(recipe.pick(["top/a", "top/b/c", "././@LongLink", "top/" + "n" * 90]))
        info.type, info.size = recipe.pick(_TAR_TYPES), recipe.pick(_TAR_SIZES)
        info.linkname = "a" if info.type == tarfile.SYMTYPE else ""
        body = recipe.pick([b"", b"a" * min(info.size, 700), b"9 path=top/p\n", b"a" * min(info.size, 70000)])
        if body.startswith(b"9 "):
            info.size = len(body)
        raw.write(info.tobuf(tarfile.USTAR_FORMAT, "utf-8", "surrogateescape") + body + b"\0" * (-len(body) % 512))
    packed = raw.getvalue() + recipe.pick([b"\0" * 1024, b"", b"junk"])
    if recipe.pick([False, True]):
        packed = gzip.compress(packed, 1)
    tracemalloc.start()
    try:
        archive(packed)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < 64 << 20, f"{peak:,} bytes taken"


_ROOT_NAMES = ["a", "b", "lib", "lib64", "include", "targets", "licenses", "lib/f", "a/f", "targets/x86_64-linux"]
_ROOT_LINKS = ["", "", ".", "..", "a", "b", "lib", "a/..", "a/a/../..", "a/a/../../outside", "nowhere", "x/.."]


def cuda_root(data: bytes) -> None:
    """Two or three component archives built from the fuzzer's choices (folders, files, links to '.',
    through each other, up and out, to nothing), each unpacked by the real unpacker: the merged root is
    refused, or merging it as cuda install does writes nothing outside and every path resolves inside."""
    from tests.unit.test_hostile_cuda_root import _everything, _merge_as_cuda_install, _unpacked

    recipe = _Recipe(data)
    components = [
        [("include/own.h", ""), *((recipe.pick(_ROOT_NAMES), recipe.pick(_ROOT_LINKS)) for _ in range(4))]
        for _ in range(recipe.pick([2, 3]))
    ]
    components = [list(dict(c).items()) for c in components]  # one entry per name
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "outside").mkdir()
        parts = _unpacked(root, components)
        if parts is None:
            return
        before = _everything(root)
        os_name = recipe.pick(["linux", "windows"])
        try:
            judge_merged(parts, os_name, toolkit="13.0.3")
        except SourceError:
            assert _everything(root) == before
            return
        merged = root / "staging" / "root"
        with contextlib.suppress(SourceError):  # two components carrying one path differently
            _merge_as_cuda_install(parts, merged, os_name)
            check_links_on_disk(merged, toolkit="13.0.3")
        assert _everything(root) == before, "written outside the root"


def seed_tar_headers(folder: Path) -> None:
    """Choices that make the shapes of the unit tests: a long name, a PAX header, one over the bound."""
    for number, seed in enumerate([bytes([2, 0, 0, 0]), bytes([2, 2, 3, 1, 6, 0, 1, 0]), bytes([0, 4, 3, 3])]):
        (folder / f"seed{number}").write_bytes(seed)


# --- the remote JSON readers (issue 30.3): GitHub's answers, PyPI's JSON, NVIDIA's redistrib JSON ---------------

_PLACES = [
    GitHubPlace("https://api.github.com", "octo/dswheels"),
    GitHubPlace("http://127.0.0.1:8080", "octo/dswheels"),
]


def _remote(data: bytes) -> object:
    """The bytes as a server's answer: its JSON (parse_json's ValueError is the documented refusal)."""
    return parse_json(data, what="answer")


def _judged(read: Callable[[], T]) -> T | None:
    """What a reader returns, or None when it refused with its ValueError, whose message can be shown."""
    try:
        return read()
    except ValueError as exc:
        message = str(exc)
        assert message.isprintable(), message[:200]
        assert len(message) < 2000, message[:200]
        return None


def github_answer(data: bytes) -> None:
    """Any answer, read by each reader of GitHub's answers: refused, or values of the shapes GitHub makes."""
    with contextlib.suppress(ValueError):
        value = _remote(data)
        for place in _PLACES:
            asset = _judged(functools.partial(read_asset, RemoteJson(value, "x", document="answer"), place))
            if asset is not None:
                assert place.download_url_problem(asset.download_url, asset.name) == ""
                assert asset.sha256 is None or len(asset.sha256) == 64
                assert "/" not in asset.name
                assert asset.name.isprintable()
            release = _judged(functools.partial(read_release, RemoteJson(value, "x", document="answer"), place))
            if release is not None:
                assert place.upload_url_problem(release.upload_url, release.id) == ""
            pull = _judged(functools.partial(read_pull, RemoteJson(value, "x", document="answer"), place))
            if pull is not None:
                assert place.pull_url_problem(pull.url, pull.number) == ""
        for read in (read_issue, read_issues, read_runs, read_comment, read_artifacts, read_blob_sha):
            _judged(functools.partial(read, RemoteJson(value, "x", document="answer")))


def pypi_json(data: bytes) -> None:
    """Any PyPI project JSON: refused, or files with http(s) URLs naming them, sha256s and bounded sizes."""
    project = _judged(lambda: read_pypi_project(_remote(data), json_url="https://pypi.org/pypi/deepspeed/json"))
    if project is None:
        return
    for files in project.releases.values():
        for file in files:
            assert file.url.startswith(("http://", "https://")), file.url
            assert file.url.rsplit("/", 1)[-1].endswith(file.filename) or "%" in file.url
            assert len(file.sha256) == 64
            assert 0 <= file.size <= MAX_FILE_BYTES
            assert file.filename.isascii()
            assert file.filename.isprintable()


def redist_json(data: bytes) -> None:
    """Any redistrib JSON: refused, or each entry an archive below its component's folder or its reason."""
    release = _judged(lambda: parse_redist(_remote(data)))
    if release is None:
        return
    for component, platforms in release.entries.items():
        for platform in platforms:
            archive_entry = _judged(functools.partial(release.archive, component, platform))
            if archive_entry is None:
                continue
            assert archive_entry.relative_path.startswith(component + "/")
            assert ".." not in archive_entry.relative_path.split("/")
            assert archive_entry.size > 0


def remote_error(data: bytes) -> None:
    """What an error shows of a remote value (shown) and of an error answer (error_summary): plain, short."""
    try:
        value: object = _remote(data)
    except ValueError:
        value = _text(data)
    text = shown(value)
    assert text.isprintable(), text[:200]
    assert len(text) < 200, text[:200]
    summary = error_summary(value)
    assert summary.isprintable(), summary[:200]
    assert len(summary) <= 300


def seed_remote(folder: Path) -> None:
    """The documents as their servers send them (tests/unit/test_hostile_remote.py's), to mutate."""
    import json

    from tests.unit import test_hostile_remote as recorded

    for name, doc in [
        ("asset", recorded.ASSET),
        ("release", recorded.RELEASE),
        ("issue", recorded.ISSUE),
        ("runs", recorded.RUNS),
        ("comment", recorded.COMMENT),
        ("artifacts", recorded.ARTIFACTS),
        ("pull", recorded.PULL),
        ("pypi", recorded.SMALL_PYPI),
        ("redist", {k: recorded.REDIST[k] for k in ("release_label", "cuda_nvcc", "cuda_cudart")}),
    ]:
        (folder / f"{name}.json").write_text(json.dumps(doc), encoding="utf-8")


SEEDS: dict[str, Callable[[Path], None]] = {
    "archive": seed_archives,
    "binary": seed_binaries,
    "tar_headers": seed_tar_headers,
    "github_answer": seed_remote,
    "pypi_json": seed_remote,
    "redist_json": seed_remote,
    "remote_error": seed_remote,
}

TARGETS: dict[str, Callable[[bytes], None]] = {
    "matrix": matrix,
    "index_page": index_page,
    "manifest": manifest,
    "names": names,
    "archive": archive,
    "binary": binary,
    "entry_points": entry_points,
    "tar_headers": tar_headers,
    "cuda_root": cuda_root,
    "github_answer": github_answer,
    "pypi_json": pypi_json,
    "redist_json": redist_json,
    "remote_error": remote_error,
}
