"""Run :mod:`dswheels.probes.no_jit` in a target interpreter: the one JIT-forbidding loader.

``verify`` and ``install`` load a wheel's ops with :func:`load_ops`; ``smoke`` trains through
the same script (:data:`NO_JIT_SCRIPT` ``train``/``adam``). Every run gets an empty
``TORCH_EXTENSIONS_DIR`` from the caller: whatever is in it afterwards was JIT-compiled.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from dswheels.host import proc
from dswheels.kernel.errors import DswheelsError
from dswheels.kernel.opload_result import LoadReport, parse_load
from dswheels.probes import no_jit

__all__ = ["NO_JIT_SCRIPT", "jit_files", "load_ops"]

NO_JIT_SCRIPT = Path(no_jit.__file__)


def jit_files(extensions_dir: Path) -> tuple[str, ...]:
    """What is in ``TORCH_EXTENSIONS_DIR`` (its entries, sorted): a JIT compile's build directories."""
    return tuple(sorted(p.name for p in extensions_dir.iterdir())) if extensions_dir.is_dir() else ()


def load_ops(
    python: Path | str,
    ops: Sequence[str] | None,
    *,
    env: Mapping[str, str],
    extensions_dir: Path,
    cwd: Path | None = None,
    log_file: Path | None = None,
    timeout: float = 1200,
    error: type[DswheelsError] = DswheelsError,
) -> tuple[LoadReport | None, proc.RunResult]:
    """Load ``ops`` (None: every op the installed wheel marks) in ``python`` with JIT forbidden.

    ``extensions_dir`` becomes ``TORCH_EXTENSIONS_DIR``; it should be empty. ``env`` carries
    ``DS_ACCELERATOR`` (or leaves it to DeepSpeed's detection). The report is None when the script
    printed nothing (the run's tail says why).
    """
    request = {"ops": None if ops is None else list(ops)}
    result = proc.capture(
        [str(python), str(NO_JIT_SCRIPT), "load", json.dumps(request)],
        cwd=cwd,
        env={**env, "TORCH_EXTENSIONS_DIR": str(extensions_dir)},
        log_file=log_file,
        heartbeat=60,
        heartbeat_label="loading the ops",
        timeout=timeout,
        error=error,
        what="loading the ops",
    )
    answer = proc.marked_json(result.output, no_jit.LOAD_MARK)
    if not isinstance(answer, dict):
        return None, result
    return parse_load(answer, jit_files(extensions_dir)), result
