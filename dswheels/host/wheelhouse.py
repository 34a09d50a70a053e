"""The wheelhouse: what ``dswheels build`` writes, and finding wheels on disk.

``dswheels build`` writes ``OUT/<variant>/<wheel>`` (default OUT: ``wheelhouse/``,
:mod:`dswheels.kernel.locations`) with its build manifest (``<wheel>.manifest.json``) and, with
debug symbols kept, ``<wheel stem>.debug.tar.gz`` beside it (:func:`place_wheel`); a failed
build leaves none of the three (:func:`discard_wheel`). A directory stands for the wheels in it
and in its subdirectories one level down: ``wheelhouse/``, ``wheelhouse/cpu/`` and a flat
``dist/`` all work (:func:`find_wheels`).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from dswheels.host.files import write_text_atomic
from dswheels.host.log import get_reporter
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.locations import WHEELHOUSE
from dswheels.kernel.manifest import Manifest, manifest_name, render_manifest
from dswheels.kernel.model import Cell
from dswheels.kernel.naming import try_parse_wheel

__all__ = [
    "debug_archive_name",
    "discard_wheel",
    "find_wheels",
    "is_wheel_file",
    "place_wheel",
    "remove_stale",
    "remove_stale_of_cell",
]


def debug_archive_name(wheel_name: str) -> str:
    """The debug symbols a build kept for a wheel (``--debug-symbols``): ``<wheel stem>.debug.tar.gz``."""
    return wheel_name.removesuffix(".whl") + ".debug.tar.gz"


def _with_sidecars(wheel: Path) -> tuple[Path, Path, Path]:
    """The wheel, its manifest and its debug archive: what a build leaves in ``OUT/<variant>/``."""
    return wheel, wheel.with_name(manifest_name(wheel.name)), wheel.with_name(debug_archive_name(wheel.name))


def place_wheel(out_variant: Path, wheel: Path, *, debug_archive: Path | None, manifest: Manifest) -> tuple[Path, Path]:
    """Copy a finished wheel (and its debug archive) into ``out_variant`` and write its manifest beside it.

    The wheel gets its name in one rename; a manifest is never left beside a wheel it does not
    describe. Returns the wheel's and the manifest's paths.
    """
    out_variant.mkdir(parents=True, exist_ok=True)
    final, manifest_path, _debug = _with_sidecars(out_variant / wheel.name)
    if manifest_path.exists():
        manifest_path.unlink()  # never a manifest beside a wheel it does not describe
    tmp = out_variant / f".{wheel.name}.partial"
    shutil.copyfile(wheel, tmp)
    tmp.replace(final)
    if debug_archive is not None:
        shutil.copyfile(debug_archive, out_variant / debug_archive.name)
    write_text_atomic(manifest_path, render_manifest(manifest))
    return final, manifest_path


def discard_wheel(wheel: Path) -> None:
    """Remove a wheel and what was written beside it (manifest, debug symbols)."""
    for path in _with_sidecars(wheel):
        path.unlink(missing_ok=True)


def remove_stale(wheel: Path) -> None:
    """After a failed build: remove a wheel of the same name (and its sidecars) an earlier build left, saying so."""
    for path in _with_sidecars(wheel):
        if path.exists():
            path.unlink()
            get_reporter().warning(f"removed {path}: it is not the result of this build")


def remove_stale_of_cell(out_variant: Path, cell: Cell, *, keep: str = "") -> None:
    """Remove every wheel of ``cell`` in ``out_variant`` but ``keep`` (and their sidecars): a Linux wheel's name
    carries its floor (``manylinux_2_N``), so an earlier build of the cell may have left it under another name."""
    if not out_variant.is_dir():
        return
    for path in sorted(out_variant.glob("*.whl")):
        wheel = try_parse_wheel(path.name)
        if wheel is not None and wheel.cell == cell and path.name != keep:
            remove_stale(path)


def _checked(test: Callable[[], bool], path: Path) -> bool:
    try:
        return test()
    except OSError as exc:  # e.g. a name longer than the file system allows, or no permission
        raise ConfigError(f"{str(path)[:200]}: {exc.strerror}") from None


def is_wheel_file(path: Path) -> bool:
    """A ``*.whl`` that is a regular file; ConfigError when the path cannot even be looked at."""
    return path.name.endswith(".whl") and _checked(path.is_file, path)


def _wheels_in(directory: Path) -> list[Path]:
    def listing() -> list[Path]:
        entries = sorted(directory.iterdir())
        subdirs = [sub for sub in entries if sub.is_dir()]
        return entries + [p for sub in subdirs for p in sorted(sub.iterdir())]

    try:
        candidates = listing()
    except OSError as exc:
        raise ConfigError(f"{str(directory)[:200]}: {exc.strerror}") from None
    return sorted(p for p in candidates if is_wheel_file(p))


def find_wheels(paths: Sequence[Path]) -> list[Path]:
    """The wheels ``paths`` name, a directory standing for the wheels in it and one level down.

    Other paths are passed on as given (the reader says what is wrong with them). With no
    paths: the wheels in ``wheelhouse/``, what `dswheels build` wrote. Raises ConfigError
    when that finds nothing.
    """
    if not paths:
        if _checked(WHEELHOUSE.is_dir, WHEELHOUSE) and (built := _wheels_in(WHEELHOUSE)):
            return built
        raise ConfigError(
            f"no wheels given, and none in {WHEELHOUSE}/ here (where `dswheels build` writes them)",
            hint=f"build one first (`dswheels build`), run from the directory that holds {WHEELHOUSE}/, "
            "or name the wheels (or their directory)",
        )
    found = [wheel for path in paths for wheel in (_wheels_in(path) if _checked(path.is_dir, path) else [path])]
    if not found:
        raise ConfigError(
            f"no wheels in {', '.join(map(str, paths))}",
            hint="build some first (`dswheels build`), or name the directory that holds them",
        )
    return found
