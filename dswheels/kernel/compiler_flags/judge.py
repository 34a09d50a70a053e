"""Judge one op's flags the way its platform's compilers will read them.

On Windows ``cl`` compiles the ``.cpp`` files with ``extra_compile_args["cxx"]``, ``nvcc``
the ``.cu`` files with ``extra_compile_args["nvcc"]`` plus ``NVCC_APPEND_FLAGS`` (nvcc
appends that variable itself; dswheels' workaround flags travel there), passing its
``-Xcompiler`` values to ``cl``; ``link`` gets ``extra_link_args``. On Linux ``g++`` takes
the places of ``cl`` and ``link``. Torch's own flags (``/MD``, ``/EHsc``, ``-std=c++20``
for nvcc, ...) are not judged: every torch extension gets them.

An op whose ``builder()`` raised has no flags at all: setup.py would stop on the same
exception, so that is fatal too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from dswheels.kernel.compiler_flags.gcc import judge_gcc
from dswheels.kernel.compiler_flags.issue import Finding, FlagIssue
from dswheels.kernel.compiler_flags.msvc import judge_cl, judge_link
from dswheels.kernel.compiler_flags.nvcc import NvccOptions, judge_nvcc
from dswheels.kernel.compiler_flags.op_flag_set import OpFlags
from dswheels.kernel.model import Platform
from dswheels.kernel.platform_traits import traits

__all__ = ["judge_op", "narrowed_archs", "sass_archs", "summarize"]

_SASS_CODE = re.compile(r"code=sm_([0-9]+)")


def judge_op(
    flags: OpFlags, *, platform: Platform, deepspeed: str, nvcc_append: Sequence[str] = (), nvcc: NvccOptions
) -> tuple[Finding, ...]:
    """Every issue of ``flags`` for ``cl``/``link``/``nvcc`` (Windows) or ``g++``/``nvcc`` (Linux).

    >>> from dswheels.kernel.compiler_flags.nvcc import NvccOption
    >>> op = OpFlags(op="cpu_adam", extension="CppExtension", cxx=("-O3", "-Wno-reorder"), nvcc=None)
    >>> for f in judge_op(op, platform=Platform.WIN_AMD64, deepspeed="0.19.8", nvcc=NvccOptions("13.0", ())):
    ...     print(f.describe()[:59])
    cpu_adam: cl warns about '-O3' (D9002: cl ignores an option
    cpu_adam: cl rejects '-Wno-reorder' (D8021: invalid numeric
    """
    windows = traits(platform).compiler == "msvc"  # cl and link.exe judge the flags, else g++
    machine = traits(platform).machine  # an AArch64 g++ knows other -m options than an x86-64 one
    host_tool = "cl" if windows else "g++"

    def finding(tool: str, issue: FlagIssue) -> Finding:
        return Finding(op=flags.op, tool=tool, issue=issue, deepspeed=deepspeed, platform=platform.value)

    if flags.error:
        why = f"builder() raised {flags.error}: setup.py stops on it before compiling anything"
        issue = FlagIssue(flag="", fatal=True, code="builder", why=why, source="DeepSpeed's setup.py")
        return (finding("DeepSpeed", issue),)
    out = [finding(host_tool, i) for i in (judge_cl(flags.cxx) if windows else judge_gcc(flags.cxx, machine=machine))]
    if flags.cuda and flags.nvcc is not None:
        via: list[FlagIssue] = []

        def host(payload: Sequence[str]) -> tuple[FlagIssue, ...]:
            found = judge_cl(payload) if windows else judge_gcc(payload, machine=machine)
            via.extend(found)
            return found

        direct = judge_nvcc((*flags.nvcc, *nvcc_append), nvcc, host=host)
        out += [finding(f"{host_tool} (via nvcc -Xcompiler)" if i in via else "nvcc", i) for i in direct]
    link = judge_link(flags.link) if windows else judge_gcc(flags.link, link=True, machine=machine)
    out += [finding("link" if windows else "g++ (link)", i) for i in link]
    return tuple(out)


def summarize(findings: Sequence[Finding]) -> list[str]:
    """Warnings grouped by tool and message id: ``cl ignores -g0, -fopenmp (D9002) in cpu_adam, cpu_lion``.

    >>> issue = FlagIssue(flag="-fopenmp", fatal=False, code="D9002", why="", source="")
    >>> summarize([Finding("cpu_adam", "cl", issue, "0.19.7", "win_amd64"),
    ...     Finding("cpu_lion", "cl", issue, "0.19.7", "win_amd64")])
    ['cl ignores -fopenmp (D9002) in cpu_adam, cpu_lion']
    """
    groups: dict[tuple[str, str], tuple[dict[str, None], dict[str, None]]] = {}
    for item in findings:
        if item.fatal:
            continue
        flags, ops = groups.setdefault((item.tool, item.issue.code), ({}, {}))
        flags[item.issue.flag] = None
        ops[item.op] = None
    return [
        f"{tool} ignores {', '.join(flags)} ({code}) in {', '.join(ops)}"
        if code in ("D9002", "LNK4044")
        else f"{tool} warns about {', '.join(flags)} ({code}) in {', '.join(ops)}"
        for (tool, code), (flags, ops) in groups.items()
    ]


def _archs(flags: OpFlags) -> list[str]:
    """``compute_50`` ... of an op's ``-gencode`` flags, in order."""
    return [f.split(",")[0].removeprefix("-gencode=arch=") for f in flags.nvcc or () if f.startswith("-gencode=arch=")]


def sass_archs(flags: OpFlags) -> frozenset[int]:
    """The SASS archs an op's ``-gencode`` flags ask nvcc for (``code=sm_80`` -> 80).

    >>> sass_archs(OpFlags("x", "CUDAExtension", (), ("-gencode=arch=compute_80,code=sm_80",
    ...     "-gencode=arch=compute_90a,code=sm_90a", "-gencode=arch=compute_90,code=compute_90")))
    frozenset({80, 90})
    """
    return frozenset(int(m.group(1)) for f in flags.nvcc or () if (m := _SASS_CODE.search(f)))


def narrowed_archs(in_order: Mapping[str, OpFlags], alone: Mapping[str, OpFlags]) -> list[str]:
    """Ops a build compiles for fewer archs than they would alone, and which.

    From 0.19.1 DeepSpeed's ``builder()`` sets ``TORCH_CUDA_ARCH_LIST`` to the op's own
    filtered list (``filter_ccs``: transformer_inference keeps >= 6.0, ...), so every op built
    after it in setup.py's order loses what that filter dropped. nvcc accepts it; the wheel
    silently lacks the SASS the plan promised.

    >>> def op(*archs: str) -> OpFlags:
    ...     return OpFlags("x", "CUDAExtension", (), tuple(f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs))
    >>> narrowed_archs({"quantizer": op("60", "80")}, {"quantizer": op("50", "60", "80")})
    ['quantizer: compute_50 lost (an earlier op narrowed TORCH_CUDA_ARCH_LIST)']
    """
    out = []
    for name, flags in in_order.items():
        lost = [a for a in _archs(alone[name]) if a not in _archs(flags)] if name in alone else []
        if lost:
            out.append(f"{name}: {', '.join(lost)} lost (an earlier op narrowed TORCH_CUDA_ARCH_LIST)")
    return out
