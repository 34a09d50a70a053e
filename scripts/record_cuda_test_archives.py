"""Build the CUDA 13.0.3 test toolkit of tests/data/cuda-redist/ from NVIDIA's PyPI wheels.

    python scripts/record_cuda_test_archives.py

NVIDIA's redist server cannot be reached from the dev machine, and its archives are hundreds of
MB. The tests instead serve archives in NVIDIA's archive layout
(``<component>-<platform>-<version>-archive/...``, ``.tar.xz`` for linux-x86_64 and linux-sbsa,
``.zip`` for windows-x86_64) that hold a few real files of each component, read with HTTP range requests
from the PyPI wheels of exactly the versions cuda-toolkit 13.0.3 pins (the versions of
NVIDIA's redistrib_13.0.3.json), so only kilobytes are downloaded. Two programs too large to
keep (nvcc 20-30 MB, cicc 70 MB) and each archive's 59 KB LICENSE are small stand-ins;
tests/data/cuda-redist/README.md says which. The JSON written beside them has the recorded
shape of redistrib_13.0.3.json (its header and these components' entries, copied from
dswheels/cuda_redist/) with the three platforms' ``sha256``, ``md5`` and ``size`` replaced by
those of the archives made here.
The archives are deterministic (sorted, mtime 0, root-owned), so a rerun reproduces them.
"""

from __future__ import annotations

import hashlib
import io
import json
import lzma
import sys
import tarfile
import zipfile
from pathlib import Path
from urllib.parse import urljoin

import requests

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "cuda-redist"
RECORDED = ROOT / "dswheels" / "cuda_redist" / "redistrib_13.0.3.json"
PYPI = "https://pypi.org/pypi/{project}/json"
PREFIX = "nvidia/cu13/"  # where the 13.x wheels keep a CUDA root
TAGS = {
    "linux-x86_64": ("manylinux", "_x86_64"),
    "linux-sbsa": ("manylinux", "_aarch64"),  # arm64 servers (linux_aarch64 cells)
    "windows-x86_64": ("win_amd64",),
}

NVCC_VERSION = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Wed_Aug_20_01:58:59_PM_PDT_2025
Cuda compilation tools, release 13.0, V13.0.88
Build cuda_13.0.r13.0/compiler.36424714_0
"""
STAND_IN_NVCC = (
    "#!/bin/sh\n"
    "# dswheels test data: a stand-in for nvcc 13.0.88 (the real program is 30 MB). It prints what the\n"
    "# real one prints for --version and refuses anything else.\n"
    'if [ "$1" = "--version" ] || [ "$1" = "-V" ]; then\n'
    f"cat <<'EOF'\n{NVCC_VERSION}EOF\n"
    "  exit 0\n"
    "fi\n"
    'echo "stand-in nvcc: only --version" >&2\n'
    "exit 1\n"
)
STAND_IN_CICC = "#!/bin/sh\n# dswheels test data: a stand-in for cicc (the real program is 70 MB)\nexit 1\n"
LICENSE = (
    "dswheels test data: NVIDIA's archives carry the CUDA Toolkit EULA here (59 KB in every archive, and in\n"
    "every wheel these files were read from as .dist-info/licenses/License.txt); this stand-in keeps the\n"
    "test data small.\n"
)
STAND_IN_EXE = "dswheels test data: a stand-in for {name} of CUDA 13.0.3 (the real program is too large to keep)\n"

# component -> (PyPI project, files of the wheel below nvidia/cu13/ (a dict: wheel path -> archive path
# where they differ), stand-ins (archive path -> text) per platform)
COMPONENTS: dict[str, tuple[str, list[str] | dict[str, str], dict[str, dict[str, str]]]] = {
    "cuda_nvcc": (
        "nvidia-cuda-nvcc",
        ["bin/nvcc.profile", "bin/crt/link.stub", "include/fatbinary_section.h"],
        {
            "linux-x86_64": {"bin/nvcc": STAND_IN_NVCC},
            "linux-sbsa": {"bin/nvcc": STAND_IN_NVCC},
            "windows-x86_64": {"bin/nvcc.exe": STAND_IN_EXE.format(name="nvcc.exe")},
        },
    ),
    "cuda_cudart": ("nvidia-cuda-runtime", ["include/cuda_runtime.h", "include/builtin_types.h"], {}),
    "cuda_cccl": (
        "nvidia-cuda-cccl",
        ["include/cccl/cub/cub.cuh", "include/nv/target", "lib/cmake/cccl/cccl-config-version.cmake"],
        {},
    ),
    "cuda_profiler_api": ("nvidia-cuda-profiler-api", ["include/cuda_profiler_api.h", "include/cudaProfiler.h"], {}),
    "libcublas": ("nvidia-cublas", ["include/cublas_v2.h"], {}),
    "libcurand": ("nvidia-curand", ["include/curand_kernel.h"], {}),
    "libcusparse": ("nvidia-cusparse", ["include/cusparse.h"], {}),
    "libcusolver": ("nvidia-cusolver", ["include/cusolverDn.h", "include/cusolver_common.h"], {}),
    "cuda_crt": ("nvidia-cuda-crt", ["include/crt/host_config.h", "include/crt/host_defines.h"], {}),
    # the wheel keeps nvvm.h in include/, NVIDIA's libnvvm archive everything below nvvm/
    "libnvvm": (
        "nvidia-nvvm",
        {"include/nvvm.h": "nvvm/include/nvvm.h"},
        {
            "linux-x86_64": {"nvvm/bin/cicc": STAND_IN_CICC},
            "linux-sbsa": {"nvvm/bin/cicc": STAND_IN_CICC},
            "windows-x86_64": {"nvvm/bin/cicc.exe": STAND_IN_EXE.format(name="cicc.exe")},
        },
    ),
}


class _RangeFile(io.RawIOBase):
    """A remote file read with HTTP range requests: zipfile seeks to the central directory and the members."""

    def __init__(self, session: requests.Session, url: str) -> None:
        head = session.head(url, allow_redirects=True, timeout=60)
        head.raise_for_status()
        self.session, self.url, self.size, self.pos = session, head.url, int(head.headers["Content-Length"]), 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = offset if whence == 0 else self.pos + offset if whence == 1 else self.size + offset
        return self.pos

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        n = min(len(buffer), self.size - self.pos)
        if n <= 0:
            return 0
        answer = self.session.get(self.url, headers={"Range": f"bytes={self.pos}-{self.pos + n - 1}"}, timeout=120)
        if answer.status_code != 206:
            raise SystemExit(f"{self.url}: no range support (HTTP {answer.status_code})")
        buffer[:n] = answer.content
        self.pos += n
        return n


def _wheel(session: requests.Session, project: str, version: str, tags: tuple[str, ...]) -> zipfile.ZipFile:
    url = PYPI.format(project=project)
    files = session.get(url, timeout=60).json()["releases"][version]
    (found,) = [f for f in files if all(t in f["filename"] for t in tags) and f["filename"].endswith(".whl")]
    print(f"  {found['filename']} (range reads)")
    return zipfile.ZipFile(io.BufferedReader(_RangeFile(session, urljoin(url, found["url"])), 1 << 16))


def _tar_xz(top: str, files: dict[str, bytes], executable: set[str]) -> bytes:
    out = io.BytesIO()
    with lzma.open(out, "wb", preset=9) as xz, tarfile.open(fileobj=xz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        folders = sorted({"/".join(p.split("/")[: i + 1]) for p in files for i in range(p.count("/"))})
        for folder in folders:
            info = tarfile.TarInfo(f"{top}/{folder}")
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
            tar.addfile(info)
        for path in sorted(files):
            info = tarfile.TarInfo(f"{top}/{path}")
            info.size, info.mtime = len(files[path]), 0
            info.mode = 0o755 if path in executable else 0o644
            tar.addfile(info, io.BytesIO(files[path]))
    return out.getvalue()


def _zip(top: str, files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for path in sorted(files):
            info = zipfile.ZipInfo(f"{top}/{path}", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, files[path])
    return out.getvalue()


def main() -> int:
    recorded = json.loads(RECORDED.read_text(encoding="utf-8"))
    document: dict[str, object] = {k: recorded[k] for k in ("release_date", "release_label", "release_product")}
    session = requests.Session()
    for component, (project, members, stand_ins) in COMPONENTS.items():
        entry = dict(recorded[component])
        version = entry["version"]
        wanted = members if isinstance(members, dict) else {m: m for m in members}
        print(f"{component} {version}")
        for platform, tags in TAGS.items():
            wheel = _wheel(session, project, version, tags)
            files = {target: wheel.read(PREFIX + source) for source, target in wanted.items()}
            files["LICENSE"] = LICENSE.encode()
            extra = stand_ins.get(platform, {})
            files.update({path: text.encode() for path, text in extra.items()})
            top = f"{component}-{platform}-{version}-archive"
            data = _tar_xz(top, files, set(extra)) if platform.startswith("linux") else _zip(top, files)
            target = OUT / entry[platform]["relative_path"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            entry[platform] = {
                **entry[platform],
                "sha256": hashlib.sha256(data).hexdigest(),
                "md5": hashlib.md5(data).hexdigest(),  # noqa: S324 - the JSON's own field, not a check
                "size": str(len(data)),
            }
            print(f"  -> {target.relative_to(ROOT)} ({len(data)} bytes)")
        document[component] = entry
    text = json.dumps(document, indent=4)
    (OUT / "redistrib_13.0.3.json").write_text(text, encoding="utf-8")
    print(f"redistrib_13.0.3.json sha256 {hashlib.sha256(text.encode()).hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
