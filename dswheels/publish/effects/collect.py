"""What `dswheels publish` sends: the wheels named on the command line (or `dswheels build`'s).

Where they go is a store (:mod:`dswheels.stores`: a directory, a GitHub Release, an upload
server), each keeping one rule (:mod:`~dswheels.stores.outgoing`): a published file is immutable.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dswheels.host.wheelhouse import find_wheels, is_wheel_file
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.naming import parse_wheel
from dswheels.stores.wheel_ref import LocalWheel, local_wheel

__all__ = ["collect_wheels"]


def collect_wheels(paths: Sequence[Path]) -> list[LocalWheel]:
    """Wheels named directly, or every ``*.whl`` in the directories given (and one level down, as
    `dswheels build` writes them); no paths: what `dswheels build` wrote (``wheelhouse/``)."""
    found = find_wheels(paths)
    for path in found:
        if not is_wheel_file(path):
            raise ConfigError(f"{path}: no such wheel or directory")
    names: dict[str, Path] = {}
    for path in found:
        try:
            parse_wheel(path.name)
        except ValueError as exc:
            raise ConfigError(
                f"not a dswheels wheel: {exc}",
                hint="only wheels built by `dswheels build` can be published (their names carry the torch build)",
            ) from None
        if path.name in names and names[path.name].resolve() != path.resolve():
            raise ConfigError(f"{path.name} is given twice: {names[path.name]} and {path}")
        names[path.name] = path
    return [local_wheel(p) for p in names.values()]
