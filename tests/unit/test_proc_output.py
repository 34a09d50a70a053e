"""A child's output never stops dswheels reading it (issue 25).

Piped stdout on Windows is the ANSI code page (cp1252) unless PYTHONUTF8/PYTHONIOENCODING says
otherwise. DeepSpeed 0.19.8's kernel_matmul.cuh has U+FF0C in a comment, and cl prints bytes in
the OEM code page: one such line made the reader thread of host/proc.py die on the write to
stdout, the child filled the pipe, and the build hung until the job's timeout. Here dswheels runs
in a subprocess with its stdout in cp1252 and a child that prints both, then more than a pipe holds.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dswheels.building.effects import cell_log as buildlog
from dswheels.host import gha, proc
from dswheels.host.log import reset_reporter, set_reporter
from tests.support.recording import RecordingReporter

FULLWIDTH_COMMA = "\uff0c"
# more than any pipe buffer holds (64 KiB on Linux, 4 KiB to 64 KiB on Windows): a reader that
# stops leaves the child blocked on its next write
FILLER_LINES = 3000

CHILD = textwrap.dedent(
    f"""
    import sys
    out = sys.stdout.buffer
    out.write("kernel_matmul.cuh(87): // a comment\\N{{FULLWIDTH COMMA}} in UTF-8\\n".encode("utf-8"))
    out.write(b"cl: OEM code page bytes \\x82\\xff\\xfe end\\n")
    for i in range({FILLER_LINES}):
        out.write(b"line %d " % i + b"x" * 100 + b"\\n")
    out.write(b"child done\\n")
    """
)

DRIVER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from dswheels.host import proc
    from dswheels.host.log import GitHubReporter, TerminalReporter, set_reporter

    set_reporter(GitHubReporter() if sys.argv[1] == "github" else TerminalReporter())
    result = proc.run([sys.executable, sys.argv[3]], log_file=Path(sys.argv[2]), heartbeat=None)
    print("run returned", result.returncode)
    """
)


@pytest.mark.parametrize("reporter", ["terminal", "github"])
def test_a_line_stdout_cannot_encode_is_shown_escaped_logged_whole_and_the_run_returns(
    tmp_path: Path, reporter: str
) -> None:
    log, child = tmp_path / "build.log", tmp_path / "child.py"
    child.write_text(CHILD, encoding="utf-8")
    env = {**os.environ, "PYTHONIOENCODING": "cp1252", "PYTHONUTF8": "0"}
    try:
        done = subprocess.run(
            [sys.executable, "-c", DRIVER, reporter, str(log), str(child)],
            env=env,
            capture_output=True,
            timeout=30,  # seconds: the run takes about one; before the fix it never returned
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("proc.run never returned: its reader stopped and the child blocked on a full pipe")
    stdout = done.stdout.decode("cp1252")
    assert done.returncode == 0, done.stderr.decode("cp1252", "replace")[-3000:]
    assert "run returned 0" in stdout
    assert "a comment\\uff0c in UTF-8" in stdout  # stdout cannot hold U+FF0C: shown as its escape
    assert "child done" in stdout  # every line after it was read and shown
    assert stdout.count(" xxxx") == FILLER_LINES
    logged = log.read_text(encoding="utf-8")
    assert f"a comment{FULLWIDTH_COMMA} in UTF-8" in logged  # the log file (UTF-8) keeps it whole
    assert "bytes \\x82\\xff\\xfe end" in logged  # undecodable bytes kept visible, not dropped
    assert "child done" in logged
    assert "Traceback" not in done.stderr.decode("cp1252", "replace")


@pytest.mark.timeout(30)
def test_a_failing_line_handler_is_reported_and_the_child_is_read_to_the_end(tmp_path: Path) -> None:
    """Whatever goes wrong with one line (here the caller's own ``on_line``), the pipe is drained."""
    seen: list[str] = []

    def on_line(line: str) -> None:
        if line.startswith("line 7 "):
            msg = "a progress parser that chokes on one line"
            raise ValueError(msg)
        seen.append(line)

    recording = RecordingReporter()
    token = set_reporter(recording)
    try:
        result = proc.run(
            [sys.executable, "-c", CHILD], log_file=tmp_path / "log", on_line=on_line, capture=True, heartbeat=None
        )
    finally:
        reset_reporter(token)
    assert result.returncode == 0
    assert seen[-1] == "child done"
    assert len(seen) == FILLER_LINES + 2  # every line but the one that failed
    assert len(recording.of("output")) == FILLER_LINES + 3  # shown, all of them
    (warning,) = recording.of("warning")
    assert "1 line(s)" in warning
    assert "a progress parser that chokes on one line" in warning
    assert "child done" in (tmp_path / "log").read_text(encoding="utf-8")


def test_notes_and_the_job_summary_keep_what_utf8_cannot_hold(tmp_path: Path) -> None:
    """A path Python could only decode with surrogateescape (bytes that are not UTF-8 in a file name)."""
    odd = "wheelhouse/\udcff.whl"
    log = tmp_path / "build.log"
    buildlog.log_note(log, f"wrote {odd}")
    assert "wrote wheelhouse/\\udcff.whl" in log.read_text(encoding="utf-8")
    summary = tmp_path / "summary.md"
    assert gha.write_summary(f"| {odd} | ok |", env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert "| wheelhouse/\\udcff.whl | ok |" in summary.read_text(encoding="utf-8")


def test_a_command_prints_what_stdout_cannot_encode_as_escapes(tmp_path: Path) -> None:
    """Not only the reporter: what a command writes to stdout itself (here a path in index's last lines)."""
    published, site = tmp_path / f"published{FULLWIDTH_COMMA}", tmp_path / f"site{FULLWIDTH_COMMA}"
    published.mkdir()
    env = {**os.environ, "PYTHONIOENCODING": "cp1252", "PYTHONUTF8": "0"}
    env.pop("GITHUB_ACTIONS", None)
    done = subprocess.run(
        [sys.executable, "-m", "dswheels", "index", "--from", str(published), "--out", str(site)],
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode("cp1252", "replace")[-3000:]
    assert "--directory '" in done.stdout.decode("cp1252")
    assert "site\\uff0c" in done.stdout.decode("cp1252")
    assert (site / "index.html").is_file()


@pytest.mark.timeout(30)
def test_when_reading_itself_fails_the_rest_is_drained_so_the_child_can_finish() -> None:
    """The reader's last line of defence, driven directly: a stream whose decoding fails (strict ASCII)."""
    process = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE)
    assert process.stdout is not None
    with io.TextIOWrapper(process.stdout, encoding="ascii") as stdout:
        pump = proc._Pump(capture=False, log=None, timestamps=False, stream=False, on_line=None)
        pump(stdout)
        assert process.wait(timeout=20) == 0  # the pipe was drained: the child wrote all it had
    assert isinstance(pump.fault, UnicodeDecodeError)
    assert pump.faults == 1
