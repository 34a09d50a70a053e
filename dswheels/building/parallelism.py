"""How many compiles a build runs at once: extensions at a time x ninja jobs x nvcc arch threads.

The machine's cores bound the total, its memory may lower it (:func:`fit_jobs`), and
:func:`split_parallelism` spends the total so that nvcc's ``--threads`` and ninja's jobs do
not multiply past it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GIB", "Parallelism", "fit_jobs", "pooled_parallelism", "split_jobs", "split_parallelism"]


def split_jobs(jobs: int, ops: int, parallel: int = 0) -> tuple[int, int]:
    """(extensions built at once, compile jobs for each): at most ``jobs`` compiles in all.

    >>> split_jobs(2, 6), split_jobs(16, 3), split_jobs(4, 6, parallel=1), split_jobs(4, 3)
    ((2, 1), (3, 5), (1, 4), (3, 1))
    """
    at_once = max(1, min(ops, parallel or jobs))
    return at_once, max(1, jobs // at_once)


# What one concurrent compile may take: nvcc's cicc/ptxas for one arch of a DeepSpeed kernel
# stays under ~2 GiB, a C++ translation unit against torch's headers under ~1 GiB; the system
# keeps 1 GiB. A hosted Windows runner (4 cores, 16 GB) then runs 4 compiles at a time, as
# peers found safe for lighter kernels (mjun0812 runs 2 for flash-attention's).
GIB = 1 << 30
_PER_COMPILE = {True: 2 * GIB, False: 1 * GIB}


def fit_jobs(cpus: int, available_memory: int | None, *, cuda: bool) -> tuple[int, str]:
    """Concurrent compiles for this machine: its cores, fewer when memory would not hold them.

    >>> fit_jobs(4, 14 * GIB, cuda=True)[0], fit_jobs(4, 5 * GIB, cuda=True)[0], fit_jobs(16, None, cuda=True)[0]
    (4, 2, 16)
    """
    cpus = max(1, cpus)
    if available_memory is None:
        return cpus, f"{cpus} core(s); available memory unknown"
    per = _PER_COMPILE[cuda]
    by_memory = max(1, (available_memory - GIB) // per)
    jobs = min(cpus, by_memory)
    why = f"{cpus} core(s), {available_memory / GIB:.1f} GiB available, ~{per // GIB} GiB per compile"
    return jobs, why


@dataclass(frozen=True, slots=True)
class Parallelism:
    """How ``jobs`` concurrent compiles are spent: extensions at once x ninja jobs x nvcc arch threads."""

    at_once: int  # extensions setuptools builds at the same time (build_ext --parallel)
    ninja_jobs: int  # MAX_JOBS: translation units ninja compiles at once within one extension (0: the pool's)
    nvcc_threads: int  # DS_NVCC_THREADS: archs one nvcc compiles at once (DeepSpeed's default: min(cores, 8))
    pool: int = 0  # slots of the build's jobserver every extension's units draw on (0: none)

    def describe(self) -> str:
        if self.pool:
            slots = self.pool + (1 if self.at_once == 1 else 0)  # a lone extension's ninja runs one unit beside it
            return f"longest first, {self.at_once} at a time, every unit from one pool of {slots} compile slot(s)"
        threads = f", {self.nvcc_threads} nvcc thread(s) each" if self.nvcc_threads > 1 else ""
        return f"{self.at_once} at a time with {self.ninja_jobs} compile job(s){threads}"


def split_parallelism(jobs: int, *, ops: int, archs: int, parallel: int = 0) -> Parallelism:
    """Spend about ``jobs`` concurrent compiles, never many more: nvcc's ``--threads`` multiplies ninja's jobs.

    DeepSpeed gives nvcc ``--threads=min(cores, 8)`` unless ``DS_NVCC_THREADS`` is set, so with
    ninja's jobs on top a 4-core runner would run 4 x 4 arch compiles at once. An extension's
    share goes to arch threads first (one ``.cu`` file per op is common and compiles every arch),
    the rest to ninja jobs.

    >>> split_parallelism(4, ops=1, archs=8)
    Parallelism(at_once=1, ninja_jobs=1, nvcc_threads=4, pool=0)
    >>> split_parallelism(16, ops=2, archs=2)
    Parallelism(at_once=2, ninja_jobs=4, nvcc_threads=2, pool=0)
    """
    at_once, per_op = split_jobs(jobs, ops, parallel)
    threads = max(1, min(per_op, archs)) if archs else 1
    return Parallelism(at_once=at_once, ninja_jobs=max(1, per_op // threads), nvcc_threads=threads)


def pooled_parallelism(jobs: int, *, ops: int) -> Parallelism:
    """``jobs`` slots shared by every op's units (a jobserver): as many extensions at once as slots, each
    holding one while it builds (its ninja's first unit runs on it); one extension holds none (its
    ninja's first unit runs beside the pool's ``jobs - 1``). A unit is one process (one nvcc thread: the
    same nvcc command, and cache key, whatever else the build holds), so the slots are the processes.

    >>> pooled_parallelism(4, ops=16)
    Parallelism(at_once=4, ninja_jobs=0, nvcc_threads=1, pool=4)
    >>> pooled_parallelism(4, ops=1)
    Parallelism(at_once=1, ninja_jobs=0, nvcc_threads=1, pool=3)
    >>> pooled_parallelism(1, ops=1)
    Parallelism(at_once=1, ninja_jobs=1, nvcc_threads=1, pool=0)
    """
    at_once = max(1, min(ops, jobs))
    pool = max(1, jobs) - (1 if at_once == 1 else 0)
    return Parallelism(at_once=at_once, ninja_jobs=0 if pool else 1, nvcc_threads=1, pool=pool)
