"""Install a CUDA toolkit from NVIDIA's redistributable archives: ``dswheels cuda install``.

Exactly the components of compat.yml's one list (``cuda_components``) for the toolkit's minor,
nothing else, and no installer runs:

1. ``redistrib_<release>.json``, pinned in compat.yml (``cuda.<X.Y>.redist_sha256``): dswheels'
   recorded copy when it has one, else downloaded from the redist URL; its sha256 must be the pin.
2. Each component's archive for the platform, downloaded with retries, resumed after a break,
   each attempt bounded in time, and kept only if its size and sha256 are the JSON's.
3. Every archive unpacked by the hardened unpacker (:mod:`dswheels.host.unpack`) and the
   parts merged into one root, in a staging folder beside it: a file two components both carry
   with different bytes is an error, each archive's top-level files (its ``LICENSE``) go to
   ``licenses/<component>/``, and on Linux the links nvcc.profile and DeepSpeed expect are added
   (:func:`dswheels.cuda.redist.root_links`). Archives that each pass the unpacker can still
   merge into links that leave the root (a link to ``.`` in one, a link through it in another),
   so before anything is moved the merged tree, dswheels' own links included, is judged as one
   (:func:`dswheels.kernel.archive.tree_problems`: nothing below a link, every link resolving to
   a path of the root), and once merged its links are checked again on disk.
4. The file each component ``provides`` checked in the root, a marker written
   (``.dswheels-cuda.json``), and the root swapped into place. Any failure before this leaves
   the destination as it was.

The root is cached under the cache directory by the JSON's digest and the archives taken from
it (:func:`dswheels.cuda.redist.install_key`): a second install of the same toolkit finds
it complete and downloads nothing. The archives themselves are deleted once unpacked.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin

from dswheels.cuda.effects.merged_root import LICENSES, check_links_on_disk, judge_merged
from dswheels.cuda.redist import (
    REDIST_URL,
    MissingComponentsError,
    RedistArchive,
    RedistRelease,
    archives_for,
    install_key,
    parse_redist,
    redist_json_name,
    redist_platform,
    root_links,
)
from dswheels.host.cache import CacheLayout
from dswheels.host.destinations import judge_destination
from dswheels.host.downloads import Downloader
from dswheels.host.files import exclusive, public_mode, read_bounded, replace_dir, staging_dir, write_text_atomic
from dswheels.host.http import TIMEOUTS
from dswheels.host.log import get_reporter
from dswheels.host.unpack import extract_archive
from dswheels.kernel.compat import Compat
from dswheels.kernel.compat.entries import CudaComponent, CudaToolkit
from dswheels.kernel.digests import is_sha256
from dswheels.kernel.errors import ConfigError, SourceError
from dswheels.kernel.jsondoc import parse_json
from dswheels.kernel.model import Platform
from dswheels.kernel.versions import format_version, parse_version

__all__ = ["MARKER", "CudaInstallOptions", "InstalledCuda", "install_cuda"]

MARKER = ".dswheels-cuda.json"
MARKER_SCHEMA = "dswheels.cuda-root/1"
MAX_UNPACKED_BYTES = 16 * 1024**3  # cuBLAS for Linux unpacks to a few GB: a bomb still stops here
ATTEMPT_SECONDS = 20 * 60  # one attempt at one archive (cuBLAS is ~0.85 GB); the next resumes it


@dataclass(frozen=True, kw_only=True, slots=True)
class CudaInstallOptions:
    toolkit: str  # the release, X.Y.Z
    platform: Platform  # whose archives (linux_aarch64: NVIDIA's linux-sbsa)
    cache: CacheLayout  # its downloads go there, and the root unless ``dest`` is given
    dest: Path | None = None
    redist_url: str = REDIST_URL  # NVIDIA's redist folder, or a mirror of it
    redist_sha256: str = ""  # the JSON's digest when it is not compat.yml's (another release, a mirror's copy)
    retries: int = 5
    timeout: tuple[float, float] = TIMEOUTS.for_request
    attempt_seconds: float = ATTEMPT_SECONDS


@dataclass(frozen=True, slots=True)
class InstalledCuda:
    root: Path
    release: str
    platform: str
    json_sha256: str
    json_from: str  # where the JSON came from (dswheels' recorded copy, or its URL)
    archives: tuple[RedistArchive, ...]
    components: tuple[CudaComponent, ...]
    reused: bool  # found complete in the cache: nothing downloaded


def _toolkit(compat: Compat, options: CudaInstallOptions) -> tuple[CudaToolkit, str]:
    """compat.yml's toolkit of the release's minor, and the JSON's pin."""
    try:
        redist_json_name(options.toolkit)
    except ValueError as exc:
        raise ConfigError(f"--toolkit: {exc}") from None
    minor = parse_version(options.toolkit)[:2]
    toolkit = compat.cuda.get(minor)
    if toolkit is None:
        known = ", ".join(t.install for _m, t in sorted(compat.cuda.items()))
        raise ConfigError(
            f"compat.yml has no CUDA {format_version(minor)}",
            hint=f"the toolkits it knows: {known}",
        )
    if options.redist_sha256:
        if not is_sha256(options.redist_sha256):  # judged before anything is fetched by it
            shown = options.redist_sha256[:80]
            raise ConfigError(f"--redist-sha256: {shown!r} is not a sha256 (64 lowercase ASCII hex digits)")
        return toolkit, options.redist_sha256
    if options.toolkit != toolkit.install:
        raise ConfigError(
            f"compat.yml installs CUDA {toolkit.install} for {format_version(minor)}, not {options.toolkit}",
            hint=f"install {toolkit.install}, or pin the JSON of {options.toolkit} yourself with --redist-sha256 "
            "(after checking it)",
        )
    if not toolkit.redist_sha256:
        name = redist_json_name(toolkit.install)
        raise ConfigError(
            f"CUDA {toolkit.install}: compat.yml pins no {name} (cuda.{format_version(minor)}.redist_sha256)",
            hint=f"record {name} and pin it (dswheels/cuda_redist/README.md), or pass --redist-sha256 after "
            "checking the JSON yourself",
        )
    return toolkit, toolkit.redist_sha256


def _redist_json(
    compat: Compat, options: CudaInstallOptions, pin: str, downloader: Downloader
) -> tuple[RedistRelease, str]:
    """The pinned JSON (dswheels' copy when it is the pinned one, else downloaded) and where it came from."""
    name = redist_json_name(options.toolkit)
    data = compat.redist_records(options.toolkit)
    where = f"dswheels' recorded {name}"
    if data is None or hashlib.sha256(data).hexdigest() != pin:
        url = urljoin(_folder(options.redist_url), name)
        path, _sha = downloader.fetch(url, sha256=pin)
        data, where = read_bounded(path), url
    try:
        release = parse_redist(parse_json(data, what=name))
    except ValueError as exc:
        raise SourceError(f"{where}: {exc}") from None
    if release.label != options.toolkit:
        raise SourceError(f"{where} is the JSON of CUDA {release.label}, not {options.toolkit}")
    return release, where


def _folder(url: str) -> str:
    return url if url.endswith("/") else url + "/"


def _marker(options: CudaInstallOptions, pin: str, archives: tuple[RedistArchive, ...]) -> dict[str, object]:
    return {
        "schema": MARKER_SCHEMA,
        "release": options.toolkit,
        "platform": redist_platform(options.platform),
        "redist_sha256": pin,
        "components": [
            {"redist": a.component, "version": a.version, "archive": a.filename, "sha256": a.sha256} for a in archives
        ],
    }


def _complete(root: Path, marker: dict[str, object], components: tuple[CudaComponent, ...], os: str) -> bool:
    """A root this install already made: its marker says so and every component's file is there."""
    try:
        found = parse_json(read_bounded(root / MARKER), what=MARKER)
    except (OSError, ValueError):
        return False
    return found == marker and not _missing_files(root, components, os)


def _missing_files(root: Path, components: tuple[CudaComponent, ...], os: str) -> list[str]:
    return [
        f"{c.provided_path(os)} ({c.name}: {c.redist})"
        for c in components
        if not (root / c.provided_path(os)).is_file()
    ]


def install_cuda(compat: Compat, options: CudaInstallOptions) -> InstalledCuda:
    """Install the toolkit ``options`` names (see the module docstring)."""
    reporter = get_reporter()
    if options.dest is not None:  # before anything is downloaded: a file there is the user's, never replaced
        judge_destination(options.dest, what="--dest")
    toolkit, pin = _toolkit(compat, options)
    components = compat.components_for(toolkit.minor)
    downloads = options.cache.cuda_downloads
    with Downloader(
        downloads, retries=options.retries, timeout=options.timeout, attempt_seconds=options.attempt_seconds
    ) as downloader:
        release, where = _redist_json(compat, options, pin, downloader)
        try:
            archives = archives_for(release, components, options.platform)
        except MissingComponentsError as exc:
            raise SourceError(
                str(exc),
                hint="a component of compat.yml's cuda_components that NVIDIA renamed or dropped: correct its "
                "`redist` name (`dswheels plan` checks this for every recorded JSON)",
            ) from None
        except ValueError as exc:
            raise SourceError(f"{where}: {exc}") from None
        key = install_key(pin, archives)
        root = (
            options.dest or options.cache.cuda_root(f"{options.toolkit}-{redist_platform(options.platform)}-{key[:16]}")
        ).absolute()
        marker = _marker(options, pin, archives)
        installed = InstalledCuda(
            root=root,
            release=options.toolkit,
            platform=redist_platform(options.platform),
            json_sha256=pin,
            json_from=where,
            archives=archives,
            components=components,
            reused=False,
        )
        root.parent.mkdir(parents=True, exist_ok=True)
        with exclusive(root.parent, what=f"installing CUDA {options.toolkit}", error=SourceError):
            if _complete(root, marker, components, options.platform):
                reporter.info(f"CUDA {options.toolkit} ({installed.platform}) is already at {root}")
                return dataclasses.replace(installed, reused=True)
            if root.is_dir() and any(root.iterdir()) and not (root / MARKER).is_file():
                raise ConfigError(
                    f"{root} is not empty and is no CUDA root dswheels made: it would be replaced",
                    hint="name a new or empty folder with --dest, or leave --dest out (the cache folder)",
                )
            paths = []
            for archive in archives:
                reporter.info(
                    f"{archive.component} {archive.version}: {archive.filename} "
                    f"({archive.size / 1024**2:.1f} MiB, sha256 {archive.sha256[:12]}...)"
                )
                path, _sha = downloader.fetch(
                    urljoin(_folder(options.redist_url), archive.relative_path),
                    sha256=archive.sha256,
                    size=archive.size,
                )
                paths.append(path)
            _assemble(root, tuple(zip(archives, paths, strict=True)), options, marker, components)
        for path in paths:  # the root is the cache now: the archives would only double the disk it takes
            path.unlink(missing_ok=True)
    return installed


def _assemble(
    root: Path,
    archives: tuple[tuple[RedistArchive, Path], ...],
    options: CudaInstallOptions,
    marker: dict[str, object],
    components: tuple[CudaComponent, ...],
) -> None:
    """Unpack and merge the archives into a staged root, check it, and swap it into place."""
    with staging_dir(root.parent, root.name) as staging:
        merged = staging / "root"
        merged.mkdir(mode=public_mode(directory=True))
        parts = []
        for archive, path in archives:
            part = staging / "parts" / archive.component
            extract_archive(path, part, max_bytes=MAX_UNPACKED_BYTES, what=f"NVIDIA's {archive.filename}")
            parts.append((archive.component, part))
        judge_merged(parts, options.platform, toolkit=options.toolkit)
        for component, part in parts:
            _merge(part, merged, component, root=merged)
        for link, target in root_links(options.platform):
            _link(merged, link, target)
        check_links_on_disk(merged, toolkit=options.toolkit)
        missing = _missing_files(merged, components, options.platform)
        if missing:
            raise SourceError(
                f"the CUDA {options.toolkit} root assembled from NVIDIA's archives lacks {', '.join(missing)}",
                hint="the archive no longer carries the file compat.yml's cuda_components says it `provides`: "
                "check the component's layout in this release and correct the list",
            )
        write_text_atomic(merged / MARKER, json.dumps(marker, indent=1) + "\n")
        replace_dir(root, merged)


def _merge(part: Path, into: Path, component: str, *, root: Path) -> None:
    """Move ``part``'s tree into ``into`` (a folder of ``root``); a file already there must have the same bytes."""
    with os.scandir(part) as scan:
        entries = sorted(scan, key=lambda e: e.name)
    for entry in entries:
        source = Path(entry.path)
        if into == root and entry.is_file(follow_symlinks=False):  # LICENSE: one per component
            target = root / LICENSES / component / entry.name
            target.parent.mkdir(parents=True, exist_ok=True)
            source.replace(target)
            continue
        target = into / entry.name
        if not os.path.lexists(target):
            source.rename(target)  # a whole folder at once when no other component has it
        elif entry.is_dir(follow_symlinks=False) and target.is_dir() and not target.is_symlink():
            _merge(source, target, component, root=root)
        elif not _same_file(source, target):
            raise SourceError(
                f"{component} carries {target.relative_to(root).as_posix()}, which a component unpacked before it "
                "carries with other contents",
                hint="two components of compat.yml's cuda_components overlap in this release: check the list",
            )


def _same_file(a: Path, b: Path) -> bool:
    if a.is_symlink() or b.is_symlink():
        return a.is_symlink() and b.is_symlink() and a.readlink() == b.readlink()
    if not (a.is_file() and b.is_file()) or a.stat().st_size != b.stat().st_size:
        return False
    with a.open("rb") as fa, b.open("rb") as fb:
        while chunk := fa.read(1 << 20):
            if chunk != fb.read(len(chunk)):
                return False
    return True


def _link(root: Path, link: str, target: str) -> None:
    """``root/link`` -> ``target`` unless an archive already made it (a copy where links are not allowed)."""
    path = root / link
    if os.path.lexists(path):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.symlink_to(target, target_is_directory=True)
    except OSError:  # no symlink rights: a copy of the folder it names
        shutil.copytree(path.parent / target, path, symlinks=True)
