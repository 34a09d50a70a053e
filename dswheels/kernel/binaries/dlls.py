"""Whether each DLL a Windows extension imports will be there when the op loads.

Windows resolves a ``.pyd``'s imports when Python loads it; one missing DLL fails the import
("DLL load failed while importing fused_adam_op: The specified module could not be found").
A DeepSpeed op may rely on exactly four providers: Windows itself (system DLLs and API sets),
the Microsoft Visual C++ runtime, the Python interpreter (``python311.dll``), and the torch
wheel it was built against (torch's own DLLs and, in torch's CUDA wheels, the CUDA runtime
libraries its build copies into ``torch/lib``). The facts, with their sources, are package
data: ``dswheels/windows_dlls.yml``. This module judges names; reading them out of the PE
files is :mod:`dswheels.kernel.binaries.pe`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cache
from importlib import resources

import yaml

from dswheels.kernel.model import Python
from dswheels.kernel.numbers import ascii_int
from dswheels.kernel.untyped import Untyped
from dswheels.kernel.versions import VersionTuple, format_version, parse_version

__all__ = [
    "DllFacts",
    "DllTarget",
    "DllVerdict",
    "describe_providers",
    "judge_dll",
    "judge_imports",
    "load_dll_facts",
    "parse_dll_facts",
]

_PYTHON_DLL = re.compile(r"^python3([0-9]+)(t?)\.dll$")


@dataclass(frozen=True, slots=True)
class TorchDlls:
    torch: VersionTuple
    dlls: frozenset[str]  # lower case


@dataclass(frozen=True, slots=True)
class DllFacts:
    """``windows_dlls.yml``, every name lower case (Windows matches DLL names without case)."""

    system: frozenset[str]
    system_patterns: tuple[str, ...]
    msvc: frozenset[str]
    msvc_provider: str
    torch: tuple[TorchDlls, ...]  # oldest first
    torch_cuda: frozenset[str]
    cuda_patterns: tuple[str, ...]
    cuda_by_major: Mapping[int, frozenset[str]]

    def torch_row(self, torch: VersionTuple) -> TorchDlls:
        """The newest recorded release at or below ``torch`` (the oldest when all are newer)."""
        below = [row for row in self.torch if row.torch <= torch[:2]]
        return below[-1] if below else self.torch[0]


@dataclass(frozen=True, slots=True)
class DllTarget:
    """What the wheel runs with: its Python, torch M.m and CUDA major (``None``: the CPU build / unknown)."""

    python: Python | None = None
    torch: VersionTuple | None = None
    cuda_major: int | None = None

    @property
    def torch_words(self) -> str:
        build = f"CUDA {self.cuda_major}" if self.cuda_major else "CPU"
        return f"torch {format_version(self.torch)} ({build})" if self.torch else f"torch ({build})"


@dataclass(frozen=True, slots=True)
class DllVerdict:
    name: str  # as imported
    provider: str  # "windows" | "msvc runtime" | "python" | "torch" | "cuda (in torch/lib)" | "unknown"
    ok: bool
    detail: str  # who provides it, or why nothing will

    def as_json(self) -> dict[str, object]:
        return {"name": self.name, "provider": self.provider, "ok": self.ok, "detail": self.detail}


def parse_dll_facts(data: object) -> DllFacts:
    """Narrow the parsed YAML; raises ValueError naming the path of a malformed value."""
    root = Untyped(data, "windows_dlls.yml")
    system, msvc, cuda = root.at("system"), root.at("msvc_runtime"), root.at("torch_cuda")
    rows = sorted(
        (
            TorchDlls(
                torch=parse_version(row.at("torch").text()), dlls=frozenset(d.lower() for d in row.at("dlls").strs())
            )
            for row in root.at("torch").seq()
        ),
        key=lambda r: r.torch,
    )
    if not rows:
        raise ValueError("windows_dlls.yml.torch: expected at least one torch release")
    return DllFacts(
        system=frozenset(n.lower() for n in system.at("names").strs()),
        system_patterns=tuple(p.lower() for p in system.at("patterns").strs()),
        msvc=frozenset(n.lower() for n in msvc.at("names").strs()),
        msvc_provider=msvc.at("provider").text(),
        torch=tuple(rows),
        torch_cuda=frozenset(n.lower() for n in cuda.at("dlls").strs()),
        cuda_patterns=tuple(p.lower() for p in cuda.at("patterns").strs()),
        cuda_by_major={
            ascii_int(major): frozenset(n.lower() for n in names.strs())
            for major, names in cuda.at("by_cuda_major").items()
        },
    )


@cache
def load_dll_facts() -> DllFacts:
    """The shipped facts (package data), parsed once per process."""
    text = resources.files("dswheels").joinpath("windows_dlls.yml").read_text(encoding="utf-8")
    return parse_dll_facts(yaml.safe_load(text))


def judge_dll(name: str, target: DllTarget, facts: DllFacts) -> DllVerdict:
    """Who provides ``name`` on the machine that runs the wheel, or why nothing will.

    >>> facts = load_dll_facts()
    >>> judge_dll("cudart64_12.dll", DllTarget(torch=(2, 6), cuda_major=12), facts).detail
    "CUDA 12 runtime library that torch's CUDA 12 wheels carry in torch/lib"
    >>> judge_dll("cudart64_12.dll", DllTarget(torch=(2, 9), cuda_major=13), facts).ok
    False
    """
    low = name.lower()
    if low in facts.system or any(fnmatchcase(low, p) for p in facts.system_patterns):
        return DllVerdict(name, "windows", ok=True, detail="part of Windows")
    if low in facts.msvc:
        return DllVerdict(name, "msvc runtime", ok=True, detail=facts.msvc_provider)
    if (python := _PYTHON_DLL.match(low)) or low == "python3.dll":
        return _judge_python(name, python, target)
    torch = _judge_torch(name, low, target, facts)
    if torch is not None:
        return torch
    return DllVerdict(
        name,
        "unknown",
        ok=False,
        detail=f"not part of Windows, the Visual C++ runtime, Python or {target.torch_words}'s wheel: the op fails "
        f"to load ('DLL load failed') unless the user installs what provides {name}; link it statically, "
        "or bundle it into the wheel (delvewheel)",
    )


def _judge_python(name: str, match: re.Match[str] | None, target: DllTarget) -> DllVerdict:
    if match is None:  # python3.dll: the stable ABI, beside every CPython 3 interpreter
        return DllVerdict(name, "python", ok=True, detail="the stable-ABI DLL of every CPython 3 on Windows")
    imported = Python(version=(3, int(match.group(1))), free_threaded=bool(match.group(2)))
    if target.python is None or imported == target.python:
        return DllVerdict(name, "python", ok=True, detail=f"the Python {imported} interpreter")
    return DllVerdict(
        name,
        "python",
        ok=False,
        detail=f"{name} is Python {imported}'s, but the wheel is for Python {target.python}: the op cannot load there",
    )


def _judge_torch(name: str, low: str, target: DllTarget, facts: DllFacts) -> DllVerdict | None:
    row = facts.torch_row(target.torch) if target.torch else facts.torch[-1]
    if low in row.dlls:
        return DllVerdict(name, "torch", ok=True, detail=f"torch/lib of torch {format_version(row.torch)}'s wheels")
    if any(low in other.dlls for other in facts.torch):
        releases = ", ".join(format_version(r.torch) for r in facts.torch if low in r.dlls)
        return DllVerdict(
            name,
            "torch",
            ok=False,
            detail=f"torch/lib has {name} in torch {releases}, not in {target.torch_words}: the op cannot load there",
        )
    cuda_words = f"torch's CUDA {target.cuda_major} wheels" if target.cuda_major else "torch's CUDA wheels"
    is_cuda_dll = low in facts.torch_cuda or any(fnmatchcase(low, p) for p in facts.cuda_patterns)
    if not is_cuda_dll and not any(low in names for names in facts.cuda_by_major.values()):
        return None
    if target.cuda_major is None:
        return DllVerdict(
            name,
            "cuda (in torch/lib)",
            ok=False,
            detail=f"only {cuda_words} carry {name}; with torch's CPU wheel the op cannot load",
        )
    if low in facts.torch_cuda:
        return DllVerdict(name, "torch", ok=True, detail=f"torch/lib of {cuda_words}")
    own = facts.cuda_by_major.get(target.cuda_major, frozenset())
    other = sorted(m for m, names in facts.cuda_by_major.items() if low in names and m != target.cuda_major)
    if low not in own and other:
        return DllVerdict(
            name,
            "cuda (in torch/lib)",
            ok=False,
            detail=f"{name} belongs to CUDA {other[0]}, but {target.torch_words} carries CUDA {target.cuda_major}'s "
            "libraries: the op was linked against another toolkit than torch's and cannot load",
        )
    return DllVerdict(
        name,
        "cuda (in torch/lib)",
        ok=True,
        detail=f"CUDA {target.cuda_major} runtime library that {cuda_words} carry in torch/lib",
    )


def judge_imports(imports: Iterable[str], target: DllTarget, facts: DllFacts) -> tuple[DllVerdict, ...]:
    """A verdict per distinct imported DLL (first spelling kept), in import order."""
    seen: dict[str, DllVerdict] = {}
    for name in imports:
        if name.lower() not in seen:
            seen[name.lower()] = judge_dll(name, target, facts)
    return tuple(seen.values())


def describe_providers(verdicts: Iterable[DllVerdict]) -> str:
    """``windows (KERNEL32.dll, ...); python (python311.dll); ...``: the DLLs grouped by what provides them.

    >>> describe_providers([DllVerdict("c10.dll", "torch", True, ""), DllVerdict("KERNEL32.dll", "windows", True, "")])
    'windows (KERNEL32.dll); torch (c10.dll)'
    """
    order = ["windows", "msvc runtime", "python", "torch", "cuda (in torch/lib)", "unknown"]
    groups: dict[str, list[str]] = {}
    for v in verdicts:
        groups.setdefault(v.provider, []).append(v.name)
    return "; ".join(f"{p} ({', '.join(groups[p])})" for p in sorted(groups, key=order.index))
