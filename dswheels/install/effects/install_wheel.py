"""Install a picked wheel into the target interpreter and prove its ops load without JIT.

:func:`quick_verify` runs the JIT-forbidding loader ``verify`` uses (:mod:`dswheels.host.opload`)
in the target interpreter: every op the wheel marks as installed is loaded through DeepSpeed's
own builder, with DeepSpeed's accelerator set to the cell's (what the wheel is built for) and an empty
``TORCH_EXTENSIONS_DIR``; the module must be the prebuilt one (``builder.absolute_name()``)
and nothing may appear in the extensions directory (that would be a JIT compile).
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from dswheels.host import proc
from dswheels.host.opload import load_ops
from dswheels.host.proc import find_tool
from dswheels.kernel.errors import DswheelsError, EnvironmentMismatchError, VerifyError
from dswheels.kernel.model import Accelerator
from dswheels.kernel.opload_result import load_problems

__all__ = ["Installer", "VerifyResult", "choose_installer", "install_argv", "install_wheel", "quick_verify"]


@dataclass(frozen=True, slots=True)
class VerifyResult:
    version: str
    accelerator: str
    torch_info: Mapping[str, str]
    loaded: Mapping[str, str]  # op -> module name it loaded as


class Installer(str, Enum):
    """What installs a wheel into the target: its pip, or uv; auto picks one (:func:`choose_installer`)."""

    AUTO = "auto"
    PIP = "pip"
    UV = "uv"


def choose_installer(python: str, requested: Installer, env: Mapping[str, str]) -> Installer:
    """``pip`` when the target has it (or was asked for), else ``uv`` when on PATH."""
    if requested is not Installer.AUTO:
        return requested
    probe = proc.capture([python, "-m", "pip", "--version"], env=env, error=EnvironmentMismatchError)
    if probe.returncode == 0:
        return Installer.PIP
    if find_tool("uv", env) is not None:
        return Installer.UV
    raise EnvironmentMismatchError(
        f"{python} has no pip and uv is not on PATH",
        hint=f"add pip ({python} -m ensurepip) or install uv, then run again (or pass --installer)",
    )


def install_argv(python: str, wheel: str, installer: Installer) -> list[str]:
    """The command that installs ``wheel`` (a path or URL) and its dependencies into ``python``."""
    if installer is Installer.UV:
        return ["uv", "pip", "install", "--python", python, wheel]
    return [python, "-m", "pip", "install", "--disable-pip-version-check", wheel]


def install_wheel(python: str, wheel: Path, *, installer: Installer, env: Mapping[str, str]) -> None:
    """Install a downloaded (and sha256-checked) wheel file and its dependencies."""
    proc.run(
        install_argv(python, str(wheel), installer),
        env=env,
        heartbeat=30.0,
        error=EnvironmentMismatchError,
        what=f"{installer.value} install",
    )


def quick_verify(
    python: str, *, expected_version: str, accelerator: Accelerator, env: Mapping[str, str]
) -> VerifyResult:
    """Load every installed op in ``python`` under the wheel's ``accelerator`` (``DS_ACCELERATOR``) with an
    empty TORCH_EXTENSIONS_DIR; VerifyError if any fails."""
    with tempfile.TemporaryDirectory(prefix="dswheels-verify-ext-") as ext:
        try:
            report, result = load_ops(
                python,
                None,
                env={**env, "DS_ACCELERATOR": accelerator.value},
                extensions_dir=Path(ext),
                error=VerifyError,
            )
        except DswheelsError as exc:
            raise VerifyError(f"could not run the verify step: {exc.message}") from None
    if report is None:
        raise VerifyError("the verify step printed no result", details="\n".join(result.tail[-20:]))
    problems = load_problems(report, expected_version=expected_version)
    if problems:
        raise VerifyError(
            "the installed wheel does not load its prebuilt ops",
            details="\n".join(problems),
            hint="run `dswheels doctor` in the same environment; report the output if the environment is right",
        )
    return VerifyResult(
        version=report.version,
        accelerator=report.accelerator_wheel,
        torch_info=report.torch_info,
        loaded={op.name: op.loaded for op in report.ops},
    )
