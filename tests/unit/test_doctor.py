"""doctor's judgement over facts recorded from real machines (tests/data/machines).

Longer than most modules: one case per kind of machine fault, each a few lines over the same
recorded machines; the published-index and output cases are in test_doctor_published.py.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from dswheels.doctor import IndexView, Status, diagnose
from dswheels.doctor.machine_facts import (
    DeepSpeedFacts,
    Facts,
    PythonFacts,
    Toolkit,
    VisualStudio,
    parse_nvidia_smi,
    parse_vswhere,
)
from dswheels.doctor.machine_facts_json import facts_from_data, facts_to_data
from dswheels.doctor.render_report import render_text
from dswheels.kernel.compat import Compat
from dswheels.kernel.index_files import IndexFile
from dswheels.kernel.naming import try_parse_wheel
from dswheels.kernel.versions import parse_nvcc_version, parse_version
from dswheels.plan.effects.matrix_file import load_matrix
from dswheels.plan.matrix.spec import MatrixSpec
from dswheels.plan.planner import Combo, plan
from tests.conftest import ROOT
from tests.unit.machines import DATA, NEWEST_DS, checks, load_machine, machine_names, nvcc_text, one

# --- parsers over recorded tool output --------------------------------------------------------


@pytest.mark.parametrize("path", sorted((DATA / "recordings" / "nvcc").glob("*.txt")), ids=lambda p: p.stem)
def test_nvcc_version_of_every_recording(path: Path) -> None:
    expected = parse_version(path.stem.split("-", 1)[1])
    assert parse_nvcc_version(path.read_text(encoding="utf-8")) == expected


def test_nvcc_version_absent() -> None:
    assert parse_nvcc_version("") is None
    assert parse_nvcc_version("nvcc fatal : Unknown option '--version'") is None


def test_nvidia_smi_recordings() -> None:
    smi = DATA / "recordings" / "nvidia-smi"
    gpus, driver = parse_nvidia_smi((smi / "windows-rtx4070-laptop.csv").read_text(encoding="utf-8"))
    assert [(g.name, g.capability, g.memory_mib) for g in gpus] == [("NVIDIA GeForce RTX 4070 Laptop GPU", "8.9", 8188)]
    assert driver == "581.42"
    gpus, driver = parse_nvidia_smi((smi / "linux-rtx5060.csv").read_text(encoding="utf-8"))
    assert [(g.name, g.capability, g.memory_mib) for g in gpus] == [("NVIDIA GeForce RTX 5060", "12.0", None)]
    assert driver == "580.159.03"


def test_nvidia_smi_columns_in_any_order_and_old_drivers() -> None:
    text = "memory.total [MiB], driver_version, name\n24564 MiB, 560.94, NVIDIA GeForce RTX 4090\n"
    gpus, driver = parse_nvidia_smi(text)
    assert (gpus[0].name, gpus[0].capability, gpus[0].memory_mib, driver) == (
        "NVIDIA GeForce RTX 4090",
        "",
        24564,
        "560.94",
    )
    assert parse_nvidia_smi("") == ((), "")


def test_vswhere_recordings_with_toolsets() -> None:
    text = (DATA / "recordings" / "vswhere" / "buildtools-2022-17.14.28.json").read_text(encoding="utf-8")
    path = r"C:\Program Files (x86)\Microsoft Visual Studio\2022\BuildTools"
    vs = VisualStudio(
        vswhere=text, toolsets={path: ("14.29.30133", "14.44.35207", "x64")}, defaults={path: "14.44.35207"}
    )
    (install,) = parse_vswhere(vs)
    assert install.name == "Visual Studio Build Tools 2022"
    assert install.version == "17.14.28"
    assert install.toolsets == ("14.44.35207", "14.29.30133")  # newest first; stray directories ignored
    assert install.majors() == ("14.44", "14.29")
    assert install.default == "14.44.35207"
    assert parse_vswhere(VisualStudio(vswhere="not json", toolsets={}, defaults={})) == ()
    assert parse_vswhere(VisualStudio(vswhere=None, toolsets={}, defaults={})) == ()


@pytest.mark.parametrize("name", machine_names())
def test_facts_round_trip(name: str) -> None:
    facts = load_machine(name)
    assert facts_from_data(json.loads(json.dumps(facts_to_data(facts)))) == facts


# --- healthy machines -----------------------------------------------------------------------


def test_windows_healthy(compat: Compat) -> None:
    report = diagnose(load_machine("windows-healthy-cu124"), compat)
    assert report.worst is Status.OK, render_text(report)
    verdict = report.verdict
    assert verdict.cell_id == f"ds{NEWEST_DS}-torch2.6-cu124-cp312-win_amd64"
    local = verdict.local
    assert local.status is Status.OK
    assert local.toolchain is not None
    assert (local.toolchain.host_compiler.version, local.toolchain.nvcc) == ("14.43", (12, 4))
    env = dict(local.environment)
    assert env["CUDA_HOME"] == r"C:\Program Files\NVIDIA GPU Computing Toolkit\CUDA\v12.4"
    assert env["DISTUTILS_USE_SDK"] == "1"
    assert "DS_ACCELERATOR" not in env  # a GPU is visible
    # sm_89 (RTX 4070) runs torch's sm_86 SASS: same major, newer minor
    assert one(report, "gpu").status is Status.OK
    assert "venv" in report.guidance[1]
    assert "Activate.ps1" in report.guidance[2]


def test_linux_healthy(compat: Compat) -> None:
    report = diagnose(load_machine("linux-healthy-cu128"), compat)
    assert report.worst is Status.OK, render_text(report)
    assert report.verdict.cell_id == f"ds{NEWEST_DS}-torch2.8-cu128-cp312-linux_x86_64"
    local = report.verdict.local
    assert local.status is Status.OK
    assert local.toolchain is not None
    assert local.toolchain.host_compiler.version == "13"
    assert dict(local.environment)["TORCH_CUDA_ARCH_LIST"] == "7.0;7.5;8.0;8.6;9.0;10.0;12.0"
    assert one(report, "cuda_home").title.startswith("CUDA_HOME -> /usr/local/cuda-12.8 (via CUDA_HOME)")


# --- no toolkit, major and minor mismatch -----------------------------------------------------


def test_no_toolkit(compat: Compat) -> None:
    report = diagnose(load_machine("linux-no-toolkit"), compat)
    toolkit = one(report, "toolkit")
    assert toolkit.status is Status.WARN
    assert "CUDA 12.8.2" in toolkit.fix  # the full release compat.yml installs for 12.8
    local = report.verdict.local
    assert local.status is Status.FAIL
    assert local.blockers[0].startswith("no CUDA toolkit found: torch CUDA 12.8 needs one")
    assert one(report, "cuda_home").status is Status.WARN
    # installing a published wheel needs no toolkit: nothing FAILs
    assert report.worst is Status.WARN


def test_no_toolkit_where_dswheels_can_install_one_names_the_command(compat: Compat) -> None:
    # 12.8.2's redistrib JSON is not pinned: the installer's page; a pinned toolkit: `dswheels cuda install`
    assert "dswheels cuda install" not in one(diagnose(load_machine("linux-no-toolkit"), compat), "toolkit").fix
    pinned = dataclasses.replace(compat.cuda[(12, 8)], redist_sha256="0" * 64)
    report = diagnose(
        load_machine("linux-no-toolkit"), dataclasses.replace(compat, cuda={**compat.cuda, (12, 8): pinned})
    )
    assert one(report, "toolkit").fix.startswith("`dswheels cuda install --toolkit 12.8.2` (the components a build")


def test_major_mismatch_uses_the_planners_rule(compat: Compat) -> None:
    report = diagnose(load_machine("linux-major-mismatch"), compat)
    cuda_home = one(report, "cuda_home")
    assert cuda_home.status is Status.WARN
    assert "different CUDA major" in cuda_home.detail
    local = report.verdict.local
    assert local.status is Status.FAIL
    expected = (
        "[nvcc-major] nvcc 12.8 cannot build cu130: torch refuses a CUDA major mismatch -- "
        "install a CUDA 13.x toolkit, ideally 13.0"
    )
    assert local.blockers == (expected,)


def _with_nvcc(facts: Facts, *, torch: str, cuda: str, nvcc: str) -> Facts:
    """The healthy Linux machine with another torch and a (recorded) nvcc of another version."""
    root = f"/usr/local/cuda-{nvcc}"
    toolkit = dataclasses.replace(
        facts.toolkits[0],
        root=root,
        aliases=(root,),
        nvcc_output=nvcc_text("linux", nvcc),
    )
    assert facts.torch is not None
    return dataclasses.replace(
        facts,
        torch=dataclasses.replace(facts.torch, version=torch, cuda=cuda, cuda_home=root, arch_list=()),
        env={"CUDA_HOME": root},
        path_nvcc=f"{root}/bin/nvcc",
        toolkits=(toolkit,),
    )


# DeepSpeed's cuda_minor_mismatch_ok, one row per whitelist era (shared/reference/compat.md C.2):
# (deepspeed, torch, torch CUDA, nvcc, does DeepSpeed accept the pair without DS_SKIP_CUDA_CHECK)
MISMATCH_CASES = [
    ("0.14.2", "2.4.1+cu121", "12.1", "12.4", False),  # 0.12.1-0.14.2: 12.0-12.3, 12.4 not listed
    ("0.14.3", "2.4.1+cu121", "12.1", "12.4", True),  # 0.14.3-0.15.2: 12.0-12.5
    ("0.16.0", "2.7.1+cu128", "12.8", "12.6", False),  # 0.15.3-0.16.3: 12.0-12.6, 12.8 not listed
    ("0.16.0", "2.6.0+cu124", "12.4", "12.6", True),
    ("0.16.4", "2.7.1+cu128", "12.8", "12.6", True),  # 0.16.4-0.17.1: adds 12.8
    ("0.17.1", "2.8.0+cu129", "12.9", "12.8", False),  # 12.9 only from 0.17.2
    ("0.17.2", "2.8.0+cu129", "12.9", "12.8", True),
    ("0.19.8", "2.7.1+cu118", "11.8", "11.7", True),  # the 11.x list: 11.0-11.8 in every release
    ("0.19.8", "2.12.1+cu130", "13.0", "13.1", False),  # no CUDA 13 list up to 0.19.8
]


@pytest.mark.parametrize("case", MISMATCH_CASES, ids=lambda c: f"ds{c[0]}-{c[1]}-nvcc{c[3]}")
def test_minor_mismatch_under_each_whitelist(compat: Compat, case: tuple[str, str, str, str, bool]) -> None:
    deepspeed, torch, cuda, nvcc, accepted = case
    facts = _with_nvcc(load_machine("linux-healthy-cu128"), torch=torch, cuda=cuda, nvcc=nvcc)
    if nvcc.startswith("11."):
        facts = dataclasses.replace(facts, gcc="11.4.0")  # nvcc 11.x accepts GCC <= 11 (the planner checks it)
    report = diagnose(facts, compat, deepspeed=parse_version(deepspeed))
    local = report.verdict.local
    assert local.toolchain is not None, local.blockers
    assert local.toolchain.skip_cuda_check is (not accepted)
    env = dict(local.environment)
    if accepted:
        assert "DS_SKIP_CUDA_CHECK" not in env
        assert local.status is Status.OK
    else:
        assert env["DS_SKIP_CUDA_CHECK"] == "1"
        assert local.status is Status.WARN
        assert any(w.startswith(f"DS_SKIP_CUDA_CHECK=1: nvcc {nvcc} != torch CUDA {cuda}") for w in local.workarounds)
    # the same decision `dswheels plan --nvcc` makes for the cell on the shipped matrix
    cell = report.verdict.cell
    assert cell is not None
    spec_plan = plan(
        _shipped_matrix(compat),
        compat,
        combo=Combo(
            deepspeed=cell.deepspeed, torch=cell.torch, variant=cell.variant, python=cell.python, platform=cell.platform
        ),
        nvcc=parse_version(nvcc),
    )
    (planned,) = spec_plan.planned
    assert planned.toolchain.skip_cuda_check is local.toolchain.skip_cuda_check
    assert planned.toolchain.cuda_check == local.toolchain.cuda_check


def _shipped_matrix(compat: Compat) -> MatrixSpec:
    return load_matrix(ROOT / "matrix" / "matrix.yml", compat)


# --- MSVC too new for the nvcc ----------------------------------------------------------------


def test_msvc_too_new_picks_the_older_side_by_side_toolset(compat: Compat) -> None:
    report = diagnose(load_machine("windows-cu121-msvc1444"), compat)
    assert one(report, "msvc").title == "Visual Studio Build Tools 2022 17.14.28: MSVC 14.44 (default), 14.29"
    local = report.verdict.local
    assert local.status is Status.WARN
    assert local.toolchain is not None
    assert local.toolchain.host_compiler.version == "14.29"
    assert local.workarounds[0].startswith("use MSVC 14.29: call vcvarsall.bat x64 -vcvars_ver=14.29")
    assert "rejected 14.44 (_MSC_VER 1944 outside nvcc 12.1's 1910-1939)" in local.workarounds[0]
    # the planner makes the same choice for GitHub's windows-2022 image (14.44 default, 14.29 side by side)
    cell = report.verdict.cell
    assert cell is not None
    (planned,) = plan(
        _shipped_matrix(compat),
        compat,
        combo=Combo(
            deepspeed=cell.deepspeed, torch=cell.torch, variant=cell.variant, python=cell.python, platform=cell.platform
        ),
    ).planned
    assert planned.toolchain.host_compiler.version == local.toolchain.host_compiler.version


def test_msvc_too_new_without_an_older_toolset_needs_escape_flags(compat: Compat) -> None:
    facts = load_machine("windows-cu121-msvc1444")
    assert facts.visual_studio is not None
    path = next(iter(facts.visual_studio.toolsets))
    facts = dataclasses.replace(
        facts, visual_studio=dataclasses.replace(facts.visual_studio, toolsets={path: ("14.44.35207",)})
    )
    local = diagnose(facts, compat).verdict.local
    assert local.status is Status.WARN
    assert local.toolchain is not None
    assert local.toolchain.host_compiler.version == "14.44"
    assert "-D_ALLOW_COMPILER_AND_STL_VERSION_MISMATCH" in dict(local.environment)["NVCC_APPEND_FLAGS"]
    assert any("installing an MSVC toolset this nvcc supports is safer" in w for w in local.workarounds)


def test_build_tools_without_the_cpp_workload(compat: Compat) -> None:
    report = diagnose(load_machine("windows-buildtools-no-vc"), compat)
    msvc = one(report, "msvc")
    assert msvc.status is Status.WARN
    assert "--add Microsoft.VisualStudio.Workload.VCTools" in msvc.fix
    local = report.verdict.local
    assert local.status is Status.FAIL
    assert local.blockers[0].startswith("[host-compiler] no MSVC toolset found -- install an MSVC toolset nvcc 12.8")
    assert one(report, "long_paths").status is Status.WARN


def test_gpu_machine_with_an_installed_wheel(compat: Compat) -> None:
    """Recorded on a real H200 after `dswheels install`: everything OK, the wheel's ops seen."""
    report = diagnose(load_machine("linux-h200-cu130-deepspeed"), compat)
    assert report.worst is Status.OK, render_text(report)
    gpu = one(report, "gpu")
    assert gpu.status is Status.OK
    assert "H200" in gpu.title
    deepspeed = one(report, "deepspeed")
    assert deepspeed.status is Status.OK
    assert "2 prebuilt ops" in deepspeed.title
    assert "cpu_adam, fused_adam" in deepspeed.detail
    verdict = report.verdict
    assert verdict.cell_id == "ds0.19.8-torch2.11-cu130-cp312-linux_x86_64"  # the installed DeepSpeed
    local = verdict.local
    assert local.status is Status.OK
    assert local.toolchain is not None
    assert (local.toolchain.host_compiler.version, local.toolchain.nvcc) == ("13", (13, 0))
    env = dict(local.environment)
    assert env["CUDA_HOME"] == "/usr/local/cuda-13.0"  # the symlink /usr/local/cuda resolved
    assert "DS_ACCELERATOR" not in env  # a GPU is visible
    assert "CUDA_INC_PATH" not in env  # the toolkit has the cuBLAS/cuRAND dev files itself
    # Ubuntu 24.04: glibc 2.39 and GCC 14's libstdc++, as compat.yml records for the ubuntu-24.04 image
    runtime = one(report, "linux_runtime")
    assert runtime.title == "glibc 2.39, libstdc++ GLIBCXX_3.4.33: loads the published Linux wheels"
    assert "libstdc++.so.6.0.33 defines up to GLIBCXX_3.4.33 and CXXABI_1.3.15 (loaded by torch)" in runtime.detail


# --- CPU torch, no GPU --------------------------------------------------------------------------


def test_cpu_torch_on_windows_with_a_gpu(compat: Compat) -> None:
    report = diagnose(load_machine("windows-cpu-torch-gpu"), compat)
    torch = one(report, "torch")
    assert torch.status is Status.FAIL
    assert "PyPI's Windows torch wheels are all CPU builds" in torch.detail
    # the CUDA 12.6 toolkit on the machine decides the variant to suggest
    assert torch.fix.startswith("pip install torch==2.6.0 --index-url https://download.pytorch.org/whl/cu126")
    assert report.verdict.cell_id == f"ds{NEWEST_DS}-torch2.6-cpu-cp312-win_amd64"


def test_no_gpu_cuda_torch_this_machine(compat: Compat) -> None:
    report = diagnose(load_machine("linux-cuda13-cudatorch-nogpu"), compat)
    gpu = one(report, "gpu")
    assert gpu.status is Status.WARN
    assert "DS_ACCELERATOR=cuda" in gpu.detail
    assert report.verdict.cell_id == f"ds{NEWEST_DS}-torch2.14-cu130-cp311-linux_x86_64"
    # torch guesses /usr/local from the /usr/local/bin/nvcc wrapper; doctor points at the real root
    cuda_home = one(report, "cuda_home")
    assert cuda_home.status is Status.WARN
    assert cuda_home.title.startswith("CUDA_HOME -> /usr/local (via")
    assert cuda_home.fix == "export CUDA_HOME=/usr/local/cuda-13.0"
    local = report.verdict.local
    assert local.status is Status.WARN
    env = dict(local.environment)
    assert env["CUDA_HOME"] == "/usr/local/cuda-13.0"
    assert env["DS_ACCELERATOR"] == "cuda"
    assert env["CUDA_INC_PATH"].endswith("site-packages/nvidia/cu13/include")
    assert any("random_ltd, transformer, transformer_inference would fail to link" in w for w in local.workarounds)
    assert report.worst is Status.WARN


def test_cpu_torch_no_gpu_this_machine(compat: Compat) -> None:
    report = diagnose(load_machine("linux-cuda13-cputorch-nogpu"), compat)
    assert one(report, "torch").status is Status.OK
    assert one(report, "cuda_home").title == "CUDA_HOME: not used (torch is a CPU build)"
    toolkits = checks(report, "toolkit")
    assert {c.status for c in toolkits} == {Status.OK}  # a CPU torch does not use them
    assert "missing headers: cuBLAS" in toolkits[-1].detail
    assert report.verdict.cell_id == f"ds{NEWEST_DS}-torch2.13-cpu-cp311-linux_x86_64"
    local = report.verdict.local
    assert local.status is Status.OK
    assert "cpu_adam" in local.ops
    assert report.guidance == ()  # CUDA_HOME does not matter for a CPU torch


def test_gpu_older_than_torchs_arch_list(compat: Compat) -> None:
    gpu = one(diagnose(load_machine("linux-gpu-too-old"), compat), "gpu")
    assert gpu.status is Status.FAIL
    assert "no kernels for sm_61" in gpu.detail


# --- other environment problems -----------------------------------------------------------------


def test_torch_missing(compat: Compat) -> None:
    facts = dataclasses.replace(load_machine("linux-healthy-cu128"), torch=None, torch_error="not installed")
    report = diagnose(facts, compat)
    torch = one(report, "torch")
    assert (torch.status, torch.title) == (Status.FAIL, "torch is not installed")
    assert torch.fix.startswith("pip install torch==")
    assert report.verdict.cell is None
    assert report.verdict.local.status is Status.FAIL


def _index_of(*names: str) -> IndexView:
    return IndexView(
        url="http://127.0.0.1:8000/",
        files=tuple(
            IndexFile(filename=n, url=f"http://127.0.0.1:8000/files/{n}", sha256="0" * 64, wheel=try_parse_wheel(n))
            for n in names
        ),
    )


def test_torch_missing_the_fix_is_a_torch_the_index_has_a_wheel_for(compat: Compat) -> None:
    """This machine without torch, against a site whose only partition is cpu-torch2.13: not the newest torch
    (2.14.1, no wheel for it there) but the one that makes `dswheels install --index` find its wheel."""
    facts = dataclasses.replace(load_machine("linux-cuda13-cputorch-nogpu"), torch=None, torch_error="not installed")
    index = _index_of(f"deepspeed-{NEWEST_DS}+cputorch2.13-cp311-cp311-linux_x86_64.whl")
    torch = one(diagnose(facts, compat, index=index), "torch")
    assert torch.fix == "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
    assert f"the index publishes deepspeed-{NEWEST_DS}+cputorch2.13-cp311-cp311-linux_x86_64.whl" in torch.detail
    # with no index, or none for this Python, the newest torch (for a local build), and it says why
    assert one(diagnose(facts, compat), "torch").fix.startswith("pip install torch==2.14.1")
    other = _index_of(f"deepspeed-{NEWEST_DS}+cputorch2.13-cp312-cp312-linux_x86_64.whl")
    torch = one(diagnose(facts, compat, index=other), "torch")
    assert torch.fix.startswith("pip install torch==2.14.1")
    assert "the index publishes no wheel for Python 3.11 on linux_x86_64" in torch.detail


def test_torch_missing_a_gpu_machine_is_pointed_at_a_cuda_wheel(compat: Compat) -> None:
    facts = dataclasses.replace(load_machine("linux-healthy-cu128"), torch=None, torch_error="not installed")
    assert facts.python is not None
    py = "cp" + "".join(facts.python.version.split(".")[:2])
    names = [f"deepspeed-{NEWEST_DS}+{v}torch2.13-{py}-{py}-linux_x86_64.whl" for v in ("cpu", "cu126", "cu130")]
    torch = one(diagnose(facts, compat, index=_index_of(*names)), "torch")
    # a GPU: a CUDA wheel, and of those the variant of the CUDA 12.8 toolkit's major here (cu126)
    assert torch.fix == "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cu126", torch


def test_cuda_home_that_is_no_toolkit_is_not_ok_without_torch(compat: Compat) -> None:
    """torch's guess from the /usr/local/bin/nvcc wrapper: /usr/local, no toolkit root. Not OK where a torch is
    still to be installed (a CUDA one would build against it); OK, as unused, only for a CPU torch."""
    facts = dataclasses.replace(load_machine("linux-cuda13-cputorch-nogpu"), torch=None, torch_error="not installed")
    cuda_home = one(diagnose(facts, compat), "cuda_home")
    assert cuda_home.status is Status.WARN
    assert "/usr/local has no include/cuda_runtime.h: it is not a CUDA toolkit root" in cuda_home.detail
    assert cuda_home.fix == "export CUDA_HOME=/usr/local/cuda-13.0"
    cpu = load_machine("linux-cuda13-cputorch-nogpu")
    assert cpu.torch is not None
    guessed = dataclasses.replace(cpu, torch=dataclasses.replace(cpu.torch, cuda_home="/usr/local"))
    cuda_home = one(diagnose(guessed, compat), "cuda_home")
    assert (cuda_home.status, cuda_home.title) == (Status.OK, "CUDA_HOME: not used (torch is a CPU build)")
    assert "not a CUDA toolkit root" in cuda_home.detail


def test_torch_import_error_is_reported(compat: Compat) -> None:
    error = "OSError: [WinError 126] The specified module could not be found. Error loading fbgemm.dll"
    facts = dataclasses.replace(load_machine("windows-healthy-cu124"), torch=None, torch_error=error)
    torch = one(diagnose(facts, compat), "torch")
    assert torch.title == "torch does not import"
    assert torch.detail == error


def test_32_bit_python_on_windows(compat: Compat) -> None:
    facts = load_machine("windows-healthy-cu124")
    assert facts.python is not None
    facts = dataclasses.replace(facts, python=dataclasses.replace(facts.python, platform="win32", bits=32))
    report = diagnose(facts, compat)
    assert one(report, "platform").status is Status.FAIL
    assert report.verdict.cell is None


def test_unknown_torch_minor(compat: Compat) -> None:
    facts = load_machine("linux-healthy-cu128")
    assert facts.torch is not None
    facts = dataclasses.replace(facts, torch=dataclasses.replace(facts.torch, version="2.99.0.dev20270101+cu128"))
    torch = one(diagnose(facts, compat), "torch")
    assert torch.status is Status.WARN
    assert "not in dswheels' compatibility data" in torch.detail


def test_deepspeed_built_for_another_torch(compat: Compat) -> None:
    ds = DeepSpeedFacts(
        version="0.16.5",
        installed_ops={"cpu_adam": True, "fused_adam": True, "async_io": False},
        accelerator="cuda",
        torch_version="2.6",
        cuda_version="12.4",
    )
    facts = load_machine("windows-healthy-cu124")
    assert one(diagnose(dataclasses.replace(facts, deepspeed=ds), compat), "deepspeed").status is Status.OK
    assert facts.torch is not None
    facts = dataclasses.replace(
        facts, deepspeed=ds, torch=dataclasses.replace(facts.torch, version="2.7.1+cu126", cuda="12.6")
    )
    check = one(diagnose(facts, compat), "deepspeed")
    assert check.status is Status.FAIL
    assert "built with torch 2.6, torch 2.7.1+cu126 is installed" in check.detail
    assert "prebuilt: cpu_adam, fused_adam" in check.detail


def test_conda_guidance(compat: Compat) -> None:
    facts = load_machine("linux-healthy-cu128")
    assert facts.python is not None
    conda = PythonFacts(**{**dataclasses.asdict(facts.python), "conda": True, "prefix": "/opt/conda/envs/ds"})
    report = diagnose(dataclasses.replace(facts, python=conda), compat)
    assert report.env_kind == "conda"
    assert report.guidance[0].startswith("conda: conda env config vars set CUDA_HOME=/usr/local/cuda-12.8")


def test_headers_only_under_targets(compat: Compat) -> None:
    facts = load_machine("linux-healthy-cu128")
    files = frozenset(f for f in facts.toolkits[0].files if not f.startswith("include/"))
    toolkit: Toolkit = dataclasses.replace(facts.toolkits[0], files=files)
    report = diagnose(dataclasses.replace(facts, toolkits=(toolkit,)), compat)
    assert (
        dict(report.verdict.local.environment)["CUDA_INC_PATH"] == "/usr/local/cuda-12.8/targets/x86_64-linux/include"
    )


def test_windows_toolkit_without_dev_components(compat: Compat) -> None:
    facts = load_machine("windows-healthy-cu124")
    layout = (DATA / "recordings" / "layouts" / "windows-nvcc-cudart-only.txt").read_text(encoding="utf-8")
    toolkit = dataclasses.replace(facts.toolkits[0], files=frozenset(layout.split()))
    report = diagnose(dataclasses.replace(facts, toolkits=(toolkit,)), compat)
    check = one(report, "toolkit")
    assert check.status is Status.WARN
    assert "cublas_dev" in check.fix  # compat.yml's installer components for CUDA 12.4
    assert report.verdict.local.status is Status.FAIL
