"""The compiler cache a build runs through: ccache or sccache from PATH, sccache's server, the statistics.

What the cache is told (its base directory, where sccache keeps its objects) is decided in
:mod:`dswheels.building.build_env` and :mod:`dswheels.plan.compiler_cache_keys`; this module finds the
tool, makes the compiler links (ccache) or the C++ script (sccache) a build needs, starts
sccache's server for the build and reads what the cache did.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path

from dswheels.building.build_env import CompilerCache
from dswheels.building.effects.cell_log import log_note
from dswheels.building.output_reading import CacheStats, parse_ccache_stats_log, parse_sccache_stats
from dswheels.host import proc
from dswheels.host.log import get_reporter
from dswheels.kernel.errors import EnvironmentMismatchError
from dswheels.plan.compiler_cache_keys import CacheTool, CompilerCacheChoice, SccacheSettings, sccache_backend

__all__ = ["cache_stats", "find_compiler_cache", "restart_sccache", "start_sccache"]


def _sccache_cxx(sccache: str, work_dir: Path, compilers: tuple[str, str] | None, env: Mapping[str, str]) -> str:
    """A script that runs the C++ compiler through sccache (Linux), for ``CXX``; "" on Windows or without one.

    Not compiler-named links on PATH, as for ccache: nvcc, which sccache's server runs, looks for its
    host compiler on PATH, and sccache started from inside its own server refuses to act as the
    compiler ("Compiler not supported: unexpected argument '-E'", measured with sccache 0.16). So only
    ninja's C++ rule (torch reads ``CXX``) goes through sccache; nvcc's host compiler stays the real one.
    """
    # torch's ninja rule runs cl itself on Windows (the platform in a condition, not an early return:
    # mypy --platform win32 would call the rest unreachable)
    real = (
        proc.find_tool(compilers[1] if compilers else env.get("CXX") or "c++", env) if sys.platform != "win32" else None
    )
    if real is None:
        return ""
    script = work_dir / "sccache-bin" / "c++"
    script.parent.mkdir(parents=True, exist_ok=True)
    run = f'exec {shlex.quote(sccache)} {shlex.quote(real)} "$@"'
    script.write_text(f"#!/bin/sh\n# dswheels: the C++ compiler through sccache\n{run}\n", encoding="utf-8")
    script.chmod(0o755)
    return str(script)


def find_compiler_cache(
    choice: CompilerCacheChoice, *, env: Mapping[str, str], work_dir: Path, compilers: tuple[str, str] | None
) -> CompilerCache | None:
    """ccache (preferred) or sccache from PATH, or the one ``choice`` names."""
    if choice is CompilerCacheChoice.NONE:
        return None
    tools = tuple(CacheTool) if choice is CompilerCacheChoice.AUTO else (CacheTool(choice.value),)
    for name in tools:
        exe = proc.find_tool(name.value, env)
        if exe is None:
            continue
        exe = str(Path(exe).resolve())
        if name is CacheTool.SCCACHE:
            return CompilerCache(
                tool=name,
                executable=exe,
                masquerade_dir="",
                stats_log="",
                base_dir=str(work_dir),
                cxx=_sccache_cxx(exe, work_dir, compilers, env),
            )
        masquerade = ""
        if sys.platform != "win32":
            # compiler-named links to ccache, first on PATH: c++/g++ (and CC/CXX's names) go through it
            link_dir = work_dir / "ccache-bin"
            link_dir.mkdir(parents=True, exist_ok=True)
            for compiler in {"cc", "c++", "gcc", "g++", *(compilers or ())}:
                link = link_dir / compiler
                if not link.exists():
                    link.symlink_to(exe)
            masquerade = str(link_dir)
        return CompilerCache(
            tool=name,
            executable=exe,
            masquerade_dir=masquerade,
            stats_log=str(work_dir / "ccache-stats.log"),
            base_dir=str(work_dir),
        )
    if choice is not CompilerCacheChoice.AUTO:
        raise EnvironmentMismatchError(
            f"--compiler-cache {choice}: {choice} is not on PATH", hint=f"install {choice} or use --compiler-cache auto"
        )
    return None


def restart_sccache(cache: CompilerCache, env: Mapping[str, str], backend: Mapping[str, str], log_file: Path) -> str:
    """Start sccache's server for one build: its base directory, its backend, statistics from zero.

    The server reads its configuration when it starts, so an earlier one (another work directory)
    is stopped first. A remote backend that does not answer is no reason to fail a build: then the
    server starts on the local disk, with a warning. Returns which backend it uses.
    """
    run_env = {**env, **backend}

    def start(with_env: Mapping[str, str]) -> bool:
        proc.capture([cache.executable, "--stop-server"], env=with_env, log_file=log_file)
        started = proc.run(
            [cache.executable, "--start-server"],
            env=with_env,
            capture=True,
            stream=False,
            heartbeat=None,
            check=False,
            log_file=log_file,
            timeout=120,
        )
        return started.returncode == 0

    if start(run_env):
        return "remote" if any(k in backend for k in ("SCCACHE_BUCKET", "SCCACHE_GHA_ENABLED")) else "local"
    remote = {
        k
        for k in backend
        if k.startswith(("SCCACHE_BUCKET", "SCCACHE_S3", "SCCACHE_GHA", "SCCACHE_ENDPOINT", "SCCACHE_REGION"))
    }
    if remote and start({k: v for k, v in run_env.items() if k not in remote}):
        get_reporter().warning("sccache's remote cache did not answer: compiling with its local disk cache only")
        return "local"
    raise EnvironmentMismatchError(
        "sccache's server does not start", hint=f"see {log_file}; build without it: --compiler-cache none"
    )


def start_sccache(
    cache: CompilerCache, settings: SccacheSettings, *, inherited: Mapping[str, str], env: Mapping[str, str], log: Path
) -> dict[str, str]:
    """Start sccache's server for a build (:func:`restart_sccache`) and say where it keeps its objects.

    Returns the variables that choose its backend: the build's environment must carry them too.
    """
    backend, where = sccache_backend(settings, inherited, base_dir=cache.base_dir)
    if restart_sccache(cache, {**env, **backend}, backend, log) == "local" and any(
        "GHA" in k or "BUCKET" in k for k in backend
    ):
        where = "local disk: the remote cache did not answer"
    get_reporter().info(f"sccache: {where}")
    log_note(log, f"sccache server started: {where}")
    return backend


def cache_stats(cache: CompilerCache, env: Mapping[str, str]) -> CacheStats | None:
    """What the cache did during the build (hits, misses); None when sccache's answer is unreadable."""
    if cache.tool is CacheTool.CCACHE:
        log = Path(cache.stats_log)
        if not log.exists():
            return CacheStats(tool=CacheTool.CCACHE, hits=0, misses=0)
        return parse_ccache_stats_log(log.read_text(encoding="utf-8", errors="replace"), base_dir=cache.base_dir)
    result = proc.capture([cache.executable, "--show-stats", "--stats-format=json"], env=env)
    try:
        return parse_sccache_stats(json.loads(result.output))
    except (ValueError, TypeError):
        return None
