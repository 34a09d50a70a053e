"""What the runner keeps of a program's output is bounded, for every caller (issue 30, point 8).

A ``CUDA_HOME/bin/nvcc`` that prints forever made ``doctor`` keep every line until its 60 s timeout
(MemoryError under a memory cap), and a line without an end was one string as long as the output.
The programs that print forever run in a child Python under a memory cap (``RLIMIT_AS``), so that a
runner without the bound fails the test at the cap instead of taking this machine's memory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from dswheels.host import proc
from dswheels.kernel.errors import DswheelsError, EnvironmentMismatchError
from tests.conftest import ROOT

CAP = 1024 * 1024 * 1024  # the child's address space: dswheels and its threads need ~300 MiB of it
BOUND = 1024 * 1024  # the capture's bound in the child, far below what the cap lets it hold

DRIVER = textwrap.dedent(
    f"""
    import json, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, ({CAP}, {CAP}))
    from dswheels.host import proc
    proc.MAX_CAPTURE = {BOUND}
    what = sys.argv[1]
    if what == "doctor":
        from dswheels.doctor.effects.collect_facts import collect
        facts = collect(env={{"CUDA_HOME": sys.argv[2], "PATH": "/usr/bin:/bin"}})
        said = [t.nvcc_output for t in facts.toolkits if t.root == sys.argv[2]]
        print("DRIVER", json.dumps(said))
    else:  # a line without an end, shown and logged, not captured: read until the timeout
        try:
            proc.run([sys.argv[2]], stream=False, timeout=3, heartbeat=None, echo=False)
        except Exception as exc:
            longest = max(map(len, (exc.details or "").splitlines()), default=0)
            print("DRIVER", json.dumps([type(exc).__name__, exc.message, longest]))
    # VmHWM is this process's own peak: getrusage's ru_maxrss starts from the parent's size at the
    # fork, so a large pytest made a child of a few MiB read as 440 MiB
    hwm = next(ln for ln in open("/proc/self/status") if ln.startswith("VmHWM:"))
    print("DRIVER-RSS", hwm.split()[1])
    """
)


def _program(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable}\nimport sys\n{textwrap.dedent(body)}", encoding="utf-8")
    path.chmod(0o755)
    return path


def _drive(*args: str) -> tuple[str, int]:
    """What the driver printed after ``DRIVER``, and its peak resident memory in KiB."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", DRIVER, *args], capture_output=True, text=True, timeout=60, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the runner kept reading a program that never stops printing")
    lines = done.stdout.splitlines()
    said = next((ln.removeprefix("DRIVER ") for ln in lines if ln.startswith("DRIVER ")), None)
    assert said is not None, f"exit {done.returncode}: {done.stderr[-2000:]}"  # MemoryError before the fix
    rss = int(next(ln.split()[1] for ln in lines if ln.startswith("DRIVER-RSS")))
    return said, rss


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS, /proc and a script nvcc are Linux's")
def test_doctor_stops_an_nvcc_that_prints_forever_within_the_bound(tmp_path: Path) -> None:
    home = tmp_path / "cuda"
    _program(home / "bin" / "nvcc", "while True:\n    sys.stdout.write('nvcc: NVIDIA (R) Cuda compiler driver\\n')\n")
    start = time.monotonic()
    said, rss = _drive("doctor", str(home))
    assert time.monotonic() - start < 40  # before the fix: until doctor's 60 s timeout, or MemoryError at the cap
    assert "printed more than 1,048,576 characters of output and was stopped" in said
    assert rss < 400 * 1024  # KiB: the bound (1 MiB) and the interpreter, not the output


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS and /proc are Linux's")
def test_a_line_without_an_end_is_read_in_bounded_pieces_until_the_timeout(tmp_path: Path) -> None:
    endless = _program(tmp_path / "endless", "while True:\n    sys.stdout.write('x' * 4096)\n")
    said, rss = _drive("line", str(endless))
    kind, message, longest = json.loads(said)
    assert (kind, message) == ("DswheelsError", "endless did not finish within 3.0s")
    assert longest == proc.MAX_LINE + len(proc.CUT)  # the line, cut (before the fix: MemoryError at the cap)
    assert rss < 400 * 1024


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_line_longer_than_the_bound_is_shown_cut_and_marked_and_captured_whole(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(proc, "MAX_LINE", 100)
    log = tmp_path / "log"
    result = proc.capture(_python("print('a' * 250); print('next'); print('b' * 100, end='')"), log_file=log)
    assert result.tail == ("a" * 100 + proc.CUT, "next", "b" * 100)  # the last: whole, not cut
    assert "a" * 100 + proc.CUT + "\n" in log.read_text(encoding="utf-8")
    # a capture is an answer: a probe's one JSON line is longer than any line shown (op flags: > 64 Ki)
    assert result.output.splitlines() == ["a" * 250, "next", "b" * 100]
    exact = proc.capture(_python("print('c' * 99); print('d' * 100)"))
    assert exact.output.splitlines() == ["c" * 99, "d" * 100]
    assert exact.tail == ("c" * 99, "d" * 100)


def test_a_one_line_answer_longer_than_a_shown_line_is_read_whole() -> None:
    answer = {"ops": ["x" * 1000] * 200}  # about 200 KB on one line, as the op-flags probe answers
    code = "import json; print('noise'); print(json.dumps({'ops': ['x' * 1000] * 200}))"
    result = proc.capture(_python(code))
    assert json.loads(result.output.splitlines()[-1]) == answer


def test_a_capture_within_the_bound_is_kept_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(proc, "MAX_CAPTURE", 1000)
    result = proc.capture(_python("print(''); print('x' * 500); print()"))
    assert result.output == "\n" + "x" * 500 + "\n"  # the lines as they were, empty ones too
    assert proc.capture(_python("pass")).output == ""


def test_a_capture_past_the_bound_stops_the_program_and_raises_the_callers_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(proc, "MAX_CAPTURE", 10_000)
    start = time.monotonic()
    with pytest.raises(EnvironmentMismatchError, match="printed more than 10,000 characters") as caught:
        proc.capture(
            _python("import itertools\nfor i in itertools.count(): print('line', i, flush=True)"),
            timeout=60,
            error=EnvironmentMismatchError,
            log_file=tmp_path / "log",
        )
    assert time.monotonic() - start < 30  # stopped at the bound, not at its timeout
    details = caught.value.details or ""
    assert details.startswith("line 0\nline 1\n")  # the head ...
    assert "[... more than 10,000 characters; the last lines:]" in details  # ... said cut, then the tail
    assert caught.value.hint == f"full log: {tmp_path / 'log'}"


def test_output_only_shown_is_read_to_its_end_whatever_its_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """No capture, no overflow: a compile's long output is drained and its tail kept, not stopped."""
    monkeypatch.setattr(proc, "MAX_CAPTURE", 100)
    result = proc.run(_python("for i in range(5000): print('line', i)"), stream=False, echo=False)
    assert result.returncode == 0
    assert result.tail[-1] == "line 4999"
    assert len(result.tail) == proc.TAIL_LINES
    with pytest.raises(DswheelsError, match="exit code 3"):
        proc.run(_python("print('x' * 1000); raise SystemExit(3)"), stream=False, echo=False)
