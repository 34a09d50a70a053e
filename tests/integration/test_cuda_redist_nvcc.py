"""The root `dswheels cuda install` assembles compiles CUDA: the real nvcc, cicc and headers, in NVIDIA's layout.

tests/data/cuda-redist holds only small files (nvcc and cicc are stand-ins). Here the archives
are packed at test time, in NVIDIA's layout (``<component>-linux-x86_64-<version>-archive/``,
``.tar.xz``), from the real files of NVIDIA's PyPI wheels that make this machine's CUDA 13.0
(``/usr/local/cuda-13.0``, the toolkit the CUDA build tests use; each wheel's RECORD says which
files are its), with a JSON of the recorded shape listing them. They are served on loopback,
assembled by ``install_cuda`` for the components of compat.yml's list those wheels cover, and
the nvcc of the assembled root compiles and links a ``.cu`` that includes CCCL and the profiler
API header: nvcc.profile finds cicc, the headers (``targets/x86_64-linux/include`` and its
``cccl``) and the libraries (``targets/x86_64-linux/lib``) only through the links the install adds.
"""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import io
import json
import lzma
import shutil
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from dswheels.cuda.effects.install_toolkit import CudaInstallOptions, install_cuda
from dswheels.host.cache import CacheLayout
from dswheels.kernel.compat import load_compat
from dswheels.kernel.model import Platform
from tests.conftest import require
from tests.integration.conftest import CUDA_HOME
from tests.support.servers import StaticServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

Handler = Callable[[http.server.BaseHTTPRequestHandler], None]
# the wheel (its dist-info folder's name) -> the component's key in NVIDIA's redistrib JSON
WHEELS = {
    "nvidia_cuda_nvcc": "cuda_nvcc",
    "nvidia_cuda_runtime": "cuda_cudart",
    "nvidia_cuda_cccl": "cuda_cccl",
    "nvidia_cuda_crt": "cuda_crt",
    "nvidia_nvvm": "libnvvm",
    "nvidia_cuda_profiler_api": "cuda_profiler_api",
}
PROGRAM = """\
#include <cuda_profiler_api.h>
#include <cub/cub.cuh>
#include <cstdio>

__global__ void add(const float* a, float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) b[i] += a[i];
}

int main() {
    float *a = nullptr, *b = nullptr;
    cudaMalloc(&a, 4 * sizeof(float));
    cudaMalloc(&b, 4 * sizeof(float));
    add<<<1, 4>>>(a, b, 4);
    cudaProfilerStop();
    std::printf("CUB %d\\n", CUB_VERSION);
    return 0;
}
"""


def _pack(redist: Path) -> dict[str, object]:
    """An archive per wheel in NVIDIA's layout under ``redist``, and the JSON that lists them."""
    document: dict[str, object] = {"release_date": "2026-04-13", "release_label": "13.0.3", "release_product": "cuda"}
    for info in sorted((CUDA_HOME / "dist-info").glob("*.dist-info")):
        project, version = info.name.removesuffix(".dist-info").rsplit("-", 1)
        component = WHEELS.get(project)
        if component is None:
            continue
        top = f"{component}-linux-x86_64-{version}-archive"
        relative = f"{component}/linux-x86_64/{top}.tar.xz"
        data = io.BytesIO()
        with lzma.open(data, "wb", preset=0) as xz, tarfile.open(fileobj=xz, mode="w") as tar:
            for line in (info / "RECORD").read_text(encoding="utf-8").splitlines():
                name = line.split(",")[0]
                if not name.startswith("nvidia/cu13/"):
                    continue
                path = name.removeprefix("nvidia/cu13/")
                if path.startswith(".metadata/"):  # NVIDIA's build notes in cccl's wheel, not installed here
                    continue
                tar.add(CUDA_HOME / path, arcname=f"{top}/{path}", recursive=False)
            license_text = b"the CUDA Toolkit EULA (test archive)\n"
            member = tarfile.TarInfo(f"{top}/LICENSE")
            member.size = len(license_text)
            tar.addfile(member, io.BytesIO(license_text))
        target = redist / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data.getvalue())
        document[component] = {
            "name": component,
            "license": "CUDA Toolkit",
            "license_path": f"{component}/LICENSE.txt",
            "version": version,
            "linux-x86_64": {
                "relative_path": relative,
                "sha256": hashlib.sha256(data.getvalue()).hexdigest(),
                "md5": hashlib.md5(data.getvalue()).hexdigest(),  # noqa: S324 - the JSON's own field
                "size": str(len(data.getvalue())),
            },
        }
    return document


def test_the_assembled_root_compiles_and_links_cuda_with_its_own_nvcc(tmp_path: Path) -> None:
    require((CUDA_HOME / "dist-info").is_dir(), f"the PyPI-wheel CUDA 13.0 at {CUDA_HOME} (its dist-info)")
    require(shutil.which("g++") is not None, "g++, nvcc's host compiler")
    redist = tmp_path / "redist"
    document = _pack(redist)
    assert set(WHEELS.values()) <= set(document), sorted(document)
    text = json.dumps(document, indent=4)
    (redist / "redistrib_13.0.3.json").write_text(text, encoding="utf-8")
    compat = load_compat()
    covered = tuple(c for c in compat.components_for((13, 0)) if c.redist in WHEELS.values())
    assert [c.name for c in covered] == ["nvcc", "cudart", "cccl", "profiler_api", "crt", "nvvm"]
    with StaticServer(redist) as server:
        installed = install_cuda(
            dataclasses.replace(compat, cuda_components=covered),
            CudaInstallOptions(
                toolkit="13.0.3",
                platform=Platform.LINUX_X86_64,
                cache=CacheLayout(tmp_path / "cache"),
                redist_url=server.url,
                redist_sha256=hashlib.sha256(text.encode()).hexdigest(),
            ),
        )
    root = installed.root
    nvcc = root / "bin" / "nvcc"
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    assert "release 13.0, V13.0.88" in version
    source = tmp_path / "add.cu"
    source.write_text(PROGRAM, encoding="utf-8")
    env = {"PATH": f"{root / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}  # no other CUDA anywhere
    done = subprocess.run(
        [nvcc, "-arch=sm_80", "-o", str(tmp_path / "add"), str(source)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (tmp_path / "add").is_file()
    # the compile went through the assembled root's own cicc and headers, not the machine's CUDA
    dry = subprocess.run(
        [nvcc, "-arch=sm_80", "--dryrun", "-c", "-o", str(tmp_path / "add.o"), str(source)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    steps = dry.stderr
    assert f"#$ TOP={root}/bin/.." in steps
    assert f'-isystem" "{root}/bin/../targets/x86_64-linux/include/cccl"' in steps  # CCCL through the link
    assert f'"-L{root}/bin/../targets/x86_64-linux/lib"' in steps
    assert f"#$ CICC_PATH={root}/bin/../nvvm/bin" in steps
    assert str(CUDA_HOME) not in steps
