"""``--report FILE``: a stage's result written as JSON, the one way every command writes it."""

from __future__ import annotations

import json
from pathlib import Path

from dswheels import __version__
from dswheels.host.files import failing_as, write_text_atomic
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.result import StageResult
from dswheels.kernel.urls import redact_text

__all__ = ["write_report"]


def write_report(path: Path, result: StageResult) -> None:
    """Replace ``path`` with ``result`` as JSON in one rename (a reader never sees half a report); a
    report is shown (an artifact, an issue): no URL's credentials in it. A path that cannot be
    written is a ConfigError naming it."""
    text = json.dumps(result.as_json(version=__version__), indent=2, default=str) + "\n"
    with failing_as(ConfigError, what=f"--report {path}", where=path.parent, kept="no report was written"):
        write_text_atomic(path, redact_text(text))
