"""The scripts of dswheels/probes, run for real: by file path in this interpreter, as dswheels runs them.

Where a probe needs torch or DeepSpeed, a miniature one laid out like the real thing
(tests/support/deepspeed_standin.py) goes on ``PYTHONPATH``; the real ones run them in the
integration tests (build, verify, smoke, install, doctor).
"""

from __future__ import annotations

import ast
import os
import platform
import sys
import sysconfig
from pathlib import Path

import packaging
import pytest

import dswheels.probes
from dswheels.building.effects.op_flags_asked import run_probe
from dswheels.building.effects.op_sources_asked import OP_SOURCES_SCRIPT
from dswheels.doctor.effects.collect_facts import collect, probe_target
from dswheels.host import proc
from dswheels.host.opload import NO_JIT_SCRIPT, load_ops
from dswheels.host.venvs import probe_python
from dswheels.kernel.compiler_flags.op_flag_set import OpFlags, ProbeJob
from dswheels.kernel.errors import EnvironmentMismatchError
from dswheels.kernel.opload_result import judge_loads, load_problems
from dswheels.probes import environment, interpreter, no_jit, op_sources
from tests.support.deepspeed_standin import deepspeed_package, source_tree, torch_package, write_files

PROBES = Path(dswheels.probes.__file__).parent
HAS_TORCH = any((Path(p) / "torch").is_dir() for p in sys.path if p)


def _env(*paths: Path) -> dict[str, str]:
    """This environment with ``paths`` importable (a stand-in torch/DeepSpeed)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DS_ACCELERATOR", "TORCH_EXTENSIONS_DIR")}
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in paths)
    return env


def _standin(tmp_path: Path, *, kind: str = "prebuilt", accelerator: str = "cpu") -> Path:
    site = tmp_path / "site"
    write_files(site, torch_package("2.13.0"))
    files = deepspeed_package(
        version="0.19.8+cputorch2.13", accelerator=accelerator, torch_minor="2.13", cuda="", kind=kind
    )
    return write_files(site, files)


# --- every probe -------------------------------------------------------------------------------


def test_the_probes_folder_holds_only_scripts_that_shadow_nothing_they_import() -> None:
    """Run by path, the folder is sys.path[0] in the target: a probe named like a module would hide it."""
    scripts = {p.stem for p in PROBES.glob("*.py")} - {"__init__"}
    assert scripts == {
        "environment",
        "interpreter",
        "isa_dispatch",
        "isa_variants",
        "no_jit",
        "op_flags",
        "op_sources",
        "win32_python",
        "wine_tool",
    }
    imported = {"torch", "deepspeed", "op_builder", "accelerator", "build", "setuptools", "wheel", "ninja"}
    imported |= {"packaging", "numpy", "psutil", "resource", "site", "ctypes", *sys.stdlib_module_names}
    assert not scripts & imported


def test_the_doctor_probe_is_python_3_8() -> None:
    """doctor runs it in whatever Python the user names: 3.8 must at least parse it."""
    ast.parse((PROBES / "environment.py").read_text(encoding="utf-8"), feature_version=(3, 8))
    for script in PROBES.glob("*.py"):
        ast.parse(script.read_text(encoding="utf-8"), feature_version=(3, 10))


# --- interpreter -------------------------------------------------------------------------------


def test_the_interpreter_probe_describes_this_interpreter() -> None:
    info = probe_python(sys.executable)
    assert info.python == platform.python_version()
    assert Path(info.executable).resolve() == Path(sys.executable).resolve()
    assert info.modules["packaging"] == packaging.__version__
    assert info.purelib
    if not HAS_TORCH:
        assert info.torch is None
        assert "No module named 'torch'" in info.torch_error
    assert info.cuda_devices is None  # not asked


def test_the_interpreter_probe_reads_torch_and_counts_gpus_when_asked(tmp_path: Path) -> None:
    site = write_files(tmp_path, torch_package("2.13.0", cuda="13.0"))
    (site / "torch" / "cuda.py").write_text("def is_available():\n    return False\n")
    (site / "torch" / "__init__.py").write_text("from torch import cuda, version\n__version__ = version.__version__\n")
    info = probe_python(sys.executable, env=_env(site), gpus=True)
    assert (info.torch, info.torch_cuda, info.torch_error) == ("2.13.0", "13.0", "")
    assert info.torch_parent == str(site)
    assert info.cuda_devices == 0


def test_the_interpreter_probe_in_process() -> None:
    facts = interpreter.describe(["json", "dswheels_no_such_module"])
    assert facts["modules"] == {"json": __import__("json").__version__, "dswheels_no_such_module": None}


def test_an_interpreter_that_does_not_run(tmp_path: Path) -> None:
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho nope; exit 3\n")
    broken.chmod(0o755)
    with pytest.raises(EnvironmentMismatchError, match="cannot run the interpreter"):
        probe_python(broken)


# --- environment (doctor, install) -------------------------------------------------------------


def test_the_doctor_probe_reads_deepspeed_without_importing_it(tmp_path: Path) -> None:
    site = _standin(tmp_path)
    (site / "deepspeed" / "__init__.py").write_text("raise RuntimeError('the probe must not import deepspeed')\n")
    data, why = probe_target(sys.executable, _env(site), light=True)
    assert why == ""
    assert data is not None
    python = data["python"]
    assert isinstance(python, dict)
    assert python["version"] == platform.python_version()
    assert data["torch"] == {
        "version": "2.13.0",
        "cuda": None,
        "hip": None,
        "cuda_available": False,
        "devices": [],
        "arch_list": [],
        "cuda_home": None,
        "cuda_home_error": "not probed",
    }
    assert data["deepspeed"] == {
        "version": "0.19.8+cputorch2.13",  # no distribution metadata: from git_version_info_installed.py
        "installed_ops": {"async_io": False, "cpu_adam": True, "fused_adam": True},
        "accelerator": "cpu",
        "torch_version": "2.13",
        "cuda_version": "0.0",
        "error": "no distribution metadata: PackageNotFoundError: No package metadata was found for deepspeed",
    }
    if sys.platform.startswith("linux"):
        runtime = data["linux_runtime"]
        assert isinstance(runtime, dict)
        assert runtime["glibc"].startswith("glibc ")
        assert "libstdc++.so" in runtime["libstdcxx"]


def test_the_doctor_probe_imports_torch_unless_light(tmp_path: Path) -> None:
    site = write_files(tmp_path, torch_package("2.14.1", cuda="13.0"))
    (site / "torch" / "__init__.py").write_text("raise ImportError('libtorch_cpu.so: cannot open shared object')\n")
    full, _ = probe_target(sys.executable, _env(site))
    assert full is not None
    assert full["torch"] is None
    assert full["torch_error"] == "ImportError: libtorch_cpu.so: cannot open shared object"
    light, _ = probe_target(sys.executable, _env(site), light=True)
    assert light is not None
    assert isinstance(light["torch"], dict)
    assert light["torch"]["cuda"] == "13.0"


def test_collect_turns_the_probe_into_facts(tmp_path: Path) -> None:
    facts = collect(sys.executable, _env(_standin(tmp_path)), full=False)
    assert facts.python is not None
    assert facts.python.version == platform.python_version()
    assert facts.torch is not None
    assert facts.torch.version == "2.13.0"
    assert facts.deepspeed is not None
    assert facts.deepspeed.installed_ops == {"async_io": False, "cpu_adam": True, "fused_adam": True}


def test_a_target_python_that_does_not_run() -> None:
    data, why = probe_target("/nonexistent/python3", dict(os.environ))
    assert data is None
    assert "/nonexistent/python3" in why


def test_the_doctor_probe_in_process() -> None:
    assert environment.literals(str(PROBES / "no_jit.py"))["LOAD_MARK"] == no_jit.LOAD_MARK
    assert environment.python_facts()["executable"] == sys.executable


# --- no_jit: the one loader of verify, install and smoke ---------------------------------------


def test_the_loader_loads_the_prebuilt_ops(tmp_path: Path) -> None:
    ext = tmp_path / "ext"
    ext.mkdir()
    report, _run = load_ops(sys.executable, None, env=_env(_standin(tmp_path)), extensions_dir=ext)
    assert report is not None
    assert (report.version, report.torch, report.accelerator_runtime, report.accelerator_wheel) == (
        "0.19.8+cputorch2.13",
        "2.13.0",
        "cpu",
        "cpu",
    )
    assert [(op.name, op.loaded, op.prebuilt) for op in report.ops] == [
        ("cpu_adam", "deepspeed.ops.adam.cpu_adam_op", True),
        ("fused_adam", "deepspeed.ops.adam.fused_adam_op", True),
    ]
    assert load_problems(report, expected_version="0.19.8+cputorch2.13") == []
    assert load_problems(report, expected_version="0.19.7+cputorch2.13") == [
        "deepspeed.git_version_info.version is 0.19.8+cputorch2.13, expected 0.19.7+cputorch2.13"
    ]


def test_the_loader_forbids_jit_compiles(tmp_path: Path) -> None:
    ext = tmp_path / "ext"
    ext.mkdir()
    report, _run = load_ops(sys.executable, ["cpu_adam"], env=_env(_standin(tmp_path, kind="jit")), extensions_dir=ext)
    assert report is not None
    why = "load() raised WouldJitError: cpu_adam would be JIT-compiled: DeepSpeed found no usable prebuilt module"
    assert [v.detail for v in judge_loads(report)] == [f"{why} for this accelerator"]
    assert not list(ext.iterdir())  # refused before anything was built


def test_the_loader_catches_an_op_compiled_behind_jit_loads_back(tmp_path: Path) -> None:
    ext = tmp_path / "ext"
    ext.mkdir()
    report, _run = load_ops(sys.executable, None, env=_env(_standin(tmp_path, kind="stray")), extensions_dir=ext)
    assert report is not None
    assert report.jit_files == ("cpu_adam", "fused_adam")
    assert load_problems(report) == [
        "cpu_adam: loaded cpu_adam instead of the prebuilt deepspeed.ops.adam.cpu_adam_op (JIT-compiled)",
        "fused_adam: loaded fused_adam instead of the prebuilt deepspeed.ops.adam.fused_adam_op (JIT-compiled)",
        "TORCH_EXTENSIONS_DIR is not empty after loading: something was JIT-compiled (cpu_adam, fused_adam)",
    ]


def test_the_loader_runs_under_the_accelerator_it_is_given(tmp_path: Path) -> None:
    """A CUDA wheel on a GPU-less host: DeepSpeed picks cpu unless DS_ACCELERATOR says cuda."""
    site = _standin(tmp_path, accelerator="cuda")
    ext = tmp_path / "ext"
    ext.mkdir()
    plain, _ = load_ops(sys.executable, [], env=_env(site), extensions_dir=ext)
    assert plain is not None
    assert (plain.accelerator_runtime, plain.accelerator_wheel) == ("cpu", "cuda")
    told, _ = load_ops(sys.executable, [], env={**_env(site), "DS_ACCELERATOR": "cuda"}, extensions_dir=ext)
    assert told is not None
    assert (told.accelerator_runtime, told.accelerator_wheel) == ("cuda", "cuda")


def test_the_loader_without_deepspeed_or_torch(tmp_path: Path) -> None:
    ext = tmp_path / "ext"
    ext.mkdir()
    report, _ = load_ops(sys.executable, None, env=_env(), extensions_dir=ext)
    assert report is not None
    assert report.error == f"deepspeed is not importable in {sys.executable}"
    site = write_files(
        tmp_path / "site", deepspeed_package(version="0", accelerator="cpu", torch_minor="", cuda="", kind="jit")
    )
    report, _ = load_ops(sys.executable, None, env=_env(site), extensions_dir=ext)
    assert report is not None
    if not HAS_TORCH:
        assert report.error == "import failed: ModuleNotFoundError: No module named 'torch'"


def test_the_no_jit_script_names_its_modes() -> None:
    result = proc.capture([sys.executable, str(NO_JIT_SCRIPT), "compile"])
    assert result.returncode == 2
    assert "usage: no_jit.py {load|train|adam}" in result.output


# --- op_flags (build, plan's flag record) --------------------------------------------------------


def test_the_op_flags_probe_records_what_the_builders_pass(tmp_path: Path) -> None:
    site = write_files(tmp_path / "site", torch_package("2.13.0"))
    tree = write_files(tmp_path / "src", source_tree())
    answer = run_probe(sys.executable, [ProbeJob(tree=str(tree), ops=("cpu_adam", "async_io"))], env=_env(site))
    assert answer.platform == sys.platform
    (job,) = answer.jobs
    assert (job.accelerator, job.error) == ("cpu", "")
    flags = job.results[0].ops
    assert flags["cpu_adam"] == OpFlags(
        op="cpu_adam",
        extension="CppExtension",
        cxx=("-O3", "-std=c++17"),
        nvcc=None,
        include_dirs=("csrc/includes",),
        compatible=True,
    )
    assert flags["async_io"].compatible is False
    assert set(flags) == {"cpu_adam", "async_io"}


def test_the_op_flags_probe_outside_a_source_tree(tmp_path: Path) -> None:
    site = write_files(tmp_path / "site", torch_package("2.13.0"))
    answer = run_probe(sys.executable, [ProbeJob(tree=str(tmp_path))], env=_env(site))
    assert answer.jobs[0].error == "ModuleNotFoundError: No module named 'op_builder'"


# --- op_sources (build) ------------------------------------------------------------------------


def test_the_op_sources_probe_reads_a_source_trees_builders(tmp_path: Path) -> None:
    tree = write_files(tmp_path / "src", source_tree())
    result = proc.capture(
        [str(sys.executable), str(OP_SOURCES_SCRIPT), '["cpu_adam", "async_io"]'],
        cwd=tree,
        env=_env(),
    )
    data = proc.marked_json(result.output, op_sources.MARK)
    assert data == {
        "accelerator": "cpu",
        "ops": {
            "cpu_adam": {
                "var": "DS_BUILD_CPU_ADAM",
                "module": "deepspeed.ops.adam.cpu_adam_op",
                "sources": ["csrc/cpu_adam.cpp"],
                "include_paths": [],
                "compatible": True,
                "variants": [],  # a tree dswheels did not patch for ISA variants: built once
                "messages": "",
            },
            "fused_adam": {"var": "DS_BUILD_FUSED_ADAM", "module": "deepspeed.ops.adam.fused_adam_op"},
            "async_io": {
                "var": "DS_BUILD_ASYNC_IO",
                "module": "deepspeed.ops.aio.async_io_op",
                "sources": ["csrc/async_io.cpp"],
                "include_paths": [],
                "compatible": False,
                "variants": [],
                "messages": "async_io requires a library this machine lacks\n",
            },
        },
        # where torch's and Python's headers are (no torch here: none of torch's)
        "include": {"torch": [], "python": [sysconfig.get_paths()["include"]]},
    }, result.output


def test_the_op_sources_probe_outside_a_source_tree(tmp_path: Path) -> None:
    result = proc.capture(
        [str(sys.executable), str(OP_SOURCES_SCRIPT), "[]"],
        cwd=tmp_path,
    )
    data = proc.marked_json(result.output, op_sources.MARK)
    assert data is None
    assert "No module named 'op_builder'" in result.output
