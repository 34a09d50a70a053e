"""Does this Linux system's glibc and libstdc++ load the published wheels' extensions?

A Linux wheel's extensions need symbol versions of glibc and libstdc++ (their manifest's
``runtime``; compat.yml ``linux_runtime_floor`` is the most any published wheel may need).
The dynamic loader refuses an extension whose need the system lacks, and only when an op
loads (``version `GLIBCXX_3.4.30' not found``), long after ``pip install``. This compares
the need with what the target process really loads (:class:`~dswheels.doctor.machine_facts.LinuxRuntime`)
before anything is installed; ``dswheels install`` refuses with the same judgement.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from dswheels.doctor.checkup import Check, Status
from dswheels.doctor.environment_view import Env
from dswheels.doctor.machine_facts import LinuxRuntime
from dswheels.kernel.binaries.linux_runtime import (
    LibstdcxxRelease,
    PublishedRuntime,
    RuntimeFloor,
    RuntimeJudgement,
    gcc_providing,
    judge_runtime,
)
from dswheels.kernel.compat import Compat
from dswheels.kernel.platform_traits import known_os
from dswheels.kernel.versions import format_version, parse_version

__all__ = ["SystemJudgement", "check_linux_runtime", "judge_system", "system_runtime"]


@dataclass(frozen=True, kw_only=True, slots=True)
class SystemJudgement:
    """A need (a wheel's runtime, or the promise) against this system's glibc and libstdc++.

    The comparison is :func:`dswheels.kernel.binaries.linux_runtime.judge_runtime`, the one ``verify`` makes
    against the promise; the limit here is what the system defines (a family it could not read is
    None, so ``unknown``).
    """

    judgement: RuntimeJudgement
    need_from: str  # "the published Linux wheels" / "the published wheel deepspeed-...whl (its build manifest)"

    @property
    def need(self) -> RuntimeFloor:
        return self.judgement.need

    @property
    def have(self) -> RuntimeFloor:
        return self.judgement.limit

    @property
    def problems(self) -> tuple[str, ...]:
        """``GLIBCXX_3.4.30 > 3.4.29``, one per family above what the system has."""
        return self.judgement.problems

    @property
    def unknown(self) -> tuple[str, ...]:
        return self.judgement.unknown

    @property
    def needs(self) -> str:
        """``the published Linux wheels need`` / ``the published wheel X needs``."""
        plural = self.need_from.startswith("the published Linux wheels")
        return f"{self.need_from} {'need' if plural else 'needs'}"

    @property
    def status(self) -> Status:
        if self.problems:
            return Status.FAIL
        return Status.WARN if self.unknown else Status.OK


def _version(text: str) -> tuple[int, ...] | None:
    match = re.search(r"[0-9]+(?:\.[0-9]+)+", text)
    if match is None:
        return None
    try:
        return parse_version(match.group(0))
    except ValueError:
        return None


def system_runtime(lr: LinuxRuntime) -> RuntimeFloor:
    """The newest glibc / GLIBCXX / CXXABI this system defines (None where it was not read).

    >>> system_runtime(LinuxRuntime(glibc="glibc 2.34", libstdcxx="/x", glibcxx="3.4.29", cxxabi="1.3.13"))
    RuntimeFloor(glibc=(2, 34), glibcxx=(3, 4, 29), cxxabi=(1, 3, 13), private=())
    """
    return RuntimeFloor(glibc=_version(lr.glibc), glibcxx=_version(lr.glibcxx), cxxabi=_version(lr.cxxabi))


def judge_system(lr: LinuxRuntime, need: RuntimeFloor, need_from: str) -> SystemJudgement:
    """``need`` against what this system defines (``GLIBC_PRIVATE`` needs are not judged here: no system
    but the builder's has them, and ``verify`` already fails such a wheel)."""
    versions = RuntimeFloor(glibc=need.glibc, glibcxx=need.glibcxx, cxxabi=need.cxxabi)
    return SystemJudgement(judgement=judge_runtime(versions, system_runtime(lr)), need_from=need_from)


def describe_system(lr: LinuxRuntime) -> str:
    """``glibc 2.36; /usr/lib/.../libstdc++.so.6.0.30 defines up to GLIBCXX_3.4.30 and CXXABI_1.3.13``."""
    glibc = lr.glibc or "glibc: unknown"
    if not lr.libstdcxx:
        return f"{glibc}; no libstdc++.so.6 found"
    if not lr.glibcxx:
        return f"{glibc}; {lr.libstdcxx} (its versions could not be read)"
    cxxabi = f" and CXXABI_{lr.cxxabi}" if lr.cxxabi else ""
    return f"{glibc}; {lr.libstdcxx} defines up to GLIBCXX_{lr.glibcxx}{cxxabi}"


def need_words(need: RuntimeFloor, libstdcxx: Sequence[LibstdcxxRelease]) -> str:
    """``glibc >= 2.35 and GLIBCXX_3.4.30 (GCC 12's libstdc++)``."""
    parts = []
    if need.glibc is not None:
        parts.append(f"glibc >= {format_version(need.glibc)}")
    if need.glibcxx is not None:
        gcc = gcc_providing(need.glibcxx, libstdcxx)
        major = f" (GCC {gcc.split('.')[0]}'s libstdc++)" if gcc else ""
        parts.append(f"GLIBCXX_{format_version(need.glibcxx)}{major}")
    if need.cxxabi is not None:
        parts.append(f"CXXABI_{format_version(need.cxxabi)}")
    parts += list(need.private)
    return " and ".join(parts) or "no versioned glibc or libstdc++ symbol"


def fix_for(judgement: SystemJudgement) -> str:
    """What to do when the system is below the need: a local build always works; conda only for libstdc++."""
    glibc_short = any(p.startswith("GLIBC_") for p in judgement.problems)
    build = "build locally with `dswheels build` (a wheel built here needs only this system's runtime)"
    if glibc_short:
        return build + "; glibc cannot be replaced inside an environment: or use a newer distribution"
    return build + ", or use a conda env whose libstdc++ is newer (conda install -c conda-forge 'libstdcxx-ng>=12')"


def check_linux_runtime(env: Env, published: PublishedRuntime | None = None) -> list[Check]:
    """OK when this system loads what the wheels need, FAIL when it is older; nothing off Linux.

    The need is the published wheel's own (its manifest's ``runtime``) when ``published``
    has one, else compat.yml's promise. Facts recorded before the runtime was probed give
    no check.
    """
    facts = env.facts
    lr = facts.linux_runtime
    row = known_os(facts.os)
    if row is None or not row.runtime_floor or lr is None:
        return []
    judgement = judge(lr, env.compat, published)
    system = describe_system(lr)
    via = f" ({lr.how})" if lr.how else ""
    if published is not None and published.runtime is None:
        via += f" [judged by the promise: for {published.filename}, {published.note}]"
    need = need_words(judgement.need, env.compat.libstdcxx)
    if judgement.problems:
        return [
            Check(
                "linux_runtime",
                Status.FAIL,
                f"glibc/libstdc++ older than {judgement.need_from} need",
                detail=f"{judgement.needs} {need}; this system has {system}{via}: "
                + ", ".join(judgement.problems)
                + '. Loading an op would fail with "version `'
                + judgement.problems[0].split(" ")[0]
                + "' not found\"",
                fix=fix_for(judgement),
            ),
        ]
    if judgement.unknown:
        return [
            Check(
                "linux_runtime",
                Status.WARN,
                f"cannot tell whether this system loads {judgement.need_from}",
                detail=f"{judgement.needs} {need}; this system has {system}{via}"
                + (f" ({lr.error})" if lr.error else "")
                + f"; not read: {', '.join(judgement.unknown)}",
                fix="check with `ldd --version` and `strings $(g++ -print-file-name=libstdc++.so.6) | grep GLIBCXX_`",
            ),
        ]
    return [
        Check(
            "linux_runtime",
            Status.OK,
            f"glibc {format_version(judgement.have.glibc or ())}, libstdc++ GLIBCXX_"
            f"{format_version(judgement.have.glibcxx or ())}: loads {judgement.need_from}",
            detail=f"{judgement.needs} {need}; this system has {system}{via}",
        ),
    ]


def judge(lr: LinuxRuntime, compat: Compat, published: PublishedRuntime | None) -> SystemJudgement:
    """Against the published wheel's manifest when it has ``runtime``, else against the promise."""
    if published is not None and published.runtime is not None:
        return judge_system(lr, published.runtime, f"the published wheel {published.filename} (its build manifest)")
    return judge_system(lr, compat.linux_runtime_floor, "the published Linux wheels")
