"""``dswheels doctor``: judge a machine from collected facts, and say what to fix.

Pure: :mod:`dswheels.doctor.effects.collect_facts` collects :class:`~dswheels.doctor.machine_facts.Facts` (raw
tool output included, so tests feed recordings from real machines); :func:`diagnose` turns them into checks
(OK / WARN / FAIL, each with a concrete fix) and a :class:`Verdict`: the cell this environment
is, whether a published wheel fits, and whether a local build would work. The local-build
judgement is the planner's own (:func:`dswheels.plan.planner.resolve_cell` with a
:class:`~dswheels.plan.planner.LocalHost`), so doctor and ``dswheels plan`` never disagree.

The parts: :mod:`.facts` (what is collected, and parsers of raw tool output),
:mod:`.facts_json` (the facts as JSON, both ways), :mod:`.environment` (the facts parsed
once), ``checks_*`` (one module per area: runtime, cuda, build tools, deepspeed),
:mod:`.fixes` (toolkit fixes several checks give), :mod:`.local_build` and :mod:`.verdict`,
:mod:`.guidance` (where to set CUDA_HOME), :mod:`.report` (the result types) and
:mod:`.render` (the report as text or JSON).
"""

from __future__ import annotations

from dswheels.doctor.checks_build_tools import check_compiler, check_long_paths, check_ninja
from dswheels.doctor.checks_cuda import check_cuda_home, check_toolkits
from dswheels.doctor.checks_deepspeed import check_deepspeed, check_index
from dswheels.doctor.checks_linux_runtime import check_linux_runtime
from dswheels.doctor.checks_runtime import check_gpu, check_platform, check_python, check_torch
from dswheels.doctor.checkup import Check, IndexView, LocalBuild, Report, Status, Verdict
from dswheels.doctor.environment_view import derive_env, env_kind
from dswheels.doctor.guidance import cuda_home_guidance
from dswheels.doctor.machine_facts import Facts
from dswheels.doctor.verdict import make_verdict
from dswheels.kernel.binaries.linux_runtime import PublishedRuntime
from dswheels.kernel.compat import Compat
from dswheels.kernel.versions import VersionTuple

__all__ = [
    "Check",
    "IndexView",
    "LocalBuild",
    "PublishedRuntime",
    "Report",
    "Status",
    "Verdict",
    "diagnose",
    "env_kind",
]


def diagnose(
    facts: Facts,
    compat: Compat,
    *,
    deepspeed: VersionTuple | None = None,
    index: IndexView | None = None,
    published: PublishedRuntime | None = None,
) -> Report:
    """Every check with its fix, and the verdict for this environment.

    ``published``: the build manifest of the published wheel the verdict picks (read by the
    command after a first diagnosis); the Linux runtime check then judges that wheel's own
    need instead of the promise.
    """
    env = derive_env(facts, compat)
    checks: list[Check] = [check_platform(env), check_python(env), check_torch(env, index, deepspeed), check_gpu(env)]
    checks.append(check_cuda_home(env))
    checks.extend(check_toolkits(env))
    checks.extend(check_compiler(env))
    checks.extend(check_long_paths(env))
    checks.append(check_ninja(env))
    checks.append(check_deepspeed(env))
    verdict = make_verdict(env, deepspeed=deepspeed, index=index)
    if published is not None and (verdict.wheel is None or published.filename != verdict.wheel.filename):
        published = None  # the manifest of another wheel than the one picked says nothing here
    checks.extend(check_linux_runtime(env, published))
    checks.extend(check_index(verdict))
    return Report(
        checks=tuple(checks), verdict=verdict, guidance=cuda_home_guidance(env, verdict), env_kind=env_kind(facts)
    )
