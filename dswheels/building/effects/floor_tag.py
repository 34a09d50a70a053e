"""A Linux wheel tagged with the floor it really has: auditwheel's verdict, in its name and its WHEEL file.

``python -m build`` names a Linux wheel ``linux_x86_64`` or ``linux_aarch64`` (no floor: pip installs it
anywhere). After post-processing, ``auditwheel show`` judges the staged wheel with torch's libraries left out
(:mod:`dswheels.host.auditwheel`), and the wheel is retagged: the filename's platform tag and the
``Tag:`` lines of ``.dist-info/WHEEL``, with RECORD rewritten. ``auditwheel repair`` is not run: it
would graft the libraries torch provides into the wheel (and patch the extensions' RPATH).
"""

from __future__ import annotations

import zipfile
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from dswheels.building.effects.postprocess import Postprocessed
from dswheels.host.auditwheel import auditwheel_available, judge_floor
from dswheels.host.log import get_reporter
from dswheels.host.wheelhouse import debug_archive_name
from dswheels.kernel.compat import Compat
from dswheels.kernel.errors import BuildError
from dswheels.kernel.manylinux import FloorVerdict, retag_wheel_file
from dswheels.kernel.model import PlannedCell
from dswheels.kernel.naming import cell_id, wheel_filename
from dswheels.kernel.wheel_contents import dist_info_dir, render_record

__all__ = ["as_built_here", "retag_wheel", "tag_with_floor"]

# pypa's manylinux images say which policy they build for (their Dockerfile's ENV AUDITWHEEL_PLAT): the image's own
# name (quay.io/pypa/manylinux_2_28_aarch64 sets manylinux_2_28_aarch64)
_IMAGE_PLATFORM = "AUDITWHEEL_PLAT"


def _image_platform(container: str) -> str:
    """The policy a pypa image builds for, from its reference: its repository's last part.

    >>> _image_platform("quay.io/pypa/manylinux_2_28_aarch64@sha256:5614")
    'manylinux_2_28_aarch64'
    """
    return container.split("@", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0]


def as_built_here(planned: PlannedCell, environ: Mapping[str, str]) -> PlannedCell:
    """The cell as it builds on this machine: a cell the plan builds in a manylinux container, built elsewhere (a
    developer's ``--cell``), cannot keep the container's floor, so it promises nothing beyond its own tag."""
    tc = planned.toolchain
    if not tc.container or environ.get(_IMAGE_PLATFORM, "") == _image_platform(tc.container):
        return planned
    note = (
        f"built outside the plan's {tc.runner_image} container ({_IMAGE_PLATFORM} is not set here): the wheel is "
        "tagged with the floor it gets on this machine, and promises no more (linux_runtime dropped)"
    )
    get_reporter().warning(f"{cell_id(planned.cell)}: {note}")
    return replace(planned, toolchain=replace(tc, linux_runtime=None, notes=(*tc.notes, note)))


def tag_with_floor(
    planned: PlannedCell, pp: Postprocessed, compat: Compat, *, log: Path | None
) -> tuple[Postprocessed, FloorVerdict | None]:
    """The post-processed Linux wheel under the tag auditwheel gives it (None: not judged here)."""
    reporter = get_reporter()
    if not auditwheel_available():
        reporter.warning(
            f"{cell_id(planned.cell)}: auditwheel is not installed here: the wheel keeps the tag "
            f"{planned.cell.platform} (no floor; pip installs it anywhere). Install dswheels with its dependencies "
            "on Linux"
        )
        return pp, None
    verdict = judge_floor(pp.wheel, compat.torch_provided_libraries, error=BuildError, log_file=log)
    reporter.info(f"floor: {verdict.describe()}")
    if verdict.glibc is None:
        reporter.warning(f"{cell_id(planned.cell)} keeps the tag {planned.cell.platform}: {verdict.describe()}")
        return pp, verdict
    wheel = retag_wheel(pp.wheel, wheel_filename(planned.cell, verdict.tag))
    debug = pp.debug_archive
    if debug is not None:  # its name follows the wheel's (--debug-symbols)
        debug = debug.replace(debug.with_name(debug_archive_name(wheel.name)))
    return replace(pp, wheel=wheel, debug_archive=debug), verdict


def retag_wheel(wheel: Path, new_name: str) -> Path:
    """``wheel`` rewritten beside it as ``new_name`` (another platform tag), its WHEEL file's tags and RECORD to
    match; the old file is removed."""
    old_platform = wheel.name.removesuffix(".whl").rsplit("-", 1)[-1]
    new_platform = new_name.removesuffix(".whl").rsplit("-", 1)[-1]
    target = wheel.with_name(new_name)
    partial = wheel.with_name(f".{new_name}.partial")
    with zipfile.ZipFile(wheel) as src:
        dist_info = dist_info_dir(src.namelist())
        record_path, wheel_path = f"{dist_info}/RECORD", f"{dist_info}/WHEEL"
        members = []
        for info in src.infolist():
            if info.filename == record_path:
                continue
            data = src.read(info)
            if info.filename == wheel_path:
                data = retag_wheel_file(data.decode("utf-8"), old_platform, new_platform).encode("utf-8")
            members.append((info, data))
    record = render_record(((i.filename, d) for i, d in members), record_path=record_path).encode("utf-8")
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as dst:
        for info, data in members:
            dst.writestr(_copy_info(info), data)
        record_info = zipfile.ZipInfo(record_path, date_time=members[-1][0].date_time)
        record_info.external_attr = 0o644 << 16
        dst.writestr(record_info, record, compress_type=zipfile.ZIP_DEFLATED)
    partial.replace(target)
    if target != wheel:
        wheel.unlink()
    return target


def _copy_info(info: zipfile.ZipInfo) -> zipfile.ZipInfo:
    new = zipfile.ZipInfo(info.filename, date_time=info.date_time)
    new.external_attr = info.external_attr
    new.create_system = info.create_system
    new.compress_type = zipfile.ZIP_DEFLATED
    return new
