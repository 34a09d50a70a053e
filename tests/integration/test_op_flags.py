"""DeepSpeed's op flags from the real PyPI sdists, judged for cl/nvcc (Windows) and g++/nvcc (Linux).

The sdists of the releases issue 12 names are downloaded (sha256 from PyPI's JSON API) into the
shared test cache, unpacked and patched by dswheels' own ``patch_tree`` as a cell of each OS
is, and their op builders evaluated in an interpreter with torch 2.13's CPU build, with
``sys.platform`` set to win32 for the Windows cells (the probe stands in for the CUDA toolkit,
the torch minor and the arch list of each cell). Then:

* every planned op of every Windows cell of the shipped matrix, for each of those releases,
  passes cl and nvcc (and every Linux cell's, g++ and nvcc); without dswheels' win32 patch,
  0.19.8's CPU ops do not (the fault of issue 12 item 3);
* the recorded ``dswheels/op_flags.json`` equals what the sdists give now;
* the models agree with the real nvcc 13.0 (``--dryrun``) and gcc 12 on every recorded flag list.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from dswheels.building.effects.flag_recorder import (
    RecordContext,
    evaluate_releases,
    fetch_sdists,
    read_nvcc_options,
    record_context,
    record_interpreter,
    templates,
    unpack_patched,
)
from dswheels.building.effects.op_flags_asked import run_probe
from dswheels.building.patches import CPU_BUILDER_FILES, patch_debug_flags
from dswheels.host.downloads import Downloader, extract_archive
from dswheels.kernel.compat import load_compat
from dswheels.kernel.compiler_flags.gcc import judge_gcc
from dswheels.kernel.compiler_flags.issue import Finding
from dswheels.kernel.compiler_flags.judge import judge_op, narrowed_archs, summarize
from dswheels.kernel.compiler_flags.nvcc import judge_nvcc
from dswheels.kernel.compiler_flags.op_flag_set import EvalContext, OpFlags, ProbeJob
from dswheels.kernel.compiler_flags.record import EMPTY_RECORD, load_flag_record
from dswheels.kernel.errors import DswheelsError
from dswheels.kernel.model import DroppedCell, PlannedCell, Platform
from dswheels.kernel.naming import cell_id
from dswheels.kernel.versions import format_version, parse_version
from dswheels.plan.matrix.parse import parse_matrix
from dswheels.plan.planner import Combo, plan
from tests.conftest import ROOT, require
from tests.integration.conftest import CUDA_HOME, record_time

pytestmark = pytest.mark.integration

VERSIONS = ("0.14.5", "0.15.4", "0.16.5", "0.17.6", "0.18.9", "0.19.7", "0.19.8")
COMPAT = load_compat()
SHIPPED = parse_matrix((ROOT / "matrix" / "matrix.yml").read_text(encoding="utf-8"), "matrix/matrix.yml", COMPAT)
RECORD = load_flag_record()
NVCC = CUDA_HOME / "bin" / "nvcc"


@dataclass(frozen=True)
class Sources:
    sdists: dict[str, Path]
    trees: dict[tuple[str, str], Path]  # (version, os) -> unpacked and patched as a cell of that OS
    python: Path


def _cells(os_name: str) -> tuple[list[PlannedCell], list[DroppedCell]]:
    """The shipped matrix's cells of one OS for each release of VERSIONS, as ``dswheels plan`` plans them."""
    platform = Platform.WIN_AMD64 if os_name == "windows" else Platform.LINUX_X86_64
    planned: list[PlannedCell] = []
    dropped: list[DroppedCell] = []
    for version in VERSIONS:
        try:
            result = plan(SHIPPED, COMPAT, combo=Combo(deepspeed=parse_version(version), platform=platform))
        except DswheelsError:
            continue  # the rules forbid every cell of this release on this OS
        planned += result.planned
        dropped += result.dropped
    return planned, dropped


def _two_digit_archs(cell: PlannedCell | DroppedCell) -> bool:
    """DeepSpeed <= 0.16.3 spells arch X.Y as cc[0] + cc[2]: 10.0 -> 'compute_1.' (0.16.4 fixed it)."""
    return cell.cell.deepspeed < (0, 16, 4)


@pytest.fixture(scope="module")
def sources(dswheels_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Sources:
    planned = plan(SHIPPED, COMPAT, flag_record=EMPTY_RECORD).planned
    try:
        python = record_interpreter(planned, venv_root=dswheels_cache / "venvs", log_file=None).python
    except DswheelsError as exc:
        require(condition=False, why=f"an interpreter with torch 2.13 (CPU) is needed: {exc.message}")
        raise
    start = time.monotonic()
    with Downloader(dswheels_cache / "sources") as downloader:
        sdists = fetch_sdists(VERSIONS, downloader=downloader, pypi_json=COMPAT.sdist_json)
    work = tmp_path_factory.mktemp("op-flags")
    trees: dict[tuple[str, str], Path] = {}
    for version in VERSIONS:
        for os_name, template in templates(planned).items():
            cell = replace(template, cell=replace(template.cell, deepspeed=parse_version(version)))
            trees[(version, os_name)] = work / f"{version}-{os_name}"
            unpack_patched(sdists[version], trees[(version, os_name)], cell, COMPAT)
    record_time("op flags: 7 sdists fetched, unpacked and patched for both OSes", time.monotonic() - start)
    return Sources(sdists=sdists, trees=trees, python=python)  # pytest's tmp retention removes the trees


def _evaluate(
    sources: Sources, cells: list[PlannedCell], *, trees: dict[str, Path] | None = None
) -> dict[str, dict[str, OpFlags]]:
    """Each cell's planned ops, in setup.py's order, with the cell's platform, CUDA, torch and arch list."""
    groups: dict[tuple[str, str, str, tuple[str, ...]], list[PlannedCell]] = {}
    for item in cells:
        accelerator = "cuda" if item.cell.variant.is_cuda else "cpu"
        key = (format_version(item.cell.deepspeed), item.cell.platform.os, accelerator, item.ops.build_names)
        groups.setdefault(key, []).append(item)
    jobs: list[ProbeJob] = []
    for (version, os_name, accelerator, ops), items in groups.items():
        contexts = tuple(
            EvalContext(
                platform="win32" if os_name == "windows" else "linux",
                cuda=format_version(i.toolchain.nvcc) if i.toolchain.nvcc else None,
                torch=format_version(i.cell.torch),
                arch_list=i.toolchain.arch_list_text or None,
            )
            for i in items
        )
        tree = (trees or {}).get(version) or sources.trees[(version, os_name)]
        jobs.append(ProbeJob(tree=str(tree), accelerator=accelerator, ops=ops, contexts=contexts))
    start = time.monotonic()
    answer = run_probe(sources.python, jobs, env={"PATH": "/usr/bin:/bin", "DS_NVCC_THREADS": "1"})
    record_time(f"op flags: {len(cells)} cells evaluated ({len(jobs)} jobs, one probe)", time.monotonic() - start)
    out: dict[str, dict[str, OpFlags]] = {}
    for items, job in zip(groups.values(), answer.jobs, strict=True):
        assert not job.error, job.error
        for item, result in zip(items, job.results, strict=True):
            out[cell_id(item.cell)] = dict(result.ops)
    return out


def _judge(cells: list[PlannedCell], flags: dict[str, dict[str, OpFlags]]) -> list[Finding]:
    findings: list[Finding] = []
    for item in cells:
        ops: dict[str, OpFlags] = flags[cell_id(item.cell)]
        assert set(ops) == set(item.ops.build_names), cell_id(item.cell)
        for op in ops.values():
            findings += judge_op(
                op,
                platform=item.cell.platform,
                deepspeed=format_version(item.cell.deepspeed),
                nvcc_append=item.toolchain.nvcc_flags,
                nvcc=RECORD.nvcc,
            )
    return findings


def test_every_windows_cell_passes_cl_and_nvcc(sources: Sources) -> None:
    cells, dropped = _cells("windows")
    assert {format_version(c.cell.deepspeed) for c in cells} == set(VERSIONS)
    findings = _judge(cells, _evaluate(sources, cells))
    assert [f.describe() for f in findings if f.fatal] == []
    print("\n".join(summarize(findings)))  # the warnings cl/link will print: D9002/LNK4044 only
    assert {f.issue.code for f in findings} <= {"D9002", "LNK4044"}
    # the plan already dropped what would not compile: the arch lists with 10.0/12.0 of DeepSpeed <= 0.16.3
    by_flags = [d for d in dropped if d.reasons[0].rule == "op-flags"]
    assert by_flags
    assert all(_two_digit_archs(d) and "'-gencode=arch=compute_1.," in d.reasons[0].message for d in by_flags)
    assert all(not _two_digit_archs(c) or "10.0" not in c.toolchain.arch_list for c in cells)


def test_every_linux_cell_passes_gcc_and_nvcc(sources: Sources) -> None:
    cells, dropped = _cells("linux")
    findings = _judge(cells, _evaluate(sources, cells))
    assert [f.describe() for f in findings] == []
    assert all(_two_digit_archs(d) for d in dropped if d.reasons[0].rule == "op-flags")


def test_without_the_win32_patch_the_0198_cpu_ops_stop_cl(sources: Sources, tmp_path: Path) -> None:
    """The fault of issue 12 item 3: what today's main builds for every 0.19.8 Windows cell."""
    unpatched = {}
    for version in ("0.19.7", "0.19.8"):
        tree = tmp_path / version
        shutil.copytree(sources.trees[(version, "windows")], tree, symlinks=True)
        with tarfile.open(sources.sdists[version]) as sdist:
            for rel in CPU_BUILDER_FILES:  # DeepSpeed's text with only the '-g' -> '-g0' patch main applies
                member = sdist.extractfile(f"deepspeed-{version}/{rel}")
                assert member is not None
                (tree / rel).write_text(patch_debug_flags(member.read().decode())[0], encoding="utf-8")
        unpatched[version] = tree
    cells = [
        c
        for c in _cells("windows")[0]
        if cell_id(c.cell).startswith(("ds0.19.7-torch2.13-cu126", "ds0.19.8-torch2.13-"))
    ]
    findings = _judge(cells, _evaluate(sources, cells, trees=unpatched))
    fatal = {(f.deepspeed, f.op, f.tool, f.issue.flag, f.issue.code) for f in findings if f.fatal}
    assert fatal == {("0.19.8", op, "cl", "-Wno-reorder", "D8021") for op in ("cpu_adam", "cpu_adagrad", "cpu_lion")}


def test_the_record_is_what_the_sdists_give(sources: Sources, tmp_path: Path) -> None:
    planned = plan(SHIPPED, COMPAT, flag_record=EMPTY_RECORD).planned
    context = RecordContext(
        torch=RECORD.context["torch"],
        cuda=RECORD.context["cuda"],
        cpu_baseline=RECORD.context["cpu_baseline"],
        nvcc_threads=RECORD.context["nvcc_threads"],
        arch_lists={p: tuple(sorted(k[2] for k in RECORD.ops if k[:2] == (p, "cuda"))) for p in ("win32", "linux")},
    )
    # the record covers the arch lists the shipped matrix plans (re-record after changing them)
    assert context == record_context(planned, SHIPPED.cpu_baseline_for("x86_64", COMPAT))
    recording = evaluate_releases(
        sources.python,
        sources.sdists,
        templates=templates(planned),
        context=context,
        compat=COMPAT,
        work=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
    )
    for (version, platform, accelerator, arch), ops in recording.results.items():
        # is_compatible() answers for this machine (libaio, a GPU): not recorded
        evaluated = {name: replace(flags, compatible=True) for name, flags in ops.items()}
        assert RECORD.lookup(version, (platform, accelerator, arch)) == (evaluated, True), (version, platform, arch)
    recorded = {(v, *k) for k, per in RECORD.ops.items() for v in per if v in VERSIONS}
    assert recorded == set(recording.results)
    assert {k: v for k, v in RECORD.not_recorded.items() if k.split()[0] in VERSIONS} == recording.not_recorded


def test_the_nvcc_table_is_nvcc_13s_help() -> None:
    require(NVCC.is_file(), f"nvcc 13.0 at {NVCC}")
    assert read_nvcc_options(str(NVCC)) == RECORD.nvcc


def _nvcc_dryrun(flags: tuple[str, ...], tmp: Path) -> bool:
    source = tmp / "empty.cu"
    source.write_text("", encoding="utf-8")
    run = subprocess.run(
        [str(NVCC), "--dryrun", "-c", str(source), "-o", str(tmp / "empty.o"), *flags],
        capture_output=True,
        text=True,
        check=False,
    )
    return run.returncode == 0 and "nvcc fatal" not in run.stderr + run.stdout


def _gencode_arch(flag: str) -> str:
    return flag.split(",", maxsplit=1)[0].removeprefix("-gencode=arch=") if flag.startswith("-gencode=arch=") else ""


def test_the_nvcc_model_agrees_with_nvcc(tmp_path: Path) -> None:
    require(NVCC.is_file(), f"nvcc 13.0 at {NVCC}")
    # which archs an nvcc release supports is the plan's arch list's business (compat.yml), not the flag model's
    listed = subprocess.run([str(NVCC), "--list-gpu-arch"], capture_output=True, text=True, check=True).stdout
    supported = set(listed.split())
    recorded = {op.nvcc for per in RECORD.ops.values() for ops in per.values() for op in ops.values() if op.nvcc}
    lists = {
        tuple(
            f
            for f in flags
            if not f.startswith("-gencode=arch=") or f.split(",")[0][len("-gencode=arch=") :] in supported
        )
        for flags in recorded
    }
    crafted = {(f,) for f in ("-Wno-reorder", "-fopenmp", "--lineinfo", "-threads=4", "-std=c++23", "-lineinfo=1",
                              "--use_fast_math=true", "-gencode=arch=compute_1.,code=sm_1.", "-gencode=foo=bar",
                              "-ftz=yes", "-t4", "-DX", "-Xcompiler=/Zc:preprocessor", "-DUSE_CUDA")}  # fmt: skip
    disagree = []
    for flags in sorted(lists | crafted):
        model = not [i for i in judge_nvcc(flags, RECORD.nvcc, host=lambda _f: ()) if i.fatal]
        if model != _nvcc_dryrun(flags, tmp_path):
            disagree.append(flags)
    assert disagree == []
    assert len(lists) > 10


def _gcc_accepts(flags: tuple[str, ...], tmp: Path) -> bool:
    source = tmp / "empty.cpp"
    source.write_text("", encoding="utf-8")
    cmd = [
        "g++",
        "-c",
        str(source),
        "-o",
        str(tmp / "empty.o"),
        *(f.replace("$CUDA_HOME", "/usr/local/cuda") for f in flags),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, check=False).returncode == 0


def test_the_gcc_model_agrees_with_gcc(tmp_path: Path) -> None:
    require(shutil.which("g++") is not None, "g++ is needed")
    linux = [ops for key, per in RECORD.ops.items() if key[0] == "linux" for ops in per.values()]
    lists = {op.cxx for ops in linux for op in ops.values()} | {op.link for ops in linux for op in ops.values()}
    crafted = {(f,) for f in ("-O4", "-Ofoo", "-D", "-Wno-no-such-warning", "-Wall", "-march=x86-64-v2", "-lineinfo",
                              "--use_fast_math", "-Xcompiler", "/O2", "-fopenmp", "-pthread")}  # fmt: skip
    unmodelled, disagree = [], []
    for flags in sorted(lists | crafted):
        issues = judge_gcc(flags)
        unmodelled += [i.flag for i in issues if i.code == "not-modelled"]
        if (not [i for i in issues if i.fatal]) != _gcc_accepts(flags, tmp_path):
            disagree.append(flags)
    assert disagree == []
    assert unmodelled == [], (
        "DeepSpeed passes flags the gcc model does not know: teach dswheels/kernel/compiler_flags/gcc.py"
    )


def test_an_earlier_ops_filter_narrows_later_ops_unless_patched(sources: Sources, tmp_path: Path) -> None:
    """DeepSpeed >= 0.19.0: builder() leaves its own filtered TORCH_CUDA_ARCH_LIST for the ops after it.

    Unpatched, every op built after transformer_inference (filter_ccs: >= 6.0) loses sm_50 from a
    cu126 arch list; dswheels' patch (patch_arch_list_leak) keeps the write for JIT builds only.
    """
    [cell] = [c for c in _cells("linux")[0] if cell_id(c.cell) == "ds0.19.8-torch2.13-cu126-cp311-linux_x86_64"]
    arch = cell.toolchain.arch_list_text
    assert arch.startswith("5.0;")
    for version in ("0.19.7", "0.19.8"):
        raw = tmp_path / f"raw-{version}"
        extract_archive(sources.sdists[version], raw)  # DeepSpeed as released, no dswheels patch
        contexts = tuple(
            EvalContext(platform="linux", cuda="12.6", torch="2.13", arch_list=arch, isolate=isolate)
            for isolate in (False, True)
        )
        jobs = [
            ProbeJob(tree=str(tree), accelerator="cuda", ops=cell.ops.build_names, contexts=contexts)
            for tree in (raw, sources.trees[(version, "linux")])
        ]
        unpatched, patched = run_probe(sources.python, jobs, env={"PATH": "/usr/bin:/bin"}).jobs
        narrowed = narrowed_archs(unpatched.results[0].ops, unpatched.results[1].ops)
        assert narrowed, version
        assert all("compute_50 lost" in line for line in narrowed)
        assert not [line for line in narrowed if line.startswith(("fused_adam", "transformer_inference"))]
        assert narrowed_archs(patched.results[0].ops, patched.results[1].ops) == [], version
        # and the patched ops get exactly what each gets built alone
        assert patched.results[0].ops == patched.results[1].ops
