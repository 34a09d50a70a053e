"""Judging a Windows extension's DLL imports against what Windows, MSVC, Python and torch provide."""

from __future__ import annotations

import pytest
import yaml

from dswheels.kernel.binaries.dlls import (
    DllTarget,
    describe_providers,
    judge_dll,
    judge_imports,
    load_dll_facts,
    parse_dll_facts,
)
from dswheels.kernel.compat import load_compat
from dswheels.kernel.model import Python
from dswheels.plan.matrix.parse import parse_matrix
from dswheels.plan.planner import plan
from tests.conftest import ROOT

FACTS = load_dll_facts()
CU12 = DllTarget(python=Python.parse("3.11"), torch=(2, 6), cuda_major=12)
CU13 = DllTarget(python=Python.parse("3.12"), torch=(2, 9), cuda_major=13)
CPU = DllTarget(python=Python.parse("3.11"), torch=(2, 9), cuda_major=None)


@pytest.mark.parametrize(
    ("name", "target", "provider"),
    [
        ("KERNEL32.dll", CU12, "windows"),
        ("api-ms-win-crt-runtime-l1-1-0.dll", CU12, "windows"),
        ("MSVCP140.dll", CU12, "msvc runtime"),
        ("VCRUNTIME140_1.dll", CPU, "msvc runtime"),
        ("python311.dll", CU12, "python"),
        ("python3.dll", CU13, "python"),
        ("c10.dll", CPU, "torch"),
        ("torch_python.dll", CU13, "torch"),
        ("c10_cuda.dll", CU12, "torch"),
        ("cudart64_12.dll", CU12, "cuda (in torch/lib)"),
        ("cublas64_13.dll", CU13, "cuda (in torch/lib)"),
        ("curand64_10.dll", CU13, "cuda (in torch/lib)"),
        ("cudnn64_9.dll", CU12, "cuda (in torch/lib)"),  # by copy.bat's pattern only
    ],
)
def test_expected_dlls(name: str, target: DllTarget, provider: str) -> None:
    verdict = judge_dll(name, target, FACTS)
    assert (verdict.provider, verdict.ok) == (provider, True), verdict


@pytest.mark.parametrize(
    ("name", "target", "words"),
    [
        ("python310.dll", CU12, "Python 3.10's, but the wheel is for Python 3.11"),
        ("python313t.dll", CU13, "Python 3.13t's"),
        ("fbgemm.dll", CPU, "torch/lib has fbgemm.dll in torch 2.3, 2.6, not in torch 2.9 (CPU)"),
        ("c10_cuda.dll", CPU, "with torch's CPU wheel the op cannot load"),
        ("cudart64_12.dll", CU13, "belongs to CUDA 12, but torch 2.9 (CUDA 13) carries CUDA 13's"),
        ("cudart64_12.dll", CPU, "only torch's CUDA wheels carry cudart64_12.dll"),
        ("mystery.dll", CU12, "unless the user installs what provides mystery.dll"),
    ],
)
def test_unexpected_dlls_say_why(name: str, target: DllTarget, words: str) -> None:
    verdict = judge_dll(name, target, FACTS)
    assert not verdict.ok
    assert words in verdict.detail


def test_case_and_duplicates() -> None:
    verdicts = judge_imports(["C10.DLL", "c10.dll", "kernel32.DLL"], CU12, FACTS)
    assert [v.name for v in verdicts] == ["C10.DLL", "kernel32.DLL"]
    assert all(v.ok for v in verdicts)
    assert describe_providers(verdicts) == "windows (kernel32.DLL); torch (C10.DLL)"


def test_torch_rows() -> None:
    assert FACTS.torch_row((2, 7)).torch == (2, 6)
    assert FACTS.torch_row((2, 1)).torch == FACTS.torch[0].torch  # older than any row: the oldest
    assert all("c10.dll" in row.dlls and "torch_python.dll" in row.dlls for row in FACTS.torch)


def test_every_cuda_major_the_shipped_matrix_builds_is_known() -> None:
    """A CUDA major without a DLL list would judge cudart/cublas imports by copy.bat's pattern alone."""
    compat = load_compat()
    spec = parse_matrix((ROOT / "matrix" / "matrix.yml").read_text(encoding="utf-8"), "matrix.yml", compat)
    majors = {c.cell.variant.cuda[0] for c in plan(spec, compat).planned if c.cell.variant.cuda is not None}
    assert majors
    assert majors <= set(FACTS.cuda_by_major)


def test_malformed_facts_name_the_path() -> None:
    data = yaml.safe_load((ROOT / "dswheels" / "windows_dlls.yml").read_text(encoding="utf-8"))
    data["torch"][1]["dlls"] = "c10.dll"
    with pytest.raises(ValueError, match=r"windows_dlls.yml.torch\[1\].dlls: expected a list"):
        parse_dll_facts(data)
