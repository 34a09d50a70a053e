"""``dswheels cibw``: the Windows job configuration, read back by cibuildwheel itself.

cibuildwheel cannot build Windows wheels here, but it can list a configuration's build
identifiers for Windows and evaluate its options: that is what these tests ask of it.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dswheels.core.buildenv import BuildSetup, build_env
from dswheels.core.compat import load_compat
from tests.conftest import require
from tests.integration.conftest import dswheels

tomllib = importlib.import_module("tomllib")  # Python >= 3.11, like cibuildwheel itself

pytestmark = pytest.mark.integration

MATRIX = """\
schema: 1
deepspeed: ["0.19.8"]
torch:
  - {version: "2.14", variants: [cu130]}
python: ["3.11", "3.12"]
platforms: [win_amd64]
ops: [fused_adam, cpu_adam]
arch_lists:
  cu130: "8.0;8.6;12.0+PTX"
runners:
  win_amd64:
    build: [windows-2022]
    smoke: [self-hosted, windows, gpu]
"""
CELLS = "ds0.19.8-torch2.14-cu130-cp311-win_amd64 ds0.19.8-torch2.14-cu130-cp312-win_amd64"


@pytest.fixture
def job(tmp_path: Path) -> Path:
    matrix = tmp_path / "matrix.yml"
    matrix.write_text(MATRIX)
    result = dswheels("cibw", "--matrix", str(matrix), "--cell", CELLS, "--out", str(tmp_path / "cibw"), "--no-source")
    assert result.returncode == 0, result.stderr
    assert "cibuildwheel " in result.stdout
    config = tmp_path / "cibw" / "cibuildwheel.toml"
    assert config.is_file()
    return config


def _cibuildwheel() -> str:
    exe = shutil.which("cibuildwheel") or str(Path(sys.executable).parent / "cibuildwheel")
    require(Path(exe).exists(), "cibuildwheel (a test dependency) is needed")
    return exe


def test_cibuildwheel_lists_the_jobs_pythons(job: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "setup.py").write_text("")
    result = subprocess.run(
        [
            _cibuildwheel(),
            "--print-build-identifiers",
            "--platform",
            "windows",
            "--config-file",
            str(job),
            str(project),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["cp311-win_amd64", "cp312-win_amd64"]


def test_cibuildwheel_reads_the_options_as_planned(job: Path, tmp_path: Path) -> None:
    _cibuildwheel()
    from cibuildwheel.options import CommandLineArguments, compute_options

    project = tmp_path / "project"
    project.mkdir()
    args = CommandLineArguments.defaults()
    args = type(args)(**{**args.__dict__, "config_file": str(job), "package_dir": project, "platform": "windows"})
    options = compute_options("windows", args, env={})
    build = options.build_options("cp312-win_amd64")
    # the environment as cibuildwheel evaluates it on a runner with CUDA 13.0 installed
    runner = {"CUDA_PATH": r"C:\Program Files\NVIDIA GPU Computing Toolkit\CUDA\v13.0", "PATH": r"C:\Windows"}
    env = build.environment.as_dictionary(prev_environment=runner)
    assert env["CUDA_HOME"] == runner["CUDA_PATH"]
    assert env["DS_ACCELERATOR"] == "cuda"
    assert env["DS_BUILD_OPS"] == "0"
    assert {k for k, v in env.items() if k.startswith("DS_BUILD_") and v == "1"} == {
        "DS_BUILD_FUSED_ADAM",
        "DS_BUILD_CPU_ADAM",
    }
    assert env["TORCH_CUDA_ARCH_LIST"] == "8.0;8.6;12.0+PTX"
    assert env["DS_BUILD_STRING"] == "+cu130torch2.14"
    assert env["DISTUTILS_USE_SDK"] == "1"
    assert env["NVCC_APPEND_FLAGS"] == "-DUSE_CUDA"  # torch >= 2.9 on Windows needs it (compat.yml)
    # ... and it is exactly what the build module computes for the cell
    from dswheels.commands.build import plan_cell_ids

    planned = plan_cell_ids(CELLS.split(), matrix=tmp_path / "matrix.yml", nvcc=None, compat=load_compat())
    expected = build_env(
        planned[1],
        BuildSetup(
            os="windows",
            path="",
            path_sep=";",
            jobs=2,
            cuda_home=runner["CUDA_PATH"],
            nvcc=None,
            cache=None,
            compilers=None,
            extra_config=None,
        ),
    )
    assert {k: env[k] for k in expected} == expected
    # build without isolation, torch of the variant before each build, no repair, verify as the test
    assert build.build_frontend is not None
    assert build.build_frontend.name == "build"
    assert "--no-isolation" in build.build_frontend.args
    before = build.before_build or ""
    assert "torch==2.14.1 --index-url https://download.pytorch.org/whl/cu130" in before
    assert '"setuptools>=69"' in before  # quoted for cmd.exe
    assert build.repair_command == ""
    assert (build.test_command or "").startswith("dswheels verify {wheel} --python current --matrix ")
    assert "torch==2.14.1 --index-url https://download.pytorch.org/whl/cu130" in (build.before_test or "")


def test_config_is_valid_toml_with_the_plan(job: Path) -> None:
    data = tomllib.loads(job.read_text())["tool"]["cibuildwheel"]
    assert data["build"] == "cp311-win_amd64 cp312-win_amd64"
    assert data["repair-wheel-command"] == ""
    assert data["windows"]["archs"] == ["AMD64"]


def test_one_job_only(tmp_path: Path) -> None:
    matrix = tmp_path / "matrix.yml"
    matrix.write_text(MATRIX.replace("variants: [cu130]", "variants: [cu130, cu126]"))
    result = dswheels(
        "cibw",
        "--matrix",
        str(matrix),
        "--out",
        str(tmp_path / "o"),
        "--no-source",
        "--cell",
        "ds0.19.8-torch2.14-cu130-cp311-win_amd64 ds0.19.8-torch2.14-cu126-cp311-win_amd64",
    )
    assert result.returncode == 2
    assert "one cibuildwheel job builds the Pythons of one DeepSpeed/torch/variant/platform" in result.stderr


def test_env_for_windows_is_not_linux(tmp_path: Path) -> None:
    # sanity: the builder never sets Windows-only variables for Linux cells
    setup = BuildSetup(
        os="linux",
        path="/bin",
        path_sep=":",
        jobs=2,
        cuda_home="/cuda",
        nvcc=None,
        cache=None,
        compilers=None,
        extra_config=None,
    )
    from dswheels.commands.build import plan_cell_ids

    matrix = tmp_path / "m.yml"
    matrix.write_text(MATRIX.replace("win_amd64", "linux_x86_64").replace("windows-2022", "ubuntu-24.04"))
    planned = plan_cell_ids(
        ["ds0.19.8-torch2.14-cu130-cp311-linux_x86_64"], matrix=matrix, nvcc=None, compat=load_compat()
    )
    env = build_env(planned[0], setup)
    assert "DISTUTILS_USE_SDK" not in env
    assert "NVCC_APPEND_FLAGS" not in env
