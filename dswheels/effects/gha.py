"""GitHub Actions: detection, job summaries and step outputs (files named by the runner)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from pathlib import Path

from dswheels.core.urls import redact_text
from dswheels.log import TEXT_ERRORS

__all__ = ["in_github_actions", "write_output", "write_summary"]


def in_github_actions(env: Mapping[str, str] | None = None) -> bool:
    return (env if env is not None else os.environ).get("GITHUB_ACTIONS") == "true"


def write_summary(markdown: str, env: Mapping[str, str] | None = None) -> bool:
    """Append to ``$GITHUB_STEP_SUMMARY``; False when not running under Actions."""
    path = (env if env is not None else os.environ).get("GITHUB_STEP_SUMMARY")
    if not path:
        return False
    with Path(path).open("a", encoding="utf-8", errors=TEXT_ERRORS) as fh:  # shown, never parsed
        fh.write(redact_text(markdown).rstrip("\n") + "\n\n")  # a summary is shown: no URL's credentials
    return True


def write_output(name: str, value: str, env: Mapping[str, str] | None = None) -> bool:
    """Set a step output in ``$GITHUB_OUTPUT`` (multi-line safe, with a random delimiter)."""
    path = (env if env is not None else os.environ).get("GITHUB_OUTPUT")
    if not path:
        return False
    with Path(path).open("a", encoding="utf-8") as fh:
        if "\n" in value:
            delimiter = f"ghadelimiter_{uuid.uuid4()}"
            fh.write(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
        else:
            fh.write(f"{name}={value}\n")
    return True
