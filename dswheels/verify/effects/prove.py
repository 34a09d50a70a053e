"""``dswheels verify``: prove a wheel is what its name and manifest say, statically and at run time.

Static: name, label, torch pin, accelerator, torch_info, installed_ops = the manifest's ops,
one extension per op, the CPU baseline in the disassembly, the GPU code in the fatbins.
Run time: a fresh venv with the cell's torch and the wheel; ``ds_report`` parsed; every
installed op loaded with an empty ``TORCH_EXTENSIONS_DIR`` while JIT compilation is made to
fail loudly, proving each op came from the wheel.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dswheels.host import proc
from dswheels.host.extensions import read_extensions
from dswheels.host.files import read_bounded
from dswheels.host.log import get_reporter
from dswheels.host.machine import host_os
from dswheels.host.opload import jit_files, load_ops
from dswheels.host.venvs import find_uv, probe_python, torch_index_args, uv_install, uv_venv
from dswheels.host.wheel_file import WheelContents, read_wheel
from dswheels.kernel.binaries.dlls import load_dll_facts
from dswheels.kernel.compat import Compat
from dswheels.kernel.errors import VerifyError
from dswheels.kernel.manifest import ManifestError, manifest_name, parse_manifest
from dswheels.kernel.model import Accelerator, Cell
from dswheels.kernel.naming import cell_id
from dswheels.kernel.opload_result import judge_loads
from dswheels.kernel.platform_traits import traits
from dswheels.kernel.sources import TorchSource, TorchSourceKind
from dswheels.kernel.versions import format_version
from dswheels.kernel.wheel_contents import WheelContentError
from dswheels.stores.wheel_ref import MAX_MANIFEST_BYTES
from dswheels.verify.ds_report import DsReport, parse_ds_report
from dswheels.verify.static_checks import (
    Check,
    Expected,
    binary_checks,
    expected_from_manifest,
    gpu_checks,
    static_checks,
)

__all__ = [
    "RuntimeResult",
    "fresh_venv",
    "load_expected",
    "read_verified_wheel",
    "runtime_checks",
    "static_part",
    "tool_checks",
]

BUILDER = "deepspeed/ops/op_builder/builder.py"


def read_verified_wheel(path: Path) -> WheelContents:
    """The wheel with everything the static checks read: builder sources and every extension's bytes."""
    return read_wheel(path, error=VerifyError, builders=True, extensions=True)


def load_expected(
    wheel: Path,
    cell: Cell,
    plan_expectation: Callable[[Cell], Expected | None],
    manifest: Path | None,
    *,
    compat: Compat,
) -> Expected:
    """The manifest beside the wheel (or given) wins; without one, what the plan says of ``cell``
    (``plan_expectation`` is asked only then: a wheel with a manifest needs no matrix, no planning)."""
    path = manifest or wheel.with_name(manifest_name(wheel.name))
    if path.exists():
        try:
            data = parse_manifest(read_bounded(path, limit=MAX_MANIFEST_BYTES).decode("utf-8"))
        except (ManifestError, OSError, ValueError) as exc:  # ValueError: not UTF-8, too large, not a regular file
            raise VerifyError(f"{path}: {exc}") from None
        if data.cell_id != cell_id(cell):
            raise VerifyError(
                f"the manifest {path.name} describes {data.cell_id}, the wheel's name says {cell_id(cell)}",
            )
        if data.wheel.filename != wheel.name:
            raise VerifyError(f"the manifest {path.name} describes {data.wheel.filename}, not {wheel.name}")
        try:
            return expected_from_manifest(data, cell, default_runtime=compat.linux_runtime_floor)
        except ValueError as exc:
            raise VerifyError(f"{path}: {exc}") from None
    from_plan = plan_expectation(cell)
    if from_plan is None:
        raise VerifyError(
            f"no manifest beside {wheel.name} and no plan to compare with",
            hint="keep the .manifest.json beside the wheel, or pass --matrix so the plan says what it must contain",
        )
    return from_plan


def tool_checks(data: WheelContents, expected: Expected, compat: Compat) -> list[Check]:
    """The extensions' binaries: CPU baseline (objdump, ELF and PE), runtime needs, GPU code; -march=native traces."""
    checks: list[Check] = []
    baseline = compat.cpu_baselines.get(expected.cpu_baseline)
    binaries = read_extensions(
        data.extensions,
        forbidden_registers=baseline.forbidden_registers if baseline is not None else None,
        error=VerifyError,
    )
    native = [n for n, b in binaries.items() if b.records_native]
    checks.append(
        Check(
            "no -march=native",
            not native,
            "no extension records -march=native" if not native else f"-march=native recorded in {', '.join(native)}",
        ),
    )
    known = [b for b in binaries.values() if b.format != "unknown"]
    if known and baseline is None:
        checks.append(Check("cpu baseline", ok=False, detail=f"unknown baseline {expected.cpu_baseline!r}"))
    elif known and proc.find_tool("objdump") is None:
        get_reporter().warning("objdump (binutils) is not on PATH: the CPU baseline of the extensions is not checked")
    checks.extend(
        Check(f"cpu baseline {b.name.split('.')[0]}", ok=b.isa.ok, detail=b.isa.describe(expected.cpu_baseline))
        for b in known
        if b.isa is not None
    )
    checks += binary_checks(binaries, expected, compat.libstdcxx, load_dll_facts())
    checks += gpu_checks(expected, {m: b.gpu for m, b in binaries.items() if b.gpu is not None})
    return checks


def static_part(data: WheelContents, expected: Expected, compat: Compat) -> list[Check]:
    try:
        installed = data.installed
    except WheelContentError as exc:
        return [Check("git_version_info_installed.py", ok=False, detail=str(exc))]
    checks = static_checks(
        filename=data.path.name,
        names=data.names,
        metadata=data.metadata,
        installed=installed,
        expected=expected,
        builder_source=data.builder_sources.get(BUILDER),
        sha256=data.sha256,
        builder_sources=data.builder_sources,
    )
    return checks + tool_checks(data, expected, compat)


# --- run time ------------------------------------------------------------------------------------


@dataclass
class RuntimeResult:
    checks: list[Check] = field(default_factory=list)
    ds_report: DsReport | None = None
    ds_report_text: str = ""
    loads: dict[str, object] = field(default_factory=dict)
    python: str = ""
    torch: str = ""


def fresh_venv(
    wheel: Path,
    expected: Expected,
    *,
    compat: Compat,
    torch_source: TorchSource,
    root: Path,
    log: Path | None,
    torch_version: str | None = None,
) -> Path:
    """A new venv with the cell's torch (or ``torch_version``) and the wheel; returns its python."""
    uv = find_uv()
    cell = expected.cell
    root.mkdir(parents=True, exist_ok=True)
    venv = Path(tempfile.mkdtemp(prefix="venv-", dir=root))
    uv_venv(uv, cell.python, venv / "env", log_file=log, error=VerifyError)
    python = venv / "env" / traits(host_os()).venv_python
    version = torch_version or compat.torch[cell.torch].latest
    plan_index = compat.torch_index.format(variant=cell.variant.name)
    index_args = torch_index_args(torch_source, plan_index)
    get_reporter().info(f"fresh venv {venv / 'env'}: torch {version} ({cell.variant.name}) and the wheel")
    uv_install(uv, python, [f"torch=={version}"], index_args, log_file=log)
    deps_index = index_args if torch_source.kind is TorchSourceKind.PIP else []
    if torch_version is None:
        uv_install(uv, python, [str(wheel)], deps_index, log_file=log)
    else:
        # keep the other torch: the wheel's pin would replace it, so install its other requirements by hand
        metadata = read_wheel(wheel, error=VerifyError).metadata
        others = [str(r) for r in metadata.requirements if r.name != "torch" and not r.marker]
        uv_install(uv, python, others, deps_index, log_file=log)
        uv_install(uv, python, ["--no-deps", str(wheel)], [], log_file=log)
    return python


def discard_venv(python: Path) -> None:
    """Remove a venv :func:`fresh_venv` made (its python is ``<tmp>/env/bin/python``)."""
    shutil.rmtree(python.parents[2], ignore_errors=True)


def runtime_checks(
    wheel: Path,
    expected: Expected,
    *,
    compat: Compat,
    python: Path | None,
    torch_source: TorchSource,
    work_root: Path,
    accelerator: Accelerator | None,
    log: Path | None,
    torch_version: str | None = None,
) -> RuntimeResult:
    """Install (unless ``python`` is given: it must already have the wheel), ds_report, load every op."""
    result = RuntimeResult()
    created = python is None
    if python is None:
        python = fresh_venv(
            wheel,
            expected,
            compat=compat,
            torch_source=torch_source,
            root=work_root,
            log=log,
            torch_version=torch_version,
        )
    try:
        _runtime(result, python, expected, accelerator=accelerator, log=log)
    finally:
        if created:
            discard_venv(python)
    return result


def _runtime(
    result: RuntimeResult, python: Path, expected: Expected, *, accelerator: Accelerator | None, log: Path | None
) -> None:
    cell = expected.cell
    info = probe_python(python)
    result.python, result.torch = info.python, info.torch or ""
    torch_minor = ".".join((info.torch or "").split("+")[0].split(".")[:2])
    want = format_version(cell.torch)
    result.checks.append(
        Check(
            "runtime torch",
            torch_minor == want,
            f"the environment has torch {info.torch or 'none'}, the wheel is built for torch {want}"
            + ("" if torch_minor == want else ": DeepSpeed refuses every prebuilt op (PyTorch version mismatch)"),
        ),
    )
    with tempfile.TemporaryDirectory(prefix="dsw-ext-") as ext_dir, tempfile.TemporaryDirectory() as cwd:
        env = {
            **_clean_env(),
            "TORCH_EXTENSIONS_DIR": ext_dir,
            # a CUDA wheel on a GPU-less host: DeepSpeed would pick the cpu accelerator and JIT everything
            **({"DS_ACCELERATOR": accelerator.value} if accelerator else {}),
        }
        report = proc.capture(
            [str(python), "-m", "deepspeed.env_report"],  # what the ds_report script runs
            cwd=Path(cwd),
            env=env,
            log_file=log,
            timeout=600,
            error=VerifyError,
            what="ds_report",
        )
        result.ds_report_text = report.output
        try:
            parsed = parse_ds_report(report.output)
        except ValueError as exc:
            result.checks.append(Check("ds_report", ok=False, detail=f"{exc}: {' / '.join(report.tail[-5:])}"))
            parsed = None
        if parsed is not None:
            result.ds_report = parsed
            shown = set(parsed.installed)
            want_ops = set(expected.ops)
            compiled = parsed.compiled_with
            want_compiled = f"torch {want}" + (f", cuda {cell.variant.cuda_text}" if cell.variant.is_cuda else "")
            ok = shown == want_ops and compiled.startswith(want_compiled)
            detail = f"installed [YES]: {', '.join(sorted(shown)) or 'none'}; compiled w. {compiled!r}"
            if shown != want_ops:
                detail += f"; expected {', '.join(sorted(want_ops))}"
            result.checks.append(Check("ds_report", ok, detail))
        loads, run = load_ops(
            python,
            sorted(expected.ops),
            env=env,
            extensions_dir=Path(ext_dir),
            cwd=Path(cwd),
            log_file=log,
            error=VerifyError,
        )
        if loads is None or (loads.error and not loads.ops):
            why = loads.error if loads is not None else " / ".join(run.tail[-8:])
            result.checks.append(Check("load ops", ok=False, detail=f"the loader failed: {why}"))
        else:
            result.loads = dict(loads.raw)
            result.checks += [Check(f"load {v.name}", v.ok, v.detail) for v in judge_loads(loads)]
        leftovers = jit_files(Path(ext_dir))
        result.checks.append(
            Check(
                "no JIT",
                not leftovers,
                "TORCH_EXTENSIONS_DIR stayed empty" if not leftovers else f"JIT builds in it: {', '.join(leftovers)}",
            ),
        )


def _clean_env() -> dict[str, str]:
    import os  # noqa: PLC0415 - the environment is read only here

    return {k: v for k, v in os.environ.items() if not k.startswith(("DS_BUILD_", "TORCH_EXTENSIONS_DIR"))}
