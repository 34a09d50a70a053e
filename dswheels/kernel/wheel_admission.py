"""Whether a file named as a dswheels wheel is that wheel: the one judgement of ``publish``,
``index`` and ``install`` (before pip sees it).

A wheel is admitted when its contents say what its name says and it writes into an
environment only what DeepSpeed's ``setup.py`` makes it write:

- METADATA's Name and Version are the name's (the version with its local label,
  ``0.19.8+cu128torch2.9``), its only ``torch`` requirement is the pin of the label's torch
  (``torch==2.9.*``), and the ``Tag`` lines of its WHEEL file are exactly the name's tag;
- its members lie under ``deepspeed/`` (installed into site-packages), its one
  ``deepspeed-<version>.dist-info/`` and its ``deepspeed-<version>.data/``, whose only files
  are the ``scripts/`` DeepSpeed declares (installed into ``bin/`` or ``Scripts\\``) and
  ``purelib/``/``platlib/`` under ``deepspeed/``; no ``data/`` (anywhere under the
  environment's prefix: ``bin/python3``) and no ``headers/``;
- its ``entry_points.txt`` is read the same by a strict reading and by the readers pip and uv
  use (:mod:`dswheels.kernel.entry_points`), and declares no console or GUI script (pip would
  write one into ``bin/``) other than DeepSpeed's script names.

So a file at the site-packages root (a ``.pth`` runs at every interpreter start), another
distribution's ``.dist-info`` (pip would think it installed), ``bin/pip`` or ``bin/python3``
can never come from a wheel dswheels lets through.
"""

from __future__ import annotations

from collections.abc import Sequence

from packaging.utils import canonicalize_name, canonicalize_version

from dswheels.kernel.entry_points import EntryPointsError, read_entry_points, script_names
from dswheels.kernel.model import OS
from dswheels.kernel.naming import PROJECT, PublishedWheel
from dswheels.kernel.versions import format_version
from dswheels.kernel.wheel_contents import Metadata, torch_pin

__all__ = ["SCRIPTS_POSIX", "SCRIPTS_WINDOWS", "admission_problems", "entry_point_scripts", "wheel_tags"]

# DeepSpeed's setup.py, ``scripts=``, 0.14.0 to 0.19.8 (ds_elastic until 0.19.x; ds_nvme_tune and ds_io since 0.16.0)
SCRIPTS_POSIX = frozenset(
    {"deepspeed", "deepspeed.pt", "ds", "ds_ssh", "ds_report", "ds_bench", "dsr", "ds_elastic", "ds_nvme_tune", "ds_io"}
)
# on win32 (since 0.14.5): the .bat launchers and the two Python scripts they run
SCRIPTS_WINDOWS = frozenset({"deepspeed.bat", "ds", "ds_report.bat", "ds_report"})
_SCRIPTS = {OS.LINUX: SCRIPTS_POSIX, OS.WINDOWS: SCRIPTS_WINDOWS}

_MAX_SHOWN = 8  # problems of one kind listed before "and N more"


def wheel_tags(wheel_file: str) -> list[str]:
    """The ``Tag:`` values of a WHEEL file.

    >>> wheel_tags("Wheel-Version: 1.0\\nRoot-Is-Purelib: false\\nTag: cp311-cp311-linux_x86_64\\n")
    ['cp311-cp311-linux_x86_64']
    """
    tags = []
    for line in wheel_file.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == "tag":
            tags.append(value.strip())
    return tags


def entry_point_scripts(text: str) -> list[str]:
    """The names of the console and GUI scripts an ``entry_points.txt`` declares; ``EntryPointsError``
    when pip's readers and a strict reading would not agree on them (:mod:`dswheels.kernel.entry_points`).

    >>> entry_point_scripts("[pytest_randomly.random_seeder]\\nds = x:y\\n[console_scripts]\\npip = evil:main\\n")
    ['pip']
    """
    return script_names(read_entry_points(text))


def _unsafe_name(name: str) -> bool:
    """A member name that could land somewhere else than it says (pip resolves ``..``)."""
    parts = name.split("/")
    return (
        not name
        or name.startswith("/")
        or "\\" in name
        or ":" in parts[0]
        or any(part in ("", ".", "..") for part in parts[:-1])
        or parts[-1] in (".", "..")
        or any(ord(c) < 32 for c in name)
    )


def _same_dist(prefix: str, version: str) -> bool:
    """Whether ``deepspeed-<version>`` (a .dist-info/.data name without its suffix) is this wheel's."""
    name, sep, found = prefix.partition("-")
    return (
        bool(sep)
        and canonicalize_name(name) == PROJECT
        and canonicalize_version(found) == canonicalize_version(version)
    )


def _member_problem(name: str, *, version: str, scripts: frozenset[str]) -> str:
    """Why a member may not be installed ("" when it may)."""
    if _unsafe_name(name):
        return f"{name!r}: not a plain relative path"
    top, _sep, rest = name.partition("/")
    if top == PROJECT:
        return ""
    if name.endswith("/") and (top.endswith((".dist-info", ".data")) and _same_dist(top.rpartition(".")[0], version)):
        return ""  # a directory entry of the wheel's own metadata or data
    if top.endswith(".dist-info"):
        return "" if _same_dist(top.removesuffix(".dist-info"), version) else f"{top}/: another distribution's metadata"
    if top.endswith(".data") and _same_dist(top.removesuffix(".data"), version):
        scheme, _sep, path = rest.partition("/")
        if scheme == "scripts":
            return "" if path in scripts else f"{name}: a script DeepSpeed does not install (bin/{path})"
        if scheme in ("purelib", "platlib"):
            inner = path.partition("/")[0]
            return "" if inner == PROJECT else f"{name}: outside the deepspeed package (site-packages/{path})"
        return f"{name}: installed under the environment's {scheme or 'data'} directory, which DeepSpeed never writes"
    return f"{name}: outside the deepspeed package (site-packages/{name})"


def _capped(problems: Sequence[str]) -> list[str]:
    if len(problems) <= _MAX_SHOWN:
        return list(problems)
    return [*problems[:_MAX_SHOWN], f"... and {len(problems) - _MAX_SHOWN} more"]


def admission_problems(
    wheel: PublishedWheel,
    *,
    names: Sequence[str],
    metadata: Metadata,
    wheel_file: str | None,
    entry_points: str | None,
) -> list[str]:
    """What makes the file ``wheel`` names something else than that wheel (empty: nothing).

    ``names`` are its zip members, ``metadata`` its METADATA, ``wheel_file`` and
    ``entry_points`` the text of its ``.dist-info/WHEEL`` and ``entry_points.txt`` (None: absent).
    """
    problems: list[str] = []
    version = str(wheel.version)
    if canonicalize_name(metadata.name) != PROJECT or metadata.version != version:
        problems.append(f"its METADATA says {metadata.name} {metadata.version}, its name says {PROJECT} {version}")
    pin = torch_pin(wheel.cell.torch)
    torch = [str(r) for r in metadata.requirements if canonicalize_name(r.name) == "torch"]
    if torch != [pin]:
        problems.append(
            f"it requires {', '.join(torch) or 'no torch'}; a wheel for torch {format_version(wheel.cell.torch)} "
            f"pins {pin}"
        )
    tag = "-".join(wheel.filename.removesuffix(".whl").split("-")[-3:])
    tags = wheel_tags(wheel_file) if wheel_file is not None else []
    if tags != [tag]:
        problems.append(f"its WHEEL file says Tag: {', '.join(tags) or 'none'}; its name says {tag}")
    scripts = _SCRIPTS[wheel.cell.platform.os]
    members = list(dict.fromkeys(p for name in names if (p := _member_problem(name, version=version, scripts=scripts))))
    problems.extend(_capped(members))
    twice = sorted({n for n in names if names.count(n) > 1} if len(set(names)) != len(names) else ())
    if twice:  # which copy an installer takes differs (pip: the last, others: the first)
        problems.append(f"its zip lists {', '.join(_capped(twice))} more than once")
    try:
        foreign = [n for n in entry_point_scripts(entry_points or "") if n not in scripts]
    except EntryPointsError as exc:
        problems.append(f"its {exc}: pip and uv may install scripts dswheels cannot see")
        foreign = []
    if foreign:
        shown = ", ".join(_capped(foreign))
        problems.append(f"its entry_points.txt declares scripts DeepSpeed does not install: {shown}")
    return problems
