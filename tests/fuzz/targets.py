"""One target per parser of outside data: bytes in, the documented outcome out (or an AssertionError).

Each target states the contract the hypothesis tests check (tests/unit/test_hostile_*.py):
any input is parsed or refused with the parser's own error, quickly, and an archive never
writes outside its folder. The binary target starts from real ELF/PE files and from built ones
whose records overlap (tests/support/binaries.py): mutations of a crafted structure reach what
mutations of random bytes do not. atheris drives them by coverage (``python -m tests.fuzz``).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from dswheels.host.unpack import extract_archive
from dswheels.index.yank import parse_yanked
from dswheels.kernel.binaries.extension import BinaryError, read_extension
from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import ConfigError, SourceError
from dswheels.kernel.index_files import link_problem, parse_project_page
from dswheels.kernel.manifest import ManifestError, parse_manifest
from dswheels.kernel.naming import parse_wheel
from dswheels.kernel.sources import torch_index_problem
from dswheels.plan.matrix.parse import parse_matrix

__all__ = ["SEEDS", "TARGETS"]

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


SEEDS: dict[str, Callable[[Path], None]] = {"archive": seed_archives, "binary": seed_binaries}

TARGETS: dict[str, Callable[[bytes], None]] = {
    "matrix": matrix,
    "index_page": index_page,
    "manifest": manifest,
    "names": names,
    "archive": archive,
    "binary": binary,
}
