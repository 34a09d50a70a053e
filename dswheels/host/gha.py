"""GitHub Actions: detection, job summaries and step outputs (files named by the runner). Commands write the
job summary through their reporter (:meth:`dswheels.host.log.Reporter.summary`), which calls :func:`write_summary`.

The runner's files (``$GITHUB_OUTPUT``, ``$GITHUB_STEP_SUMMARY``, ``$GITHUB_ENV``, ``$GITHUB_PATH``) are
judged before every command (:func:`dswheels.host.environ.check_environment`: regular files only, looked
at, never opened), and appended to by :func:`_append`, whose open never blocks (``O_NONBLOCK``: a FIFO
swapped in with no reader fails at once) and is checked again on the descriptor; a write the system
refuses (a full disk) is an error naming the file, not a traceback."""

from __future__ import annotations

import errno
import os
import stat
import uuid
from collections.abc import Mapping
from pathlib import Path

from dswheels.host.log import TEXT_ERRORS, get_reporter
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.urls import redact_text

__all__ = [
    "RUNNER_IDENTITY",
    "add_path",
    "in_github_actions",
    "runner_identity",
    "write_env",
    "write_output",
    "write_summary",
]

# what the runner says about itself (its variables, and the image's ImageOS/ImageVersion), by the key a record uses
RUNNER_IDENTITY = {
    "os": "RUNNER_OS",
    "arch": "RUNNER_ARCH",
    "name": "RUNNER_NAME",
    "environment": "RUNNER_ENVIRONMENT",  # github-hosted | self-hosted
    "image": "ImageOS",
    "image_version": "ImageVersion",
    "repository": "GITHUB_REPOSITORY",
    "run_id": "GITHUB_RUN_ID",
    "run_attempt": "GITHUB_RUN_ATTEMPT",
    "job": "GITHUB_JOB",
}


_WHAT = {"GITHUB_OUTPUT": "output", "GITHUB_ENV": "variable"}


def _flag(name: str) -> int:
    return int(getattr(os, name, 0))  # O_NONBLOCK, O_NOCTTY: POSIX


def _append(path: Path, text: str, *, errors: str = "strict") -> None:
    """Append ``text`` to the regular file ``path`` (made if missing); ``OSError`` when it cannot be opened,
    is not a regular file (``EINVAL``) or the write is refused (``ENOSPC``)."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | _flag("O_NONBLOCK") | _flag("O_NOCTTY") | _flag("O_CLOEXEC")
    fd = os.open(path, flags, 0o666)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file: the runner names a regular file to append to", str(path))
        data = memoryview(text.encode("utf-8", errors))
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)


def in_github_actions(env: Mapping[str, str] | None = None) -> bool:
    return (env if env is not None else os.environ).get("GITHUB_ACTIONS") == "true"


def write_summary(markdown: str, env: Mapping[str, str] | None = None) -> bool:
    """Append to ``$GITHUB_STEP_SUMMARY``; False when not running under Actions, or when the file
    cannot be written to (a warning: the summary only shows what the command already did)."""
    path = (env if env is not None else os.environ).get("GITHUB_STEP_SUMMARY")
    if not path:
        return False
    try:  # shown, never parsed; a summary is shown: no URL's credentials
        _append(Path(path), redact_text(markdown).rstrip("\n") + "\n\n", errors=TEXT_ERRORS)
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
    try:
        _append(Path(path), directory + "\n")
    except OSError as exc:
        raise ConfigError(
            f"cannot append {directory} to $GITHUB_PATH ({path}): {exc.strerror}",
            hint="GitHub Actions names a regular file there, on a disk with room; outside Actions, unset GITHUB_PATH",
        ) from None
    return True


def _append_named(file_variable: str, name: str, value: str, env: Mapping[str, str] | None) -> bool:
    """``name=value`` in the runner's file ``$file_variable`` (a heredoc with a random delimiter when multi-line)."""
    path = (env if env is not None else os.environ).get(file_variable)
    if not path:
        return False
    if "\n" in value:
        delimiter = f"ghadelimiter_{uuid.uuid4()}"
        text = f"{name}<<{delimiter}\n{value}\n{delimiter}\n"
    else:
        text = f"{name}={value}\n"
    try:
        _append(Path(path), text)  # one write of the whole entry: a reader never sees half of it
    except OSError as exc:
        raise ConfigError(
            f"cannot append the step {_WHAT[file_variable]} {name} to ${file_variable} ({path}): {exc.strerror}",
            hint=f"GitHub Actions names a regular file there, on a disk with room; outside Actions, unset "
            f"{file_variable}",
        ) from None
    return True


def runner_identity(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The runner and run a record was made on (:data:`RUNNER_IDENTITY`), each value one short printable line;
    {} outside GitHub Actions."""
    env = env if env is not None else os.environ
    if not in_github_actions(env):
        return {}
    found = {key: env.get(variable, "") for key, variable in RUNNER_IDENTITY.items()}
    return {key: value[:100] for key, value in found.items() if value and value.isprintable()}
