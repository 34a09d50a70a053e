"""Small but real wheels and sdists, written with zipfile/tarfile.

Each wheel is a valid zip with a ``.dist-info`` (METADATA, WHEEL and a RECORD that lists
every file with its sha256 and size), so pip and uv install it for real. Output is
byte-for-byte reproducible (fixed timestamps, sorted members).

DeepSpeed wheels meant to be *installed* here are tagged for this interpreter on
linux_x86_64. They keep the real ``Requires-Dist: torch==M.m.*`` pin; the tests serve a
tiny fake ``torch`` (:func:`write_fake_torch`) on a loopback "PyTorch index" instead of
letting the resolver fetch the real multi-GB torch.
"""

from __future__ import annotations

import base64
import hashlib
import io
import random
import struct
import sys
import tarfile
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dswheels.kernel.manifest import FileInfo, Manifest, render_manifest
from tests.support.planned import planned_cell

__all__ = [
    "Bomb",
    "interpreter_tag",
    "write_deepspeed_wheel",
    "write_fake_sdist",
    "write_fake_torch",
    "write_manifest",
    "write_wheel",
    "write_zip",
]

_DATE = (2020, 1, 1, 0, 0, 0)


def interpreter_tag() -> str:
    """``cp311`` for the running interpreter: the tag a wheel needs to install into venvs made from it."""
    return f"cp{sys.version_info[0]}{sys.version_info[1]}"


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def write_wheel(
    directory: Path,
    *,
    name: str,
    version: str,
    tag: str,
    files: Mapping[str, bytes],
    requires_dist: Sequence[str] = (),
    requires_python: str | None = None,
    build: str = "",
    summary: str = "test wheel",
) -> Path:
    """A wheel ``{name}-{version}[-{build}]-{tag}.whl`` holding ``files`` (path -> bytes)."""
    dist = name.replace("-", "_")
    dist_info = f"{dist}-{version}.dist-info"
    metadata = [
        "Metadata-Version: 2.1",
        f"Name: {name}",
        f"Version: {version}",
        f"Summary: {summary}",
    ]
    if requires_python:
        metadata.append(f"Requires-Python: {requires_python}")
    metadata += [f"Requires-Dist: {req}" for req in requires_dist]
    pure = tag.endswith("-none-any")
    wheel_file = [
        "Wheel-Version: 1.0",
        "Generator: dswheels-tests",
        f"Root-Is-Purelib: {'true' if pure else 'false'}",
        f"Tag: {tag}",
    ]
    if build:
        wheel_file.append(f"Build: {build}")
    members = dict(sorted(files.items()))
    members[f"{dist_info}/METADATA"] = ("\n".join(metadata) + "\n").encode()
    members[f"{dist_info}/WHEEL"] = ("\n".join(wheel_file) + "\n").encode()
    record = [f"{path},{_record_hash(data)},{len(data)}" for path, data in members.items()]
    record.append(f"{dist_info}/RECORD,,")
    members[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    filename = "-".join([dist, version, *([build] if build else []), tag]) + ".whl"
    path = directory / filename
    directory.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in members.items():
            info = zipfile.ZipInfo(member, date_time=_DATE)
            info.external_attr = 0o644 << 16
            big = len(data) > 64 * 1024  # payloads stay stored (incompressible anyway), code is deflated
            info.compress_type = zipfile.ZIP_STORED if big else zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return path


def write_deepspeed_wheel(
    directory: Path,
    *,
    version: str = "0.19.8",
    variant: str = "cu128",
    torch: str = "2.9",
    python: str | None = None,
    platform: str = "linux_x86_64",
    requires_python: str | None = ">=3.9",
    pin_torch: bool = True,
    payload: int = 0,
    build: str = "",
    seed: int = 0,
) -> Path:
    """A deepspeed wheel named as dswheels names it; ``payload`` adds that many random bytes.

    The package records which build it is (``deepspeed.BUILD``) so a test can tell which
    wheel the installer picked.
    """
    python = python or interpreter_tag()
    abi = python
    interpreter = python.rstrip("t")
    label = f"{variant}torch{torch}"
    full = f"{version}+{label}"
    init = f'__version__ = "{full}"\nBUILD = "{full}-{python}-{platform}{"-" + build if build else ""}"\n'
    files = {"deepspeed/__init__.py": init.encode()}
    if payload:
        files["deepspeed/ops/_payload.bin"] = random.Random(f"{full}{python}{platform}{seed}").randbytes(payload)  # noqa: S311 - test bytes
    return write_wheel(
        directory,
        name="deepspeed",
        version=full,
        tag=f"{interpreter}-{abi}-{platform}",
        files=files,
        requires_dist=[f"torch=={torch}.*"] if pin_torch else [],
        requires_python=requires_python,
        build=build,
        summary="DeepSpeed (dswheels test wheel)",
    )


def write_fake_torch(directory: Path, version: str) -> Path:
    """A pure-Python ``torch`` that only knows its version: satisfies ``torch==M.m.*`` offline."""
    return write_wheel(
        directory,
        name="torch",
        version=version,
        tag="py3-none-any",
        files={"torch/__init__.py": f'__version__ = "{version}"\n'.encode()},
        summary="fake torch for dswheels tests",
    )


def write_fake_sdist(directory: Path, *, name: str = "deepspeed", version: str = "0.20.0") -> Path:
    """An sdist whose build fails loudly: if an installer ever picks it, the test sees it."""
    base = f"{name}-{version}"
    members = {
        f"{base}/PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{base}/pyproject.toml": b'[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n',
        f"{base}/backend.py": b'raise SystemExit("dswheels test: this sdist must never be built")\n',
    }
    path = directory / f"{base}.tar.gz"
    directory.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for member, data in members.items():
            info = tarfile.TarInfo(member)
            info.size = len(data)
            info.mtime = 1577836800
            archive.addfile(info, io.BytesIO(data))
    path.write_bytes(buffer.getvalue())
    return path


def write_manifest(wheel: Path, sha256: str | None = None) -> Path:
    """A build manifest beside ``wheel`` that describes it (or, with ``sha256``, other bytes)."""
    digest = sha256 or hashlib.sha256(wheel.read_bytes()).hexdigest()
    manifest = Manifest(
        cell_id="ds0.19.8-torch2.9-cu128-cp311-linux_x86_64",
        plan=planned_cell("ds0.19.8-torch2.9-cu128-cp311-linux_x86_64"),
        wheel=FileInfo(filename=wheel.name, size=wheel.stat().st_size, sha256=digest),
        accelerator="cuda",
        torch_version="2.9.1+cu128",
        torch_cuda="12.8",
        python_version="3.11.7",
        toolchain={},
        cpu_baseline="x86-64-v2",
        arch_list="8.0",
        env={},
        ops_built=(),
        ops_left_out={},
        durations={},
        source={},
        source_changes=(),
        created="2026-11-23T00:00:00Z",
        dswheels="0.1.0",
    )
    path = wheel.with_name(wheel.name.removesuffix(".whl") + ".manifest.json")
    path.write_text(render_manifest(manifest), encoding="utf-8")
    return path


_CHUNK = 16 * 1024**2


@dataclass(frozen=True)
class Bomb:
    """A member that inflates to ``inflates`` zero bytes and whose zip headers state ``stated``
    (the same, or a lie). Its CRC is that of nothing: a reader that inflated it all would first
    run out of memory, then find the CRC wrong."""

    inflates: int
    stated: int | None = None  # None: the truth


def _deflated_zeros(size: int) -> bytes:
    """A raw deflate stream of ``size`` zero bytes, in milliseconds: after a full flush deflate
    starts afresh, so the compressed form of one 16 MiB chunk repeats (3 GiB: 3 MB)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    whole, rest = divmod(size, _CHUNK)
    chunk = compressor.compress(bytes(_CHUNK)) + compressor.flush(zlib.Z_FULL_FLUSH) if whole else b""
    tail = compressor.compress(bytes(rest)) + compressor.flush()
    return chunk * whole + tail


def write_zip(path: Path, members: Mapping[str, bytes | Bomb]) -> Path:
    """A zip written byte by byte (zipfile cannot state a size other than the truth): files
    deflated, bombs as :class:`Bomb` says."""
    local = bytearray()
    central = bytearray()
    for name, member in members.items():
        encoded = name.encode()
        if isinstance(member, Bomb):
            data, crc, size = _deflated_zeros(member.inflates), 0, member.stated or member.inflates
        else:
            compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
            data, crc, size = compressor.compress(member) + compressor.flush(), zlib.crc32(member), len(member)
        fields = (20, 0, 8, 0, 0x5021, crc, len(data), size, len(encoded), 0)  # 2020-01-01, deflated
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, *fields, 0, 0, 0, 0o644 << 16, len(local))
        central += encoded
        local += struct.pack("<IHHHHHIIIHH", 0x04034B50, *fields) + encoded + data
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(central), len(local), 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(local + central + end))
    return path


def cpu_deepspeed_wheel(directory: Path) -> Path:
    """A tiny DeepSpeed wheel as a CPU build for torch 2.14 leaves it (no ops): for the commands' plumbing."""
    installed = "version='0.19.8+cputorch2.14'\ninstalled_ops={}\naccelerator_name='cpu'\n"
    return write_wheel(
        directory,
        name="deepspeed",
        version="0.19.8+cputorch2.14",
        tag="cp312-cp312-linux_x86_64",
        files={"deepspeed/git_version_info_installed.py": installed.encode()},
        requires_dist=["torch==2.14.*"],
    )
