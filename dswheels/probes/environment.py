"""What ``dswheels doctor`` and ``install`` need to know of the target interpreter, seen from inside it.

Run as ``python environment.py [--light]``: prints one line, :data:`MARK` and a JSON object
(read by :mod:`dswheels.doctor.effects.collect_facts`): the Python, its torch (version, CUDA, devices,
``CUDA_HOME`` as torch computes it), the DeepSpeed installed there (read from its
``git_version_info_installed.py``, never imported: that takes seconds and prints warnings),
on Linux the glibc and ``libstdc++.so.6`` the process really loads, and the CUDA headers of
pip's ``nvidia-*`` wheels. ``--light`` (``install``) reads torch's version from
``torch/version.py`` instead of importing torch.

Every part tolerates absence: torch that does not import, a DeepSpeed without its build
info, a missing library: each becomes a fact (the error text), never an exception.

Standard library only, and Python 3.8's syntax and library (annotations are never evaluated):
it runs in whatever interpreter the user names, which may be older than dswheels' own (a
unit test parses it as 3.8).
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import json
import os
import platform
import sys
import sysconfig
from pathlib import Path
from typing import Any

MARK = "DSWHEELS-PROBE-JSON:"
_CUDA_HEADERS = ("cuda_runtime.h", "cublas_v2.h", "cusparse.h", "cusolverDn.h", "curand.h")


def _err(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


# torch/version.py and git_version_info_installed.py are ~1 KB. The bound keeps ast.parse (which
# recurses with an expression's depth) out of reach of a chain long enough to crash it: 150,000
# attributes kill Python 3.10 with SIGSEGV; 64 KiB of them parse (or raise) on 3.8-3.13.
_MAX_LITERALS_FILE = 64 * 1024


def literals(path: str) -> dict[str, Any]:
    """Module-level ``NAME = <literal>`` and ``NAME: T = <literal>`` of a file, without importing it.

    ValueError for a file larger than :data:`_MAX_LITERALS_FILE` or nested too deeply to parse."""
    with Path(path).open(encoding="utf-8") as handle:
        text = handle.read(_MAX_LITERALS_FILE + 1)
    if len(text) > _MAX_LITERALS_FILE:
        raise ValueError(f"{Path(path).name} is larger than 64 KiB (a build writes ~1 KB): not read")
    try:
        tree = ast.parse(text)
    except (RecursionError, MemoryError):
        raise ValueError(f"{Path(path).name} nests an expression too deeply to parse: not read") from None
    values: dict[str, Any] = {}
    for node in tree.body:
        target: ast.expr | None = None
        value: ast.expr | None = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        if isinstance(target, ast.Name) and value is not None:
            try:
                values[target.id] = ast.literal_eval(value)
            except (ValueError, TypeError, RecursionError, MemoryError):  # not a literal, or too deep to build
                continue
    return values


def _package_dir(name: str) -> str | None:
    """Where a package would be imported from, without importing it (None: not installed)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(next(iter(spec.submodule_search_locations)))


def python_facts() -> dict[str, Any]:
    return {
        "executable": sys.executable,
        "version": platform.python_version(),
        "implementation": sys.implementation.name,
        "free_threaded": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
        "bits": 64 if sys.maxsize > 2**32 else 32,
        "platform": sysconfig.get_platform(),
        "prefix": sys.prefix,
        "base_prefix": getattr(sys, "base_prefix", sys.prefix),
        "conda": (Path(sys.prefix) / "conda-meta").is_dir(),
    }


def _torch_light(torch_dir: str) -> dict[str, Any]:
    """Version and CUDA from ``torch/version.py``: what install needs, without the slow import."""
    v = literals(str(Path(torch_dir) / "version.py"))
    return {
        "version": str(v["__version__"]),
        "cuda": v.get("cuda"),
        "hip": v.get("hip"),
        "cuda_available": False,
        "devices": [],
        "arch_list": [],
        "cuda_home": None,
        "cuda_home_error": "not probed",
    }


def _torch_imported() -> dict[str, Any]:
    torch = importlib.import_module("torch")
    t: dict[str, Any] = {
        "version": str(torch.__version__),
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
        "cuda_available": False,
        "devices": [],
        "arch_list": [],
        "cuda_home": None,
        "cuda_home_error": "",
    }
    try:
        t["cuda_available"] = bool(torch.cuda.is_available())
        if t["cuda_available"]:
            for i in range(torch.cuda.device_count()):
                props = torch.cuda.get_device_properties(i)
                t["devices"].append(
                    {
                        "name": props.name,
                        "capability": f"{props.major}.{props.minor}",
                        "memory_mib": int(props.total_memory // (1024 * 1024)),
                    }
                )
            t["arch_list"] = list(torch.cuda.get_arch_list())
    except Exception as exc:  # noqa: BLE001 - a driver problem is a fact to report
        t["cuda_home_error"] = "cuda query failed: " + _err(exc)
    try:
        t["cuda_home"] = importlib.import_module("torch.utils.cpp_extension").CUDA_HOME
    except Exception as exc:  # noqa: BLE001
        t["cuda_home_error"] = _err(exc)
    return t


def torch_facts(*, light: bool) -> dict[str, Any]:
    """``{"torch": {...} or None, "torch_error": why not}``."""
    torch_dir = _package_dir("torch")
    if torch_dir is None:
        return {"torch": None, "torch_error": "not installed"}
    try:
        return {"torch": _torch_light(torch_dir) if light else _torch_imported(), "torch_error": ""}
    except BaseException as exc:  # noqa: BLE001 - torch's import can raise anything, even SystemExit
        prefix = "cannot read torch/version.py: " if light else ""
        return {"torch": None, "torch_error": prefix + _err(exc)}


def deepspeed_facts() -> dict[str, Any] | None:
    """DeepSpeed's version and build info (``git_version_info_installed.py``); None when not installed."""
    ds_dir = _package_dir("deepspeed")
    if ds_dir is None:
        return None
    ds: dict[str, Any] = {"version": "", "installed_ops": {}, "accelerator": "", "torch_version": ""}
    ds.update(cuda_version="", error="")
    try:
        from importlib import metadata  # noqa: PLC0415 - only where DeepSpeed is installed

        ds["version"] = metadata.version("deepspeed")
    except Exception as exc:  # noqa: BLE001
        ds["error"] = "no distribution metadata: " + _err(exc)
    try:
        values = literals(str(Path(ds_dir) / "git_version_info_installed.py"))
        ds["installed_ops"] = {str(k): bool(v) for k, v in dict(values.get("installed_ops", {})).items()}
        ds["accelerator"] = str(values.get("accelerator_name", ""))
        info = dict(values.get("torch_info", {}))
        ds["torch_version"] = str(info.get("version", ""))
        ds["cuda_version"] = str(info.get("cuda_version", ""))
        if not ds["version"]:
            ds["version"] = str(values.get("version", ""))
    except OSError:
        ds["error"] = "no git_version_info_installed.py: this DeepSpeed was installed without its build step"
    except Exception as exc:  # noqa: BLE001
        ds["error"] = _err(exc)
    return ds


def _mapped_libstdcxx() -> str:
    """The ``libstdc++.so*`` this process has mapped ("" when none)."""
    try:
        with Path("/proc/self/maps").open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                fields = line.split(None, 5)
                if len(fields) == 6 and Path(fields[5].strip()).name.startswith("libstdc++.so"):
                    return fields[5].strip()
    except OSError:
        pass
    return ""


def _glibc() -> str:
    found = ""
    if sys.platform != "win32":  # os.confstr is POSIX-only
        with contextlib.suppress(ValueError, OSError):  # a libc that does not name itself
            found = os.confstr("CS_GNU_LIBC_VERSION") or ""
    if not found:
        name, version = platform.libc_ver()
        if name == "glibc" and version:
            found = "glibc " + version
    return found


def linux_runtime() -> dict[str, Any]:
    """glibc, and the libstdc++.so.6 this process maps: after ``import torch`` the one torch loaded;
    otherwise (``--light``) the one dlopen finds for this interpreter."""
    lr = {"glibc": _glibc(), "libstdcxx": _mapped_libstdcxx(), "how": "", "error": ""}
    if lr["libstdcxx"]:
        lr["how"] = "loaded by torch" if "torch" in sys.modules else "loaded by this Python"
    else:
        try:
            import ctypes  # noqa: PLC0415 - only when nothing mapped it yet

            ctypes.CDLL("libstdc++.so.6")
            lr["libstdcxx"] = _mapped_libstdcxx()
            lr["how"] = "dlopen(libstdc++.so.6)"
        except OSError as exc:
            lr["error"] = "cannot load libstdc++.so.6: " + _err(exc)
    if not lr["libstdcxx"]:
        try:
            import ctypes.util  # noqa: PLC0415

            lr["libstdcxx"] = ctypes.util.find_library("stdc++") or ""
            lr["how"] = "ctypes.util.find_library"
        except Exception as exc:  # noqa: BLE001
            lr["error"] = lr["error"] or _err(exc)
    return lr


def pip_cuda_headers() -> dict[str, list[str]]:
    """``<site>/nvidia/<pkg>/include`` -> the CUDA headers it has, for every site directory."""
    found: dict[str, list[str]] = {}
    try:
        import site  # noqa: PLC0415 - only here

        roots = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
        user = site.getusersitepackages() if hasattr(site, "getusersitepackages") else None
        if isinstance(user, str):
            roots.append(user)
        roots.append(sysconfig.get_paths().get("purelib", ""))
        for root in roots:
            nv = os.path.join(root, "nvidia")  # noqa: PTH118 - the key is the path as the site module spells it
            if not root or not Path(nv).is_dir():
                continue
            for package in sorted(p.name for p in Path(nv).iterdir()):
                inc = os.path.join(nv, package, "include")  # noqa: PTH118
                present = [h for h in _CUDA_HEADERS if (Path(inc) / h).is_file()]
                if present:
                    found[inc] = present
    except Exception:  # noqa: BLE001, S110 - a broken site module hides nothing doctor needs
        pass
    return found


def describe(*, light: bool) -> dict[str, Any]:
    """Everything, as :func:`main` prints it."""
    out: dict[str, Any] = {"python": python_facts(), "scripts": sysconfig.get_paths().get("scripts", "")}
    out.update(torch_facts(light=light))
    out["deepspeed"] = deepspeed_facts()
    out["linux_runtime"] = linux_runtime() if sys.platform.startswith("linux") else None
    out["pip_cuda_headers"] = pip_cuda_headers()
    return out


def main(argv: list[str]) -> int:
    sys.stdout.write("\n" + MARK + json.dumps(describe(light="--light" in argv[1:])) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
