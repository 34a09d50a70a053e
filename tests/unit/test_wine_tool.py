"""The script that runs each Windows tool under Wine (dswheels/probes/wine_tool.py): what it translates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dswheels.probes import wine_tool

DRIVES = {"/": "Z"}


@pytest.mark.parametrize(
    ("arg", "expected"),
    [
        ("/work/src/x.cpp", r"Z:\work\src\x.cpp"),
        ("/Fo/work/build/x.obj", r"/FoZ:\work\build\x.obj"),
        ("-I/work/inc", r"-IZ:\work\inc"),
        ("/LIBPATH:/work/lib", r"/LIBPATH:Z:\work\lib"),
        ("/OUT:/work/x.pyd", r"/OUT:Z:\work\x.pyd"),
        ("@/work/x.rsp", r"@Z:\work\x.rsp"),
        # options are not paths, even when they start with a slash
        ("/MD", "/MD"),
        ("/std:c++20", "/std:c++20"),
        ("/DNDEBUG", "/DNDEBUG"),
        ("/wd4819", "/wd4819"),
        # a value after = stays as it is; so does a relative path
        ("-DTORCH_EXTENSION_NAME=cpu_adam_op", "-DTORCH_EXTENSION_NAME=cpu_adam_op"),
        ("csrc/adam/cpu_adam.cpp", "csrc/adam/cpu_adam.cpp"),
        ("-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_80,code=sm_80"),
    ],
)
def test_arguments_naming_files_of_this_machine_become_wine_paths(arg: str, expected: str) -> None:
    assert wine_tool.translate_arg(arg, DRIVES) == expected


def test_an_option_that_only_looks_like_a_path_is_left_alone(tmp_path: Path) -> None:
    """``/NAME/...`` is a path only when ``/NAME`` exists here (``/work``, ``/tmp``); ``/Zc:x/y`` is not."""
    assert wine_tool.translate_arg("/Zc:preprocessor/x", DRIVES) == "/Zc:preprocessor/x"
    assert wine_tool.translate_arg(f"{tmp_path}/a.cpp", DRIVES).startswith("Z:\\")


def test_paths_printed_by_windows_tools_come_back_as_this_machines() -> None:
    """ninja's ``deps = msvc`` reads cl's ``/showIncludes`` lines: the headers must be paths it can stat here."""
    text = "Note: including file:  Z:\\work\\src\\csrc\\includes\\cpu_adam.h\ncl : warning at C:\\Program Files\\x.h\n"
    back = wine_tool.to_local(text, DRIVES)
    assert "Note: including file:  /work/src/csrc/includes/cpu_adam.h" in back
    assert "C:\\Program Files\\x.h" in back  # a drive we do not map stays Windows'


def test_the_names_a_link_leaves_unresolved_are_read_decorated() -> None:
    output = (
        'x.obj : error LNK2001: unresolved external symbol "__declspec(dllimport) class c10::cuda::CUDAStream '
        '__cdecl c10::cuda::getCurrentCUDAStream(signed char)" (__imp_?getCurrentCUDAStream@cuda@c10@@YA?AVCUDAStream'
        "@12@C@Z)\n"
        'y.obj : error LNK2019: unresolved external symbol "int __cdecl f(int)" (?f@@YAHH@Z) referenced in '
        'function "void __cdecl g(void)" (?g@@YAXXZ)\n'
        "z.obj : error LNK2001: unresolved external symbol cudaLaunchKernel\n"
    )
    names = [(m.group(1) or m.group(2)) for m in wine_tool._UNRESOLVED.finditer(output)]
    assert names == ["__imp_?getCurrentCUDAStream@cuda@c10@@YA?AVCUDAStream@12@C@Z", "?f@@YAHH@Z", "cudaLaunchKernel"]


def test_variables_are_exported_as_data() -> None:
    assert wine_tool._is_data("?allocator@CUDACachingAllocator@cuda@c10@@3U?$atomic@PEAVCUDAAllocator@@@std@@A")
    assert not wine_tool._is_data("?getCurrentCUDAStream@cuda@c10@@YA?AVCUDAStream@12@C@Z")


def test_nvccs_depfile_is_rewritten_for_ninja(tmp_path: Path) -> None:
    depfile = tmp_path / "x.obj.d"
    depfile.write_text("Z:\\work\\x.obj : Z:\\work\\x.cu \\\n  Z:\\work\\inc\\y.h\n", encoding="utf-8")
    wine_tool._rewrite_depfile(["-MD", "-MF", str(depfile)], DRIVES)
    assert depfile.read_text(encoding="utf-8") == "/work/x.obj : /work/x.cu \\\n  /work/inc/y.h\n"


# what Wine 8's cmd printed when it could not start cudafe++ for one unit of a full Windows build (nox -s windows)
WINE_COULD_NOT_START = (
    "quantize_intX.cu\nCan't recognize 'cudafe++ --ms_c++20 --static-host-stub --m64 --parse_templates' as an "
    "internal or external command, or batch script.\n"
)
# stands in for `wine`: fails as Wine's cmd did while the count file says so, then runs the "tool" (echoes)
FLAKY_WINE = """\
#!/bin/sh
count=$(cat "{count}")
echo $((count - 1)) > "{count}"
if [ "$count" -gt 0 ]; then printf '%s' "$FAILURE"; exit 2; fi
printf 'compiled %s\n' "$*"
"""


def _flaky(tmp_path: Path, failures: int, failure: str) -> Path:
    count = tmp_path / "count"
    count.write_text(str(failures), encoding="utf-8")
    wine = tmp_path / "wine"
    wine.write_text(FLAKY_WINE.format(count=count), encoding="utf-8")
    wine.chmod(0o755)
    config = tmp_path / "wine-tools.json"
    tools = {"nvcc": "C:\\cuda\\bin\\nvcc.exe", "cl": "C:\\msvc\\cl.exe"}
    config.write_text(
        json.dumps({"wine": str(wine), "drives": DRIVES, "tools": tools, "env": {"FAILURE": failure}}), encoding="utf-8"
    )
    return config


@pytest.mark.parametrize(("failures", "code"), [(0, 0), (1, 0), (2, 0), (3, 2)])
def test_nvcc_is_run_again_when_wines_cmd_could_not_start_one_of_its_tools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], failures: int, code: int
) -> None:
    config = _flaky(tmp_path, failures, WINE_COULD_NOT_START)
    assert wine_tool.main(["wine_tool.py", str(config), "nvcc", "-c", "x.cu"]) == code
    out, err = capsys.readouterr()
    assert err.count("could not start one of nvcc's tools") == min(failures, 2)
    assert ("compiled C:\\cuda\\bin\\nvcc.exe -c x.cu" in out) == (code == 0)


@pytest.mark.parametrize(
    ("tool", "failure"), [("nvcc", "x.cu(3): error: identifier undefined\n"), ("cl", WINE_COULD_NOT_START)]
)
def test_a_failed_compile_or_another_tool_is_not_run_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tool: str, failure: str
) -> None:
    config = _flaky(tmp_path, 1, failure)
    assert wine_tool.main(["wine_tool.py", str(config), tool, "x.cu"]) == 2
    assert "again" not in capsys.readouterr().err
