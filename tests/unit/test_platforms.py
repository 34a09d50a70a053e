"""The platform seam (dswheels.platforms): one module per wheel platform, each answering the whole Protocol."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import pytest

from dswheels.building.effects.compile_tools import check_toolchain
from dswheels.host.cache import CacheLayout
from dswheels.host.machine import host_os
from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import EnvironmentMismatchError
from dswheels.kernel.model import OS, PlannedCell, Platform
from dswheels.kernel.platform_traits import ALL_TRAITS, traits
from dswheels.plan.matrix.parse import parse_matrix
from dswheels.plan.planner import plan
from dswheels.platforms import ALL_PLATFORMS, PlatformModule, platform_module
from tests.conftest import ROOT

COMPAT = load_compat()
SHIPPED = parse_matrix((ROOT / "matrix" / "matrix.yml").read_text(), "matrix/matrix.yml", COMPAT)
PLANNED = plan(SHIPPED, COMPAT).planned
# the Protocol's members, as its class body declares them
MEMBERS = sorted(name for name in vars(PlatformModule) if not name.startswith("_"))


def _cell(platform: Platform) -> PlannedCell:
    """A CPU cell where the matrix has one (the shipped Windows cells are all CUDA ones)."""
    cells = sorted((p for p in PLANNED if p.cell.platform is platform), key=lambda p: p.cell.variant.is_cuda)
    return cells[0]


def test_every_platform_has_a_module_and_every_os_a_row() -> None:
    assert set(ALL_PLATFORMS) == set(Platform)
    assert len(ALL_PLATFORMS) == len(Platform)
    assert set(ALL_TRAITS) == set(OS) == {p.os for p in Platform}
    for platform, module in ALL_PLATFORMS.items():
        assert module.traits.platform is platform
        assert module.traits.os is platform.os
        assert platform_module(platform) is module
        assert platform_module(platform.os) is module
        assert traits(platform) is traits(platform.os.value) is module.traits


@pytest.mark.parametrize("platform", list(Platform))
def test_each_module_answers_every_protocol_member_with_its_signature(platform: Platform) -> None:
    assert MEMBERS == [
        "add_source_files",
        "check_build_tools",
        "check_runtime",
        "cuda_roots",
        "finish_build",
        "host_compilers",
        "strips_symbols",
        "traits",
    ]
    module = ALL_PLATFORMS[platform]
    assert isinstance(module, PlatformModule)
    for name in MEMBERS:
        declared = getattr(PlatformModule, name)
        if isinstance(declared, property):
            continue
        got = inspect.signature(getattr(module, name))
        want = inspect.signature(declared)
        assert list(got.parameters) == list(want.parameters)[1:], name  # less `self`
        assert [p.kind for p in got.parameters.values()] == [p.kind for p in want.parameters.values()][1:], name


def test_os_is_the_str_compat_yml_spells() -> None:
    assert OS("windows") is OS.WINDOWS
    keyed = {"windows": "from compat.yml", "linux": "from compat.yml"}  # compat.yml's mappings look OS up as is
    assert keyed[OS.LINUX] == keyed[OS.WINDOWS] == "from compat.yml"
    assert f"{OS.WINDOWS}" == str(OS.WINDOWS) == "windows"
    assert {p.os for p in Platform} == {"windows", "linux"}
    # the data the core asks for instead of comparing names
    assert [traits(p).extension_suffix for p in (Platform.WIN_AMD64, Platform.LINUX_X86_64)] == [".pyd", ".so"]
    assert traits(OS.WINDOWS).exe("nvcc") == "nvcc.exe"
    assert traits(OS.LINUX).exe("nvcc") == "nvcc"
    assert traits(OS.WINDOWS).lib_paths("curand") == ("lib/x64/curand.lib",)
    assert traits(OS.LINUX).lib_paths("curand")[0] == "lib64/libcurand.so"
    with pytest.raises(ValueError, match="darwin"):
        traits("darwin")


def test_host_os_is_the_running_machines() -> None:
    assert host_os() is (OS.WINDOWS if sys.platform == "win32" else OS.LINUX)
    assert traits(host_os()).sys_platform == sys.platform


def test_toolkit_places_and_compilers_per_host_os() -> None:
    win, linux = platform_module(OS.WINDOWS), platform_module(OS.LINUX)
    env = {"CUDA_PATH_V12_8": r"D:\cuda128", "ProgramFiles": r"E:\Programs", "VCToolsVersion": "14.44.35207"}
    assert win.cuda_roots(env, (12, 8)) == [
        Path(r"D:\cuda128"),
        Path(r"E:\Programs") / "NVIDIA GPU Computing Toolkit" / "CUDA" / "v12.8",
    ]
    assert win.cuda_roots(env, None) == []
    assert win.host_compilers(env) == ("", ("14.44",))
    assert win.host_compilers({}) == ("", ())
    roots = linux.cuda_roots({}, (12, 8))
    assert roots[:2] == [Path("/usr/local/cuda-12.8"), Path("/usr/local/cuda")]
    assert roots[-1] == Path("/opt/cuda")
    assert Path("/usr/local/cuda-12.8") not in linux.cuda_roots({}, None)


def test_post_processing_strips_linux_wheels_on_linux_only() -> None:
    assert platform_module(OS.LINUX).strips_symbols(OS.LINUX)
    assert not platform_module(OS.LINUX).strips_symbols(OS.WINDOWS)
    assert not platform_module(OS.WINDOWS).strips_symbols(OS.LINUX)
    assert not platform_module(OS.WINDOWS).strips_symbols(OS.WINDOWS)


@pytest.mark.parametrize("platform", list(Platform))
def test_a_cell_of_the_other_os_is_only_prepared(platform: Platform, tmp_path: Path) -> None:
    planned = _cell(platform)
    other = next(o for o in OS if o is not platform.os)
    module = platform_module(platform)
    args = {"host": other, "msvc_root": None, "cache": CacheLayout(tmp_path), "wine_cuda": ("auto", "")}
    with pytest.raises(EnvironmentMismatchError) as err:
        module.check_build_tools(planned, {}, prepare_only=False, **args)  # type: ignore[arg-type]
    assert f"this machine runs {other.capitalize()}" in str(err.value)
    # only Windows cells have a second host: Linux under Wine
    assert ("--msvc-root" in (err.value.hint or "")) is (platform is Platform.WIN_AMD64 and other is OS.LINUX)
    tools = module.check_build_tools(planned, {}, prepare_only=True, **args)  # type: ignore[arg-type]
    assert tools.foreign
    assert (tools.cuda, tools.msvc, tools.wine) == (None, None, None)


def test_check_toolchain_asks_the_cells_module_for_this_host() -> None:
    planned = _cell(Platform.LINUX_X86_64 if host_os() is OS.WINDOWS else Platform.WIN_AMD64)
    tools = check_toolchain(planned, {}, prepare_only=True)
    assert tools.foreign
    native = _cell(traits(host_os()).platform)
    if not native.cell.variant.is_cuda:  # a CPU cell needs no nvcc: nothing to find
        assert check_toolchain(native, {}, prepare_only=False) == type(tools)(foreign=False, cuda=None, msvc=None)


def test_only_windows_cells_get_the_files_their_setup_py_needs(tmp_path: Path) -> None:
    linux_src, windows_src = tmp_path / "linux", tmp_path / "windows"
    linux_src.mkdir()
    windows_src.mkdir()
    assert platform_module(OS.LINUX).add_source_files(linux_src, COMPAT) == []
    assert list(linux_src.iterdir()) == []
    notes = platform_module(OS.WINDOWS).add_source_files(windows_src, COMPAT)
    assert len(notes) == len(COMPAT.windows_files) > 0
    for rel, text in COMPAT.windows_files.items():
        assert (windows_src / rel).read_bytes() == text.encode()
