"""Evaluate the op flags of DeepSpeed's PyPI sdists as dswheels patches them: ``nox -s update_flags`` and the tests.

For each release: the sdist from PyPI (sha256 from its JSON API), unpacked once per OS and
patched by :func:`dswheels.building.effects.source_tree.patch_tree` exactly as a cell of that OS is patched,
then every op's builder evaluated by the probe with ``win32``/``linux`` stood in for, for the
CUDA and the CPU accelerator. The probe runs once per batch of trees (torch is imported once).
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from dswheels.building.effects.op_flags_asked import run_probe
from dswheels.building.effects.source_tree import patch_tree
from dswheels.host import proc
from dswheels.host.downloads import Downloader, extract_archive
from dswheels.host.venvs import Interpreter, InterpreterMode, prepare_interpreter
from dswheels.kernel.compat import Compat
from dswheels.kernel.compiler_flags.nvcc import NvccOptions, parse_nvcc_help
from dswheels.kernel.compiler_flags.op_flag_set import EvalContext, OpFlags, ProbeAnswer, ProbeJob
from dswheels.kernel.errors import BuildError, DswheelsError, EnvironmentMismatchError, SourceError
from dswheels.kernel.model import OS, Accelerator, PlannedCell, Platform, Python, Variant
from dswheels.kernel.numbers import is_ascii_digits
from dswheels.kernel.platform_traits import traits
from dswheels.kernel.sources import TorchSource, TorchSourceKind
from dswheels.kernel.versions import format_version, parse_version

__all__ = [
    "RecordContext",
    "Recording",
    "evaluate_releases",
    "fetch_sdists",
    "read_nvcc_options",
    "record_context",
    "record_interpreter",
    "templates",
    "unpack_patched",
]

# platform as the builders see it -> the OS of dswheels' cells
PLATFORMS = {traits(os).sys_platform: os for os in (OS.WINDOWS, OS.LINUX)}  # as the builders see it -> OS


@dataclass(frozen=True, slots=True)
class RecordContext:
    """The machine the builders are told about (stored in op_flags.json as ``context``)."""

    torch: str  # MAJOR.MINOR
    cuda: str  # the toolkit X.Y the CUDA accelerator's builders see
    cpu_baseline: str
    nvcc_threads: str  # DS_NVCC_THREADS (else DeepSpeed's --threads follows the machine's cores)
    arch_lists: Mapping[str, tuple[str, ...]]  # platform ("win32"/"linux") -> the arch lists to record

    def as_json(self) -> dict[str, str]:
        return {
            "torch": self.torch,
            "cuda": self.cuda,
            "cpu_baseline": self.cpu_baseline,
            "nvcc_threads": self.nvcc_threads,
        }

    def contexts(self, platform: str, accelerator: Accelerator) -> tuple[EvalContext, ...]:
        """One per arch list for the CUDA accelerator; one for the CPU accelerator (no CUDA)."""
        if accelerator is not Accelerator.CUDA:
            return (EvalContext(platform=platform, torch=self.torch, isolate=True),)
        return tuple(
            EvalContext(platform=platform, cuda=self.cuda, torch=self.torch, arch_list=arch, isolate=True)
            for arch in self.arch_lists[platform]
        )


# The machine the recording stands for: the newest torch and CUDA the shipped matrix builds
# (they choose only -std= spellings); the arch lists are the plan's own.
RECORD_TORCH, RECORD_VARIANT = (2, 15), "cu130"
# The probe's interpreter: torch's CPU build is enough to import the builders (and small), for Linux, where the
# recording is made (it stands in for win32 too).
PROBE_TORCH, PROBE_PLATFORM = (2, 13), Platform.LINUX_X86_64


def _recorded(planned: Sequence[PlannedCell]) -> list[PlannedCell]:
    """The cells the record is made for: each OS's first platform's (x86_64). A linux_aarch64 cell's builders
    give the flags of a Linux one with its own CPU baseline, which the plan puts in (plan/toolchain.py)."""
    return [p for p in planned if traits(p.cell.platform) is traits(p.cell.platform.os)]


def record_context(planned: Sequence[PlannedCell], cpu_baseline: str) -> RecordContext:
    """torch 2.15 with CUDA 13.0; the arch lists the plan's CUDA cells of each platform build; its CPU baseline."""
    lists: dict[str, dict[str, None]] = {platform: {} for platform in PLATFORMS}
    by_os = {os_name: platform for platform, os_name in PLATFORMS.items()}
    for item in _recorded(planned):
        if item.cell.variant.is_cuda:
            lists[by_os[item.cell.platform.os]][item.toolchain.arch_list_text] = None
    return RecordContext(
        torch=format_version(RECORD_TORCH),
        cuda=Variant.parse(RECORD_VARIANT).cuda_text,
        cpu_baseline=cpu_baseline,
        nvcc_threads="1",
        arch_lists={platform: tuple(sorted(found)) for platform, found in lists.items()},
    )


def templates(planned: Sequence[PlannedCell]) -> dict[str, PlannedCell]:
    """The first planned CUDA cell of each OS: the patches a cell of that OS gets."""
    out: dict[str, PlannedCell] = {}
    for item in _recorded(planned):
        if item.cell.variant.is_cuda:
            out.setdefault(item.cell.platform.os, item)
    missing = sorted(set(PLATFORMS.values()) - set(out))
    if missing:
        raise EnvironmentMismatchError(f"the plan has no CUDA cell for {', '.join(missing)} to take the patches from")
    return out


def record_interpreter(planned: Sequence[PlannedCell], *, venv_root: Path, log_file: Path | None) -> Interpreter:
    """An interpreter with torch 2.13's CPU build (this one if it has it, else a venv made as builds make theirs)."""
    python = Python.parse(f"{sys.version_info.major}.{sys.version_info.minor}")
    cell = next(
        (
            item
            for item in planned
            if item.cell.platform is PROBE_PLATFORM
            and not item.cell.variant.is_cuda
            and item.cell.torch == PROBE_TORCH
            and item.cell.python == python
        ),
        None,
    )
    if cell is None:
        raise EnvironmentMismatchError(f"the plan has no torch 2.13 cpu cell for Python {python} on Linux")
    return prepare_interpreter(
        cell,
        mode=InterpreterMode.AUTO,
        torch_source=TorchSource(TorchSourceKind.PIP),
        venv_root=venv_root,
        log_file=log_file,
    )


@dataclass
class Recording:
    results: dict[tuple[str, str, str, str], Mapping[str, OpFlags]]  # (version, platform, accelerator, arch) -> ops
    not_recorded: dict[str, str]  # "0.14.0 win32 cuda" -> why


def fetch_sdists(versions: Sequence[str], *, downloader: Downloader, pypi_json: str) -> dict[str, Path]:
    """Each release's sdist, verified against the sha256 PyPI's JSON API lists (cached by digest)."""
    project = downloader.get_pypi_project(pypi_json)
    out: dict[str, Path] = {}
    for version in versions:
        try:
            info = project.sdist(version)
        except LookupError as exc:
            raise SourceError(str(exc), hint="check the DeepSpeed version") from None
        out[version], _sha = downloader.fetch(info.url, sha256=info.sha256, size=info.size)
    return out


def unpack_patched(sdist: Path, dest: Path, planned: PlannedCell, compat: Compat) -> list[str]:
    """``dest``: the sdist unpacked and patched as a build of ``planned`` patches it; the patch notes."""
    if dest.exists():
        shutil.rmtree(dest)
    extract_archive(sdist, dest)
    return patch_tree(dest, planned, compat, debug_symbols=False)


def _batches(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def evaluate_releases(
    python: Path,
    sdists: Mapping[str, Path],
    *,
    templates: Mapping[str, PlannedCell],
    context: RecordContext,
    compat: Compat,
    work: Path,
    env: Mapping[str, str],
    batch: int = 8,
    log_file: Path | None = None,
) -> Recording:
    """Every op of every release for each platform and accelerator.

    ``templates``: a planned cell per OS (``windows``/``linux``) whose patches are applied, with
    the release put in; a release the patches refuse for an OS is listed in ``not_recorded``.
    """
    recording = Recording(results={}, not_recorded={})
    # what the stand-ins decide must not come from the caller's environment
    probe_env = {k: v for k, v in env.items() if not k.startswith("DS_") and k != "TORCH_CUDA_ARCH_LIST"}
    probe_env["DS_NVCC_THREADS"] = context.nvcc_threads
    versions = sorted(sdists, key=parse_version)
    for chunk in _batches(versions, batch):
        jobs: list[ProbeJob] = []
        keys: list[tuple[str, str, str]] = []  # (version, platform, accelerator) of each job
        for version in chunk:
            for platform, os_name in PLATFORMS.items():
                tree = work / f"{version}-{os_name}"
                planned = _release_cell(templates[os_name], version, context)
                try:
                    unpack_patched(sdists[version], tree, planned, compat)
                except BuildError as exc:
                    for accelerator in Accelerator:
                        recording.not_recorded[f"{version} {platform} {accelerator}"] = exc.message
                    continue
                for accelerator in Accelerator:
                    contexts = context.contexts(platform, accelerator)
                    jobs.append(ProbeJob(tree=str(tree), accelerator=accelerator.value, ops=None, contexts=contexts))
                    keys.append((version, platform, accelerator.value))
        if jobs:
            _record(run_probe(python, jobs, env=probe_env, log_file=log_file, error=DswheelsError), keys, recording)
        for version in chunk:
            for os_name in PLATFORMS.values():
                shutil.rmtree(work / f"{version}-{os_name}", ignore_errors=True)
    return recording


def _release_cell(template: PlannedCell, version: str, context: RecordContext) -> PlannedCell:
    """``template`` with the release ``version`` and the recording's CPU baseline put in."""
    return replace(
        template,
        cell=replace(template.cell, deepspeed=parse_version(version)),
        toolchain=replace(template.toolchain, cpu_baseline=context.cpu_baseline),
    )


def _record(answer: ProbeAnswer, keys: Sequence[tuple[str, str, str]], recording: Recording) -> None:
    """The probe's answer for each job (``keys``: its version, platform and accelerator) into ``recording``."""
    for key, job in zip(keys, answer.jobs, strict=True):
        if job.error:
            recording.not_recorded[" ".join(key)] = f"DeepSpeed's op builders cannot be imported: {job.error}"
        for result in job.results:
            recording.results[(key[0], key[1], key[2], result.context.arch_list or "")] = result.ops


def read_nvcc_options(nvcc: str) -> NvccOptions:
    """The option table of this nvcc (``nvcc --help``), with its full version (``13.0.88``)."""
    version = proc.capture([nvcc, "--version"], error=EnvironmentMismatchError, what="nvcc --version")
    release = next((w for w in version.output.split() if w.startswith("V") and is_ascii_digits(w[1:2])), "")
    if version.returncode != 0 or not release:
        raise EnvironmentMismatchError(f"{nvcc} --version did not say its release", details=version.output[-500:])
    help_text = proc.capture([nvcc, "--help"], error=EnvironmentMismatchError, what="nvcc --help")
    table = parse_nvcc_help(help_text.output, release[1:])
    if help_text.returncode != 0 or len(table.options) < 50:
        raise EnvironmentMismatchError(f"{nvcc} --help listed {len(table.options)} options", hint="is it nvcc?")
    return table
