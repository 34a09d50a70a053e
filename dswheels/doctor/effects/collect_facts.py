"""Collect the :class:`~dswheels.doctor.machine_facts.Facts` of this machine and a target interpreter.

Every probe tolerates absence: a missing tool, an interpreter that will not start, torch that
does not import, a registry key that is not there -- each becomes a fact ("not found", the
error text), never an exception. Raw tool output is kept raw (the core parses it), so what the
probe sees here is what tests replay from recordings.

The torch/DeepSpeed part runs *in the target interpreter* (``--python``), because that is the
environment DeepSpeed will live in: its torch, its site-packages, its CUDA_HOME as torch
computes it (:mod:`dswheels.probes.environment`, run there by file path).
"""

from __future__ import annotations

import os
import platform
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from dswheels.doctor.machine_facts import (
    DeepSpeedFacts,
    Facts,
    Gpu,
    LinuxRuntime,
    PythonFacts,
    Toolkit,
    TorchFacts,
    VisualStudio,
    toolkit_probe_paths,
)
from dswheels.host import proc
from dswheels.host.machine import host_os
from dswheels.host.proc import find_tool, marked_json
from dswheels.kernel.binaries.linux_runtime import ElfError, defined_maximum, version_defs
from dswheels.kernel.errors import DswheelsError
from dswheels.kernel.jsondoc import parse_json
from dswheels.kernel.platform_traits import conventions, known_os, traits
from dswheels.kernel.versions import format_version
from dswheels.platforms import platform_module
from dswheels.probes import environment as _probe_module

__all__ = ["ENV_KEYS", "PROBE_SCRIPT", "collect", "current_environment", "probe_target"]

# Variables that change what torch/DeepSpeed builds or loads (reported verbatim).
ENV_KEYS = (
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_INC_PATH",
    "CONDA_PREFIX",
    "VIRTUAL_ENV",
    "DS_ACCELERATOR",
    "DS_SKIP_CUDA_CHECK",
    "DS_BUILD_OPS",
    "TORCH_CUDA_ARCH_LIST",
    "TORCH_EXTENSIONS_DIR",
    "CUDA_VISIBLE_DEVICES",
    "DISTUTILS_USE_SDK",
    "VSCMD_ARG_TGT_ARCH",
    "VCToolsVersion",
)
_TIMEOUT = 180.0

PROBE_SCRIPT = Path(_probe_module.__file__)


def current_environment() -> dict[str, str]:
    """A copy of this process's environment (commands pass it on explicitly)."""
    return dict(os.environ)


def _os_name() -> str:
    """``windows``, ``linux``, ``darwin``, ...: the key compat.yml uses."""
    return platform.system().lower()


def probe_target(python: str, env: Mapping[str, str], *, light: bool = False) -> tuple[dict[str, object] | None, str]:
    """Run :mod:`dswheels.probes.environment` in ``python``: its parsed JSON, or None and why not.

    ``light`` reads torch's version and CUDA from ``torch/version.py`` instead of importing torch.
    """
    try:
        result = proc.capture(
            [str(python), str(PROBE_SCRIPT), *(["--light"] if light else [])],
            env=env,
            timeout=_TIMEOUT,
            what=f"the probe in {python}",
        )
        data = marked_json(result.output, _probe_module.MARK)
    except DswheelsError as exc:
        return None, exc.message
    if isinstance(data, dict):
        return data, ""
    tail = "\n".join(result.tail[-8:])
    return None, f"{python} exited with {result.returncode}: {tail}"


def _capture(argv: list[str], env: Mapping[str, str], timeout: float = 60.0) -> tuple[int, str]:
    """Run a small tool; (-1, why) when it cannot start."""
    try:
        result = proc.capture(argv, env=env, timeout=timeout)
    except DswheelsError as exc:
        return -1, exc.message
    return result.returncode, result.output


def _candidate_roots(os_name: str, env: Mapping[str, str], path_nvcc: str) -> list[tuple[str, str]]:
    """(path as spelled, how it was found) for every place a toolkit may be."""
    found = [(env[key], key) for key in ("CUDA_HOME", "CUDA_PATH") if env.get(key)]
    found.extend((env[key], key) for key in sorted(env) if key.startswith("CUDA_PATH_V") and env[key])
    if path_nvcc:
        found.append((str(Path(path_nvcc).parent.parent), "nvcc on PATH"))
        real = Path(path_nvcc).resolve()
        if real != Path(path_nvcc):
            found.append((str(real.parent.parent), "nvcc on PATH (resolved)"))
    # then conda's and the OS's own places (any OS but Windows reads as Linux: conventions)
    found.extend(platform_module(conventions(os_name).os).toolkit_places(env))
    return found


def _toolkits(os_name: str, env: Mapping[str, str], path_nvcc: str) -> tuple[Toolkit, ...]:
    groups: dict[str, tuple[list[str], list[str]]] = {}
    for spelled, how in _candidate_roots(os_name, env, path_nvcc):
        path = Path(spelled)
        if not path.is_dir():
            continue
        key = str(path.resolve())
        aliases, vias = groups.setdefault(key, ([], []))
        if spelled not in aliases:
            aliases.append(spelled)
        if how not in vias:
            vias.append(how)
    toolkits: list[Toolkit] = []
    probe_paths = toolkit_probe_paths(os_name)
    for root, (aliases, vias) in groups.items():
        files = frozenset(rel for rel in probe_paths if (Path(root) / rel).exists())
        nvcc_rel = probe_paths[0]
        if nvcc_rel not in files and not any(v.startswith(("CUDA", "nvcc")) for v in vias):
            continue  # a standard location that exists but holds no toolkit (e.g. /usr)
        output = ""
        if nvcc_rel in files:
            _code, output = _capture([str(Path(root) / nvcc_rel), "--version"], env)
        toolkits.append(
            Toolkit(root=root, aliases=tuple(aliases), found_via=tuple(vias), nvcc_output=output, files=files)
        )
    return tuple(toolkits)


def _nvidia_smi(env: Mapping[str, str]) -> tuple[str | None, str]:
    smi = find_tool("nvidia-smi", env)
    if smi is None:
        return None, "nvidia-smi not found"
    fields = "name,compute_cap,driver_version,memory.total"
    code, output = _capture([smi, f"--query-gpu={fields}", "--format=csv"], env)
    if code != 0 and "compute_cap" in output:  # drivers before 510 lack the field
        code, output = _capture([smi, "--query-gpu=name,driver_version,memory.total", "--format=csv"], env)
    if code != 0:
        return None, f"nvidia-smi failed: {output.strip().splitlines()[-1] if output.strip() else code}"
    return output, ""


def _visual_studio(env: Mapping[str, str]) -> VisualStudio:
    program_files = env.get("ProgramFiles(x86)", r"C:\Program Files (x86)")
    vswhere = Path(program_files) / "Microsoft Visual Studio" / "Installer" / "vswhere.exe"
    exe = str(vswhere) if vswhere.is_file() else find_tool("vswhere", env)
    if exe is None:
        return VisualStudio(vswhere=None, toolsets={}, defaults={})
    code, output = _capture([exe, "-products", "*", "-format", "json", "-utf8"], env)
    if code != 0:
        return VisualStudio(vswhere=None, toolsets={}, defaults={})
    toolsets: dict[str, tuple[str, ...]] = {}
    defaults: dict[str, str] = {}
    try:
        installs = parse_json(output, what="vswhere's answer")
    except ValueError:  # not JSON, nested too deeply, a number too long for Python
        installs = []
    for item in installs if isinstance(installs, list) else []:
        path = str(item.get("installationPath", "")) if isinstance(item, dict) else ""
        if not path:
            continue
        msvc = Path(path) / "VC" / "Tools" / "MSVC"
        toolsets[path] = tuple(sorted(p.name for p in msvc.iterdir() if p.is_dir())) if msvc.is_dir() else ()
        default = Path(path) / "VC" / "Auxiliary" / "Build" / "Microsoft.VCToolsVersion.default.txt"
        if default.is_file():
            defaults[path] = default.read_text(encoding="utf-8", errors="replace").strip()
    return VisualStudio(vswhere=output, toolsets=toolsets, defaults=defaults)


if sys.platform == "win32":
    import winreg

    def _long_paths() -> bool | None:
        """``LongPathsEnabled`` under HKLM\\SYSTEM\\CurrentControlSet\\Control\\FileSystem (absent: off)."""
        try:
            with winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, r"SYSTEM\CurrentControlSet\Control\FileSystem") as key:
                value, _kind = winreg.QueryValueEx(key, "LongPathsEnabled")
        except FileNotFoundError:
            return False
        except OSError:
            return None
        return bool(value == 1)

else:

    def _long_paths() -> bool | None:
        return None


def _ninja(env: Mapping[str, str], scripts: str) -> str | None:
    candidates = [Path(scripts) / traits(host_os()).exe("ninja")] if scripts else []
    exe = next((str(p) for p in candidates if p.is_file()), None) or find_tool("ninja", env)
    if exe is None:
        return None
    code, output = _capture([exe, "--version"], env)
    return output.strip() if code == 0 and output.strip() else None


def _gcc(env: Mapping[str, str]) -> str | None:
    if find_tool("gcc", env) is None:
        return None
    code, output = _capture(["gcc", "-dumpfullversion", "-dumpversion"], env)
    return output.strip() if code == 0 and output.strip() else None


def _python_facts(data: Mapping[str, object]) -> PythonFacts:
    return PythonFacts(
        executable=str(data.get("executable", "")),
        version=str(data.get("version", "")),
        implementation=str(data.get("implementation", "")),
        free_threaded=bool(data.get("free_threaded")),
        bits=bits if isinstance(bits := data.get("bits", 64), int) and not isinstance(bits, bool) else 64,
        platform=str(data.get("platform", "")),
        prefix=str(data.get("prefix", "")),
        base_prefix=str(data.get("base_prefix", "")),
        conda=bool(data.get("conda")),
    )


def _gpu(data: object) -> Gpu:
    d = data if isinstance(data, dict) else {}
    memory = d.get("memory_mib")
    return Gpu(
        name=str(d.get("name", "?")),
        capability=str(d.get("capability", "")),
        memory_mib=memory if isinstance(memory, int) else None,
    )


def _torch_facts(data: object) -> TorchFacts | None:
    if not isinstance(data, dict):
        return None
    cuda, hip, home = data.get("cuda"), data.get("hip"), data.get("cuda_home")
    return TorchFacts(
        version=str(data.get("version", "")),
        cuda=str(cuda) if cuda else None,
        hip=str(hip) if hip else None,
        cuda_available=bool(data.get("cuda_available")),
        devices=tuple(_gpu(d) for d in data.get("devices") or []),
        arch_list=tuple(str(a) for a in data.get("arch_list") or []),
        cuda_home=str(home) if home else None,
        cuda_home_error=str(data.get("cuda_home_error", "")),
    )


def _deepspeed_facts(data: object) -> DeepSpeedFacts | None:
    if not isinstance(data, dict):
        return None
    ops = data.get("installed_ops")
    return DeepSpeedFacts(
        version=str(data.get("version", "")),
        installed_ops={str(k): bool(v) for k, v in ops.items()} if isinstance(ops, dict) else {},
        accelerator=str(data.get("accelerator", "")),
        torch_version=str(data.get("torch_version", "")),
        cuda_version=str(data.get("cuda_version", "")),
        error=str(data.get("error", "")),
    )


def _linux_runtime(data: object) -> LinuxRuntime:
    """The target's glibc and libstdc++: the newest GLIBCXX/CXXABI its ``.gnu.version_d`` defines."""
    d = data if isinstance(data, dict) else {}
    glibc, path, error = str(d.get("glibc") or ""), str(d.get("libstdcxx") or ""), str(d.get("error") or "")
    if not d:
        error = "the target Python reported no C/C++ runtime"
    glibcxx = cxxabi = ""
    if path and not Path(path).is_absolute():
        error = f"found libstdc++ only by name ({path}), not the file the process loads"
    elif path:
        try:
            names = version_defs(Path(path).read_bytes())
        except (OSError, ElfError) as exc:
            error = f"cannot read {path}: {exc}"
        else:
            defined = defined_maximum(names or ())
            glibcxx = format_version(defined.glibcxx) if defined.glibcxx else ""
            cxxabi = format_version(defined.cxxabi) if defined.cxxabi else ""
            if not glibcxx:
                error = f"{path} defines no GLIBCXX_ version"
    elif not error:
        error = "no libstdc++.so.6 found for the target Python"
    how = str(d.get("how") or "")
    return LinuxRuntime(glibc=glibc, libstdcxx=path, glibcxx=glibcxx, cxxabi=cxxabi, how=how, error=error)


def collect(python: str | None = None, env: Mapping[str, str] | None = None, *, full: bool = True) -> Facts:
    """Probe this machine, with ``python`` (default: this interpreter) as the target environment.

    ``full=False`` probes only what ``install`` needs: the target's Python, its torch version
    and CUDA (read from torch/version.py, without importing torch) and DeepSpeed; no toolkits,
    nvidia-smi, Visual Studio, ninja or gcc.
    """
    env = dict(os.environ if env is None else env)
    target = python or sys.executable
    os_name = _os_name()
    data, python_error = probe_target(target, env, light=not full)
    data = data or {}
    pydata = data.get("python")
    path_nvcc = shutil.which("nvcc", path=env.get("PATH")) or ""
    smi, smi_error = _nvidia_smi(env) if full else (None, "not probed")
    headers = data.get("pip_cuda_headers")
    keys = [k for k in env if k in ENV_KEYS or k.startswith("CUDA_PATH_V")]
    # only a machine of an OS dswheels builds for has its compiler and runtime floor looked at
    row = known_os(os_name)
    compiler = row.compiler if row else None
    return Facts(
        os=os_name,
        machine=platform.machine(),
        python=_python_facts(pydata) if isinstance(pydata, dict) else None,
        python_error=python_error,
        torch=_torch_facts(data.get("torch")),
        torch_error=str(data.get("torch_error", "")) if data else "the target Python did not run",
        deepspeed=_deepspeed_facts(data.get("deepspeed")),
        env={k: env[k] for k in sorted(keys)},
        path_nvcc=path_nvcc,
        toolkits=_toolkits(os_name, env, path_nvcc) if full else (),
        pip_cuda_headers={str(k): tuple(str(h) for h in v) for k, v in headers.items()}
        if isinstance(headers, dict)
        else {},
        nvidia_smi=smi,
        nvidia_smi_error=smi_error,
        visual_studio=_visual_studio(env) if full and compiler == "msvc" else None,
        long_paths=_long_paths() if full else None,
        ninja=_ninja(env, str(data.get("scripts", ""))) if full else None,
        gcc=_gcc(env) if full and compiler == "gcc" else None,
        linux_runtime=_linux_runtime(data.get("linux_runtime")) if row and row.runtime_floor and data else None,
    )
