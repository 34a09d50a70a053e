"""GitHub Actions: detection, job summaries and step outputs (files named by the runner). Commands write the
job summary through their reporter (:meth:`dswheels.host.log.Reporter.summary`), which calls :func:`write_summary`."""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from pathlib import Path

from dswheels.host.log import TEXT_ERRORS, get_reporter
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.urls import redact_text

__all__ = ["add_path", "in_github_actions", "write_env", "write_output", "write_summary"]


_WHAT = {"GITHUB_OUTPUT": "output", "GITHUB_ENV": "variable"}


def in_github_actions(env: Mapping[str, str] | None = None) -> bool:
    return (env if env is not None else os.environ).get("GITHUB_ACTIONS") == "true"


def write_summary(markdown: str, env: Mapping[str, str] | None = None) -> bool:
    """Append to ``$GITHUB_STEP_SUMMARY``; False when not running under Actions, or when the file
    cannot be written to (a warning: the summary only shows what the command already did)."""
    path = (env if env is not None else os.environ).get("GITHUB_STEP_SUMMARY")
    if not path:
        return False
    try:
        with Path(path).open("a", encoding="utf-8", errors=TEXT_ERRORS) as fh:  # shown, never parsed
            fh.write(redact_text(markdown).rstrip("\n") + "\n\n")  # a summary is shown: no URL's credentials
    except OSError as exc:
        get_reporter().warning(f"cannot append the job summary to $GITHUB_STEP_SUMMARY ({path}): {exc.strerror}")
        return False
    return True


def write_output(name: str, value: str, env: Mapping[str, str] | None = None) -> bool:
    """Set a step output in ``$GITHUB_OUTPUT`` (multi-line safe, with a random delimiter)."""
    return _append_named("GITHUB_OUTPUT", name, value, env)


def write_env(name: str, value: str, env: Mapping[str, str] | None = None) -> bool:
    """Set ``name`` for the job's later steps in ``$GITHUB_ENV``; False when not running under Actions."""
    return _append_named("GITHUB_ENV", name, value, env)


def add_path(directory: str, env: Mapping[str, str] | None = None) -> bool:
    """Put ``directory`` first on PATH for the job's later steps (``$GITHUB_PATH``)."""
    path = (env if env is not None else os.environ).get("GITHUB_PATH")
    if not path:
        return False
    if "\n" in directory or "\r" in directory:
        msg = f"not a directory for GITHUB_PATH: {directory!r}"
        raise ValueError(msg)
    with Path(path).open("a", encoding="utf-8") as fh:
        fh.write(directory + "\n")
    return True


def _append_named(file_variable: str, name: str, value: str, env: Mapping[str, str] | None) -> bool:
    """``name=value`` in the runner's file ``$file_variable`` (a heredoc with a random delimiter when multi-line)."""
    path = (env if env is not None else os.environ).get(file_variable)
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
            f"cannot append the step {_WHAT[file_variable]} {name} to ${file_variable} ({path}): {exc.strerror}",
            hint=f"GitHub Actions names a file there; outside Actions, unset {file_variable}",
        ) from None
    return True
