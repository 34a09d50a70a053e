"""The verdict: the cell this environment is, the published wheel that fits it, and a local build."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from packaging.version import InvalidVersion, Version

from dswheels.doctor.checkup import IndexView, LocalBuild, Status, Verdict
from dswheels.doctor.environment_view import Env
from dswheels.doctor.local_build import judge_local_build
from dswheels.doctor.pick import Wanted, nearest, pick_wheel
from dswheels.kernel.index_files import IndexFile
from dswheels.kernel.model import Cell
from dswheels.kernel.versions import VersionTuple, parse_version
from dswheels.plan.planner import check_cell

__all__ = ["make_verdict"]


def _wanted(env: Env) -> Wanted | str:
    facts = env.facts
    if env.platform is None:
        return "this platform has no wheels (see the platform check)"
    if env.python is None:
        return "the target Python could not be read"
    if facts.torch is None:
        return "torch is not installed: a DeepSpeed wheel is specific to the torch MAJOR.MINOR and its CUDA"
    if env.torch_minor is None or env.variant is None:
        return env.problems.get("torch", "torch's version could not be read")
    return Wanted(
        torch=env.torch_minor, variant=env.variant, python=env.python, platform=env.platform, glibc=_glibc(env)
    )


def _glibc(env: Env) -> VersionTuple | None:
    """This system's glibc as doctor read it (``glibc 2.36``); None when unread or not Linux."""
    runtime = env.facts.linux_runtime
    if runtime is None or not runtime.glibc:
        return None
    try:
        return parse_version(runtime.glibc.split()[-1])
    except ValueError:
        return None


def _choose_deepspeed(
    env: Env, wanted: Wanted, requested: VersionTuple | None, files: Sequence[IndexFile]
) -> VersionTuple:
    if requested is not None:
        return requested
    published = pick_wheel(wanted, files)
    if published is not None and published.cell is not None:
        return published.cell.deepspeed
    ds = env.facts.deepspeed
    if ds is not None:
        try:
            release = Version(ds.version).release
        except InvalidVersion:
            release = ()
        if release in env.compat.deepspeed_releases:
            return release
    for version in reversed(env.compat.deepspeed_releases):
        cell = Cell(
            deepspeed=version,
            torch=wanted.torch,
            variant=wanted.variant,
            python=wanted.python,
            platform=wanted.platform,
        )
        if not check_cell(cell, env.compat):
            return version
    return env.compat.deepspeed_releases[-1]


def make_verdict(env: Env, *, deepspeed: VersionTuple | None, index: IndexView | None) -> Verdict:
    wanted = _wanted(env)
    files = index.files if index is not None else ()
    if isinstance(wanted, str):
        local = LocalBuild(status=Status.FAIL, blockers=(wanted,))
        return Verdict(cell=None, no_cell=wanted, rules=(), index=index, wheel=None, nearest=(), local=local)
    version = _choose_deepspeed(env, wanted, deepspeed, files)
    cell = Cell(
        deepspeed=version, torch=wanted.torch, variant=wanted.variant, python=wanted.python, platform=wanted.platform
    )
    rules = check_cell(cell, env.compat)
    exact = replace(wanted, deepspeed=version)
    wheel = pick_wheel(exact, files) if index is not None else None
    near = nearest(exact, files) if index is not None and not index.error and wheel is None else ()
    local = judge_local_build(env, cell)
    return Verdict(cell=cell, no_cell="", rules=rules, index=index, wheel=wheel, nearest=near, local=local)
