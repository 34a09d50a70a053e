"""GitHub Actions: detection, job summaries and step outputs (files named by the runner)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from pathlib import Path

from dswheels.errors import ConfigError
from dswheels.log import get_reporter

__all__ = ["in_github_actions", "write_output", "write_summary"]


def in_github_actions(env: Mapping[str, str] | None = None) -> bool:
    return (env if env is not None else os.environ).get("GITHUB_ACTIONS") == "true"


def write_summary(markdown: str, env: Mapping[str, str] | None = None) -> bool:
    """Append to ``$GITHUB_STEP_SUMMARY``; False when not running under Actions, or when the file
    cannot be written to (a warning: the summary only shows what the command already did)."""
    path = (env if env is not None else os.environ).get("GITHUB_STEP_SUMMARY")
    if not path:
        return False
    try:
        with Path(path).open("a", encoding="utf-8") as fh:
            fh.write(markdown.rstrip("\n") + "\n\n")
    except OSError as exc:
        get_reporter().warning(f"cannot append the job summary to $GITHUB_STEP_SUMMARY ({path}): {exc.strerror}")
        return False
    return True


def write_output(name: str, value: str, env: Mapping[str, str] | None = None) -> bool:
    """Set a step output in ``$GITHUB_OUTPUT`` (multi-line safe, with a random delimiter)."""
    path = (env if env is not None else os.environ).get("GITHUB_OUTPUT")
    if not path:
        return False
    try:
        with Path(path).open("a", encoding="utf-8") as fh:
            if "\n" in value:
                delimiter = f"ghadelimiter_{uuid.uuid4()}"
                fh.write(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
            else:
                fh.write(f"{name}={value}\n")
    except OSError as exc:
        raise ConfigError(
            f"cannot append the step output {name} to $GITHUB_OUTPUT ({path}): {exc.strerror}",
            hint="GitHub Actions names a file there; outside Actions, unset GITHUB_OUTPUT",
        ) from None
    return True
