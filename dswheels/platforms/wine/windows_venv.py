"""A fresh venv of the Windows CPython under Wine, filled by that Python's own pip, as a Windows user's is.

``python.exe -m venv`` makes it (with pip from ``ensurepip``, the wheel CPython bundles), and
``Scripts\\python.exe -m pip install`` installs the wheel and torch: pip's resolver, its unpacking,
``RECORD``, the ``.exe`` console scripts, all Windows pip's own. What it does not do is fetch from
PyPI: this Python has no ``_ssl`` (:mod:`~.cpython_build`), so the host downloads the win_amd64 wheels
pip will need into a folder first (``pip download --platform win_amd64``, each file checked against
the index's hash by pip) and the Windows pip installs from that folder alone (``--no-index
--find-links``). The folder is kept under the cache: torch is downloaded once per machine.

:attr:`WindowsVenv.python` is a script that runs the venv's ``python.exe`` under Wine with
this machine's arguments (Windows resolves ``/tmp/x`` on drive ``Z:``, which Wine maps to ``/``):
every probe that runs in a target interpreter (:mod:`dswheels.probes`) runs in it unchanged.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shlex
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement

from dswheels.host import proc
from dswheels.host.cache import CacheLayout
from dswheels.host.log import get_reporter
from dswheels.host.venvs import find_uv, torch_index_args
from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import EnvironmentMismatchError
from dswheels.kernel.sources import TorchSource, TorchSourceKind
from dswheels.kernel.versions import VersionTuple, format_version, parse_version
from dswheels.platforms.wine.cpython_build import WindowsCPython, windows_cpython
from dswheels.platforms.wine.host import WineHost, find_wine, wait_for_wineserver, windows_path
from dswheels.platforms.wine.msvc_driver import wine_msvc
from dswheels.platforms.wine.msvc_root import find_msvc_root
from dswheels.platforms.wine.wine_gaps import NUMPY_WITHOUT_CREALF, numpy_constraints, run_windows, windows_program_env

__all__ = [
    "WindowsVenv",
    "download_for_windows",
    "fresh_wheel_venv",
    "host_pip",
    "make_windows_venv",
    "needed_by",
    "pip_index_args",
    "pip_install_offline",
]

# what every Windows Python run here gets: UTF-8 on its pipes (a piped Windows Python writes the ANSI code
# page, and one character outside it would stop the run), no bytecode beside the cached interpreter's files
_PYTHON_ENV = {"PYTHONIOENCODING": "utf-8", "PYTHONDONTWRITEBYTECODE": "1"}


@dataclass(frozen=True, slots=True)
class WindowsVenv:
    """A :class:`~dswheels.platforms.hosts.WheelVenv` under Wine."""

    root: Path  # the venv: Scripts\python.exe, Lib\site-packages
    python: Path  # a script that runs Scripts\python.exe under Wine (what the probes are run with)
    base: WindowsCPython
    host: WineHost
    constraints: tuple[str, ...]  # what its installs are held to on this Wine (numpy<2 without crealf)

    @property
    def exe(self) -> Path:
        return self.root / "Scripts" / "python.exe"

    @property
    def interpreter(self) -> str:
        return f"CPython {self.base.version} for Windows, built from its sources by dswheels, under {self.host.version}"


def _launcher(path: Path, *, host: WineHost, python: Path) -> Path:
    exports = {**windows_program_env(host), **_PYTHON_ENV}
    lines = ["#!/bin/sh", *(f"export {k}={shlex.quote(v)}" for k, v in exports.items())]
    lines.append(f'exec {shlex.quote(host.wine)} {shlex.quote(windows_path(python))} "$@"')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    path.chmod(0o755)
    return path


def make_windows_venv(
    base: WindowsCPython, host: WineHost, *, where: Path, env: Mapping[str, str], log: Path | None
) -> WindowsVenv:
    """A new venv at ``where`` (it must not exist) made by the Windows ``base`` with its own ``venv`` and pip."""
    env = {**env, **_PYTHON_ENV}
    get_reporter().info(f"a venv of Windows CPython {base.version} under Wine: {where}")
    run_windows(
        host, base.python, ["-m", "venv", windows_path(where)], env=env, log=log, what="python -m venv", timeout=900
    )
    venv_python = where / "Scripts" / "python.exe"
    if not venv_python.is_file():
        raise EnvironmentMismatchError(f"python -m venv made no {venv_python}", hint=f"log: {log}")
    constraints = numpy_constraints(host, base.python, env)
    if constraints:
        get_reporter().info(
            f"this Wine's ucrtbase.dll has no crealf (numpy 2 imports it): the venv's installs hold {constraints[0]}"
        )
    launcher = _launcher(where.with_name(where.name + "-python"), host=host, python=venv_python)
    return WindowsVenv(root=where, python=launcher, base=base, host=host, constraints=constraints)


def pip_index_args(source: TorchSource, plan_index: str) -> list[str]:
    """pip's arguments that make torch come from ``source`` (pip's own configuration serves ``pip``).

    >>> pip_index_args(TorchSource(TorchSourceKind.PLAN), "https://download.pytorch.org/whl/cu130")
    ['--extra-index-url', 'https://download.pytorch.org/whl/cu130']
    >>> pip_index_args(TorchSource(TorchSourceKind.PIP), "x")
    []
    """
    if source.kind is TorchSourceKind.PLAN:
        return ["--extra-index-url", plan_index]  # a local version (+cu130) is preferred to PyPI's CPU build
    if source.kind is TorchSourceKind.INDEX:
        return ["--extra-index-url", source.location]
    if source.kind is TorchSourceKind.LINKS:
        return ["--find-links", source.location]
    return []


def needed_by(requirements: Sequence[Requirement], *, without: str = "") -> list[str]:
    """A wheel's ``Requires-Dist`` as requirements to resolve: those of its extras left out (and ``without``).

    >>> needed_by([Requirement("a>1"), Requirement("b; extra == 'docs'"), Requirement("torch==2.*")], without="torch")
    ['a>1']
    """
    return [str(r) for r in requirements if r.name != without and not (r.marker and "extra" in str(r.marker))]


def host_pip(cache: CacheLayout, *, log: Path | None) -> list[str]:
    """This machine's pip: dswheels' own interpreter's, else one in a venv uv makes once under the cache."""
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    venv = cache.host_pip
    python = venv / "bin" / "python"
    if not python.is_file():
        proc.run(
            [find_uv(), "venv", "--seed", str(venv)],
            log_file=log,
            stream=False,
            error=EnvironmentMismatchError,
            what="a venv with pip (to download Windows wheels)",
        )
    return [str(python), "-m", "pip"]


def download_for_windows(
    requirements: Sequence[str],
    *,
    dest: Path,
    python: str,
    uv_index_args: Sequence[str],
    pip_index_args: Sequence[str],
    pip: Sequence[str],
    constraints: Sequence[str],
    log: Path | None,
) -> list[str]:
    """The win_amd64 wheels ``requirements`` resolve to for CPython ``python`` (``3.11``), into ``dest``; the pins.

    Resolved by uv for Windows (``--python-platform``: each marker as Windows evaluates it; pip's
    ``download --platform`` would evaluate them for this Linux machine and ask for torch's Linux-only
    NVIDIA wheels), then each pinned file fetched by pip (``--no-deps``), checked against the index's hash.
    """
    dest.mkdir(parents=True, exist_ok=True)
    tag = python.replace(".", "")
    wanted = dest.parent / f"{dest.name}-requirements.in"
    wanted.write_text("".join(f"{r}\n" for r in requirements), encoding="utf-8")
    held = dest.parent / f"{dest.name}-constraints.txt"
    held.write_text("".join(f"{c}\n" for c in constraints), encoding="utf-8")
    pins = dest.parent / f"{dest.name}-pins.txt"
    pins.unlink(missing_ok=True)  # uv reads an earlier output as preferences, and then refused torch's win_amd64 wheel
    try:
        proc.run(
            [
                find_uv(),
                "pip",
                "compile",
                "--quiet",
                "--no-header",
                "--no-annotate",
                "--python-platform",
                "x86_64-pc-windows-msvc",
                "--python-version",
                python,
                *uv_index_args,
                "--constraint",
                str(held),
                "--output-file",
                str(pins),
                str(wanted),
            ],
            log_file=log,
            stream=False,
            timeout=1800,
            error=EnvironmentMismatchError,
            what=f"resolving {' '.join(requirements)} for Windows (uv pip compile)",
        )
    except EnvironmentMismatchError as exc:
        if NUMPY_WITHOUT_CREALF in constraints and parse_version(python)[:2] >= (3, 13):
            raise exc.with_hint(
                f"this Wine's ucrtbase has no working crealf, so the venv holds {NUMPY_WITHOUT_CREALF}, and numpy 1.x "
                f"has no wheels for Python {python}: verify it under a Wine whose ucrtbase implements crealf, or on "
                "Windows"
            ) from None
        raise
    pinned = [ln.strip() for ln in pins.read_text(encoding="utf-8").splitlines() if ln.strip() and ln[0] not in "#-"]
    proc.run(
        [
            *pip,
            "download",
            "--quiet",
            "--no-deps",
            "--dest",
            str(dest),
            "--only-binary=:all:",
            "--platform",
            "win_amd64",
            "--python-version",
            tag,
            "--implementation",
            "cp",
            "--abi",
            f"cp{tag}",
            *pip_index_args,
            "--requirement",
            str(pins),
        ],
        log_file=log,
        stream=False,
        heartbeat=60,
        heartbeat_label="pip download (win_amd64)",
        timeout=3600,
        error=EnvironmentMismatchError,
        what=f"pip download of {len(pinned)} win_amd64 wheels",
    )
    return pinned


def pip_install_offline(
    venv: WindowsVenv,
    requirements: Sequence[str],
    *,
    find_links: Path,
    env: Mapping[str, str],
    log: Path | None,
    timeout: float = 3600,
) -> None:
    """The venv's own pip installs ``requirements`` from ``find_links`` alone (paths given as this machine's)."""
    constraints = find_links.parent / f"{find_links.name}-constraints.txt"
    constraints.write_text("".join(f"{c}\n" for c in venv.constraints), encoding="utf-8")
    args = [
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--no-input",
        "--no-compile",  # byte-compiling torch's thousands of modules under Wine takes minutes and proves nothing here
        "--no-index",
        "--find-links",
        windows_path(find_links),
        "--constraint",
        windows_path(constraints),
        *(windows_path(Path(r)) if Path(r).is_absolute() and Path(r).exists() else r for r in requirements),
    ]
    run_windows(
        venv.host, venv.python, args, env={**env, **_PYTHON_ENV}, log=log, what="pip install (Windows)", timeout=timeout
    )


@contextlib.contextmanager
def fresh_wheel_venv(
    msvc_root: Path,
    wheel: Path | None,
    requirements: Sequence[str],
    *,
    python: VersionTuple,
    torch_source: TorchSource,
    plan_index: str,
    wheel_deps: bool,
    cache: CacheLayout,
    log: Path | None,
) -> Iterator[WindowsVenv]:
    """:meth:`dswheels.platforms.hosts.PlatformHost.wheel_venv` under Wine: the Windows CPython of ``python``
    (made once, :func:`~.cpython_build.windows_cpython`), a fresh venv of it in the cache's verify area,
    ``requirements`` and ``wheel`` installed by its pip from the host's download of them; removed afterwards."""
    env = dict(os.environ)  # Wine's own variables and PATH: the Windows programs run with this machine's
    host = find_wine(env, cache=cache)
    tools = wine_msvc(host, find_msvc_root(msvc_root, toolset="14"), cache.wine_cpython_tools)
    base = windows_cpython(python, compat=load_compat(), tools=tools, cache=cache, env=env, jobs=os.cpu_count() or 2)
    cache.verify.mkdir(parents=True, exist_ok=True)
    try:
        with tempfile.TemporaryDirectory(prefix="wine-venv-", dir=cache.verify) as tmp:
            venv = make_windows_venv(base, host, where=Path(tmp) / "env", env=env, log=log)
            wheelhouse = cache.wine_wheelhouse(f"cp{base.tag}")
            download_for_windows(  # what the wheel needs, not the wheel: pip installs that from its path
                requirements,
                dest=wheelhouse,
                python=format_version(python),
                uv_index_args=torch_index_args(torch_source, plan_index),
                pip_index_args=pip_index_args(torch_source, plan_index),
                pip=host_pip(cache, log=log),
                constraints=venv.constraints,
                log=log,
            )
            if wheel is None:  # what the wheel needs, for a wheel that comes from elsewhere (an index: windows_user)
                pip_install_offline(venv, requirements, find_links=wheelhouse, env=env, log=log)
            elif wheel_deps:
                pip_install_offline(venv, [*requirements, str(wheel)], find_links=wheelhouse, env=env, log=log)
            else:
                pip_install_offline(venv, requirements, find_links=wheelhouse, env=env, log=log)
                pip_install_offline(venv, ["--no-deps", str(wheel)], find_links=wheelhouse, env=env, log=log)
            yield venv
    finally:
        wait_for_wineserver(cache.wine_prefix, env)  # a verify leaves no Windows process behind
