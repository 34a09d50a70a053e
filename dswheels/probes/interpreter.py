"""What an interpreter is: its Python, platform, paths, torch, and the build modules it has.

Run as ``python interpreter.py [--gpus] MODULE...``: prints one line, :data:`MARK` and a JSON
object (the keys :class:`dswheels.host.venvs.PythonInfo` reads). torch is imported
(its version and CUDA, and where it lives); a torch that fails to import is reported, never
raised. Each MODULE is imported for its ``__version__`` (``"?"`` without one, ``null`` when
it does not import). ``--gpus`` also asks torch how many CUDA devices it sees (``smoke``
picks its device by it): that initialises CUDA, so only callers that need it ask.

Standard library only, Python 3.10+: it runs in a build or test venv, where dswheels is not
installed.
"""

from __future__ import annotations

import importlib
import json
import platform
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path

MARK = "DSWHEELS-PROBE "


def _torch(info: dict[str, object], *, gpus: bool) -> None:
    try:
        torch = importlib.import_module("torch")
        info["torch"] = str(torch.__version__)
        info["torch_cuda"] = torch.version.cuda
        info["torch_parent"] = str(Path(str(torch.__file__)).parent.parent)
        if gpus:
            info["cuda_devices"] = int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    except Exception as exc:  # noqa: BLE001 - a broken torch is a fact to report
        info["torch_error"] = repr(exc)


def _version(name: str) -> str | None:
    try:
        return str(getattr(importlib.import_module(name), "__version__", "?"))
    except Exception:  # noqa: BLE001 - absent or broken: either way not usable
        return None


def describe(modules: Sequence[str], *, gpus: bool = False) -> dict[str, object]:
    """The facts, as :func:`main` prints them."""
    info: dict[str, object] = {
        "python": platform.python_version(),
        "executable": sys.executable,
        "platform": sysconfig.get_platform(),
        "gil_disabled": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
        "scripts": sysconfig.get_path("scripts"),
        "purelib": sysconfig.get_path("purelib"),
        "cflags": sysconfig.get_config_var("CFLAGS") or "",
        "torch": None,
        "torch_cuda": None,
    }
    _torch(info, gpus=gpus)
    info["modules"] = {name: _version(name) for name in modules}
    return info


def main(argv: Sequence[str]) -> int:
    args = list(argv[1:])
    gpus = "--gpus" in args
    modules = [a for a in args if a != "--gpus"]
    sys.stdout.write(MARK + json.dumps(describe(modules, gpus=gpus)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
