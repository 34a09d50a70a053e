"""Other Pythons of this machine for builds that need one (uv finds interpreters on PATH)."""

from __future__ import annotations

import shutil
from pathlib import Path

__all__ = ["python_on_path"]


def python_on_path(version: str, where: Path) -> str | None:
    """A directory holding just ``python<version>``, for the front of PATH; None when there is no such Python.

    pyenv's shims on PATH answer for a version only where it is selected, so uv must find a real
    interpreter before a shim: pyenv's own copy of that version first, else the one PATH has.
    """
    pyenv = sorted(Path("/root/.pyenv/versions").glob(f"{version}*/bin/python{version}"))
    found = str(pyenv[-1]) if pyenv else shutil.which(f"python{version}")
    if found is None:
        return None
    link = where / f"python{version}"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.unlink(missing_ok=True)
    link.symlink_to(found)
    return str(where)
