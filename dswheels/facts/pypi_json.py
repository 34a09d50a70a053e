"""PyPI's JSON API (``/pypi/<project>/json``): DeepSpeed releases and torch minors, read.

The project document (read and judged by :func:`dswheels.kernel.pypi_project.read_pypi_project`)
lists every release with its files (name, digests, size, upload time, Requires-Python) and, under
``info``, the newest release's metadata; what a torch wheel requires (the CUDA toolkit it pins)
comes from there for the newest release and from the wheel's METADATA for the others
(:func:`dswheels.kernel.wheel_contents.parse_metadata`).
"""

from __future__ import annotations

from collections.abc import Iterable

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from dswheels.facts.seen import CudaToolkitSeen, DeepSpeedRelease, TorchMinorSeen
from dswheels.kernel.model import Python
from dswheels.kernel.pypi_project import PypiFile, PypiProject
from dswheels.kernel.versions import VersionTuple, format_version, parse_version

__all__ = [
    "CudaPin",
    "cuda_toolkit_releases",
    "deepspeed_releases",
    "parse_cuda_pin",
    "torch_minors",
    "wheel_platform",
]

CudaPin = tuple[str, bool]  # ("13.2.2", True) for cuda-toolkit==13.2.2; ("12.8", False) for a runtime pin


def _final(text: str) -> VersionTuple | None:
    """A final release's version (``2.14.1``); None for pre-releases, dev and post releases."""
    try:
        return parse_version(text)
    except ValueError:
        return None


def _files(project: PypiProject) -> dict[str, list[PypiFile]]:
    return {name: [f for f in files if not f.yanked] for name, files in project.releases.items()}


def _day(files: Iterable[PypiFile]) -> str:
    return min((f.uploaded for f in files), default="")


def deepspeed_releases(project: PypiProject) -> tuple[DeepSpeedRelease, ...]:
    """Every final, unyanked release, oldest first, with its sdist."""
    found: list[DeepSpeedRelease] = []
    for name, files in _files(project).items():
        version = _final(name)
        if version is None or not files:
            continue
        sdist = next((f for f in files if f.packagetype == "sdist"), None)
        found.append(
            DeepSpeedRelease(
                version=version,
                sdist_url=sdist.url if sdist else "",
                sdist_sha256=sdist.sha256 if sdist else "",
                sdist_size=sdist.size if sdist else None,
                uploaded=_day(files),
            )
        )
    return tuple(sorted(found, key=lambda r: r.version))


def wheel_platform(filename: str) -> tuple[Python, str] | None:
    """``(Python, os)`` of a CPython x86-64 wheel for Linux or Windows; None for any other file."""
    try:
        _name, _version, _build, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return None
    for tag in tags:
        if not tag.interpreter.startswith("cp") or not tag.abi.startswith("cp"):
            continue
        if tag.platform == "win_amd64":
            os = "windows"
        elif tag.platform.endswith("x86_64") and tag.platform.startswith(("manylinux", "linux")):
            os = "linux"
        else:
            continue
        try:
            return Python.parse(tag.abi), os
        except ValueError:
            continue
    return None


def _pythons(files: Iterable[str]) -> dict[str, tuple[Python, ...]]:
    per_os: dict[str, set[Python]] = {"linux": set(), "windows": set()}
    for name in files:
        seen = wheel_platform(name)
        if seen is not None:
            per_os[seen[1]].add(seen[0])
    return {os: tuple(sorted(pys)) for os, pys in per_os.items()}


def parse_cuda_pin(requires_dist: Iterable[str]) -> CudaPin | None:
    """The CUDA a torch release's Linux wheel pins: ``cuda-toolkit==X.Y.Z``, else the runtime's minor."""
    runtime: CudaPin | None = None
    for text in requires_dist:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        pins = [s.version for s in req.specifier if s.operator == "=="]
        if not pins:
            continue
        name = req.name.lower()
        if name == "cuda-toolkit":
            return pins[0], True
        if name.startswith("nvidia-cuda-runtime") and runtime is None:
            runtime = ".".join(pins[0].split(".")[:2]), False
    return runtime


def torch_minors(project: PypiProject) -> dict[VersionTuple, TorchMinorSeen]:
    """Every torch MAJOR.MINOR with its newest final patch; the newest one's CUDA pin from ``info``."""
    by_minor: dict[VersionTuple, list[tuple[VersionTuple, list[PypiFile]]]] = {}
    for name, files in _files(project).items():
        version = _final(name)
        if version is None or len(version) != 3 or not files:
            continue
        by_minor.setdefault(version[:2], []).append((version, files))
    newest_text = project.version
    requires_dist = project.requires_dist
    result: dict[VersionTuple, TorchMinorSeen] = {}
    for minor, releases in by_minor.items():
        releases.sort(key=lambda item: item[0])
        latest, files = releases[-1]
        latest_text = format_version(latest)
        requires = {f.requires_python for f in files}
        pin = parse_cuda_pin(requires_dist) if latest_text == newest_text else None
        result[minor] = TorchMinorSeen(
            minor=minor,
            latest=latest_text,
            released=_day(releases[0][1]),
            requires_python=" | ".join(sorted(requires)),
            python=_pythons(f.filename for f in files),
            cuda_pin=pin[0] if pin else "",
            cuda_pin_exact=pin[1] if pin else False,
            pin_from="PyPI JSON info (the newest release)" if pin else "",
        )
    return result


def linux_wheel(project: PypiProject, version: str) -> tuple[str, str] | None:
    """``(filename, url)`` of a Linux x86-64 wheel of ``version``: where its METADATA can be read."""
    for file in _files(project).get(version, []):
        seen = wheel_platform(file.filename)
        if seen is not None and seen[1] == "linux":
            return file.filename, file.url
    return None


def cuda_toolkit_releases(project: PypiProject) -> CudaToolkitSeen:
    """NVIDIA's CUDA toolkit releases from PyPI's ``cuda-toolkit`` JSON: each final X.Y.Z with the day
    it was first uploaded, and the pre-releases of each X.Y.Z (``13.4.0rc1``: 13.4.0 itself was never
    released). Yanked files do not count; dev and post releases are not toolkit releases."""
    releases: dict[VersionTuple, str] = {}
    prereleases: dict[VersionTuple, list[str]] = {}
    for name, files in _files(project).items():
        try:
            version = Version(name)
        except InvalidVersion:
            continue
        base = (*version.release, 0, 0)[:3]
        if not files or len(version.release) > 3 or version.is_devrelease or version.is_postrelease or version.local:
            continue
        if version.is_prerelease:
            prereleases.setdefault(base, []).append(name)
        else:
            releases[base] = _day(files)
    return CudaToolkitSeen(
        url=project.url,
        releases=dict(sorted(releases.items())),
        prereleases={base: tuple(sorted(names, key=Version)) for base, names in sorted(prereleases.items())},
    )
