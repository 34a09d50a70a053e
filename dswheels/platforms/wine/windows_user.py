"""A Windows user's path under Wine: the install line the index shows for Windows, typed into a fresh venv.

What a Windows user does after finding a wheel on the index: in a venv of their Python, the line the
site's picker shows in Windows' form (:func:`dswheels.kernel.index_links.windows_command`: ``py -m pip
install "deepspeed==<version>" --extra-index-url <partition> --extra-index-url <torch's index>``),
then ``ds_report``. Here that venv is one of the Windows CPython dswheels builds under Wine
(:mod:`~.cpython_build`), the line is read as cmd reads it and run by that venv's own pip against the
served site, and ``ds_report`` is DeepSpeed's ``Scripts\\ds_report.bat`` run by Wine's ``cmd`` with the
venv's ``Scripts`` first on the path, as an activated venv has it.

Two stand-ins, said where they apply: ``py`` (python.org's launcher, which in an activated venv runs
the venv's Python) is the venv's ``python.exe``; and this Python has no ``_ssl``, so the line's
``https`` indexes (PyPI, PyTorch's) cannot be read from it: pip warns and skips them, and what they
would bring (torch and DeepSpeed's other requirements) is installed first from the host's download
(:func:`~.windows_venv.pip_install_offline`). DeepSpeed itself comes only from the served site (its
local version is on no other index).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dswheels.host.cache import CacheLayout
from dswheels.kernel.errors import EnvironmentMismatchError
from dswheels.kernel.jsondoc import parse_json
from dswheels.kernel.sources import TorchSource
from dswheels.kernel.versions import VersionTuple
from dswheels.platforms.wine.host import windows_path
from dswheels.platforms.wine.windows_venv import WindowsVenv, fresh_wheel_venv
from dswheels.platforms.wine.wine_gaps import run_windows

__all__ = [
    "WindowsUserRun",
    "cmd_words",
    "find_links_line",
    "install_as_windows_user",
    "installed_ops",
    "windows_line",
    "windows_user_path",
]

_PYTHON_ENV = {"PYTHONIOENCODING": "utf-8", "PYTHONDONTWRITEBYTECODE": "1"}
_PROJECT = "deepspeed"


@dataclass(frozen=True, slots=True)
class WindowsUserRun:
    line: str  # as typed
    pip: str  # what pip said
    version: str  # the DeepSpeed the venv has afterwards (importlib.metadata)
    ds_report: str  # what ds_report said
    installed: tuple[str, ...]  # the ops ds_report lists as installed


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_OP_ROW = re.compile(r"^([A-Za-z0-9_]+) \.+ \[(YES|NO)\] \.+ \[(OKAY|NO)\]", flags=re.MULTILINE)


def installed_ops(report: str) -> tuple[str, ...]:
    """The ops ``ds_report`` marks installed (its colours dropped).

    >>> installed_ops("cpu_adam ............... \\x1b[92m[YES]\\x1b[0m ....... \\x1b[92m[OKAY]\\x1b[0m\\n"
    ...               "pin_memory ............. [NO] ....... [NO]\\n")
    ('cpu_adam',)
    """
    return tuple(m.group(1) for m in _OP_ROW.finditer(_ANSI.sub("", report)) if m.group(2) == "YES")


def cmd_words(line: str) -> list[str]:
    """The words cmd hands a program for ``line``: split on spaces, double quotes grouping (and dropped).

    >>> cmd_words('py -m pip install "deepspeed==0.19.8+cu130torch2.14" --extra-index-url http://h/x/simple/')
    ['py', '-m', 'pip', 'install', 'deepspeed==0.19.8+cu130torch2.14', '--extra-index-url', 'http://h/x/simple/']
    >>> cmd_words('pip install "a b')
    Traceback (most recent call last):
    ValueError: unbalanced double quote in 'pip install "a b'
    """
    if line.count('"') % 2:
        raise ValueError(f"unbalanced double quote in {line!r}")
    if re.search(r"[&|<>^%]", line.replace("%2B", "")):  # what cmd would read as its own
        raise ValueError(f"{line!r} holds a character cmd reads as its own")
    return [word.replace('"', "") for word in re.findall(r'(?:[^ "]|"[^"]*")+', line)]


_PICK_DATA = re.compile(r'<script type="application/json" id="pick-data">(.*?)</script>', flags=re.DOTALL)


def windows_line(page: str, wheel: str) -> str:
    """The line the site's page shows in Windows' form for ``wheel`` (the picker's data: its partition's line).

    >>> page = ('<script type="application/json" id="pick-data">{"lines": [{"windows": "py -m pip install x"}], '
    ...         '"wheels": {"k": {"line": 0, "file": "x.whl"}}}</script>')
    >>> windows_line(page, "x.whl")
    'py -m pip install x'
    """
    found = _PICK_DATA.search(page)
    if found is None:
        raise ValueError("the page carries no picker data (id=pick-data)")
    data = parse_json(found.group(1), what="the page's picker data")
    lines = data.get("lines") if isinstance(data, dict) else None
    wheels = data.get("wheels") if isinstance(data, dict) else None
    if not isinstance(lines, list) or not isinstance(wheels, dict):
        raise ValueError("the page's picker data has no lines and wheels")  # noqa: TRY004 - a page, not an argument
    for entry in wheels.values():
        if isinstance(entry, dict) and entry.get("file") == wheel:
            index = entry.get("line")
            if isinstance(index, int) and 0 <= index < len(lines):
                line = lines[index]
                if isinstance(line, dict) and isinstance(line.get("windows"), str):
                    return str(line["windows"])
            raise ValueError(f"the page shows no install line for {wheel}")
    raise ValueError(f"the page does not list {wheel}")


def find_links_line(line: str) -> str:
    """``line`` with its partition's find-links page (``<site>/whl/<part>/``) in place of the partition's index.

    >>> find_links_line('py -m pip install "d==1" --extra-index-url http://h/whl/p/simple/ --extra-index-url '
    ...                 'https://t/whl/cu130')
    'py -m pip install "d==1" --find-links http://h/whl/p/ --extra-index-url https://t/whl/cu130'
    """
    words = line.split(" ")
    for at, word in enumerate(words[:-1]):
        if word == "--extra-index-url" and words[at + 1].endswith("/simple/"):
            page = words[at + 1].removesuffix("simple/")
            return " ".join([*words[:at], "--find-links", page, *words[at + 2 :]])
    raise ValueError(f"no partition index (.../simple/) in {line!r}")


def install_as_windows_user(
    venv: WindowsVenv,
    line: str,
    *,
    project: str,
    env: Mapping[str, str],
    log: Path | None,
    accelerator: str | None = None,
    timeout: float = 1800,
) -> WindowsUserRun:
    """``line`` (``py -m pip install ...``) typed into ``venv``, then ``ds_report``; fails as pip or ds_report do.

    ``accelerator``: DeepSpeed's (``DS_ACCELERATOR``) for ``ds_report``, where this machine cannot show it the
    user's: a CUDA wheel's ops are listed installed only under the accelerator they were built for, and here
    torch is a CPU build with no GPU to find."""
    words = cmd_words(line)
    if words[:3] != ["py", "-m", "pip"]:
        raise ValueError(f"not a `py -m pip` line: {line!r}")
    env = {**env, **_PYTHON_ENV}
    pip = run_windows(
        venv.host, venv.exe, words[1:], env=env, log=log, what=f"{line} (Windows)", timeout=timeout, capture=True
    )
    shown = run_windows(
        venv.host,
        venv.exe,
        ["-c", f"import importlib.metadata as m; print('VERSION', m.version({project!r}))"],
        env=env,
        log=log,
        what=f"the {project} installed",
        capture=True,
    )
    found = re.search(r"^VERSION (\S+)", shown.output, flags=re.MULTILINE)
    if found is None:
        raise EnvironmentMismatchError(f"{project} is not installed after {line!r}: {shown.output[-500:]}")
    report = _ds_report(venv, env={**env, "DS_ACCELERATOR": accelerator} if accelerator else env, log=log)
    return WindowsUserRun(
        line=line, pip=pip.output, version=found.group(1), ds_report=report, installed=installed_ops(report)
    )


def _ds_report(venv: WindowsVenv, *, env: Mapping[str, str], log: Path | None) -> str:
    """``ds_report`` as typed in an activated venv's cmd: DeepSpeed's ``Scripts\\ds_report.bat``, which runs
    ``python`` from the path (the venv's ``Scripts`` first: ``WINEPATH``)."""
    scripts = venv.root / "Scripts"
    bat = scripts / "ds_report.bat"
    if not bat.is_file():
        raise EnvironmentMismatchError(f"pip put no {bat.name} in {scripts}: a Windows user has no ds_report command")
    cmd = Path(venv.host.prefix) / "drive_c" / "windows" / "system32" / "cmd.exe"
    words: Sequence[str] = ["/c", "ds_report"]
    result = run_windows(
        venv.host,
        cmd,
        words,
        env={**env, "WINEPATH": windows_path(scripts), "VIRTUAL_ENV": windows_path(venv.root)},
        log=log,
        what="ds_report (Windows)",
        timeout=900,
        capture=True,
    )
    return result.output


def windows_user_path(
    wheel: Path,
    requirements: Sequence[str],
    *,
    page: str,
    msvc_root: Path,
    python: VersionTuple,
    torch_source: TorchSource,
    plan_index: str,
    cache: CacheLayout,
    log: Path | None,
    accelerator: str | None = None,
) -> list[WindowsUserRun]:
    """The Windows line ``page`` (the served site's index.html) shows for ``wheel``, then the same with the
    partition's find-links page, each typed into a fresh venv of the Windows CPython ``python`` that holds
    ``requirements`` (what the ``https`` indexes would bring), each followed by ``ds_report``."""
    line = windows_line(page, wheel.name)
    runs = []
    env = dict(os.environ)
    with fresh_wheel_venv(
        msvc_root,
        None,
        requirements,
        python=python,
        torch_source=torch_source,
        plan_index=plan_index,
        wheel_deps=True,
        cache=cache,
        log=log,
    ) as venv:
        for typed in (line, find_links_line(line)):
            runs.append(
                install_as_windows_user(venv, typed, project=_PROJECT, env=env, log=log, accelerator=accelerator)
            )
            run_windows(
                venv.host,
                venv.exe,
                ["-m", "pip", "uninstall", "--yes", _PROJECT],
                env={**env, **_PYTHON_ENV},
                log=log,
                what=f"pip uninstall {_PROJECT} (Windows)",
            )
    return runs
