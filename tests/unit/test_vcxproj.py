# ruff: noqa: E501 - the project files below are in CPython's shapes, lines as long as theirs
"""CPython's PCbuild project files read without MSBuild (dswheels/platforms/wine/vcxproj.py).

Small projects in the shapes CPython 3.11-3.13's files use: properties in order with conditions,
global properties winning, ``ItemDefinitionGroup`` defaults that items extend with ``%(Name)``,
the ``pyproject.props`` import, ``Exists()``, and what cl and link are told. A condition the reader
cannot evaluate is an error, not a guess.
"""

from __future__ import annotations

import pytest

from dswheels.platforms.wine.vcxproj import (
    ConditionError,
    Project,
    cl_flags,
    evaluate_condition,
    link_flags,
    read_project,
)

NS = 'xmlns="http://schemas.microsoft.com/developer/msbuild/2003"'

PROPS = f"""<?xml version="1.0" encoding="utf-8"?>
<Project {NS}>
  <PropertyGroup>
    <_Debug>NDEBUG;</_Debug>
    <_Debug Condition="$(Configuration) == 'Debug'">_DEBUG;</_Debug>
    <TargetName Condition="'$(TargetName)' == ''">$(ProjectName)</TargetName>
    <IntDir>$(IntDir.Replace(`\\\\`, `\\`))</IntDir>
  </PropertyGroup>
  <ItemDefinitionGroup>
    <ClCompile>
      <AdditionalIncludeDirectories>$(PySourcePath)Include;%(AdditionalIncludeDirectories)</AdditionalIncludeDirectories>
      <PreprocessorDefinitions>WIN32;$(_Debug)%(PreprocessorDefinitions)</PreprocessorDefinitions>
      <Optimization>MaxSpeed</Optimization>
      <RuntimeLibrary>MultiThreadedDLL</RuntimeLibrary>
      <WholeProgramOptimization>true</WholeProgramOptimization>
      <ControlFlowGuard Condition="$(EnableControlFlowGuard) != ''">$(EnableControlFlowGuard)</ControlFlowGuard>
      <AdditionalOptions>/utf-8 %(AdditionalOptions)</AdditionalOptions>
    </ClCompile>
    <Link>
      <AdditionalDependencies>advapi32.lib;%(AdditionalDependencies)</AdditionalDependencies>
      <SubSystem>Windows</SubSystem>
      <LinkTimeCodeGeneration Condition="$(Configuration) == 'Release'">UseLinkTimeCodeGeneration</LinkTimeCodeGeneration>
    </Link>
  </ItemDefinitionGroup>
</Project>
"""

CORE = f"""\ufeff<?xml version="1.0" encoding="utf-8"?>
<Project DefaultTargets="Build" ToolsVersion="4.0" {NS}>
  <Import Project="python.props" />
  <Import Project="$(VCTargetsPath)\\Microsoft.Cpp.Default.props" />
  <PropertyGroup Label="Configuration">
    <ConfigurationType>DynamicLibrary</ConfigurationType>
  </PropertyGroup>
  <PropertyGroup>
    <IncludeExternals Condition="$(IncludeExternals) == '' and Exists('$(zlibDir)\\zlib.h')">true</IncludeExternals>
    <IncludeExternals Condition="$(IncludeExternals) == ''">false</IncludeExternals>
    <PySourcePath>C:\\not\\this\\one\\</PySourcePath>
  </PropertyGroup>
  <ImportGroup Label="PropertySheets">
    <Import Project="$(UserRootDir)\\Microsoft.Cpp.$(Platform).user.props" Condition="exists('$(UserRootDir)\\x')" />
    <Import Project="pyproject.props" />
  </ImportGroup>
  <PropertyGroup>
    <TargetName>$(PyDllName)</TargetName>
  </PropertyGroup>
  <ItemDefinitionGroup>
    <ClCompile>
      <PreprocessorDefinitions>Py_BUILD_CORE;MS_DLL_ID="$(SysWinVer)";%(PreprocessorDefinitions)</PreprocessorDefinitions>
      <PreprocessorDefinitions Condition="$(IncludeExternals)">_Py_HAVE_ZLIB;%(PreprocessorDefinitions)</PreprocessorDefinitions>
    </ClCompile>
    <Link>
      <AdditionalDependencies>version.lib;ws2_32.lib;%(AdditionalDependencies)</AdditionalDependencies>
    </Link>
  </ItemDefinitionGroup>
  <ItemGroup>
    <ClCompile Include="..\\Modules\\getpath.c">
      <PreprocessorDefinitions>
        VPATH="$(PyVPath)";
        PLATLIBDIR="DLLs";
        %(PreprocessorDefinitions)
      </PreprocessorDefinitions>
    </ClCompile>
    <ClCompile Include="..\\Objects\\a.c;..\\Objects\\b.c" />
  </ItemGroup>
  <ItemGroup Condition="$(IncludeExternals)">
    <ClCompile Include="$(zlibDir)\\adler32.c" />
  </ItemGroup>
  <ItemGroup>
    <None Include="..\\Lib\\abc.py">
      <ModName>abc</ModName>
      <OutFile>$(PySourcePath)Python\\frozen_modules\\abc.h</OutFile>
    </None>
  </ItemGroup>
  <Target Name="_RebuildDeepFrozen">
    <Exec Command='$(PythonForBuild) "$(PySourcePath)Tools\\scripts\\deepfreeze.py" ^
        "$(PySourcePath)Python\\frozen_modules\\abc.h:abc" "-o" "x.c"' />
  </Target>
</Project>
"""

GLOBALS = {
    "Configuration": "Release",
    "Platform": "x64",
    "ProjectName": "pythoncore",
    "PySourcePath": "/src/",
    "PyDllName": "python311",
    "SysWinVer": "3.11",
    "PyVPath": "..\\\\..",
    "zlibDir": "/zlib/",
    "IntDir": "/obj/",
}


def read(text: str = CORE, *, globals_: dict[str, str] | None = None, exists: frozenset[str] = frozenset()) -> Project:
    return read_project(
        "pythoncore",
        text,
        globals_=globals_ or GLOBALS,
        read_import=lambda name: PROPS if name == "pyproject.props" else None,
        exists=lambda path: path.replace("\\", "/").replace("//", "/") in exists,
    )


def test_items_carry_the_definitions_they_extend_and_their_own_metadata() -> None:
    project = read()
    getpath, a, b = project.compiles
    assert (getpath.include, a.include, b.include) == ("..\\Modules\\getpath.c", "..\\Objects\\a.c", "..\\Objects\\b.c")
    flags = cl_flags(getpath.metadata)
    assert flags == [
        "/O2",
        "/MD",
        "/GL",
        '/DVPATH="..\\\\.."',
        '/DPLATLIBDIR="DLLs"',
        "/DPy_BUILD_CORE",
        '/DMS_DLL_ID="3.11"',
        "/DWIN32",
        "/DNDEBUG",
        "/utf-8",
    ]
    assert "/DVPATH" not in " ".join(cl_flags(a.metadata))
    assert a.metadata["AdditionalIncludeDirectories"] == "/src/Include;"


def test_global_properties_win_and_property_functions_are_left_to_the_caller() -> None:
    project = read()
    assert project.properties["PySourcePath"] == "/src/"  # the file's own C:\not\this\one\ is not taken
    assert project.properties["IntDir"] == "/obj/"  # a global; the sheet's $(IntDir.Replace(...)) is skipped
    assert project.properties["TargetName"] == "python311"
    assert project.configuration_type == "DynamicLibrary"
    assert project.target_ext == ".dll"


def test_exists_decides_the_externals_as_msbuild_would() -> None:
    without = read()
    assert without.properties["IncludeExternals"] == "false"
    assert [i.include for i in without.compiles][-1] == "..\\Objects\\b.c"
    assert "/D_Py_HAVE_ZLIB" not in cl_flags(without.compiles[0].metadata)
    with_zlib = read(exists=frozenset({"/zlib/zlib.h"}))
    assert with_zlib.properties["IncludeExternals"] == "true"
    assert with_zlib.compiles[-1].include == "/zlib/\\adler32.c"
    assert "/D_Py_HAVE_ZLIB" in cl_flags(with_zlib.compiles[0].metadata)


def test_link_settings_none_items_and_target_commands() -> None:
    project = read()
    link = project.definitions["Link"]
    assert link["AdditionalDependencies"].split(";")[:3] == ["version.lib", "ws2_32.lib", "advapi32.lib"]
    assert link_flags(link) == ["/SUBSYSTEM:WINDOWS", "/LTCG"]
    (frozen,) = project.of_kind("None")
    assert frozen.metadata == {"ModName": "abc", "OutFile": "/src/Python\\frozen_modules\\abc.h"}
    (command,) = project.targets["_RebuildDeepFrozen"]
    assert command.startswith('$(PythonForBuild) "/src/Tools\\scripts\\deepfreeze.py" ^')


def test_debug_is_another_configuration() -> None:
    project = read(globals_={**GLOBALS, "Configuration": "Debug"})
    assert "/D_DEBUG" in cl_flags(project.compiles[1].metadata)
    assert link_flags(project.definitions["Link"]) == ["/SUBSYSTEM:WINDOWS"]


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ("'$(A)' == 'x'", True),
        ("$(A) == 'X'", True),  # case-insensitive, as MSBuild
        ("$(Missing) != ''", False),
        ("'$(A)' == 'x' and !Exists('/there')", False),
        ("'$(A)' == 'y' or Exists('/there')", True),
        ("!($(A) == 'x' and $(B) == 'z')", True),
        ("HasTrailingSlash('$(Dir)')", True),
        ("HasTrailingSlash($(A))", False),
        ("$(T)", True),
        ("", True),
    ],
)
def test_conditions(condition: str, expected: bool) -> None:
    props = {"A": "x", "B": "y", "Dir": "/d/", "T": "true"}
    assert evaluate_condition(condition, props, lambda path: path == "/there") is expected


@pytest.mark.parametrize(
    "condition",
    [
        "$(PlatformToolset.StartsWith(`Intel`))",
        "$([System.IO.File]::Exists('x'))",
        "'$(A)' == ",
        "$(A) > 1",
        "'x' == 'x')",
        "$(A)",  # 'x' is not a boolean
    ],
)
def test_a_condition_it_cannot_evaluate_is_an_error(condition: str) -> None:
    with pytest.raises(ConditionError):
        evaluate_condition(condition, {"A": "x"}, lambda _path: False)


def test_the_real_sheet_shape_of_an_item_condition_that_cannot_be_read_fails_loudly() -> None:
    text = CORE.replace(
        '<ClCompile Include="..\\Objects\\a.c;', '<ClCompile Condition="$(X.Length) > 0" Include="..\\Objects\\a.c;'
    )
    with pytest.raises(ConditionError, match="property function"):
        read(text)
