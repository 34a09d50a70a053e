"""Typed view of ``dswheels/compat.yml``: the facts every planning decision comes from.

The file is package data and part of this project, so a malformed entry is a bug: loading
fails loudly (``CompatDataError``) and a unit test loads it on every run.

:mod:`.entries` holds one type per kind of entry (a torch release, a CUDA toolkit, a rule,
...) and the whole file typed (:class:`Compat`) with its lookups; :mod:`.read` reads the YAML
into them. What the commands and effects use is importable from here.
"""

from __future__ import annotations

from dswheels.kernel.compat.entries import Compat, describe_versions
from dswheels.kernel.compat.read import CompatDataError, load_compat, parse_compat

__all__ = ["Compat", "CompatDataError", "describe_versions", "load_compat", "parse_compat"]
