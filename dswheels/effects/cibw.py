"""``dswheels cibw --finish``: a build manifest for every wheel cibuildwheel built.

cibuildwheel runs the compiler, so ``dswheels build`` never sees those wheels; publish and
the index expect a manifest beside each. This writes it, on the builder right after
cibuildwheel, from three things: the plan of the cell, the job's record (``job.json`` that
``dswheels cibw`` wrote with the configuration: environment, verified source) and the wheel
itself (``git_version_info_installed.py``, the op builders' module names, extension files
and sizes, sha256, on Linux the glibc/libstdc++ floor). What was observed on the builder
(nvcc, the active MSVC toolset, cibuildwheel's version) goes into ``toolchain``; compile
times were not observed and stay ``null``.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from dswheels import __version__
from dswheels.core.cibw import CibwError, JobRecord, finished_manifest, parse_job_record
from dswheels.core.compat import Compat
from dswheels.core.linux_runtime import RuntimeFloor, exceeds, floor_of, version_needs
from dswheels.core.manifest import FileInfo, Manifest, manifest_name, render_manifest
from dswheels.core.model import PlannedCell
from dswheels.core.naming import cell_id, wheel_filename
from dswheels.core.wheelfile import (
    EXTENSION_SUFFIXES,
    INSTALLED_INFO,
    OP_BUILDER_DIR,
    builder_modules,
    parse_installed_info,
)
from dswheels.effects.clock import utc_now
from dswheels.effects.files import write_text_atomic
from dswheels.effects.postprocess import sha256_file
from dswheels.effects.toolchain import find_cuda, tool_version
from dswheels.effects.wheelzip import open_wheel
from dswheels.errors import BuildError, ConfigError, EnvironmentMismatchError
from dswheels.log import get_reporter

__all__ = ["JOB_FILE", "finish_wheelhouse", "read_job", "wheel_manifest"]

JOB_FILE = "job.json"


def read_job(job_dir: Path, cells: Sequence[PlannedCell]) -> JobRecord:
    """The record ``dswheels cibw`` left in ``job_dir``; it must cover every cell to finish."""
    path = job_dir / JOB_FILE
    try:
        job = parse_job_record(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            f"no {JOB_FILE} in {job_dir}: --finish reads the record of the job `dswheels cibw` configured",
            hint="pass the same --out as the configuring `dswheels cibw` run",
        ) from None
    except CibwError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    missing = [cell_id(c.cell) for c in cells if cell_id(c.cell) not in job.cells]
    if missing:
        raise ConfigError(
            f"{path} records the job of {', '.join(job.cells)}, not {', '.join(missing)}",
            hint="finish with the --cell list the job was configured with",
        )
    return job


def _builder_file(name: str) -> bool:
    rel = name.removeprefix(OP_BUILDER_DIR)
    return (
        name.startswith(OP_BUILDER_DIR)
        and name.endswith(".py")
        and ("/" not in rel or (rel.count("/") == 1 and rel.startswith("cpu/")))
    )


def _observed_toolchain(planned: PlannedCell, env: Mapping[str, str]) -> dict[str, str]:
    """What the builder has now, right after cibuildwheel ran there: nvcc, MSVC, cibuildwheel."""
    found = {"torch": planned.torch_version}
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        found["cibuildwheel"] = importlib.metadata.version("cibuildwheel")
    nvcc = planned.toolchain.nvcc
    if nvcc is not None:
        try:
            cuda = find_cuda(nvcc, env)
        except EnvironmentMismatchError as exc:
            get_reporter().warning(f"nvcc is not recorded in the manifests: {exc.message}")
        else:
            found["nvcc"] = cuda.version_line
            found["cuda_home"] = str(cuda.home)
    if planned.cell.platform.os == "windows":
        if toolset := env.get("VCToolsVersion", ""):
            found["msvc"] = toolset
    elif sys.platform != "win32" and (cxx := tool_version(["c++", "--version"], env)):
        found["cxx"] = cxx
    return found


def wheel_manifest(
    planned: PlannedCell, wheel: Path, *, job: JobRecord, toolchain: Mapping[str, str]
) -> tuple[Manifest, Mapping[str, Mapping[str, tuple[str, ...]]]]:
    """The manifest of one built wheel, and the version needs of its ELF extensions (Linux)."""
    with open_wheel(wheel, BuildError) as zf:
        names = tuple(zf.namelist())
        installed = parse_installed_info(zf.read(INSTALLED_INFO).decode("utf-8"))
        # the builders of the CUDA accelerator (op_builder/*.py) and the CPU one (op_builder/cpu/*.py)
        builders = {n: zf.read(n).decode("utf-8", "replace") for n in names if _builder_file(n)}
        sizes: dict[str, int] = {}
        needs: dict[str, Mapping[str, tuple[str, ...]]] = {}
        for name in names:
            if not name.endswith(EXTENSION_SUFFIXES):
                continue
            data = zf.read(name)
            sizes[name] = len(data)
            if (found := version_needs(data)) is not None:
                needs[name] = found
    runtime: RuntimeFloor | None = floor_of(needs.values()) if planned.cell.platform.os == "linux" else None
    try:
        manifest = finished_manifest(
            planned,
            wheel=FileInfo(wheel.name, wheel.stat().st_size, sha256_file(wheel)),
            names=names,
            installed=installed,
            modules=builder_modules(builders),
            sizes=sizes,
            toolchain=toolchain,
            job=job,
            runtime=runtime,
            created=utc_now().strftime("%Y-%m-%dT%H:%M:%SZ"),
            dswheels=__version__,
        )
    except CibwError as exc:
        raise BuildError(
            str(exc), hint="the wheel is not what the plan asked for: do not publish it (no manifest written)"
        ) from None
    return manifest, needs


def finish_wheelhouse(
    cells: Sequence[PlannedCell],
    *,
    wheelhouse: Path,
    job_dir: Path,
    compat: Compat,
    env: Mapping[str, str] | None = None,
) -> list[Path]:
    """Write ``<wheel>.manifest.json`` beside the wheel of every cell; returns the manifests written.

    Every cell must have its wheel (cibuildwheel builds all or fails); a wheel there that is no
    cell of the job is left alone, with a warning.
    """
    reporter = get_reporter()
    environ = dict(os.environ if env is None else env)
    job = read_job(job_dir, cells)
    expected = {wheel_filename(c.cell): c for c in cells}
    present = {p.name for p in wheelhouse.glob("*.whl")} if wheelhouse.is_dir() else set()
    missing = sorted(set(expected) - present)
    if missing:
        raise BuildError(
            f"no wheel in {wheelhouse} for {len(missing)} cell(s): "
            + ", ".join(cell_id(expected[m].cell) for m in missing),
            details="expected " + ", ".join(missing) + "\nfound " + (", ".join(sorted(present)) or "no wheel"),
            hint="cibuildwheel writes to its --output-dir: pass that directory to --finish",
        )
    for stray in sorted(present - set(expected)):
        reporter.warning(f"{wheelhouse / stray} is no cell of this job: left without a manifest")
    toolchain = _observed_toolchain(cells[0], environ)
    written: list[Path] = []
    with reporter.group(f"build manifests for {len(cells)} wheel(s) in {wheelhouse}"):
        for name, planned in expected.items():
            wheel = wheelhouse / name
            manifest, needs = wheel_manifest(planned, wheel, job=job, toolchain=toolchain)
            promised = planned.toolchain.linux_runtime
            if manifest.runtime is not None:
                reporter.info(f"{name}: Linux runtime floor: {manifest.runtime.describe(compat.libstdcxx)}")
                if promised is not None and (above := exceeds(manifest.runtime, promised)):
                    reporter.warning(f"{name} needs more than promised: {'; '.join(above)} (dswheels verify fails it)")
            path = wheel.with_name(manifest_name(name))
            write_text_atomic(path, render_manifest(manifest))
            ops = ", ".join(op.name for op in manifest.ops_built)
            reporter.info(f"wrote {path.name} ({len(manifest.ops_built)} op(s): {ops}; {len(needs)} ELF extension(s))")
            written.append(path)
    return written
