"""GitHub's runner files that are no regular files, or cannot be written (issue 30, point 7).

``$GITHUB_OUTPUT`` or ``$GITHUB_STEP_SUMMARY`` naming a FIFO nobody reads blocked ``ci plan``
forever; ``$GITHUB_PATH`` on a full device ended in a traceback. Each runs in a child process
(a hang is the timeout, not a stuck suite): a file that is no regular file is exit 2 before the
command does anything; one swapped in later is refused without waiting; a write the system
refuses (past a file-size limit: ``EFBIG``, a full disk's stand-in) is one paragraph.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import DATA, ROOT

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs, devices and setrlimit are POSIX")

QUICK = 60  # every case is judged in about a second: a hang is a failure, not a wait
FILES = ("GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GITHUB_ENV", "GITHUB_PATH")


def _env(tmp_path: Path, **files: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_", "DSWHEELS_"))}
    env.update(PYTHONPATH=str(ROOT), GITHUB_ACTIONS="true", DSWHEELS_CACHE=str(tmp_path / "cache"))
    env.update(GITHUB_EVENT_NAME="workflow_dispatch", GITHUB_REF_NAME="main", INPUT_DEEPSPEED="0.19.8")
    env.update({f"INPUT_{axis}": "matrix" for axis in ("TORCH", "CUDA", "PYTHON", "PLATFORM")})
    env.update(INPUT_CANARY="false", INPUT_PUBLISH="false")
    for name in FILES:  # the others: ordinary files, as the runner makes them
        env[name] = files.get(name) or str(tmp_path / f"{name.lower()}.txt")
    return env


def _ci_plan(tmp_path: Path, **files: str) -> subprocess.CompletedProcess[str]:
    args = ["ci", "plan", "--matrix", str(DATA / "matrix-cpu.yml"), "--out", str(tmp_path / "plan")]
    return subprocess.run(
        [sys.executable, "-m", "dswheels", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(tmp_path, **files),
        timeout=QUICK,
        check=False,
    )


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("name", FILES)
def test_a_fifo_nobody_reads_is_exit_2_at_once(tmp_path: Path, fifo: Path, name: str) -> None:
    started = time.monotonic()
    done = _ci_plan(tmp_path, **{name: str(fifo)})
    assert time.monotonic() - started < QUICK / 2
    assert "Traceback" not in done.stderr
    assert done.returncode == 2, done.stderr
    assert f"${name}=" in done.stderr
    assert "a FIFO" in done.stderr
    assert not (tmp_path / "plan").exists(), "the command did something before judging its outputs"


@pytest.mark.parametrize("device", ["/dev/full", "/dev/null"])
def test_a_device_is_exit_2(tmp_path: Path, device: str) -> None:
    if not Path(device).exists():
        pytest.skip(f"no {device}")
    done = _ci_plan(tmp_path, GITHUB_PATH=device, GITHUB_OUTPUT=device)
    assert "Traceback" not in done.stderr
    assert done.returncode == 2, done.stderr
    assert "a character device" in done.stderr


def test_a_loop_of_links_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    done = _ci_plan(tmp_path, GITHUB_OUTPUT=str(tmp_path / "a"))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr


def _in_child(tmp_path: Path, code: str, *, file_size: int | None = None) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        import resource  # POSIX only, in the child

        if file_size is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))

    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=QUICK,
        check=False,
        preexec_fn=limit,
    )


def test_a_fifo_swapped_in_after_the_check_is_refused_without_waiting(tmp_path: Path, fifo: Path) -> None:
    done = _in_child(
        tmp_path,
        f"""
        from dswheels.host.gha import add_path, write_output, write_summary
        from dswheels.kernel.errors import ConfigError
        env = {{name: {str(fifo)!r} for name in ("GITHUB_OUTPUT", "GITHUB_PATH", "GITHUB_STEP_SUMMARY")}}
        print("summary", write_summary("text", env))
        for write in (lambda: write_output("x", "1", env), lambda: add_path("/opt/x", env)):
            try:
                write()
            except ConfigError as exc:
                print("refused:", exc.message)
        """,
    )
    assert done.returncode == 0, done.stderr
    assert "summary False" in done.stdout
    assert done.stdout.count("refused:") == 2, done.stdout
    assert "cannot append" in done.stdout


def test_a_write_the_system_refuses_is_one_paragraph(tmp_path: Path) -> None:
    """Every runner file at the file-size limit: the next append fails (EFBIG, as a full disk's ENOSPC)."""
    files = {name: tmp_path / name for name in FILES}
    for file in files.values():
        file.write_bytes(b"x" * 4096)
    done = _in_child(
        tmp_path,
        f"""
        from dswheels.host.gha import add_path, write_env, write_output, write_summary
        from dswheels.kernel.errors import ConfigError
        env = {{name: str(path) for name, path in { ({k: str(v) for k, v in files.items()})!r}.items()}}
        print("summary", write_summary("text", env))
        for write in (
            lambda: write_output("x", "1", env),
            lambda: write_env("CUDA_HOME", "/opt/cuda", env),
            lambda: add_path("/opt/cuda/bin", env),
        ):
            try:
                write()
            except ConfigError as exc:
                print("refused:", exc.message)
        """,
        file_size=4096,
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
    assert "summary False" in done.stdout
    assert done.stdout.count("refused:") == 3, done.stdout
    assert "File too large" in done.stdout
    assert "$GITHUB_PATH" in done.stdout
    assert all(f.read_bytes() == b"x" * 4096 for f in files.values())
