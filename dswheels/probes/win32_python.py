"""The Wine host's interpreter: the build's Linux CPython, answering as a Windows one where the build asks.

The Wine host (:mod:`dswheels.platforms.wine`) runs every script of a Windows build through a small
launcher, ``python win32_python.py CONFIG_JSON ARGS...``, so the build steps that run the
interpreter (DeepSpeed's op builders probed, ``python -m build``, setup.py) are the same as on a
windows-2022 runner. Everything that decides the build is the real code of the cell's DeepSpeed,
torch and setuptools, run with the answers Windows gives:

* ``sys.platform`` is ``win32`` when a script starts: DeepSpeed's setup.py and op builders take
  their win32 branches (ops built by default, ``MANIFEST_win.in``, the ``.bat`` scripts, the
  builders' win32 flags and libraries);
* ``torch.utils.cpp_extension`` answers as on Windows (``IS_WINDOWS`` and the names derived from it;
  the include and library folders of the cell's **Windows** torch wheel; the Windows CUDA root as
  ``CUDA_HOME``), so ``BuildExtension`` writes its MSVC ninja rules (``cl /showIncludes ...``, nvcc
  with ``-Xcompiler`` and MSVC's flags) and links through setuptools' ``MSVCCompiler``;
* setuptools learns its target the way it does for any cross build: ``_PYTHON_HOST_PLATFORM``
  (``win-amd64``: the build folders and the wheel's tag) and ``SETUPTOOLS_EXT_SUFFIX``
  (``.cp311-win_amd64.pyd``), set by the caller; its compiler is ``msvc`` (DIST_EXTRA_CONFIG), and
  ``sysconfig.get_python_inc`` names CPython's Windows headers (PC/pyconfig.h), not this Linux one's;
* setup.py's win32 file operations name paths with ``\\`` (``.\\csrc``): :func:`shutil.copytree` and
  :func:`shutil.rmtree` read a relative ``\\`` path as Windows would.

Forms: ``win32_python.py CONFIG SCRIPT ARGS`` runs a script so (what ``python SCRIPT`` does);
``win32_python.py CONFIG -m build ARGS`` runs the ``build`` frontend as it is (it only starts the
backend, with this launcher as ``sys.executable``, so setup.py runs as a script of the first form).

The compilers are the real ``cl``, ``link`` and ``nvcc`` of Windows, run under Wine by the scripts
the caller put first on ``PATH`` (:mod:`wine_tool`). What is not Windows: this interpreter (Linux
CPython of the cell's minor, whose version and ABI tags the wheel takes) and the path names
setuptools writes (``/``: the tool scripts translate them). Standard library only, besides what
the build has anyway (torch, setuptools).
"""

from __future__ import annotations

import json
import os
import runpy
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Imported before sys.platform says win32: they decide their platform when imported, and this
# process is Linux. What is imported after it (DeepSpeed's op_builder and accelerator) is meant
# to see win32.
_LINUX_FIRST = (
    "subprocess",
    "multiprocessing",
    "concurrent.futures",
    "tempfile",
    "ctypes",
    "asyncio",
    "uuid",
    "platform",
    "sysconfig",
    "numpy",
    "psutil",
    "torch",
    "torch.utils.cpp_extension",
    "setuptools",
    # by the names setuptools' distutils shim gives them (a second copy under setuptools._distutils
    # would be other classes)
    "distutils.sysconfig",
    "distutils.command.build_ext",
    "distutils._msvccompiler",
    "distutils.compilers.C.msvc",
    "setuptools.command.build_ext",
    "setuptools.command.bdist_wheel",
    "setuptools.build_meta",
    "wheel.bdist_wheel",
)
CROSS_VARIABLES = ("_PYTHON_HOST_PLATFORM", "SETUPTOOLS_EXT_SUFFIX", "DISTUTILS_USE_SDK")


def _import_linux_first() -> None:
    import importlib  # noqa: PLC0415 - only here

    for name in _LINUX_FIRST:
        try:
            importlib.import_module(name)
        except ImportError:  # noqa: PERF203 - what the interpreter lacks, the build does not use
            continue


def _windows_path(func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` reading a relative path with ``\\`` as Windows does (setup.py's ``.\\csrc``)."""

    def wrapped(*args: Any, **kwargs: Any) -> Any:  # noqa: ANN401 - shutil's own signatures
        fixed = [
            a.replace("\\", "/") if isinstance(a, str) and "\\" in a and not a.startswith("/") else a for a in args
        ]
        return func(*fixed, **kwargs)

    return wrapped


def _stand_in(config: dict[str, Any]) -> None:
    """Answer as the Windows interpreter of the cell would (see the module's docstring)."""
    import importlib  # noqa: PLC0415 - only here

    # imported by _import_linux_first already; by name, as this interpreter's own packages
    torch = importlib.import_module("torch")
    cpp_extension = importlib.import_module("torch.utils.cpp_extension")

    torch_root = config["windows_torch"]
    cuda = config.get("cuda") or None
    answers: dict[str, object] = {
        "IS_WINDOWS": True,
        "IS_LINUX": False,
        "LIB_EXT": ".pyd",
        "EXEC_EXT": ".exe",
        "CLIB_PREFIX": "",
        "CLIB_EXT": ".dll",
        "SHARED_FLAG": "/DLL",
        # the module's own globals, read at call time: include_paths(), library_paths(), BuildExtension
        "_TORCH_PATH": torch_root,
        "TORCH_LIB_PATH": os.path.join(torch_root, "lib"),  # noqa: PTH118 - as torch spells it
        "CUDA_HOME": config["cuda_home"] if cuda else None,
    }
    for name, value in answers.items():
        setattr(cpp_extension, name, value)
    torch.version.cuda = cuda  # what torch's Windows build of the cell reports (a CPU build: None)
    include = config["python_include"]
    for name in ("distutils.sysconfig", "setuptools._distutils.sysconfig"):
        module = sys.modules.get(name)
        if module is not None:
            setattr(module, "get_python_inc", lambda plat_specific=False, prefix=None: include)  # noqa: ARG005, B010
    sys.platform = "win32"
    setattr(shutil, "copytree", _windows_path(shutil.copytree))  # noqa: B010 - replaced for setup.py's win32 branch
    setattr(shutil, "rmtree", _windows_path(shutil.rmtree))  # noqa: B010


def main(argv: list[str]) -> int:
    config = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    missing = [name for name in CROSS_VARIABLES if not os.environ.get(name)]
    if missing:
        sys.stderr.write(f"win32_python: {', '.join(missing)} not set: the caller sets the cross build's variables\n")
        return 2
    args = argv[2:]
    if args[:1] == ["-m"]:  # the build frontend: as it is; it starts the backend through this launcher
        sys.executable = config["launcher"]
        sys.argv = [args[1], *args[2:]]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        return 0
    _import_linux_first()
    _stand_in(config)
    script = args[0]
    sys.argv = [script, *args[1:]]
    sys.path.insert(0, str(Path(script).resolve().parent))
    runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
