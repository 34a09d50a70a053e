"""Assemble the build manifest of one cell from what its build found: one assembly for every platform.

The model and its JSON are :mod:`dswheels.kernel.manifest`; this module gathers the facts only the
build machine has: the version line of every tool the compile ran, each op's extension, size,
compile seconds and the seconds of each of its compile units (ninja's logs), its ISA variants, and the hashes of
the wheel and of its debug archive.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from dswheels import __version__
from dswheels.building.effects.compile_tools import CompileEnv
from dswheels.building.effects.postprocess import Postprocessed
from dswheels.building.effects.source_tree import PreparedSource
from dswheels.building.output_reading import CacheStats, OpSources, parse_ninja_log, unit_seconds
from dswheels.host.clock import utc_now
from dswheels.host.files import sha256_file
from dswheels.host.gha import runner_identity
from dswheels.host.venvs import Interpreter
from dswheels.kernel.binaries.linux_runtime import RuntimeFloor
from dswheels.kernel.manifest import BuiltOp, BuiltVariant, FileInfo, Manifest
from dswheels.kernel.model import PlannedCell
from dswheels.kernel.naming import cell_id
from dswheels.kernel.platform_traits import traits
from dswheels.kernel.wheel_contents import extension_for_module
from dswheels.platforms.find_tools import tool_version

__all__ = ["assemble_manifest"]


def assemble_manifest(
    planned: PlannedCell,
    *,
    source: PreparedSource,
    interp: Interpreter,
    setup: CompileEnv,
    accelerator: str,
    ops: Sequence[OpSources],
    names: Sequence[str],
    op_seconds: Mapping[str, float],
    pp: Postprocessed,
    durations: Mapping[str, float],
    stats: CacheStats | None,
    runtime: RuntimeFloor | None,
) -> Manifest:
    """The manifest of the post-processed wheel ``pp`` (``names``: the members of the wheel as built)."""
    fetched = source.fetched
    return Manifest(
        cell_id=cell_id(planned.cell),
        plan=planned,
        wheel=_file_info(pp.wheel),
        accelerator=accelerator,
        torch_version=interp.info.torch or "",
        torch_cuda=interp.info.torch_cuda,
        python_version=interp.info.python,
        toolchain=_toolchain(planned, interp, setup),
        cpu_baseline=planned.toolchain.cpu_baseline,
        arch_list=planned.toolchain.arch_list_text,
        env={k: (v.replace(setup.outer_path, "$PATH") if k == "PATH" else v) for k, v in setup.set_by_dswheels.items()},
        ops_built=_built_ops(ops, src=source.src, names=names, sizes=pp.sizes, op_seconds=op_seconds),
        ops_left_out=dict(planned.ops.left_out),
        durations=dict(durations),
        source={
            "kind": fetched.kind.value,
            "url": fetched.url,
            "sha256": fetched.sha256,
            "verified_by": fetched.verified_by,
        },
        source_changes=source.notes,
        created=utc_now().strftime("%Y-%m-%dT%H:%M:%SZ"),
        dswheels=__version__,
        debug_symbols=_file_info(pp.debug_archive) if pp.debug_archive is not None else None,
        compiler_cache=stats.as_json() if stats else {},
        runtime=runtime,
        windows_host=setup.cross.describe() if setup.cross is not None else {},
        runner=runner_identity(),
    )


def _file_info(path: Path) -> FileInfo:
    return FileInfo(path.name, path.stat().st_size, sha256_file(path))


def _built_ops(
    ops: Sequence[OpSources],
    *,
    src: Path,
    names: Sequence[str],
    sizes: Mapping[str, int],
    op_seconds: Mapping[str, float],
) -> tuple[BuiltOp, ...]:
    """Each op's extension and its size after stripping, its compile seconds, and its compile units' (ninja's logs)."""
    outputs: dict[str, float] = {}
    for ninja_log in sorted(src.glob("build/temp*/**/.ninja_log")):
        outputs.update(parse_ninja_log(ninja_log.read_text(encoding="utf-8", errors="replace")))
    built: list[BuiltOp] = []
    for op in ops:
        variants = (
            tuple(
                BuiltVariant(
                    suffix=suffix,
                    level=level,
                    module=module,
                    extension=(ext := extension_for_module(module, names) or ""),
                    size=sizes.get(ext, 0),
                    seconds=op_seconds.get(module),
                )
                for (suffix, level), module in zip(op.variants, op.extension_modules, strict=True)
            )
            if op.variants
            else ()
        )
        ext = extension_for_module(op.extension_modules[0], names) or ""
        built.append(
            BuiltOp(
                name=op.name,
                env=op.var,
                extension=ext,
                module=op.module,
                size=sum(v.size for v in variants) if variants else sizes.get(ext, 0),
                seconds=op.seconds(op_seconds),
                units=unit_seconds(op, outputs),
                sass=tuple(sorted(op.sass)),
                scopes=op.scopes,
                variants=variants,
            )
        )
    return tuple(built)


def _toolchain(planned: PlannedCell, interp: Interpreter, setup: CompileEnv) -> dict[str, str]:
    """Tool -> the version line it printed (or the version the interpreter reported)."""
    env = setup.env
    toolchain = {
        "python": interp.info.python,
        "torch": interp.info.torch or "",
        "interpreter": f"{interp.origin}: {interp.python}",
        **{name: version or "" for name, version in interp.info.modules.items()},
        "ninja_bin": tool_version(["ninja", "--version"], env),
    }
    if setup.cuda is not None:
        toolchain["nvcc"] = setup.cuda.version_line
        toolchain["cuda_home"] = str(setup.cuda.home)
    if traits(planned.cell.platform).compiler == "gcc":
        toolchain["cxx"] = tool_version([setup.compilers[1] if setup.compilers else "c++", "--version"], env)
    if setup.msvc is not None:
        toolchain["msvc"] = setup.msvc.toolset
    if setup.cross is not None:
        toolchain.update(setup.cross.tool_versions())
    if setup.cache is not None:
        toolchain[setup.cache.tool.value] = tool_version([setup.cache.executable, "--version"], env)
    return toolchain
