"""One pool of compile slots for every op of a build (issue 23, scheduling against the tail).

A real setuptools build of a small project with DeepSpeed's setup.py patch (several extensions at
once, one build directory each), whose extensions build with the real ninja (>= 1.13, the one
build venvs install) from a real jobserver: every job records when it ran. Measured from those
records: never more jobs at once than slots, the longest extension first, and the last extension
left takes every slot the others gave back (before: one ninja job per extension, so the big op
finished alone on one core).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dswheels.building.effects.jobserver import jobserver, ninja_joins_jobservers
from dswheels.building.patches import patch_parallel_extensions
from dswheels.plan.costs import compile_makespan, op_order

NINJA = shutil.which("ninja", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))

# an extension builds by running ninja on its own build.ninja: torch's BuildExtension does the same
SETUP = """\
import os, subprocess, sys, time
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

class NinjaExt(build_ext):
    def build_extension(self, ext):
        folder = os.path.join(os.environ["JOBS_DIR"], ext.name)
        with open(os.path.join(os.environ["JOBS_DIR"], "started"), "a") as f:
            f.write(ext.name + " " + ",".join(ext.sources) + "\\n")
        subprocess.run([os.environ["NINJA"], "-C", folder], check=True, capture_output=True)

cmdclass = {}
cmdclass['build_ext'] = NinjaExt
sources = ["a.cpp", "k.cu", "b.cpp"]  # ninja would start them in this order
setup(name="pool", ext_modules=[Extension(n, sources=sources) for n in ("small", "big", "medium")], cmdclass=cmdclass)
"""

# a job: sleep, note when it ran, make its output (ninja runs it without a shell on Windows)
JOB = """\
import sys, time
log, seconds, name, out = sys.argv[1:5]
start = time.time()
time.sleep(float(seconds))
with open(log, "a") as f:
    f.write(f"{name} {start} {time.time()}\\n")
open(out, "w").close()
"""


def _ninja_file(folder: Path, jobs: int, seconds: float, log: Path) -> None:
    folder.mkdir(parents=True)
    script = folder / "job.py"
    script.write_text(JOB, encoding="utf-8")
    rule = f'rule job\n  command = "{sys.executable}" "{script}" "{log}" {seconds} {folder.name} $out\n'
    edges = "".join(f"build out{i}: job\n" for i in range(jobs))
    (folder / "build.ninja").write_text(rule + edges, encoding="utf-8")


def _most_at_once(spans: list[tuple[float, float]]) -> int:
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    now = most = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


@pytest.mark.skipif(NINJA is None, reason="ninja (the test group installs it)")
@pytest.mark.skipif(sys.platform == "win32", reason="the POSIX pool (a named pipe); Windows: the test below")
def test_every_extensions_units_draw_on_one_pool_and_the_last_takes_every_slot(tmp_path: Path) -> None:
    assert NINJA is not None
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(NINJA).parent), os.environ["PATH"]])}
    assert ninja_joins_jobservers(env), "the ninja here predates jobservers (1.13)"
    jobs_dir, log = tmp_path / "jobs", tmp_path / "spans.log"
    _ninja_file(jobs_dir / "big", 9, 0.6, log)
    _ninja_file(jobs_dir / "medium", 2, 0.6, log)
    _ninja_file(jobs_dir / "small", 1, 0.6, log)
    project = tmp_path / "project"
    project.mkdir()
    (project / "setup.py").write_text(patch_parallel_extensions(SETUP), encoding="utf-8")
    (project / "setup.cfg").write_text("[build_ext]\nparallel = 3\n", encoding="utf-8")
    build_env = {**env, "NINJA": NINJA, "JOBS_DIR": str(jobs_dir), "DSWHEELS_EXT_ORDER": "big,medium,small"}
    with jobserver(3, tmp_path) as pool:
        done = subprocess.run(
            [sys.executable, "setup.py", "build_ext"],
            cwd=project,
            env={**build_env, **pool.env()},
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    records = [line.split() for line in log.read_text().splitlines()]
    spans = {name: [(float(a), float(b)) for n, a, b in records if n == name] for name in ("big", "medium", "small")}
    assert [len(spans[n]) for n in ("big", "medium", "small")] == [9, 2, 1]
    assert _most_at_once([s for found in spans.values() for s in found]) == 3  # the pool's slots, never more
    started = [line.split() for line in (jobs_dir / "started").read_text().splitlines()]
    assert {sources for _, sources in started} == {"k.cu,a.cpp,b.cpp"}  # each op's .cu units first
    # the longest first, whatever setup.py's order: the threads take their slots in that order, but with a slot
    # for each extension they then start at once, in any order; one thread at a time shows the order itself
    (project / "setup.cfg").write_text("[build_ext]\nparallel = 1\n", encoding="utf-8")
    (jobs_dir / "started").unlink()
    with jobserver(3, tmp_path) as pool:
        subprocess.run(
            [sys.executable, "setup.py", "build_ext", "--force"],
            cwd=project,
            env={**build_env, **pool.env()},
            capture_output=True,
            check=True,
            timeout=120,
        )
    assert [line.split()[0] for line in (jobs_dir / "started").read_text().splitlines()] == ["big", "medium", "small"]
    # left alone, the big op's ninja takes the slots the others gave back (before: one job at a time, or
    # its own -j on top of the others')
    assert _most_at_once(spans["big"]) == 3


@pytest.mark.skipif(NINJA is None, reason="ninja (the test group installs it)")
def test_ninja_takes_its_slots_from_the_pool(tmp_path: Path) -> None:
    """On every OS (a named pipe; on Windows a named semaphore, run by ci.yml's windows-2022 jobs): ninja,
    given no -j, runs its first job on its own slot and every further one on a token of the pool."""
    assert NINJA is not None
    log = tmp_path / "spans.log"
    _ninja_file(tmp_path / "op", 6, 0.5, log)
    with jobserver(2, tmp_path) as pool:
        done = subprocess.run(
            [NINJA, "-C", str(tmp_path / "op")],
            env={**os.environ, **pool.env()},
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    spans = [(float(a), float(b)) for _, a, b in (line.split() for line in log.read_text().splitlines())]
    assert len(spans) == 6
    assert _most_at_once(spans) == 3  # its own slot and the pool's two: not ninja's default of cores + 2


def test_the_model_schedules_as_the_build_does() -> None:
    """compile_makespan follows the pool: a lone big op takes every slot once the others are done."""
    units = {"big": [6.0] * 9, "medium": [6.0] * 2, "small": [6.0]}
    assert op_order(units) == ["big", "medium", "small"]
    assert compile_makespan(units, 3) == 24.0  # 72 s of work on 3 slots: no slot idles
    assert compile_makespan(units, 1) == 72.0
    # a build whose work is one big unit ends with it, whatever the slots
    assert compile_makespan({"a": [100.0], "b": [1.0, 1.0]}, 4) == 100.0
