"""The compiler models, rule by rule, each with where the rule comes from.

cl/link: Microsoft's option pages and the compilers' reported messages (sources in
dswheels/kernel/compiler_flags/msvc.py; no cl runs here). nvcc and g++: the same verdicts are checked
against the real nvcc 13.0 and gcc 12 in tests/integration/test_op_flags.py.
"""

from __future__ import annotations

import pytest

from dswheels.kernel.compiler_flags.gcc import judge_gcc
from dswheels.kernel.compiler_flags.issue import Finding, FlagIssue
from dswheels.kernel.compiler_flags.judge import judge_op, summarize
from dswheels.kernel.compiler_flags.msvc import judge_cl, judge_link
from dswheels.kernel.compiler_flags.nvcc import judge_nvcc
from dswheels.kernel.compiler_flags.op_flag_set import OpFlags
from dswheels.kernel.compiler_flags.record import load_flag_record
from dswheels.kernel.model import Platform

NVCC = load_flag_record().nvcc  # the option table recorded from nvcc 13.0's --help


def _verdicts(issues: tuple[FlagIssue, ...]) -> list[tuple[str, bool, str]]:
    return [(i.flag, i.fatal, i.code) for i in issues]


# --- cl ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flag",
    # reported: Tyrox92/Gw2SPECS#31 (/Wno-reorder), ericniebler/range-v3#720 (/Wextra),
    # MicrosoftDocs/cpp-docs#679 (/Wno-cpp), civetweb/civetweb#1052 (/Wd4820: capital W)
    ["-Wno-reorder", "/Wno-reorder", "-Wextra", "-Wno-cpp", "/Wd4820", "-Werror", "-W"],
)
def test_cl_a_w_not_followed_by_a_level_is_fatal_d8021(flag: str) -> None:
    [issue] = judge_cl([flag])
    assert (issue.fatal, issue.code) == (True, "D8021")
    assert "command-line-error-d8021" in issue.source


@pytest.mark.parametrize("flag", ["/W0", "-W4", "-Wall", "/WX", "/WX-", "/Wv", "/Wv:17", "/Wv:19.29.30133", "/WL"])
def test_cl_the_warning_level_spellings_microsoft_lists_pass(flag: str) -> None:
    # learn.microsoft.com/cpp/build/reference/compiler-option-warning-level
    assert judge_cl([flag]) == ()


@pytest.mark.parametrize("flag", ["/w", "/wd4819", "-wd4251", "/we4700", "/w14996", "/wo4000"])
def test_cl_the_lowercase_w_options_pass(flag: str) -> None:
    assert judge_cl([flag]) == ()


@pytest.mark.parametrize(
    "flag",
    # reported as D9002: -O3/-std=c++11 (shibing624/pycorrector#71), -fopenmp (cython/cython#4170); DeepSpeed's
    # PyPI win_amd64 wheels were compiled with -g, -march=native, -fopenmp, -L<cuda>, -lcudart, -lcublas
    [
        "-O3",
        "-O0",
        "-g",
        "-g0",
        "-fopenmp",
        "-march=native",
        "-std=c++17",
        "-L/cuda/lib",
        "-lcudart",
        "-fPIC",
        "-shared",
    ],
)
def test_cl_ignores_an_unknown_option_with_d9002(flag: str) -> None:
    assert _verdicts(judge_cl([flag])) == [(flag, False, "D9002")]


@pytest.mark.parametrize(
    "flag",
    ["-O2", "/Od", "/Ogity", "/Ob2", "-DX", "/DBF16_AVAILABLE", "-U__CUDA_NO_HALF_OPERATORS__", "/Iinclude", "/MD",
     "/EHsc", "/std:c++20", "/Zc:preprocessor", "/arch:AVX2", "/arch:AVX512", "/openmp", "/utf-8", "/bigobj"],
)  # fmt: skip
def test_cl_options_microsoft_lists_pass(flag: str) -> None:
    # learn.microsoft.com/cpp/build/reference/compiler-options-listed-alphabetically
    assert judge_cl([flag]) == ()


@pytest.mark.parametrize("flag", ["-D", "/I", "/U", "/FI"])
def test_cl_an_option_missing_its_argument_is_fatal_d8004(flag: str) -> None:
    # microsoft/vcpkg#47367: "D8004 : '/V' requires an argument"
    assert _verdicts(judge_cl([flag])) == [(flag, True, "D8004")]


def test_cl_values_it_does_not_know_are_warnings_and_cl_is_case_sensitive() -> None:
    assert _verdicts(judge_cl(["/arch:SSE2", "/std:c++99", "/md"])) == [
        ("/arch:SSE2", False, "D9002"),
        ("/std:c++99", False, "D9002"),
        ("/md", False, "D9002"),
    ]


def test_cl_a_word_is_an_input_file_and_after_link_the_linker_judges() -> None:
    assert _verdicts(judge_cl(["extra.cpp", "/link", "-lcurand", "/LIBPATH:C:/cuda/lib"])) == [
        ("extra.cpp", False, "D9024"),
        ("-lcurand", False, "LNK4044"),
    ]


# --- link ----------------------------------------------------------------------------------------


def test_link_ignores_gcc_library_options_and_its_options_are_case_insensitive() -> None:
    # learn.microsoft.com/cpp/build/reference/ignore-ignore-specific-warnings: LNK4044 unrecognized option; ignored
    issues = judge_link(["-lcurand", "-L$CUDA_HOME/lib", "/LIBPATH:C:/x", "-libpath:C:/y", "/DLL", "cublas.lib"])
    assert _verdicts(issues) == [("-lcurand", False, "LNK4044"), ("-L$CUDA_HOME/lib", False, "LNK4044")]


# --- g++ -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flag",
    ["-O3", "-O4", "-O", "-Ofast", "-g", "-g0", "-Wall", "-Wno-reorder", "-Wno-no-such-warning", "-std=c++20",
     "-march=x86-64-v2", "-mtune=native", "-mavx2", "-fopenmp", "-fPIC", "-shared", "-DX", "-U__X", "-L/x", "-lcurand",
     "-lineinfo", "-Wl,-rpath,/x", "-pthread"],
)  # fmt: skip
def test_gcc_accepts(flag: str) -> None:
    # -Wno-*: "no diagnostic is produced for -Wno-unknown-warning" (gcc.gnu.org/onlinedocs/gcc/Warning-Options.html);
    # -lineinfo is -l ineinfo: a library, unused in a compile
    assert judge_gcc([flag]) == ()


@pytest.mark.parametrize(
    ("flag", "why"),
    [
        ("-Ofoo", "argument to '-O'"),
        ("-D", "macro name missing"),
        ("--use_fast_math", "unrecognized command-line option"),
        ("-Xcompiler", "unrecognized command-line option"),
        ("/O2", "input file"),
    ],
)
def test_gcc_stops_at(flag: str, why: str) -> None:
    [issue] = judge_gcc([flag])
    assert issue.fatal
    assert why in issue.why


def test_gcc_options_of_a_big_family_it_does_not_list_are_warnings_not_verdicts() -> None:
    assert _verdicts(judge_gcc(["-Wfoo", "-ffoo", "-mfoo", "-march=znver9", "-std=c++26"])) == [
        (flag, False, "not-modelled") for flag in ("-Wfoo", "-ffoo", "-mfoo", "-march=znver9", "-std=c++26")
    ]


def test_gcc_link_step_takes_words_as_inputs() -> None:
    assert judge_gcc(["/usr/lib/libaio.so", "-laio"], link=True) == ()
    assert judge_gcc(["/usr/lib/libaio.so"])[0].fatal


# --- nvcc ----------------------------------------------------------------------------------------


def _nvcc(*flags: str) -> list[tuple[str, bool, str]]:
    return _verdicts(judge_nvcc(flags, NVCC, host=judge_gcc))


def test_nvcc_table_is_nvcc_13_help() -> None:
    assert NVCC.version.startswith("13.0")
    names = {o.long for o in NVCC.options} | {o.short for o in NVCC.options}
    assert {"--use_fast_math", "-allow-unsupported-compiler", "-lineinfo", "-gencode", "-Xcompiler", "-std"} <= names


def test_nvcc_accepts_deepspeeds_flags() -> None:
    flags = ["-O3", "-allow-unsupported-compiler", "--use_fast_math", "-std=c++20", "-U__CUDA_NO_HALF_OPERATORS__",
             "--threads=4", "-lineinfo", "-DBF16_AVAILABLE", "-gencode=arch=compute_80,code=sm_80",
             "-gencode=arch=compute_120,code=compute_120", "-t", "4", "-std", "c++20"]  # fmt: skip
    assert _nvcc(*flags) == []


@pytest.mark.parametrize(
    ("flag", "why"),
    [
        ("-Wno-reorder", "Unknown option '-Wno-reorder'"),
        ("-fopenmp", "Unknown option"),
        ("--lineinfo", "Unknown option '--lineinfo'"),  # a short name with two dashes
        ("-threads=4", "'hreads=4': expected a number"),  # -t with the rest attached
        ("-O", "argument expected after '-O'"),
        ("-std=c++23", "Value 'c++23' is not defined for option 'std'"),
        ("-lineinfo=1", "no argument expected after '-lineinfo'"),
        ("--use_fast_math=true", "no argument expected"),
        ("-gencode=arch=compute_1.,code=sm_1.", "Unsupported gpu architecture 'compute_1.'"),
        ("-gencode=arch=sm_80,code=sm_80", "Unsupported gpu architecture 'sm_80'"),
        ("-gencode=arch=compute_80", "missing code"),
        ("-gencode=foo=bar", "Keyword 'foo'"),
        ("-ftz=yes", "Value 'yes' is not defined"),
    ],
)
def test_nvcc_stops_at(flag: str, why: str) -> None:
    # each message as nvcc 13.0 --dryrun prints it (tests/integration/test_op_flags.py runs them)
    [issue] = judge_nvcc([flag], NVCC, host=judge_gcc)
    assert issue.fatal
    assert why in issue.why


def test_nvcc_warns_when_a_single_valued_option_changes_value() -> None:
    assert _nvcc("-std=c++17", "-std=c++20", "-DA", "-DB") == [("-std=c++20", False, "nvcc warning")]


def test_nvcc_hands_xcompiler_values_to_the_host_judge() -> None:
    assert _nvcc("-Xcompiler", "-fPIC,-Wno-x", "-Xcompiler=--bad") == [("--bad", True, "gcc-error")]
    cl = judge_nvcc(["-Xcompiler=/Zc:preprocessor", "-Xcompiler", "-Wno-reorder"], NVCC, host=judge_cl)
    assert _verdicts(cl) == [("-Wno-reorder", True, "D8021")]


# --- one op --------------------------------------------------------------------------------------

# DeepSpeed 0.19.8's CPUOpBuilder.cxx_args() without dswheels' win32 patch (portable CPU and -g0 applied)
UNPATCHED_CPU_ADAM = OpFlags(
    op="cpu_adam",
    extension="CppExtension",
    cxx=("-O3", "-g0", "-Wno-reorder", "-fopenmp", "-D__SCALAR__"),
    nvcc=None,
)


def test_the_0198_cpu_op_fault_is_fatal_for_cl_and_fine_for_gcc() -> None:
    windows = judge_op(UNPATCHED_CPU_ADAM, platform=Platform.WIN_AMD64, deepspeed="0.19.8", nvcc=NVCC)
    [fatal] = [f for f in windows if f.fatal]
    assert (fatal.op, fatal.tool, fatal.issue.flag, fatal.issue.code) == ("cpu_adam", "cl", "-Wno-reorder", "D8021")
    assert "DeepSpeed 0.19.8, win_amd64" in fatal.describe()
    assert judge_op(UNPATCHED_CPU_ADAM, platform=Platform.LINUX_X86_64, deepspeed="0.19.8", nvcc=NVCC) == ()


def test_an_op_judges_nvcc_append_flags_and_names_the_host_behind_xcompiler() -> None:
    op = OpFlags(op="fused_adam", extension="CUDAExtension", cxx=("-O2",), nvcc=("-O3",), link=("-lcurand",))
    findings = judge_op(
        op, platform=Platform.WIN_AMD64, deepspeed="0.19.8", nvcc_append=("-DUSE_CUDA", "-Xcompiler=-Wno-x"), nvcc=NVCC
    )
    assert [(f.tool, f.issue.flag, f.fatal) for f in findings] == [
        ("cl (via nvcc -Xcompiler)", "-Wno-x", True),
        ("link", "-lcurand", False),
    ]


def test_an_op_whose_builder_raised_is_fatal() -> None:
    op = OpFlags(op="fp_quantizer", extension="", cxx=(), nvcc=None, error="RuntimeError: no compute capabilities")
    [finding] = judge_op(op, platform=Platform.LINUX_X86_64, deepspeed="0.19.8", nvcc=NVCC)
    assert finding.fatal
    assert "setup.py stops" in finding.issue.why


def test_summary_groups_warnings_by_tool_and_message() -> None:
    issue = FlagIssue(flag="-g0", fatal=False, code="D9002", why="", source="")
    other = FlagIssue(flag="-lcurand", fatal=False, code="LNK4044", why="", source="")
    lines = summarize(
        [
            Finding("cpu_adam", "cl", issue, "0.19.7", "win_amd64"),
            Finding("cpu_lion", "cl", issue, "0.19.7", "win_amd64"),
            Finding("cpu_adam", "link", other, "0.19.7", "win_amd64"),
        ]
    )
    assert lines == ["cl ignores -g0 (D9002) in cpu_adam, cpu_lion", "link ignores -lcurand (LNK4044) in cpu_adam"]
