"""An interpreter with the cell's torch: the current one when it matches, else a cached venv.

Venvs are made and filled by uv, so every venv shares uv's download cache and hard-links
from it: the CUDA torch (several GB with its nvidia-* wheels) is downloaded once per
machine, not once per venv or per test session.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from dswheels.host import proc
from dswheels.host.log import get_reporter
from dswheels.host.machine import host_os
from dswheels.kernel.errors import DswheelsError, EnvironmentMismatchError
from dswheels.kernel.model import Cell, PlannedCell, Platform, Python
from dswheels.kernel.platform_traits import traits
from dswheels.kernel.sources import TorchSource, TorchSourceKind, parse_pip_config, uv_index_args
from dswheels.kernel.versions import format_version
from dswheels.probes import interpreter as _probe_module

__all__ = [
    "BUILD_REQUIREMENTS",
    "Interpreter",
    "InterpreterMode",
    "Origin",
    "PythonInfo",
    "find_uv",
    "interpreter_mismatch",
    "prepare_interpreter",
    "probe_python",
    "torch_index_args",
    "uv_install",
    "uv_venv",
]

# What DeepSpeed's setup.py needs next to torch when built without isolation.
BUILD_REQUIREMENTS = ("setuptools>=69", "wheel", "build>=1.2", "ninja", "packaging", "numpy")
_PROBE_MODULES = ("setuptools", "wheel", "build", "ninja", "packaging", "numpy")
PROBE_SCRIPT = Path(_probe_module.__file__)


class InterpreterMode(str, Enum):
    """Which interpreter builds a cell (``dswheels build --interpreter``)."""

    AUTO = "auto"  # this one when it has the cell's torch, else a venv
    CURRENT = "current"  # this one, or an error saying why it cannot
    VENV = "venv"  # a venv made by uv for the cell

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class PythonInfo:
    python: str  # "3.11.7"
    executable: str
    platform: str  # sysconfig: "linux-x86_64" | "win-amd64"
    gil_disabled: bool
    scripts: str  # where console scripts (ninja) live
    purelib: str  # site-packages
    cflags: str  # the interpreter's own CFLAGS (setuptools compiles extensions with them)
    torch: str | None  # "2.14.1+cu130"
    torch_cuda: str | None  # "13.0"
    modules: Mapping[str, str | None] = field(default_factory=dict)
    torch_parent: str = ""  # the directory torch is imported from (site-packages)
    torch_error: str = ""  # why torch did not import ("" when it did, or is absent)
    cuda_devices: int | None = None  # the CUDA devices torch sees (None: not asked)

    @property
    def missing_build_modules(self) -> tuple[str, ...]:
        return tuple(name for name in _PROBE_MODULES if not self.modules.get(name))


class Origin(str, Enum):
    """Where the build interpreter came from."""

    CURRENT = "current"  # the one dswheels runs in
    NEW_VENV = "venv (new)"
    REUSED_VENV = "venv (reused)"

    def __str__(self) -> str:
        return self.value

    @property
    def is_venv(self) -> bool:
        return self is not Origin.CURRENT


@dataclass(frozen=True, slots=True)
class Interpreter:
    python: Path
    info: PythonInfo
    origin: Origin


def probe_python(python: Path | str, *, env: Mapping[str, str] | None = None, gpus: bool = False) -> PythonInfo:
    """Run :mod:`dswheels.probes.interpreter` in ``python`` (``gpus``: also count the CUDA devices torch sees)."""
    result = proc.capture(
        [str(python), str(PROBE_SCRIPT), *(["--gpus"] if gpus else []), *_PROBE_MODULES],
        env=env,
        error=EnvironmentMismatchError,
        what=f"probing {python}",
    )
    data = proc.marked_json(result.output, _probe_module.MARK)
    if not isinstance(data, dict):
        raise EnvironmentMismatchError(
            f"cannot run the interpreter {python}",
            details="\n".join(result.tail[-10:]),
        )
    devices = data.get("cuda_devices")
    return PythonInfo(
        python=data["python"],
        executable=data["executable"],
        platform=data["platform"],
        gil_disabled=bool(data["gil_disabled"]),
        scripts=data["scripts"],
        purelib=data["purelib"],
        cflags=data.get("cflags", ""),
        torch=data["torch"],
        torch_cuda=data["torch_cuda"],
        modules=data["modules"],
        torch_parent=data.get("torch_parent") or "",
        torch_error=data.get("torch_error") or "",
        cuda_devices=devices if isinstance(devices, int) else None,
    )


def interpreter_mismatch(info: PythonInfo, planned: PlannedCell, *, foreign: bool = False) -> str | None:
    """Why ``info`` cannot build ``planned`` (None: it can).

    ``foreign``: the cell is for another OS and the interpreter only runs DeepSpeed's op builders
    for it (``--prepare-only``): its Python and torch minor must match, its platform and CUDA cannot.
    """
    cell = planned.cell
    want_py = format_version(cell.python.version)
    if ".".join(info.python.split(".")[:2]) != want_py or info.gil_disabled != cell.python.free_threaded:
        return f"Python {info.python}{'t' if info.gil_disabled else ''}, the cell needs {cell.python}"
    if not foreign and Platform.from_sysconfig(info.platform) is not cell.platform:
        return f"platform {info.platform}, the cell is {cell.platform.value}"
    if info.torch is None:
        return "torch is not installed"
    torch_minor = ".".join(info.torch.split("+")[0].split(".")[:2])
    if torch_minor != format_version(cell.torch):
        return f"torch {info.torch}, the cell needs torch {format_version(cell.torch)}"
    return None if foreign else _cuda_mismatch(info.torch, info.torch_cuda, cell)


def _cuda_mismatch(torch: str, torch_cuda: str | None, cell: Cell) -> str | None:
    """Why torch ``torch`` (built with CUDA ``torch_cuda``, None: a CPU build) is not the cell's variant."""
    if cell.variant.is_cuda:
        if torch_cuda is None:
            return f"torch {torch} is a CPU build, the cell needs CUDA {cell.variant.cuda_text}"
        if ".".join(torch_cuda.split(".")[:2]) != cell.variant.cuda_text:
            return f"torch {torch} is built with CUDA {torch_cuda}, the cell needs {cell.variant.cuda_text}"
    elif torch_cuda is not None:
        return f"torch {torch} is a CUDA {torch_cuda} build, the cell is the cpu variant"
    return None


def find_uv() -> str:
    try:
        from uv import find_uv_bin  # noqa: PLC0415 - optional until needed

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        pass
    found = shutil.which("uv")
    if found:
        return found
    raise EnvironmentMismatchError(
        "uv is needed to create build environments and was not found",
        hint="pip install uv (it is a dependency of dswheels), or run dswheels from the build environment",
    )


def _pip_config(python: str) -> dict[str, list[str]]:
    """What pip here is configured with (its config files and PIP_* variables), as pip itself reports it."""
    candidates = [[python, "-m", "pip"]]
    candidates += [[tool] for name in ("pip3", "pip") if (tool := shutil.which(name))]
    for argv in candidates:
        result = proc.capture([*argv, "config", "list"], error=EnvironmentMismatchError)
        if result.returncode == 0:
            return parse_pip_config(result.output)
    raise EnvironmentMismatchError(
        "--torch-index pip: no pip found to read its configuration from",
        hint="install pip, or give --torch-index an index URL or a wheel directory",
    )


def torch_index_args(torch_source: TorchSource, plan_index: str) -> list[str]:
    """uv's arguments for where torch (and, in pip mode, everything else) comes from."""
    pip_config = _pip_config(sys.executable) if torch_source.kind is TorchSourceKind.PIP else {}
    args = uv_index_args(torch_source, plan_index=plan_index, pip_config=pip_config)
    if torch_source.kind is TorchSourceKind.PIP:
        # pip considers every configured source and takes the best version; so must uv
        args += ["--index-strategy", "unsafe-best-match"]
    return args


def _venv_key(planned: PlannedCell, index_args: Sequence[str]) -> str:
    cell = planned.cell
    digest = hashlib.sha256("\0".join(index_args).encode()).hexdigest()[:8]
    return f"{cell.python.tag}-torch{planned.torch_version}-{cell.variant.name}-{digest}"


def prepare_interpreter(
    planned: PlannedCell,
    *,
    mode: InterpreterMode,
    torch_source: TorchSource,
    venv_root: Path,
    log_file: Path | None,
    foreign: bool = False,
) -> Interpreter:
    """``mode``: ``auto`` (current interpreter if it matches, else a venv), ``current``, ``venv``.

    ``foreign``: for a cell of another OS (see :func:`interpreter_mismatch`).
    """
    reporter = get_reporter()
    current = Path(sys.executable)
    if mode in (InterpreterMode.AUTO, InterpreterMode.CURRENT):
        info = probe_python(current)
        why = interpreter_mismatch(info, planned, foreign=foreign)
        if why is None:
            if info.missing_build_modules:
                uv = find_uv()
                reporter.info(f"installing build requirements into {current}: {', '.join(info.missing_build_modules)}")
                uv_install(uv, current, BUILD_REQUIREMENTS, [], log_file=log_file)
                info = probe_python(current)
            reporter.info(f"interpreter: this one ({current}, torch {info.torch})")
            return Interpreter(python=current, info=info, origin=Origin.CURRENT)
        if mode is InterpreterMode.CURRENT:
            raise EnvironmentMismatchError(
                f"this interpreter cannot build the cell: {why}",
                hint="install the cell's torch here, or let dswheels make a venv (--interpreter auto)",
            )
        reporter.info(f"interpreter: a venv for the cell (this interpreter: {why})")
    uv = find_uv()
    index_args = torch_index_args(torch_source, planned.torch_index)
    venv = venv_root / _venv_key(planned, index_args)
    python = venv / traits(host_os()).venv_python
    origin = Origin.REUSED_VENV
    if not python.exists():
        origin = Origin.NEW_VENV
        shutil.rmtree(venv, ignore_errors=True)
        uv_venv(uv, planned.cell.python, venv, log_file=log_file, error=EnvironmentMismatchError)
    else:
        info = probe_python(python)
        exact = (info.torch or "").split("+")[0] == planned.torch_version
        if exact and interpreter_mismatch(info, planned, foreign=foreign) is None and not info.missing_build_modules:
            reporter.info(f"interpreter: {venv} (reused, torch {info.torch})")
            return Interpreter(python=python, info=info, origin=origin)
    reporter.info(f"installing torch {planned.torch_version} from {torch_source.describe()} ({origin})")
    uv_install(uv, python, [f"torch=={planned.torch_version}"], index_args, log_file=log_file)
    build_index = index_args if torch_source.kind is TorchSourceKind.PIP else []
    uv_install(uv, python, BUILD_REQUIREMENTS, build_index, log_file=log_file)
    info = probe_python(python)
    why = interpreter_mismatch(info, planned, foreign=foreign)
    if why is not None:
        raise EnvironmentMismatchError(
            f"the venv {venv} still cannot build the cell: {why}",
            hint=f"the torch index ({torch_source.describe()}) gave another build than the plan's "
            f"{planned.torch_version} {planned.cell.variant.name}; choose another with --torch-index",
        )
    return Interpreter(python=python, info=info, origin=origin)


def seed_packages(python: Python) -> tuple[str, ...]:
    """What ``python -m venv`` puts in a new venv (ensurepip): pip, and setuptools before Python 3.12. A user's venv
    has them; torch's cpp_extension imports setuptools, which torch requires only from 3.12 (torch 2.10), so
    ``ds_report`` in a venv without them fails where the user's does not.

    >>> seed_packages(Python((3, 11))), seed_packages(Python((3, 12)))
    (('pip', 'setuptools'), ('pip',))
    """
    return ("pip", "setuptools") if python.version < (3, 12) else ("pip",)


def uv_venv(
    uv: str, python: Python, venv: Path, *, log_file: Path | None, error: type[DswheelsError], seed: bool = False
) -> None:
    """A new venv at ``venv`` with ``python`` (uv finds or downloads the interpreter); ``seed``: with what
    ``python -m venv`` gives a user (:func:`seed_packages`, uv's ``--seed``)."""
    proc.run(
        [uv, "venv", *(["--seed"] if seed else []), "--python", str(python), str(venv)],
        log_file=log_file,
        stream=False,
        error=error,
        what=f"creating a Python {python} venv",
    )


def uv_install(
    uv: str, python: Path, requirements: Sequence[str], index_args: Sequence[str], *, log_file: Path | None
) -> None:
    proc.run(
        [uv, "pip", "install", "--python", str(python), *index_args, *requirements],
        log_file=log_file,
        stream=False,
        heartbeat=60,
        heartbeat_label="uv pip install",
        error=EnvironmentMismatchError,
        what=f"installing {' '.join(requirements)}",
    )
