"""The run-time part of ``dswheels verify`` for a wheel of another OS than this machine's (a win_amd64
wheel on Linux): the same fresh venv and checks, in that OS's interpreter where the platform's host
here runs one.

On the wheel's own OS the run-time part is :func:`dswheels.verify.effects.prove.runtime_checks` in a
venv uv makes. For another OS's wheel the platform's host is asked (through the seam,
:meth:`dswheels.platforms.hosts.PlatformHost.wheel_venv`): with Wine and an MSVC root
(``--msvc-root``) the Windows platform's host gives a venv of a Windows CPython dswheels builds from
CPython's sources, filled by that Python's own pip (docs/build.md#verifying-a-windows-wheel-under-wine);
then the same checks run in it: ``ds_report``, every op loaded with JIT forbidden,
``TORCH_EXTENSIONS_DIR`` empty, and, when the wheel has ``cpu_adam``, 20 DeepSpeedCPUAdam steps
against torch's AdamW.

What only torch's CUDA wheel can load is said per op: where the venv's torch is a CPU build (PyPI's
win_amd64 wheels; download.pytorch.org is the plan's index on a runner), a CUDA op whose ``.pyd``
imports ``torch_cuda.dll``/``c10_cuda.dll``/the CUDA runtime cannot load, and its check says it is
judged statically (its DLL imports, in the static checks), naming the DLLs. Any other load failure
stays a failure. Where no host runs the wheel's interpreter, :func:`not_run` says what the static
checks alone do not prove.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from dswheels.host import proc
from dswheels.host.cache import CacheLayout
from dswheels.host.machine import host_machine, host_os
from dswheels.host.opload import NO_JIT_SCRIPT
from dswheels.host.wheel_file import WheelContents
from dswheels.kernel.binaries.dlls import DllFacts, DllTarget, judge_imports, load_dll_facts
from dswheels.kernel.binaries.pe import read_pe
from dswheels.kernel.compat import Compat
from dswheels.kernel.errors import VerifyError
from dswheels.kernel.model import Accelerator
from dswheels.kernel.sources import TorchSource
from dswheels.platforms import HostChoice, platform_module
from dswheels.platforms.hosts import HostKind, WineSettings
from dswheels.probes import no_jit
from dswheels.verify.effects.prove import RuntimeResult, runtime_checks
from dswheels.verify.registry import Check
from dswheels.verify.static_checks import Expected

__all__ = ["ADAM_TOLERANCE", "foreign_run_time", "foreign_wheel", "not_run"]

ADAM_TOLERANCE = 1e-5


def foreign_wheel(expected: Expected) -> bool:
    """A wheel for another OS than this machine's: its run-time part is this module's."""
    return expected.cell.platform.os is not host_os()


def foreign_run_time(
    wheel: Path,
    expected: Expected,
    data: WheelContents,
    *,
    compat: Compat,
    msvc_root: Path | None,
    torch_source: TorchSource,
    cache: CacheLayout,
    accelerator: Accelerator | None,
    log: Path | None,
    torch_version: str | None = None,
) -> RuntimeResult:
    """In a venv the wheel's platform's host here gives (Wine with ``msvc_root``); else what is not proven, said."""
    cell = expected.cell
    choice = HostChoice(wine=WineSettings(msvc_root=msvc_root)) if msvc_root is not None else HostChoice()
    host = platform_module(cell.platform).host(choice, here=host_os(), machine=host_machine())
    if host.kind is HostKind.NONE:
        why = "no MSVC root to build a Windows Python with: --msvc-root" if msvc_root is None else "no host here"
        return not_run(why)
    if host.kind is HostKind.WINE and proc.find_tool("wine") is None and proc.find_tool("wine64") is None:
        return not_run("Wine is not installed")
    torch = f"torch=={torch_version or compat.torch[cell.torch].latest}"
    # another torch (--torch-version): the wheel's pin would replace it, so its other requirements by hand
    needs = [
        str(r)
        for r in data.metadata.requirements
        if not (torch_version and r.name == "torch") and not (r.marker and "extra" in str(r.marker))
    ]
    venv = host.wheel_venv(
        wheel,
        [torch, *needs],
        python=cell.python.version,
        torch_source=torch_source,
        plan_index=compat.torch_index.format(variant=cell.variant.name),
        wheel_deps=torch_version is None,
        cache=cache,
        log=log,
    )
    if venv is None:
        return not_run(f"the {cell.platform.value} host here gives no venv of its own")
    with venv as made:
        result = runtime_checks(
            wheel,
            expected,
            compat=compat,
            python=made.python,
            torch_source=torch_source,
            work_root=cache.verify,
            accelerator=accelerator,
            log=log,
        )
        result.checks = _judge_cuda_loads(result, data, expected)
        if "cpu_adam" in expected.ops:
            result.checks.append(_adam(made.python, env=os.environ, accelerator=accelerator, log=log))
    result.checks.insert(0, Check("interpreter", ok=True, detail=made.interpreter))
    return result


def not_run(why: str) -> RuntimeResult:
    """The run-time part of another OS's wheel where nothing here runs it: nothing loaded, said as such."""
    return RuntimeResult(
        checks=[
            Check(
                "run time",
                ok=True,
                detail=f"not run ({why}): the static checks above judge names and DLL imports; not proven here: "
                "that pip installs the wheel on Windows, that DeepSpeed imports it from where it is, that each "
                "op loads without JIT and that DeepSpeedCPUAdam steps (pass --msvc-root with Wine installed, "
                "or verify on Windows)",
            )
        ]
    )


def _judge_cuda_loads(result: RuntimeResult, data: WheelContents, expected: Expected) -> list[Check]:
    """Each failed op load whose ``.pyd`` imports what only torch's CUDA wheel has, with a CPU torch here:
    judged statically, with the DLLs named. Every other check as it was."""
    ops = result.loads.get("ops")
    if not isinstance(ops, dict) or result.loads.get("torch_cuda") or not expected.cell.variant.is_cuda:
        return list(result.checks)
    facts = load_dll_facts()
    cuda_major = int(expected.cell.variant.cuda_text.split(".")[0])
    wheel_target = DllTarget(python=expected.cell.python, torch=expected.cell.torch, cuda_major=cuda_major)
    here = DllTarget(python=expected.cell.python, torch=expected.cell.torch, cuda_major=None)
    checks = []
    for check in result.checks:
        name = check.name.removeprefix("load ")
        entry = ops.get(name) if check.name.startswith("load ") and not check.ok else None
        module = entry.get("module") if isinstance(entry, dict) else None
        error = str(entry.get("error", "")) if isinstance(entry, dict) else ""
        cuda_only = _cuda_only_imports(data, str(module), wheel_target, here, facts) if module else ()
        if cuda_only and "DLL load failed" in error:
            check = Check(  # noqa: PLW2901 - the same check, judged
                check.name,
                ok=True,
                detail=f"judged statically, not loaded: its .pyd imports {', '.join(cuda_only)}, which only torch's "
                f"CUDA {expected.cell.variant.cuda_text} wheel has, and torch here is a CPU build (PyPI's win_amd64 "
                "wheels; the plan's index has the CUDA one); its DLL imports are judged in the static checks",
            )
        checks.append(check)
    return checks


def _cuda_only_imports(
    data: WheelContents, module: str, wheel_target: DllTarget, here: DllTarget, facts: DllFacts
) -> tuple[str, ...]:
    """The DLLs the op's ``.pyd`` imports that its CUDA torch provides and a CPU torch does not; () when the
    ``.pyd`` is not where DeepSpeed imports it from, or imports anything its own torch would not provide."""
    stem = module.replace(".", "/")
    pyd = next((b for n, b in data.extensions.items() if n.startswith(stem + ".") and n.endswith(".pyd")), None)
    image = read_pe(pyd) if pyd is not None else None
    if image is None:
        return ()
    with_cuda = judge_imports(image.imports, wheel_target, facts)
    if not all(v.ok for v in with_cuda):
        return ()  # a DLL nothing provides: a fault, whatever torch is installed
    without = {v.name for v in judge_imports(image.imports, here, facts) if v.ok}
    return tuple(sorted({v.name for v in with_cuda} - without))


def _adam(launcher: Path, *, env: Mapping[str, str], accelerator: Accelerator | None, log: Path | None) -> Check:
    """20 DeepSpeedCPUAdam steps against torch's AdamW in the venv (JIT forbidden): the largest difference."""
    with tempfile.TemporaryDirectory(prefix="dsw-ext-") as ext, tempfile.TemporaryDirectory() as cwd:
        run_env = {**env, "TORCH_EXTENSIONS_DIR": ext, **({"DS_ACCELERATOR": accelerator.value} if accelerator else {})}
        out = proc.capture(
            [str(launcher), str(NO_JIT_SCRIPT), "adam"],
            cwd=Path(cwd),
            env=run_env,
            log_file=log,
            timeout=900,
            error=VerifyError,
            what="DeepSpeedCPUAdam vs AdamW",
        )
        jit = sorted(p.name for p in Path(ext).iterdir())
    data = proc.marked_json(out.output, no_jit.ADAM_MARK)
    if not isinstance(data, dict):
        return Check("cpu_adam step", ok=False, detail="no answer: " + " / ".join(out.tail[-4:]))
    diff = float(str(data.get("max_abs_diff")))
    ok = diff <= ADAM_TOLERANCE and not jit
    detail = f"{data.get('steps')} DeepSpeedCPUAdam steps against torch.optim.AdamW: largest difference {diff:.1e}"
    detail += f" (tolerance {ADAM_TOLERANCE:.0e})" + (f"; JIT-compiled {', '.join(jit)}" if jit else "")
    return Check("cpu_adam step", ok=ok, detail=detail)
