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
from dswheels.host.auditwheel import auditwheel_available, judge_floor
from dswheels.host.extensions import read_extensions
from dswheels.host.files import read_bounded
from dswheels.host.log import get_reporter
from dswheels.host.machine import host_os
from dswheels.host.opload import NO_JIT_SCRIPT, jit_files, load_ops
from dswheels.host.venvs import find_uv, probe_python, seed_packages, torch_index_args, uv_install, uv_venv
from dswheels.host.wheel_file import WheelContents, read_wheel
from dswheels.kernel.binaries.dlls import load_dll_facts
from dswheels.kernel.compat import Compat
from dswheels.kernel.errors import ConfigError, VerifyError
from dswheels.kernel.isa_variants import VariantTable, extension_levels
from dswheels.kernel.manifest import ManifestError, manifest_name, parse_manifest
from dswheels.kernel.model import Accelerator, Cell
from dswheels.kernel.naming import cell_id
from dswheels.kernel.platform_traits import traits
from dswheels.kernel.sources import TorchSource, TorchSourceKind
from dswheels.kernel.wheel_contents import WheelContentError
from dswheels.platforms.hosts import EmulatedMachine
from dswheels.probes import no_jit
from dswheels.stores.wheel_ref import MAX_MANIFEST_BYTES
from dswheels.verify.checks import judge_loaded, judge_static
from dswheels.verify.ds_report import DsReport, parse_ds_report
from dswheels.verify.loaded_checks import AdamStep, LoadedFacts
from dswheels.verify.registry import Check
from dswheels.verify.static_checks import Expected, WheelFacts, expected_from_manifest

__all__ = [
    "RuntimeResult",
    "emulated_runtime_checks",
    "fresh_venv",
    "load_expected",
    "read_verified_wheel",
    "runtime_checks",
    "static_facts",
    "static_part",
]


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


def static_facts(data: WheelContents, expected: Expected, compat: Compat) -> WheelFacts:
    """What the static checks read. The binaries are read (and disassembled) only when DeepSpeed's build
    info is readable: without it the wheel is judged on that alone (the registry's gate)."""
    try:
        installed, problem = data.installed, ""
    except WheelContentError as exc:
        installed, problem = None, str(exc)
    baseline = compat.cpu_baselines.get(expected.cpu_baseline)
    try:
        variants, variants_problem = data.variants, ""
    except WheelContentError as exc:
        variants, variants_problem = VariantTable(), str(exc)
    levels = extension_levels(variants, data.names)  # an ISA variant is judged at its own level
    binaries = (
        read_extensions(
            data.extensions,
            forbidden_registers=baseline.forbidden_registers if baseline is not None else None,
            forbidden_features=baseline.forbidden_features if baseline is not None else None,
            error=VerifyError,
            variant_registers={m: _registers(compat, level) for m, level in levels.items()},
        )
        if installed is not None and not variants_problem
        else {}
    )
    known = [b for b in binaries.values() if b.format != "unknown" and b.machine != "aarch64"]
    if known and baseline is not None and proc.find_tool("objdump") is None:
        get_reporter().warning("objdump (binutils) is not on PATH: the CPU baseline of the extensions is not checked")
    # a Linux wheel's floor, auditwheel's verdict (torch's libraries left out), where auditwheel runs
    elf = any(b.format == "elf" for b in binaries.values())
    linux = traits(expected.cell.platform).runtime_floor and elf and auditwheel_available()
    floor = judge_floor(data.path, compat.torch_provided_libraries, error=VerifyError) if linux else None
    return WheelFacts(
        filename=data.path.name,
        names=data.names,
        metadata=data.metadata,
        installed=installed,
        installed_problem=problem,
        expected=expected,
        sha256=data.sha256,
        builder_sources=data.builder_sources,
        binaries=binaries,
        baseline_known=baseline is not None,
        libstdcxx=compat.libstdcxx,
        dlls=load_dll_facts(),
        floor=floor,
        variants=variants,
        variants_problem=variants_problem,
        isa_sources=data.isa_sources,
        levels=levels,
    )


def _registers(compat: Compat, level: str) -> tuple[str, ...]:
    """What an ISA variant compiled for ``level`` must not use; a level compat.yml does not know: everything
    above x86-64-v2 (the variant fails its check, which names the level)."""
    known = compat.cpu_baselines.get(level)
    return known.forbidden_registers if known is not None else ("ymm", "zmm")


def static_part(data: WheelContents, expected: Expected, compat: Compat) -> list[Check]:
    """Every static check of the registry (:mod:`dswheels.verify.checks`), in order."""
    return judge_static(static_facts(data, expected, compat))


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
    uv_venv(uv, cell.python, venv / "env", log_file=log, error=VerifyError, seed=True)  # as a user's venv
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


def emulated_runtime_checks(
    wheel: Path,
    expected: Expected,
    machine: EmulatedMachine,
    *,
    compat: Compat,
    torch_source: TorchSource,
    work_root: Path,
    accelerator: Accelerator | None,
    log: Path | None,
    torch_version: str | None = None,
) -> RuntimeResult:
    """The run-time part of a wheel of another CPU: the same checks, in a fresh venv of ``machine``'s Python (an
    arm64 root under qemu), the cell's torch and the wheel installed as wheels of its platform."""
    if torch_version is not None:
        raise ConfigError("--torch-version is not supported for a wheel verified in an emulated machine")
    cell = expected.cell
    version = compat.torch[cell.torch].latest
    index_args = torch_index_args(torch_source, compat.torch_index.format(variant=cell.variant.name))
    work_root.mkdir(parents=True, exist_ok=True)
    # the wheel runs as its baseline's oldest core (qemu's own default has every feature, SVE2 included)
    baseline = compat.cpu_baselines.get(expected.cpu_baseline)
    cpu = baseline.qemu_cpu if baseline else None
    as_cpu = f", as a {cpu} ({baseline.name})" if cpu and baseline else ""
    with tempfile.TemporaryDirectory(prefix="venv-", dir=work_root) as tmp:
        get_reporter().info(
            f"fresh venv in {machine.describe()}{as_cpu}: torch {version} ({cell.variant.name}) and the wheel"
        )
        launcher = machine.venv(
            cell.python,
            where=Path(tmp),
            requirements=[*seed_packages(cell.python), f"torch=={version}", str(wheel)],  # as a user's venv
            index_args=index_args,
            cpu=cpu,
            log=log,
        )
        result = runtime_checks(
            wheel,
            expected,
            compat=compat,
            python=launcher,
            torch_source=torch_source,
            work_root=work_root,
            accelerator=accelerator,
            log=log,
        )
    result.checks.insert(0, Check("emulated machine", ok=True, detail=machine.describe() + as_cpu))
    return result


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
        variants = read_wheel(wheel, error=VerifyError).variants
    except WheelContentError:  # the static part says why
        variants = VariantTable()
    try:
        _runtime(result, python, expected, variants, accelerator=accelerator, log=log)
    finally:
        if created:
            discard_venv(python)
    return result


def _runtime(
    result: RuntimeResult,
    python: Path,
    expected: Expected,
    variants: VariantTable,
    *,
    accelerator: Accelerator | None,
    log: Path | None,
) -> None:
    """Run ds_report and load every op in ``python``; the loaded checks of the registry judge what they did."""
    info = probe_python(python)
    result.python, result.torch = info.python, info.torch or ""
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
        parsed, problem = _parsed_ds_report(report)
        result.ds_report = parsed
        loads, run = load_ops(
            python,
            sorted(expected.ops),
            env=env,
            extensions_dir=Path(ext_dir),
            cwd=Path(cwd),
            log_file=log,
            error=VerifyError,
        )
        if loads is not None and not (loads.error and not loads.ops):
            result.loads = dict(loads.raw)
        adam = _adam_step(python, env=env, cwd=Path(cwd), log=log) if "cpu_adam" in expected.ops else None
        facts = LoadedFacts(
            expected=expected,
            torch=info.torch or "",
            ds_report=parsed,
            ds_report_problem=problem,
            loads=loads,
            loader_tail=run.tail,
            jit_files=jit_files(Path(ext_dir)),
            variants=variants,
            adam=adam,
        )
    result.checks += judge_loaded(facts)


def _adam_step(python: Path, *, env: dict[str, str], cwd: Path, log: Path | None) -> AdamStep:
    """DeepSpeedCPUAdam against torch's AdamW in ``python`` (JIT forbidden; ``env`` has the empty
    TORCH_EXTENSIONS_DIR): :data:`~dswheels.probes.no_jit.ADAM_MARK`'s answer."""
    out = proc.run(
        [str(python), str(NO_JIT_SCRIPT), "adam"],
        cwd=cwd,
        env=env,
        log_file=log,
        capture=True,
        stream=False,
        check=False,
        timeout=1200,
        error=VerifyError,
        what="DeepSpeedCPUAdam against AdamW",
    )
    answer = proc.marked_json(out.output, no_jit.ADAM_MARK)
    return AdamStep.from_answer(answer, tail=out.tail)


def _parsed_ds_report(report: proc.RunResult) -> tuple[DsReport | None, str]:
    """ds_report's output parsed, or None and why not (with its last lines)."""
    try:
        return parse_ds_report(report.output), ""
    except ValueError as exc:
        return None, f"{exc}: {' / '.join(report.tail[-5:])}"


def _clean_env() -> dict[str, str]:
    import os  # noqa: PLC0415 - the environment is read only here

    return {k: v for k, v in os.environ.items() if not k.startswith(("DS_BUILD_", "TORCH_EXTENSIONS_DIR"))}
