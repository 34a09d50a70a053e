"""The platform seam (dswheels.platforms): one module per wheel platform, each answering the whole Protocol and
choosing the host its cells are built on from this machine (dswheels.platforms.hosts)."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import pytest

from dswheels.host.cache import CacheLayout
from dswheels.host.machine import host_os
from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import EnvironmentMismatchError
from dswheels.kernel.model import OS, PlannedCell, Platform
from dswheels.kernel.platform_traits import ALL_TRAITS, traits
from dswheels.plan.matrix.parse import parse_matrix
from dswheels.plan.planner import plan
from dswheels.platforms import ALL_PLATFORMS, PlatformModule, platform_module
from dswheels.platforms.hosts import (
    BuildTools,
    CheckedTools,
    CrossToolchain,
    Elsewhere,
    EmulatedMachine,
    HostChoice,
    HostKind,
    Native,
    PlatformHost,
    QemuSettings,
    WineSettings,
)
from dswheels.platforms.qemu.machine import QemuMachine
from dswheels.platforms.qemu.platform_host import UnderQemu
from dswheels.platforms.wine.assembly import WineBuild
from dswheels.platforms.wine.platform_host import UnderWine, WineChecked
from tests.conftest import ROOT

COMPAT = load_compat()
SHIPPED = parse_matrix((ROOT / "matrix" / "matrix.yml").read_text(), "matrix/matrix.yml", COMPAT)
PLANNED = plan(SHIPPED, COMPAT).planned
WINE = HostChoice(wine=WineSettings(msvc_root=Path("/nonexistent/msvc")))
QEMU = HostChoice(qemu=QemuSettings(root=Path("/nonexistent/arm64-root")))


def _members(protocol: type) -> list[str]:
    """A Protocol's members, as its class body declares them."""
    return sorted(name for name in vars(protocol) if not name.startswith("_"))


MEMBERS = _members(PlatformModule)


def _same_signatures(implementation: type, protocol: type) -> None:
    """``implementation`` has every member of ``protocol``, each method with the same parameters, of the same kinds."""
    for name in _members(protocol):
        declared = getattr(protocol, name)
        assert hasattr(implementation, name), name
        if isinstance(declared, property):
            continue
        got = inspect.signature(getattr(implementation, name))
        want = inspect.signature(declared)
        assert list(got.parameters) == list(want.parameters), name
        assert [p.kind for p in got.parameters.values()] == [p.kind for p in want.parameters.values()], name


def _cell(platform: Platform) -> PlannedCell:
    """A CPU cell where the matrix has one (the shipped Windows cells are all CUDA ones)."""
    cells = sorted((p for p in PLANNED if p.cell.platform is platform), key=lambda p: p.cell.variant.is_cuda)
    return cells[0]


def test_every_platform_has_a_module_and_a_row_and_every_os_its_first() -> None:
    assert set(ALL_PLATFORMS) == set(Platform) == set(ALL_TRAITS)
    assert {p.os for p in Platform} == set(OS)
    for platform, module in ALL_PLATFORMS.items():
        assert module.traits.platform is platform
        assert module.traits.os is platform.os
        assert platform_module(platform) is module
        assert traits(platform) is module.traits
        # asked by OS, the OS's first platform answers: what follows from the OS is the same in every row of it
        first = traits(platform.os.value)
        assert platform_module(platform.os).traits is first
        for fact in ("sys_platform", "compiler", "exe_suffix", "extension_suffix", "venv_python", "include_var"):
            assert getattr(module.traits, fact) == getattr(first, fact), (platform, fact)
    assert traits(OS.LINUX).platform is Platform.LINUX_X86_64
    # what follows from the CPU is the platform's own
    arm = traits(Platform.LINUX_AARCH64)
    assert (arm.machine, arm.cuda_redist, arm.runner_image) == ("aarch64", "linux-sbsa", "manylinux_2_28_aarch64")
    assert arm.lib_paths("curand")[-1] == "targets/sbsa-linux/lib/libcurand.so"


@pytest.mark.parametrize("platform", list(Platform))
def test_each_module_answers_every_protocol_member_with_its_signature(platform: Platform) -> None:
    assert MEMBERS == ["add_source_files", "cuda_roots", "host", "host_compilers", "toolkit_places", "traits"]
    module = ALL_PLATFORMS[platform]
    assert isinstance(module, PlatformModule)
    _same_signatures(type(module), PlatformModule)


def test_every_host_answers_its_protocols_with_their_signatures() -> None:
    assert _members(PlatformHost) == ["check", "finish", "kind", "machine", "strips_symbols"]
    assert _members(CheckedTools) == ["assemble", "cuda", "foreign", "foreign_interpreter", "msvc"]
    assert _members(EmulatedMachine) == ["describe", "run_dswheels", "venv"]
    for host in (Native, Elsewhere, UnderWine, UnderQemu):
        _same_signatures(host, PlatformHost)
    _same_signatures(QemuMachine, EmulatedMachine)
    for tools in (BuildTools, WineChecked):
        _same_signatures(tools, CheckedTools)
    _same_signatures(WineBuild, CrossToolchain)  # Wine's toolchain, as the build sees it


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


def test_where_doctor_looks_for_toolkits_per_host_os(tmp_path: Path) -> None:
    win, linux = platform_module(OS.WINDOWS), platform_module(OS.LINUX)
    installed = tmp_path / "NVIDIA GPU Computing Toolkit" / "CUDA"
    for version in ("v12.8", "v13.0", "not-a-toolkit"):
        (installed / version).mkdir(parents=True)
    env = {"ProgramFiles": str(tmp_path), "CONDA_PREFIX": str(tmp_path / "env")}
    assert win.toolkit_places(env) == [
        (str(tmp_path / "env" / "Library"), "CONDA_PREFIX"),  # conda's Windows layout
        (str(installed / "v12.8"), "standard location"),
        (str(installed / "v13.0"), "standard location"),
    ]
    assert win.toolkit_places({"ProgramFiles": str(tmp_path / "none")}) == []
    places = linux.toolkit_places(env)
    assert places[0] == (str(tmp_path / "env"), "CONDA_PREFIX")
    assert ("/usr/local/cuda", "standard location") in places
    assert ("/opt/cuda", "standard location") in places
    assert linux.toolkit_places({})[0] == ("/usr/local/cuda", "standard location")


def test_post_processing_strips_linux_wheels_on_linux_only() -> None:
    def strips(platform: OS, here: OS, choice: HostChoice = HostChoice()) -> bool:  # noqa: B008 - frozen
        return platform_module(platform).host(choice, here=here).strips_symbols

    assert strips(OS.LINUX, OS.LINUX)
    assert not strips(OS.LINUX, OS.WINDOWS)
    assert not strips(OS.WINDOWS, OS.LINUX)
    assert not strips(OS.WINDOWS, OS.LINUX, WINE)
    assert not strips(OS.WINDOWS, OS.WINDOWS)


def test_each_module_chooses_its_host_for_the_machine() -> None:
    linux, windows = platform_module(OS.LINUX), platform_module(OS.WINDOWS)
    assert linux.host(HostChoice(), here=OS.LINUX).kind is HostKind.NATIVE
    assert linux.host(WINE, here=OS.WINDOWS).kind is HostKind.NONE
    assert windows.host(WINE, here=OS.WINDOWS).kind is HostKind.NATIVE  # a Windows machine needs no Wine
    assert windows.host(HostChoice(), here=OS.LINUX).kind is HostKind.NONE
    wine = windows.host(WINE, here=OS.LINUX)
    assert wine.kind is HostKind.WINE
    assert wine == UnderWine(WINE.wine)  # type: ignore[arg-type]
    # the CPU counts too: an x86_64 cell on an arm64 Linux is only prepared, and the other way round
    assert linux.host(HostChoice(), here=OS.LINUX, machine="aarch64").kind is HostKind.NONE
    arm = platform_module(Platform.LINUX_AARCH64)
    assert arm.host(HostChoice(), here=OS.LINUX, machine="aarch64").kind is HostKind.NATIVE
    assert arm.host(QEMU, here=OS.LINUX, machine="aarch64").kind is HostKind.NATIVE  # no qemu on an arm64 machine
    assert arm.host(HostChoice(), here=OS.LINUX, machine="x86_64").kind is HostKind.NONE
    assert arm.host(QEMU, here=OS.LINUX, machine="x86_64") == UnderQemu(QEMU.qemu)  # type: ignore[arg-type]
    assert arm.host(QEMU, here=OS.WINDOWS, machine="AMD64").kind is HostKind.NONE


@pytest.mark.parametrize("platform", list(Platform))
def test_a_cell_of_the_other_os_is_only_prepared(platform: Platform, tmp_path: Path) -> None:
    planned = _cell(platform)
    other = next(o for o in OS if o is not platform.os)
    host = platform_module(platform).host(HostChoice(), here=other)
    with pytest.raises(EnvironmentMismatchError) as err:
        host.check(planned, {}, prepare_only=False, cache=CacheLayout(tmp_path))
    assert f"this machine runs {other.capitalize()}" in str(err.value)
    # only Windows cells have a second host: Linux under Wine
    assert ("--msvc-root" in (err.value.hint or "")) is (platform is Platform.WIN_AMD64 and other is OS.LINUX)
    tools = host.check(planned, {}, prepare_only=True, cache=CacheLayout(tmp_path))
    assert tools.foreign
    assert tools.foreign_interpreter
    assert (tools.cuda, tools.msvc) == (None, None)
    assert (
        tools.assemble(  # nothing to put together: the cell is not compiled here
            planned,
            compat=COMPAT,
            work=tmp_path,
            cache=CacheLayout(tmp_path),
            interp=None,  # type: ignore[arg-type]
            index_args=(),
            log=tmp_path / "l",
        )
        is None
    )


def test_the_wine_host_checks_the_msvc_root_and_prepares_without_it(tmp_path: Path) -> None:
    planned = _cell(Platform.WIN_AMD64)
    wine = platform_module(OS.WINDOWS).host(WINE, here=OS.LINUX)
    # --prepare-only looks for no Windows tool: nothing is checked, nothing is assembled
    tools = wine.check(planned, {}, prepare_only=True, cache=CacheLayout(tmp_path))
    assert tools.foreign
    assert (tools.cuda, tools.msvc) == (None, None)
    # a build checks the MSVC root first (before Wine, before anything is downloaded)
    with pytest.raises(EnvironmentMismatchError, match="is not an MSVC root"):
        wine.check(planned, {}, prepare_only=False, cache=CacheLayout(tmp_path))
    wine.finish(cache=CacheLayout(tmp_path), env={"PATH": ""})  # no wineserver, no prefix: nothing to wait for


def test_this_machines_host_checks_its_cells() -> None:
    planned = _cell(Platform.LINUX_X86_64 if host_os() is OS.WINDOWS else Platform.WIN_AMD64)
    host = platform_module(planned.cell.platform).host(HostChoice(), here=host_os())
    tools = host.check(planned, {}, prepare_only=True, cache=CacheLayout(ROOT))
    assert tools.foreign
    native = _cell(traits(host_os()).platform)
    if not native.cell.variant.is_cuda:  # a CPU cell needs no nvcc: nothing to find
        here = platform_module(native.cell.platform).host(HostChoice(), here=host_os())
        assert here.check(native, {}, prepare_only=False, cache=CacheLayout(ROOT)) == BuildTools(
            foreign=False, cuda=None, msvc=None
        )


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
