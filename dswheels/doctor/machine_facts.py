"""What doctor judges: the collected facts of a machine, and parsers of raw tool output.

Pure. :mod:`dswheels.doctor.effects.collect_facts` fills :class:`Facts` (raw ``nvcc --version``, ``nvidia-smi``
CSV and ``vswhere`` JSON stay raw); the parsers here read them, so tests replay recordings of
real machines through exactly the code a real run uses.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dswheels.kernel.jsondoc import parse_json
from dswheels.kernel.model import OS
from dswheels.kernel.numbers import is_ascii_digits
from dswheels.kernel.platform_traits import conventions
from dswheels.kernel.versions import VersionTuple, format_version, parse_nvcc_version, parse_version

__all__ = [
    "DEV_LIBRARIES",
    "DeepSpeedFacts",
    "DevLibrary",
    "Facts",
    "Gpu",
    "LinuxRuntime",
    "PythonFacts",
    "Toolkit",
    "ToolkitView",
    "TorchFacts",
    "VisualStudio",
    "VsInstall",
    "lib_paths",
    "ops_linking",
    "parse_nvidia_smi",
    "parse_vswhere",
    "toolkit_probe_paths",
    "toolkit_view",
    "toolset_minor",
]

# --- facts ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PythonFacts:
    """The interpreter that will use DeepSpeed (``--python``; default the current one)."""

    executable: str
    version: str  # "3.11.7"
    implementation: str  # "cpython"
    free_threaded: bool
    bits: int
    platform: str  # sysconfig.get_platform(): "linux-x86_64", "win-amd64", "win32"
    prefix: str
    base_prefix: str
    conda: bool  # prefix has conda-meta/


@dataclass(frozen=True, slots=True)
class Gpu:
    name: str
    capability: str  # "8.9"; "" when unknown
    memory_mib: int | None = None


@dataclass(frozen=True, slots=True)
class TorchFacts:
    version: str  # torch.__version__, e.g. "2.14.1+cu130"
    cuda: str | None  # torch.version.cuda
    hip: str | None
    cuda_available: bool
    devices: tuple[Gpu, ...]
    arch_list: tuple[str, ...]  # torch.cuda.get_arch_list(): empty without a usable GPU
    cuda_home: str | None  # torch.utils.cpp_extension.CUDA_HOME: what extension builds use
    cuda_home_error: str = ""


@dataclass(frozen=True, slots=True)
class DeepSpeedFacts:
    """Read from ``deepspeed/git_version_info_installed.py`` without importing DeepSpeed."""

    version: str
    installed_ops: Mapping[str, bool]
    accelerator: str
    torch_version: str  # torch_info["version"]: the torch MAJOR.MINOR it was built with
    cuda_version: str  # torch_info["cuda_version"]: "0.0" for a CPU build
    error: str = ""


@dataclass(frozen=True, slots=True)
class Toolkit:
    """A CUDA toolkit root found on the machine and what it contains."""

    root: str  # resolved path
    aliases: tuple[str, ...]  # the spellings it was found under (symlinks, env values)
    found_via: tuple[str, ...]  # "CUDA_HOME", "CUDA_PATH_V12_4", "nvcc on PATH", "standard location", ...
    nvcc_output: str  # raw `<root>/bin/nvcc --version`; "" when there is no nvcc to run
    files: frozenset[str]  # which of toolkit_probe_paths(os) exist under root ("/"-separated)


@dataclass(frozen=True, slots=True)
class VisualStudio:
    vswhere: str | None  # raw `vswhere -products * -format json` output; None: no vswhere.exe
    toolsets: Mapping[str, tuple[str, ...]]  # installationPath -> directory names in VC\Tools\MSVC
    defaults: Mapping[str, str]  # installationPath -> VC\Auxiliary\Build\Microsoft.VCToolsVersion.default.txt


@dataclass(frozen=True, slots=True)
class LinuxRuntime:
    """The C and C++ runtime the target interpreter's process loads (Linux only).

    What a wheel's extensions need of it is recorded in their manifest's ``runtime``; the
    dynamic loader refuses an extension that needs a newer version than these define.
    """

    glibc: str  # os.confstr("CS_GNU_LIBC_VERSION") in the target: "glibc 2.36"; "" when unknown
    libstdcxx: str  # path of the libstdc++.so.6 the target process maps; "" when none was found
    glibcxx: str  # the newest GLIBCXX_3.4.n that library defines (.gnu.version_d): "3.4.30"; "" unknown
    cxxabi: str  # the newest CXXABI_1.3.n it defines: "1.3.13"; "" unknown
    how: str = ""  # how the path was found: "loaded by torch", "dlopen(libstdc++.so.6)", ...
    error: str = ""  # why a part is unknown


@dataclass(frozen=True, slots=True)
class Facts:
    """Everything doctor judges. Raw tool output is kept raw; parsing happens here, in the core."""

    os: str  # "linux" | "windows" | "darwin" | ...
    machine: str  # platform.machine(): "x86_64", "AMD64", "aarch64"
    python: PythonFacts | None
    python_error: str
    torch: TorchFacts | None
    torch_error: str  # "" when torch imported; "not installed" or the import error
    deepspeed: DeepSpeedFacts | None
    env: Mapping[str, str]  # the variables that matter (CUDA_HOME, CUDA_PATH*, DS_*, ...)
    path_nvcc: str  # `which nvcc` on PATH, "" when none
    toolkits: tuple[Toolkit, ...]
    pip_cuda_headers: Mapping[str, tuple[str, ...]]  # site-packages nvidia/*/include dir -> headers in it
    nvidia_smi: str | None  # raw CSV; None: nvidia-smi not found
    nvidia_smi_error: str
    visual_studio: VisualStudio | None  # None off Windows
    long_paths: bool | None  # Windows LongPathsEnabled; None elsewhere
    ninja: str | None  # `ninja --version`; None: not found
    gcc: str | None  # `gcc -dumpfullversion`; None: not found (or not Linux)
    linux_runtime: LinuxRuntime | None = None  # None off Linux (and in facts recorded before it was probed)


# --- parsers of raw tool output -----------------------------------------------------------------


def parse_nvidia_smi(text: str) -> tuple[tuple[Gpu, ...], str]:
    """``nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv``.

    Reads the header, so the column order does not matter. Returns the GPUs and the driver.

    >>> gpus, driver = parse_nvidia_smi("name, compute_cap, driver_version, memory.total [MiB]\\n"
    ...                                 "NVIDIA GeForce RTX 4070 Laptop GPU, 8.9, 581.42, 8188 MiB\\n")
    >>> gpus[0].capability, gpus[0].memory_mib, driver
    ('8.9', 8188, '581.42')
    """
    rows = [row for row in csv.reader(io.StringIO(text.strip()), skipinitialspace=True) if row]
    if not rows:
        return (), ""
    header = [col.strip().split(" [")[0] for col in rows[0]]
    gpus: list[Gpu] = []
    driver = ""
    for row in rows[1:]:
        values = dict(zip(header, (value.strip() for value in row), strict=False))
        memory = values.get("memory.total", "").split(" ")[0]
        capability = values.get("compute_cap", "")
        gpus.append(
            Gpu(
                name=values.get("name", "?"),
                capability=capability if re.fullmatch(r"[0-9]+\.[0-9]+", capability) else "",
                memory_mib=int(memory) if is_ascii_digits(memory) and len(memory) <= 12 else None,
            ),
        )
        driver = driver or values.get("driver_version", "")
    return tuple(gpus), driver


@dataclass(frozen=True, slots=True)
class VsInstall:
    """One Visual Studio / Build Tools installation with its MSVC toolsets."""

    name: str  # "Visual Studio Community 2022"
    version: str  # "17.13.4"
    path: str
    complete: bool
    prerelease: bool
    toolsets: tuple[str, ...]  # "14.43.34808", newest first
    default: str  # the toolset vcvarsall activates by default, "" when unknown

    def majors(self) -> tuple[str, ...]:
        """Toolsets as MAJOR.MINOR (``14.43``), the way compat.yml and vcvarsall name them."""
        return tuple(dict.fromkeys(toolset_minor(t) for t in self.toolsets))


def toolset_minor(toolset: str) -> str:
    return ".".join(toolset.split(".")[:2])


def parse_vswhere(vs: VisualStudio) -> tuple[VsInstall, ...]:
    """The installations of ``vswhere -format json`` with the toolsets found on disk, newest first."""
    if not vs.vswhere:
        return ()
    try:
        data = parse_json(vs.vswhere, what="vswhere's answer")
    except ValueError:  # not JSON, nested too deeply, a number too long (a saved facts file is anyone's)
        return ()
    installs: list[VsInstall] = []
    for item in data if isinstance(data, list) else []:
        if not isinstance(item, dict):
            continue
        path = str(item.get("installationPath", ""))
        raw_catalog = item.get("catalog")
        catalog = raw_catalog if isinstance(raw_catalog, dict) else {}
        version = str(catalog.get("productDisplayVersion") or item.get("installationVersion", ""))
        toolsets = sorted(
            (t for t in vs.toolsets.get(path, ()) if re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", t)),
            key=parse_version,
            reverse=True,
        )
        installs.append(
            VsInstall(
                name=str(item.get("displayName", "Visual Studio")),
                version=version,
                path=path,
                complete=bool(item.get("isComplete", True)),
                prerelease=bool(item.get("isPrerelease", False)),
                toolsets=tuple(toolsets),
                default=vs.defaults.get(path, "").strip(),
            ),
        )
    return tuple(sorted(installs, key=lambda i: _loose_version(i.version), reverse=True))


def _loose_version(text: str) -> VersionTuple:
    parts = re.findall(r"[0-9]+", text)
    return tuple(int(p) for p in parts[:4])


# --- CUDA toolkit contents --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DevLibrary:
    name: str
    header: str
    link: str  # the library name ("" when only the header matters)
    link_on: Mapping[OS, frozenset[str] | None]  # OS -> the ops whose build links it there (None: every op)
    why: str


# Headers: torch's ATen/cuda headers include cuBLAS, cuSPARSE and cuSOLVER, so every CUDA op
# needs them. Links (DeepSpeed 0.19.8 op_builder): on Windows CUDAOpBuilder.libraries_args adds
# cublas and curand to every CUDA op; on Linux only some ops pass -lcurand (_CURAND_OPS_LINUX);
# torch's CUDAExtension links cudart everywhere.
_CURAND_OPS_LINUX = frozenset({"random_ltd", "transformer", "transformer_inference", "fp_quantizer", "evoformer_attn"})
_EVERY_OP = {OS.LINUX: None, OS.WINDOWS: None}
DEV_LIBRARIES = (
    DevLibrary("CUDA runtime", "cuda_runtime.h", "cudart", _EVERY_OP, "every CUDA op"),
    DevLibrary("cuBLAS", "cublas_v2.h", "cublas", {OS.WINDOWS: None}, "torch's ATen/cuda headers include it"),
    DevLibrary("cuSPARSE", "cusparse.h", "", {}, "torch's ATen/cuda headers include it"),
    DevLibrary("cuSOLVER", "cusolverDn.h", "", {}, "torch's ATen/cuda headers include it"),
    DevLibrary(
        "cuRAND", "curand.h", "curand", {OS.LINUX: _CURAND_OPS_LINUX, OS.WINDOWS: None}, "DeepSpeed's random kernels"
    ),
)


def ops_linking(lib: DevLibrary, os: str, ops: Sequence[str]) -> tuple[str, ...]:
    """Which of ``ops`` link ``lib`` on ``os``."""
    if os not in lib.link_on:
        return ()
    linking = lib.link_on[OS(os)]
    return tuple(op for op in ops if linking is None or op in linking)


def _nvcc_rel(os: str) -> str:
    return conventions(os).exe("bin/nvcc")


def _header_rels(os: str, header: str) -> tuple[str, ...]:
    return tuple(f"{folder}/{header}" for folder in conventions(os).toolkit_include_dirs)


def lib_paths(os: str, lib: str) -> tuple[str, ...]:
    return conventions(os).lib_paths(lib)


def toolkit_probe_paths(os: str) -> tuple[str, ...]:
    """The files under a toolkit root whose presence doctor judges (the probe checks each)."""
    paths = [_nvcc_rel(os)]
    for lib in DEV_LIBRARIES:
        paths.extend(_header_rels(os, lib.header))
        if lib.link:
            paths.extend(lib_paths(os, lib.link))
    return tuple(paths)


@dataclass(frozen=True, slots=True)
class ToolkitView:
    toolkit: Toolkit
    nvcc: VersionTuple | None
    has_nvcc: bool
    missing_headers: tuple[DevLibrary, ...]
    targets_only_headers: tuple[DevLibrary, ...]  # under targets/x86_64-linux/include only
    missing_libs: tuple[DevLibrary, ...]

    @property
    def root(self) -> str:
        return self.toolkit.root

    @property
    def is_toolkit(self) -> bool:
        """A root a build can use: nvcc plus the CUDA runtime header (under include/ or targets/)."""
        return self.has_nvcc and DEV_LIBRARIES[0] not in self.missing_headers

    def label(self) -> str:
        version = format_version(self.nvcc) if self.nvcc else "nvcc ?"
        return f"CUDA {version} at {self.root}" if self.nvcc else f"{self.root} ({version})"


def toolkit_view(toolkit: Toolkit, os: str) -> ToolkitView:
    files = toolkit.files
    missing_headers: list[DevLibrary] = []
    targets_only: list[DevLibrary] = []
    missing_libs: list[DevLibrary] = []
    for lib in DEV_LIBRARIES:
        rels = _header_rels(os, lib.header)
        if rels[0] in files:
            pass
        elif any(rel in files for rel in rels[1:]):
            targets_only.append(lib)
        else:
            missing_headers.append(lib)
        if lib.link and os in lib.link_on and not any(rel in files for rel in lib_paths(os, lib.link)):
            missing_libs.append(lib)
    return ToolkitView(
        toolkit=toolkit,
        nvcc=parse_nvcc_version(toolkit.nvcc_output),
        has_nvcc=_nvcc_rel(os) in files,
        missing_headers=tuple(missing_headers),
        targets_only_headers=tuple(targets_only),
        missing_libs=tuple(missing_libs),
    )
