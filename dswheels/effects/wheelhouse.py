"""Finding wheels on disk: those a command is given, and what ``dswheels build`` wrote when it is given none.

``dswheels build`` writes ``OUT/<variant>/<wheel>`` (default OUT: ``wheelhouse/``,
:mod:`dswheels.core.locations`), so a directory stands for the wheels in it and in its
subdirectories one level down: ``wheelhouse/``, ``wheelhouse/cpu/`` and a flat ``dist/``
all work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from dswheels.core.locations import WHEELHOUSE
from dswheels.errors import ConfigError

__all__ = ["find_wheels", "is_wheel_file"]


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
