"""The build environment and the source patches, computed from real plans (no process runs)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from dswheels.building.build_env import BuildSetup, CompilerCache, build_env, dist_extra_config
from dswheels.building.patches import PatchError, patch_debug_flags, patch_portable_cpu
from dswheels.kernel.compat import load_compat
from dswheels.kernel.model import PlannedCell
from dswheels.kernel.naming import parse_cell_id
from dswheels.kernel.versions import parse_nvcc_version
from dswheels.plan.compiler_cache_keys import CacheTool
from dswheels.plan.matrix.parse import parse_matrix
from dswheels.plan.planner import Combo, plan

DATA = Path(__file__).parent.parent / "data"
EXCERPT = (DATA / "ds0198_builder_excerpt.txt").read_text(encoding="utf-8")


WINDOWS = """\
schema: 1
deepspeed: ["0.19.8"]
torch:
  - {version: "2.14", variants: [cu130]}
python: ["3.11"]
platforms: [win_amd64]
ops: [fused_adam, cpu_adam]
runners:
  win_amd64:
    build: [windows-2022]
    smoke: [self-hosted]
"""
COMPAT = load_compat()


def _planned(cid: str, matrix: str = "matrix-cuda.yml", nvcc: tuple[int, int] | None = None) -> PlannedCell:
    compat = COMPAT
    text = WINDOWS if matrix == "windows" else (DATA / matrix).read_text(encoding="utf-8")
    spec = parse_matrix(text, matrix, compat)
    cell = parse_cell_id(cid)
    combo = Combo(
        deepspeed=cell.deepspeed, torch=cell.torch, variant=cell.variant, python=cell.python, platform=cell.platform
    )
    return plan(spec, compat, combo=combo, nvcc=nvcc).planned[0]


def _setup(**kw: object) -> BuildSetup:
    base: dict[str, object] = {
        "os": "linux",
        "path": "/venv/bin:/usr/bin",
        "path_sep": ":",
        "jobs": 2,
        "cuda_home": "/usr/local/cuda-13.0",
        "nvcc": "/usr/local/cuda-13.0/bin/nvcc",
        "cache": None,
        "compilers": None,
        "extra_config": None,
    }
    base.update(kw)
    return BuildSetup(**base)  # type: ignore[arg-type]


CUDA_ID = "ds0.19.8-torch2.14-cu130-cp311-linux_x86_64"
CPU_ID = "ds0.19.8-torch2.13-cpu-cp311-linux_x86_64"


def test_cuda_env_applies_the_plan() -> None:
    planned = _planned(CUDA_ID)
    env = build_env(planned, _setup())
    assert env["DS_BUILD_OPS"] == "0"
    built = {k for k, v in env.items() if k.startswith("DS_BUILD_") and v == "1"}
    assert built == {"DS_BUILD_FUSED_ADAM"}  # exactly the planned ops, nothing else switched on
    assert env["DS_ACCELERATOR"] == "cuda"
    assert env["TORCH_CUDA_ARCH_LIST"] == "7.5;8.0+PTX"
    assert env["CUDA_HOME"] == "/usr/local/cuda-13.0"
    assert env["DS_BUILD_STRING"] == "+cu130torch2.14"
    assert env["DS_ENABLE_NINJA"] == "1"
    assert env["MAX_JOBS"] == "2"
    assert "DS_SKIP_CUDA_CHECK" not in env  # nvcc 13.0 = torch's CUDA 13.0
    assert "DISTUTILS_USE_SDK" not in env


def test_skip_cuda_check_follows_the_plan() -> None:
    planned = _planned(CUDA_ID, nvcc=(13, 2))
    assert planned.toolchain.skip_cuda_check
    assert build_env(planned, _setup())["DS_SKIP_CUDA_CHECK"] == "1"


def test_cpu_env_has_no_cuda() -> None:
    planned = _planned(CPU_ID, "matrix-cpu.yml")
    env = build_env(planned, _setup(cuda_home=None, nvcc=None))
    assert env["CFLAGS"] == "-g0"  # no debug info unless asked for
    assert "CFLAGS" not in build_env(planned, _setup(cuda_home=None, nvcc=None, debug_symbols=True))
    assert build_env(planned, _setup(cuda_home=None, nvcc=None, cflags_value="-O2"))["CFLAGS"] == "-O2 -g0"
    assert env["DS_ACCELERATOR"] == "cpu"
    assert env["DS_BUILD_CPU_ADAM"] == "1"
    assert not {"CUDA_HOME", "TORCH_CUDA_ARCH_LIST", "NVCC_APPEND_FLAGS", "PYTORCH_NVCC"} & set(env)


def test_cuda_variant_without_toolkit_is_a_bug() -> None:
    with pytest.raises(ValueError, match="cuda_home"):
        build_env(_planned(CUDA_ID), _setup(cuda_home=None))


def test_windows_env() -> None:
    planned = _planned("ds0.19.8-torch2.14-cu130-cp311-win_amd64", "windows")
    env = build_env(
        planned, _setup(os="windows", path_sep=";", cuda_home=r"C:\CUDA\v13.0", nvcc=r"C:\CUDA\v13.0\bin\nvcc.exe")
    )
    assert env["DISTUTILS_USE_SDK"] == "1"
    assert env["CUDA_PATH"] == env["CUDA_HOME"] == r"C:\CUDA\v13.0"
    # the planner's Windows workaround for torch >= 2.9 reaches nvcc
    assert "-DUSE_CUDA" in env["NVCC_APPEND_FLAGS"].split()


def test_ccache_masquerade_and_nvcc() -> None:
    cache = CompilerCache(
        tool=CacheTool.CCACHE,
        executable="/usr/bin/ccache",
        masquerade_dir="/w/ccache-bin",
        stats_log="/w/s.log",
        base_dir="/w",
    )
    env = build_env(_planned(CUDA_ID), _setup(cache=cache))
    assert env["PATH"] == "/w/ccache-bin:/venv/bin:/usr/bin"
    assert env["PYTORCH_NVCC"] == "/usr/bin/ccache /usr/local/cuda-13.0/bin/nvcc"
    assert env["TORCH_NO_COMPILER_WRAPPER"] == "1"  # never wrapped twice
    assert env["CCACHE_BASEDIR"] == "/w"
    assert env["CCACHE_STATSLOG"] == "/w/s.log"


def test_sccache_takes_cxx_and_nvcc_and_leaves_path_alone() -> None:
    cache = CompilerCache(
        tool=CacheTool.SCCACHE,
        executable="/bin/sccache",
        masquerade_dir="",
        stats_log="",
        base_dir="/w",
        cxx="/w/sccache-bin/c++",
    )
    env = build_env(_planned(CUDA_ID), _setup(cache=cache, compilers=("gcc-11", "g++-11")))
    assert "PATH" not in env  # nvcc, run by sccache's server, must find the real host compiler
    assert env["CXX"] == "/w/sccache-bin/c++"  # ninja's C++ rule through sccache
    assert env["CC"] == "gcc-11"  # torch hands it to nvcc as -ccbin: the real one
    assert env["PYTORCH_NVCC"] == "/bin/sccache /usr/local/cuda-13.0/bin/nvcc"
    assert env["TORCH_NO_COMPILER_WRAPPER"] == "1"  # torch >= 2.13 would wrap with ccache if it finds one
    assert env["SCCACHE_BASEDIRS"] == "/w"  # paths under the work dir hashed relative
    assert env["TORCH_EXTENSION_SKIP_NVCC_GEN_DEPENDENCIES"] == "1"
    assert not any(k.startswith("CCACHE_") for k in env)


def test_the_build_imports_torch_through_the_work_dir() -> None:
    env = build_env(_planned(CUDA_ID), _setup(python_path="/w/site"))
    assert env["PYTHONPATH"] == "/w/site"
    assert "PYTHONPATH" not in build_env(_planned(CUDA_ID), _setup())


def test_paths_with_spaces_are_quoted_for_ninja() -> None:
    cache = CompilerCache(
        tool=CacheTool.SCCACHE, executable=r"C:\Tools\sccache.exe", masquerade_dir="", stats_log="", base_dir="w"
    )
    env = build_env(
        _planned("ds0.19.8-torch2.14-cu130-cp311-win_amd64", "windows"),
        _setup(
            os="windows",
            cache=cache,
            cuda_home=r"C:\Program Files\CUDA\v13.0",
            nvcc=r"C:\Program Files\CUDA\v13.0\bin\nvcc.exe",
        ),
    )
    assert env["PYTORCH_NVCC"] == r'C:\Tools\sccache.exe "C:\Program Files\CUDA\v13.0\bin\nvcc.exe"'


def test_compilers_and_extra_config() -> None:
    env = build_env(_planned(CUDA_ID), _setup(compilers=("gcc-13", "g++-13"), extra_config="/w/setup.cfg"))
    assert (env["CC"], env["CXX"], env["DIST_EXTRA_CONFIG"]) == ("gcc-13", "g++-13", "/w/setup.cfg")
    assert dist_extra_config(3) == "[build_ext]\nparallel = 3\n"


def test_portable_cpu_patch_on_real_deepspeed_text() -> None:
    patched = patch_portable_cpu(EXCERPT, arch_flag="-march=x86-64-v2", simd_flag="-D__SCALAR__")
    tree = ast.parse(patched)
    methods = {
        f.name: f
        for node in tree.body
        if isinstance(node, ast.ClassDef)
        for f in node.body
        if isinstance(f, ast.FunctionDef)
    }
    # the first statement of each method now returns the baseline (or a level the build gives the builder): the
    # host probe is dead code
    for name, value in (("cpu_arch", "-march=x86-64-v2"), ("simd_width", "-D__SCALAR__")):
        first = methods[name].body[0]
        assert isinstance(first, ast.Return)
        assert isinstance(first.value, ast.Call)
        assert ast.unparse(first.value) == f"getattr(self, 'dswheels_{name}', {value!r})"
    # and running it proves it
    namespace: dict[str, object] = {}
    exec(compile(patched, "builder.py", "exec"), namespace)  # noqa: S102 - our own patched test fixture
    builder = namespace["OpBuilder"]()  # type: ignore[operator]
    assert builder.cpu_arch() == "-march=x86-64-v2"
    assert builder.simd_width() == "-D__SCALAR__"


def test_portable_cpu_patch_windows_flag_may_be_empty() -> None:
    patched = patch_portable_cpu(EXCERPT, arch_flag="", simd_flag="-D__SCALAR__")
    assert "        return getattr(self, 'dswheels_cpu_arch', '')  # dswheels:" in patched


def test_portable_cpu_patch_fails_loudly() -> None:
    with pytest.raises(PatchError, match="exactly one `def cpu_arch"):
        patch_portable_cpu("class OpBuilder:\n    pass\n", arch_flag="-march=x86-64-v2", simd_flag="-D__SCALAR__")
    twice = EXCERPT + "\n    def simd_width(self):\n        return 1\n"
    with pytest.raises(PatchError, match="found 2"):
        patch_portable_cpu(twice, arch_flag="-march=x86-64-v2", simd_flag="-D__SCALAR__")
    once = patch_portable_cpu(EXCERPT, arch_flag="-march=x86-64-v2", simd_flag="-D__SCALAR__")
    with pytest.raises(PatchError, match="already patched"):
        patch_portable_cpu(once, arch_flag="-march=x86-64-v2", simd_flag="-D__SCALAR__")


def test_debug_flag_patch() -> None:
    text, count = patch_debug_flags(EXCERPT)
    assert count == 1
    assert "['-O3', cpp_standard, '-g0', '-Wno-reorder']" in text
    # only the exact flag: -gencode or '-g3' are not touched
    assert patch_debug_flags("x = ['-gencode', \"-g\", '-g3']") == ("x = ['-gencode', \"-g0\", '-g3']", 1)


def test_parse_nvcc_version() -> None:
    text = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\n"
    assert parse_nvcc_version(text) == (13, 0)
    assert parse_nvcc_version("command not found") is None
